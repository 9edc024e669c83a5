#!/usr/bin/env python3
"""test_calls_migrate -- numbered calls reach entities exactly once and in
order while their reals move between cellapps.

Two cellapps hold the default space split at x = 0. The bots walk within
40 m of the line, crossing it all the time, and each sends numbered calls,
n = 1, 2, 3 ..., alternately to its cell's ping(n) straight from the client
and to its base's relayPing(n), which the base turns into a call of the
cell's ping(n) (the demo game). Meanwhile the operator moves the line back
and forth with tessera-admin, so whole groups of reals move at once. The
cell counts what arrives: `pings`, the last number, and `ping_disorder`,
each call that was not the last plus one. At the end every cell must have
received exactly the calls its bot sent, in order: about 105,000 in all
(half under AddressSanitizer) on an idle machine; the test asks for half of
that, since the bots' rate is what a busy, shared machine lets them send."""
import json
import os
import threading
import unittest

import harness

BOTS = 100 if harness.SANITIZED else 200
SECONDS = 26
SETTLE = 5
# Calls per bot per second while walking (the last SETTLE seconds are quiet):
# 200 bots x 25 x 21 s = 105,000.
PING_RATE = 25
AREA = 40
SWING = 25      # the line moves between -SWING and +SWING ...
SWING_S = 0.7   # ... every this long


class LineMover(threading.Thread):
    """Moves split line 0 of the default space back and forth until stopped."""

    def __init__(self, cluster):
        super().__init__(daemon=True)
        self.cluster = cluster
        self.stop_event = threading.Event()
        self.moves = 0
        self.error = None

    def run(self):
        at = SWING
        try:
            while not self.stop_event.wait(SWING_S):
                self.cluster.admin("move-line", "default", 0, at)
                self.moves += 1
                at = -at
            self.cluster.admin("move-line", "default", 0, 0)
        except Exception as e:  # reported by the test
            self.error = e


class CallsMigrate(unittest.TestCase):
    def test_every_call_once_and_in_order(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=2, grid="2x1", spawn_radius=AREA,
                             # Every bot calls PING_RATE times a second: above
                             # the default rate limit, which is not under test.
                             extra_set=["cellapp.game.npc_count=0",
                                        "baseapp.client_calls_per_second=%d" % (PING_RATE * 4)]) as cluster:
            snapshot = os.path.join(cluster.dir, "bots-snapshot.json")
            mover = LineMover(cluster)
            bots = harness.start_bots(cluster, BOTS, SECONDS,
                                      ["--area", AREA, "--ping-rate", PING_RATE, "--calls-per-second", 0,
                                       "--settle-seconds", SETTLE, "--snapshot-file", snapshot,
                                       "--snapshot-at-seconds", SECONDS - 3])
            mover.start()
            try:
                harness.wait_for(lambda: os.path.exists(snapshot), SECONDS + 30, "the bots' snapshot")
                mover.stop_event.set()
                mover.join(30)
                # The calls were all sent before the settling began; the
                # snapshot and the dumps come after, while the bots are in
                # the world, once the last move of the line has moved its
                # reals.
                with open(snapshot) as f:
                    bot_ids = [b["entity_id"] for b in json.load(f)["bots"]]
                dumps = cluster.dump_states_settled(
                    cluster.names("cellapp"),
                    lambda dumps: all(len(harness.reals_by_id(dumps).get(i, [])) == 1 for i in bot_ids))
            finally:
                mover.stop_event.set()
                mover.join(30)
                report = harness.finish_bots(bots)
            self.assertIsNone(mover.error, "moving the line failed: %s" % mover.error)
            text = json.dumps(report, indent=2, sort_keys=True)
            self.assertEqual(report.get("logged_in"), BOTS, text)
            self.assertEqual(report.get("errors"), 0, text)
            with open(snapshot) as f:
                sent = {b["entity_id"]: b["pings_sent"] for b in json.load(f)["bots"]}
            self.assertEqual(len(sent), BOTS, "the snapshot lacks bots")
            cells = {}
            for name, document in dumps.items():
                for entity in document["entities"]:
                    self.assertNotIn(entity["id"], cells, "entity %s is real twice" % entity["id"])
                    cells[entity["id"]] = entity
            problems = []
            total = 0
            offloads = 0
            for entity_id, n in sent.items():
                cell = cells.get(entity_id)
                if cell is None:
                    problems.append("entity %s is real nowhere" % entity_id)
                    continue
                p = cell["properties"]
                total += p["pings"]
                offloads += cell["offloads"]
                if p["pings"] != n or p["ping_last"] != n or p["ping_disorder"] != 0:
                    problems.append("entity %s: sent %d, the cell counted %d (last %d, %d out of order), "
                                    "%d offloads" % (entity_id, n, p["pings"], p["ping_last"], p["ping_disorder"],
                                                     cell["offloads"]))
            forwarded = sum(cluster.stat(n, "forwarded") or 0 for n in cluster.names("cellapp"))
            harness.log("%d numbered calls arrived once and in order across %d offloads (%d line moves, %d "
                        "messages forwarded by a cellapp the real had left)"
                        % (total, offloads, mover.moves, forwarded))
            self.assertEqual(problems, [], "\n".join(problems[:20]))
            self.assertEqual(total, report["pings_sent"], text)
            # Enough calls to keep streams busy through every offload; the
            # rate is the machine's, so only half the plan is asked for.
            planned = BOTS * PING_RATE * (SECONDS - SETTLE)
            self.assertGreaterEqual(total, planned // 2, text)
            self.assertGreater(offloads, BOTS, "the reals hardly moved")
            for name in ("cellapp-1", "cellapp-2"):
                self.assertNotIn("never arrived", cluster.log(name), "%s gave up on a gap in a stream" % name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
