#!/usr/bin/env python3
"""test_multicell -- one seamless world in four cells: 4 cellapps hold the
default space split 2 x 2 (lines at x = 0 and z = 0), and 500 bots walk
across the lines for 60 s (a lighter load under AddressSanitizer, which is
several times slower).

Crossing without a trace: the bots' views match where everyone is
(--verify-aoi: 0 mismatches), nobody saw an entity leave while it was
still well inside the view (a leave and re-enter of something that stayed:
flickers 0; nor did any cellapp write a LEAVE for an entity inside the
view by its own positions: near_leaves 0), and no walking bot in view went
more than a second and a tick without an update (update_gaps 0), with
hundreds of reals moving between cellapps meanwhile.

Ghosts only near lines: at the end every cellapp is asked for its state.
Every entity is real on exactly one cellapp, inside that cellapp's cell
(or within the offload margin of it); every ghost a cellapp holds is within
ghost distance plus the fudge margin of its cell (and a little more for the
minimum lifespan's walk); reals far from every line have no ghost at all.
The counts are printed."""
import json
import os
import sys
import unittest

import harness

BOTS = 200 if harness.SANITIZED else 500
SECONDS = 25 if harness.SANITIZED else 60
# Waypoints within 150 m of the centre, where the four cells meet: every bot
# crosses lines all the time.
AREA = 150
SPEED = 5
NPCS_PER_CELLAPP = 10
# The cellapps' defaults (cellapp/main.c).
GHOST_DISTANCE = 70
GHOST_FUDGE = 20
OFFLOAD_MARGIN = 2
# A ghost may outlive its need by the minimum lifespan (5 s) of walking.
LIFESPAN_WALK = 5 * SPEED + 1


def distance_to_region(cell, x, z):
    dx = max(0.0, cell["min_x"] - x, x - cell["max_x"])
    dz = max(0.0, cell["min_z"] - z, z - cell["max_z"])
    return max(dx, dz)


class MultiCell(unittest.TestCase):
    def test_crossing_without_a_trace(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        settings = ["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]
        with harness.Cluster(baseapps=1, cellapps=4, extra_set=settings, spawn_radius=AREA,
                             timeout=60) as cluster:
            layout = cluster.admin("show", "default")
            harness.log("layout:\n" + layout)
            self.assertEqual(layout.count("cell "), 4, layout)
            snapshot = os.path.join(cluster.dir, "bots-snapshot.json")
            bots = harness.start_bots(cluster, BOTS, SECONDS,
                                      ["--verify-aoi", "--area", AREA, "--speed", SPEED, "--calls-per-second", 0.2,
                                       "--settle-seconds", 4, "--login-spread-ms", 3000, "--snapshot-file", snapshot,
                                       "--snapshot-at-seconds", SECONDS - 2])
            try:
                # While the bots stand still at the end (the snapshot says
                # when): every cellapp's reals and ghosts.
                harness.wait_for(lambda: os.path.exists(snapshot), SECONDS + 30, "the bots' snapshot")
                expected = BOTS + NPCS_PER_CELLAPP * 4

                def settled(dumps):
                    where = harness.reals_by_id(dumps)
                    return len(where) == expected and all(len(v) == 1 for v in where.values())
                dumps = cluster.dump_states_settled(cluster.names("cellapp"), settled)
            finally:
                report = harness.finish_bots(bots)
            text = harness.assert_bots_verified(self, report, BOTS)
            self.assertEqual(report.get("flickers"), 0, text)
            self.assertEqual(report.get("update_gaps"), 0, text)
            self.assertEqual(report.get("corrections"), 0, text)

            offloads = sum(cluster.stat(n, "offloads_out") or 0 for n in cluster.names("cellapp"))
            reclaimed = sum(cluster.stat(n, "offloads_reclaimed") or 0 for n in cluster.names("cellapp"))
            awaited = sum(cluster.stat(n, "arrivals_awaited") or 0 for n in cluster.names("cellapp"))
            missed = sum(cluster.stat(n, "arrivals_missed") or 0 for n in cluster.names("cellapp"))
            near_leaves = sum(cluster.stat(n, "near_leaves") or 0 for n in cluster.names("cellapp"))
            harness.log("offloads: %d (taken back: %d); entities a travelling view waited for: %d (never came: %d)"
                        % (offloads, reclaimed, awaited, missed))
            # The cellapps' own check: no LEAVE for an entity still inside
            # the view by the cell's positions.
            self.assertEqual(near_leaves, 0, "a cellapp sent a LEAVE for an entity well inside the view")
            # Walking 5 m/s near the lines, each bot crosses one every 20 s or
            # so; 1 in 100 bot-seconds is far below that.
            self.assertGreater(offloads, BOTS * SECONDS // 100, "the bots hardly crossed a line")
            self.assertEqual(reclaimed, 0, "an offload was refused or lost in a healthy cluster")

            self.check_cells(dumps, BOTS + NPCS_PER_CELLAPP * 4)
            for name in cluster.names():
                self.assertTrue(cluster.alive(name), "%s died" % name)

    def check_cells(self, dumps, expected_reals):
        where = {}
        problems = []
        lines = []
        for name, document in sorted(dumps.items()):
            cells = [c for c in document["cells"] if c["space"] == "default"]
            self.assertEqual(len(cells), 1, "%s: %s" % (name, cells))
            cell = cells[0]
            self.assertTrue(cell["has_region"], "%s holds no region: %s" % (name, cell))
            interior = 0
            for entity in document["entities"]:
                where.setdefault(entity["id"], []).append(name)
                d = distance_to_region(cell, entity["x"], entity["z"])
                if d > OFFLOAD_MARGIN + 0.01:
                    problems.append("%s: real %s at (%.1f, %.1f) is %.1f m outside its cell"
                                    % (name, entity["id"], entity["x"], entity["z"], d))
                if entity["haunts"] == 0:
                    interior += 1
            farthest = 0.0
            for ghost in document["ghosts"]:
                d = distance_to_region(cell, ghost["x"], ghost["z"])
                farthest = max(farthest, d)
                if d > GHOST_DISTANCE + GHOST_FUDGE + LIFESPAN_WALK:
                    problems.append("%s: ghost %s at (%.1f, %.1f) is %.1f m from its cell"
                                    % (name, ghost["id"], ghost["x"], ghost["z"], d))
            lines.append("%s: cell x %g..%g z %g..%g, %d reals (%d with no ghost anywhere), %d ghosts, farthest "
                         "ghost %.1f m from the cell"
                         % (name, cell["min_x"], cell["max_x"], cell["min_z"], cell["max_z"],
                            len(document["entities"]), interior, len(document["ghosts"]), farthest))
        print("\n".join(lines), file=sys.stderr)
        self.assertGreater(sum(1 for line in lines if " (0 with no ghost" not in line), 0,
                           "no real far from every line is free of ghosts")
        twice = {k: v for k, v in where.items() if len(v) > 1}
        self.assertEqual(twice, {}, "entities real on more than one cellapp")
        self.assertEqual(len(where), expected_reals, "reals: %d, expected %d" % (len(where), expected_reals))
        self.assertEqual(problems, [], "\n".join(problems[:20]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
