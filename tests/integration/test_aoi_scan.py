#!/usr/bin/env python3
"""test_aoi_scan -- the cellapps' AOI in scan mode (cellapp.aoi_mode=scan,
cellapp/coord.h "Modes"), end to end: 300 bots (120 under AddressSanitizer)
walk for 12 s in a 200 x 200 m square across the line between two cells,
so views overlap, reals offload and ghosts come and go, and every bot
checks what it is told against where everyone is (--verify-aoi: 0
mismatches, no flickers, no gaps in updates). Both cellapps report their
cell in scan mode and the entities their scans tested; the crossing mode
of the other tests is their only other difference."""
import unittest

import harness

BOTS = 120 if harness.SANITIZED else 300
SECONDS = 12
AREA = 100
NPCS_PER_CELLAPP = 10


class AoiScan(unittest.TestCase):
    def test_views_exact_in_scan_mode(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        settings = ["cellapp.aoi_mode=scan", "cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]
        with harness.Cluster(baseapps=1, cellapps=2, extra_set=settings, spawn_radius=AREA, timeout=60) as cluster:
            bots = harness.start_bots(cluster, BOTS, SECONDS,
                                      ["--verify-aoi", "--area", AREA, "--speed", 5, "--calls-per-second", 0.2,
                                       "--settle-seconds", 4, "--login-spread-ms", 3000])
            report = harness.finish_bots(bots)
            text = harness.assert_bots_verified(self, report, BOTS)
            self.assertEqual(report.get("flickers"), 0, text)
            self.assertEqual(report.get("update_gaps"), 0, text)
            for name in cluster.names("cellapp"):
                self.assertEqual(cluster.stat(name, "aoi_scanning_cells"), 1, "%s: its cell is not scanning" % name)
                self.assertGreater(cluster.stat(name, "aoi_scanned") or 0, 0, "%s: no scan tested anything" % name)
            offloads = sum(cluster.stat(n, "offloads_out") or 0 for n in cluster.names("cellapp"))
            self.assertGreater(offloads, 0, "nobody crossed the line")
            self.assertTrue(cluster.all_alive())


if __name__ == "__main__":
    unittest.main()
