#!/usr/bin/env python3
"""test_controllers_migrate -- the demo's guards patrol with navigate across
cell lines, round the demo map's walls, and their moves go on where they
arrive.

Three cellapps hold the default space in three columns (-150 .. 150 on X,
split at -50 and 50), with the demo map (demo/maps/arena.json: walls at
x = -100 and 100 and either side of the centre) as its navigation mesh.
Each cellapp spawns four guards near the centre, which patrol
(game.npc_patrol_speed 8 m/s) to random points up to 120 m from their
posts along paths on the mesh, so that most legs cross a line and the
guard moves to another cellapp in the middle of a multi-segment move. A
guard gets its next leg only when a move arrives: one whose chain were lost
on the way would stand where it arrived for ever. The test checks, from
every cellapp's state dumps:
  - every guard is real exactly once (nothing lost or doubled);
  - guards did move between cellapps (offloads, and guards real on every
    cellapp at some point);
  - every guard that has moved between cellapps is still walking: its
    position changes between two dumps a second and a half apart;
  - every process is alive at the end.
"""
import os
import time
import unittest

import harness

ARENA = os.path.join(harness.SOURCE_DIR, "demo", "maps", "arena.json")

NPCS_PER_CELLAPP = 4
CELLAPPS = 3


class ControllersMigrate(unittest.TestCase):
    def guards(self, cluster):
        """{id: (cellapp name, x, z, offloads)} of every real guard."""
        out, seen = {}, {}
        for name, dump in cluster.dump_states(cluster.names("cellapp")).items():
            for entity in dump["entities"]:
                if entity["class"] != "Npc":
                    continue
                seen.setdefault(entity["id"], []).append(name)
                out[entity["id"]] = (name, entity["x"], entity["z"], entity["offloads"])
        doubled = {k: v for k, v in seen.items() if len(v) != 1}
        self.assertFalse(doubled, "guards real on more than one cellapp: %r" % doubled)
        return out

    def test_patrols_cross_cellapps(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        settings = ["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP, "cellapp.game.npc_patrol_speed=8",
                    "cellapp.game.npc_patrol_radius=120", "cellapp.max_speed=12",
                    "cellapp.maps.default=" + ARENA, "cellapp.navmesh_cell_size=1"]
        with harness.Cluster(baseapps=1, cellapps=CELLAPPS, grid="3x1", bounds=(-150, -150, 150, 150),
                             spawn_radius=20, extra_set=settings, timeout=60) as cluster:
            expected = NPCS_PER_CELLAPP * CELLAPPS
            harness.wait_for(lambda: len(self.guards(cluster)) == expected, 20, "every guard spawned")
            holders = set()

            def crossed():
                guards = self.guards(cluster)
                holders.update(name for name, _x, _z, _o in guards.values())
                moved = sum(1 for *_rest, offloads in guards.values() if offloads > 0)
                return moved >= expected // 2 and len(holders) == CELLAPPS
            harness.wait_for(crossed, 60, "half the guards to have moved between cellapps")
            # (A guard in the middle of an offload is real nowhere for a
            # moment: a dump is taken again until every guard is in it.)
            def complete():
                guards = self.guards(cluster)
                return guards if len(guards) == expected else None
            before = harness.wait_for(complete, 10, "a dump with every guard")
            time.sleep(1.5)
            after = harness.wait_for(complete, 10, "a dump with every guard")
            offloaded = [g for g, (_n, _x, _z, offloads) in after.items() if offloads > 0]
            standing = [g for g in offloaded if g in before and before[g][1:3] == after[g][1:3]]
            harness.log("%d guards, %d moved between cellapps, held by %s; standing still: %s"
                        % (len(after), len(offloaded), sorted(holders), standing))
            self.assertEqual(standing, [], "guards whose move stopped after moving between cellapps")
            self.assertTrue(cluster.all_alive())
            for name in cluster.names("cellapp"):
                self.assertIn("navigation mesh from", cluster.log(name))


if __name__ == "__main__":
    unittest.main(verbosity=2)
