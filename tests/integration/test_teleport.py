#!/usr/bin/env python3
"""test_teleport -- teleports within a space and into another space, across
cellapps.

The default space is split at x = 0 between cellapp-1 (west) and cellapp-2
(east); a second space, "dungeon", lies wholly on cellapp-2. Two bots call
their cell's teleport (the demo's GM command) together, on a schedule:

   t = 4 s   to (200, 0, 20) in the default space: east, cellapp-2
   t = 8 s   to (-200, 0, 20): west, cellapp-1 (within the space, another cellapp)
   t = 12 s  to (0, 0, 0) in the dungeon (another space, another cellapp)
   t = 18 s  to (250, 0, 20) in the default space (another space, the same cellapp)
   t = 21 s  to (5000, 0, 0) in the default space: outside every cell, refused

While in the dungeon (the snapshot at t = 16 s) each of the two sees only
the other and itself: nothing of the default space followed them
(teleport_stale counts anything that did). At the end both are real in the
default space at (250, 20), on cellapp-2, exactly once; the refused
teleport left them there and in the world. The other bots play on in the
default space throughout without an error."""
import json
import os
import unittest

import harness

BOTS = 20
SECONDS = 25
SCHEDULE = ["4::200:0:20", "8::-200:0:20", "12:dungeon:0:0:0", "18:default:250:0:20", "21::5000:0:0"]


class Teleport(unittest.TestCase):
    def test_teleports(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=2, grid="2x1", spawn_radius=30,
                             extra_set=["cellapp.game.npc_count=5"]) as cluster:
            east = cluster.registry_id("cellapp-2")
            cluster.admin("create", "dungeon", "--bounds", "-100,-100,100,100", "--spawn", "0,0,10", "--cellapps", east)
            harness.wait_for(lambda: (cluster.stat("cellapp-2", "cells") or 0) == 2, 15,
                             "cellapp-2 to hold its dungeon cell")
            snapshot = os.path.join(cluster.dir, "bots-snapshot.json")
            args = ["--area", 30, "--speed", 2, "--teleport-bots", 2, "--snapshot-file", snapshot,
                    "--snapshot-at-seconds", 16, "--calls-per-second", 0.5]
            for entry in SCHEDULE:
                args += ["--teleport", entry]
            bots = harness.start_bots(cluster, BOTS, SECONDS, args)
            try:
                harness.wait_for(lambda: os.path.exists(snapshot), SECONDS + 30, "the snapshot in the dungeon")
                with open(snapshot) as f:
                    seen = json.load(f)
                harness.wait_for(lambda: "teleport refused" in cluster.log("cellapp-2"), SECONDS + 30,
                                 "the teleport outside every cell to be refused")
                dumps = cluster.dump_states(cluster.names("cellapp"))
            finally:
                report = harness.finish_bots(bots)
            text = json.dumps(report, indent=2, sort_keys=True)
            self.assertEqual(report.get("errors"), 0, text)
            self.assertEqual(report.get("in_world_at_end"), BOTS, text)
            # Four teleports each of the two; the fifth was refused.
            self.assertEqual(report.get("teleports_received"), 8, text)
            self.assertEqual(report.get("teleport_stale"), 0, text)

            travellers = [b for b in seen["bots"] if b["account"] in ("bot0", "bot1")]
            self.assertEqual(len(travellers), 2, seen)
            ids = {b["entity_id"] for b in travellers}
            for b in travellers:
                self.assertEqual(b["space"], "dungeon", b)
                self.assertEqual({e["id"] for e in b["entities"]}, ids,
                                 "%s in the dungeon sees %s" % (b["account"], [e["id"] for e in b["entities"]]))
            for b in seen["bots"]:
                if b["account"] not in ("bot0", "bot1"):
                    self.assertEqual(b["space"], "default", b)
                    self.assertFalse(ids & {e["id"] for e in b["entities"]},
                                     "%s in the default space still sees a traveller" % b["account"])

            where = {}
            for name, document in dumps.items():
                for entity in document["entities"]:
                    where.setdefault(entity["id"], []).append((name, entity))
            for entity_id in ids:
                places = where.get(entity_id, [])
                self.assertEqual(len(places), 1, "traveller %s is real at %s" % (entity_id, places))
                name, entity = places[0]
                self.assertEqual(name, "cellapp-2", entity)
                self.assertEqual(entity["space"], "default", entity)
                self.assertAlmostEqual(entity["x"], 250, delta=2 * 4 + 1)
                self.assertGreaterEqual(entity["offloads"], 2, entity)
            twice = {k: v for k, v in where.items() if len(v) > 1}
            self.assertEqual(twice, {}, "entities real twice")
            self.assertGreaterEqual(sum(cluster.stat(n, "teleports") or 0 for n in cluster.names("cellapp")), 8)


if __name__ == "__main__":
    unittest.main(verbosity=2)
