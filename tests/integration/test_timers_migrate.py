#!/usr/bin/env python3
"""test_timers_migrate -- a repeating timer keeps its count and its phase
across many moves between cellapps.

Every Avatar of the demo game has a half-second heartbeat timer that counts
in a cell-private property (`heartbeats`), and records when it was born
(`born_ms`). Ten bots stand within 10 m of the line of a space split in
two; the operator moves the line from x = -20 to x = +20 and back, over and
over, so each move sends all ten reals to the other cellapp, with their
timers. At the end, for every avatar that moved at least 50 times: the
count is what its age says (to the tick that the next firing waits for),
and the timer's next due time is still on its original beat."""
import json
import os
import unittest

import harness

BOTS = 10
MOVES = 56
PERIOD_MS = 500


class TimersMigrate(unittest.TestCase):
    def test_heartbeat_count_exact_across_offloads(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=2, grid="2x1", spawn_radius=10,
                             extra_set=["cellapp.game.npc_count=0"]) as cluster:
            seconds = 60
            bots = harness.start_bots(cluster, BOTS, seconds, ["--area", 10, "--speed", 0, "--calls-per-second", 0])
            try:
                harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == BOTS, 30, "bots in the world")

                def offloads():
                    return sum(cluster.stat(n, "offloads_out") or 0 for n in cluster.names("cellapp"))

                def reals(name):
                    return cluster.stat(name, "reals") or 0

                # First every real to cellapp-1's side; from then on each
                # move sends all of them across.
                cluster.admin("move-line", "default", 0, 20)
                harness.wait_for(lambda: reals("cellapp-1") == BOTS and reals("cellapp-2") == 0, 15,
                                 "every real on cellapp-1")
                at = -20
                for i in range(MOVES):
                    before = offloads()
                    cluster.admin("move-line", "default", 0, at)
                    harness.wait_for(lambda: offloads() >= before + BOTS, 15,
                                     "all %d reals to move after line move %d" % (BOTS, i + 1))
                    at = -at
                dumps = cluster.dump_states(cluster.names("cellapp"))
            finally:
                bots.terminate()
                report = harness.finish_bots(bots)
            self.assertEqual(report.get("errors"), 0, json.dumps(report, indent=2, sort_keys=True))
            checked = 0
            problems = []
            worst_phase = 0.0
            for name, document in dumps.items():
                wall_ms = document["wall_ms"]
                for entity in document["entities"]:
                    if entity["class"] != "Avatar":
                        continue
                    p = entity["properties"]
                    age_ms = wall_ms - int(p["born_ms"])
                    expected = age_ms // PERIOD_MS
                    heartbeats = p["heartbeats"]
                    timers = [t for t in entity["timers"] if t["interval_us"] == PERIOD_MS * 1000]
                    if len(timers) != 1:
                        problems.append("entity %s has %d heartbeat timers" % (entity["id"], len(timers)))
                        continue
                    # The next firing is due one period after the last one:
                    # born + (heartbeats + 1) periods, on its original beat.
                    next_due_ms = wall_ms + timers[0]["remaining_us"] / 1000.0
                    phase = next_due_ms - (int(p["born_ms"]) + (heartbeats + 1) * PERIOD_MS)
                    worst_phase = max(worst_phase, abs(phase))
                    if entity["offloads"] < 50:
                        problems.append("entity %s moved only %d times" % (entity["id"], entity["offloads"]))
                    if heartbeats not in (expected, expected - 1):
                        problems.append("entity %s: %d heartbeats at %d ms of age (want %d)"
                                        % (entity["id"], heartbeats, age_ms, expected))
                    # The beat may slip by what a tick's lateness and a
                    # move's transit cost at most, never by periods.
                    if abs(phase) > 150:
                        problems.append("entity %s: its next heartbeat is %.0f ms off its beat" % (entity["id"], phase))
                    checked += 1
            harness.log("%d avatars checked after %d line moves; largest drift of the beat %.1f ms"
                        % (checked, MOVES, worst_phase))
            self.assertEqual(problems, [], "\n".join(problems))
            self.assertEqual(checked, BOTS)


if __name__ == "__main__":
    unittest.main(verbosity=2)
