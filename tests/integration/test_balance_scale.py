#!/usr/bin/env python3
"""test_balance_scale -- a cellapp added at run time takes load; stopped
with SIGTERM, it gives its cells back first and loses nothing.

Two cellapps hold the default space (split at x = 0) with the balancer on,
and bots walk all over it. A third cellapp joins (scripts/cluster
add-cellapp): it holds no cell, so the space's cellapps run hotter than
the cluster's average, and the balancer adds a cell for it beside the
busiest cell, with no area at first; the lines then move into it until it
carries its share. The test waits until it holds reals and reports load.

Then it gets SIGTERM. It stops standing for the lease and reports itself
draining; with no free cellapp to hand its cell to, the balancer marks the
cell retiring and pushes its line until it has no area, its reals offload
to the neighbours, and once the cell is empty, nothing is in flight and
every cellapp has applied that layout, it is removed. Only then does the
cellapp exit ("drained" in its log). Every bot is still in the world, the
views matched throughout (--verify-aoi), and every entity is real on
exactly one of the two cellapps left."""
import os
import time
import unittest

import harness

BOTS = 100 if harness.SANITIZED else 200
SECONDS = 40
NPCS = 5
# Reals the added cellapp must come to hold.
REALS_TAKEN = 5


class BalanceScale(unittest.TestCase):
    # Under the sanitizers the suite's time is kept in bounds.
    @unittest.skipIf(harness.SANITIZED, "the normal build runs it; cells added and handed over run under the sanitizers in test_recovery")
    def test_add_then_drain_a_cellapp(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        settings = ["cellapp.game.npc_count=%d" % NPCS, "cellapp.balance_retire_below=0",
                    # The cluster's loads are small here (a hundred bots):
                    # the two busy cellapps run at a few per cent, and the
                    # idle one's own tick (Redis, heartbeats, and under
                    # ASan or a loaded machine more) is near that, so any
                    # positive margin can hide the difference. With none,
                    # the space's cellapps only have to be busier than the
                    # cluster's average, which an idle cellapp makes them.
                    "cellapp.balance_add_margin=0", "cellapp.balance_cell_change_ms=2000",
                    "cellapp.drain_timeout_ms=40000"]
        with harness.Cluster(baseapps=1, cellapps=2, extra_set=settings, balance=True, timeout=60,
                             bounds=(-200, -200, 200, 200), spawn_radius=150) as cluster:
            snapshot = os.path.join(cluster.dir, "bots-snapshot.json")
            bots = harness.start_bots(cluster, BOTS, SECONDS,
                                      ["--verify-aoi", "--area", 150, "--calls-per-second", 0.2,
                                       "--settle-seconds", 4, "--login-spread-ms", 3000,
                                       "--snapshot-file", snapshot, "--snapshot-at-seconds", SECONDS - 2])
            try:
                time.sleep(6)
                added = cluster.add_cellapp()
                added_id = cluster.registry_id(added)
                added_at = time.monotonic()

                # The balancer may give the new cellapp a corner of an
                # eighth of the bots' area (x 15..150, z 62..150 in one
                # run): about 26 of 200 bots on average there, and fewer
                # than a tenth of them in 1 run in 10. A few reals are what
                # shows it took its share.
                def holds_reals():
                    layout = cluster.balance_view()["spaces"]["default"]
                    mine = [o for o in harness.layout_cells(layout) if o[0] == added_id]
                    reals = cluster.stat(added, "reals") or 0
                    return (layout, reals) if mine and reals >= REALS_TAKEN else None
                layout, reals = harness.wait_for(holds_reals, 40, "the added cellapp to get a cell and reals")
                harness.log("%s (id %s) holds %d reals %.1f s after joining; cells %s; loads %s"
                            % (added, added_id, reals, time.monotonic() - added_at, harness.layout_cells(layout),
                               [(n, cluster.stat(n, "load_permille")) for n in cluster.names("cellapp")]))
                harness.wait_for(lambda: (cluster.stat(added, "load_permille") or 0) > 0, 10,
                                 "the added cellapp to report load")

                cluster.kill(added, "TERM")
                drained_at = time.monotonic()
                harness.wait_for(lambda: not cluster.alive(added), 45, "the drained cellapp to exit")
                harness.log("%s drained and stopped in %.1f s" % (added, time.monotonic() - drained_at))
                text = cluster.log(added)
                self.assertIn("draining", text)
                self.assertIn("drained: no cell, no real", text, text[-3000:])
                layout = cluster.balance_view()["spaces"]["default"]
                harness.log("cells after: %s" % harness.layout_cells(layout))
                self.assertNotIn(added_id, [o[0] for o in harness.layout_cells(layout)])

                harness.wait_for(lambda: os.path.exists(snapshot), SECONDS + 30, "the bots' snapshot")
                expected = BOTS + NPCS * 3

                def settled(dumps):
                    where = harness.reals_by_id(dumps)
                    return len(where) == expected and all(len(v) == 1 for v in where.values())
                left = [n for n in cluster.names("cellapp") if n != added]
                dumps = cluster.dump_states_settled(left, settled)
            finally:
                report = harness.finish_bots(bots)
            harness.assert_bots_verified(self, report, BOTS)
            where = harness.reals_by_id(dumps)
            # Every bot and every NPC (the added cellapp's own too: they
            # moved out with the rest) is real exactly once.
            twice = {k: v for k, v in where.items() if len(v) != 1}
            self.assertFalse(twice, twice)
            self.assertEqual(len(where), expected, "%d reals, expected %d" % (len(where), expected))


if __name__ == "__main__":
    unittest.main(verbosity=2)
