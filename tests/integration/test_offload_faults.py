#!/usr/bin/env python3
"""test_offload_faults -- a cellapp that dies in the middle of a burst of
offloads loses no entity, and none is real twice; and layouts that cannot
be right are refused before any cellapp applies them.

Three cellapps hold the default space in three columns. Every entity (the
bots' avatars and the NPCs) is first gathered on cellapp-1 by moving the
first line. Then cellapp-2 is frozen (SIGSTOP) and the line is moved so that
cellapp-2's column holds everyone: cellapp-1 sends them all there, and none
is acknowledged. cellapp-2 is killed (SIGKILL): cellapp-1 takes every one
back as a new incarnation (the cell directory still names it: nothing
is restored from the bases' backups), their ghosts on cellapp-3 follow,
and the baseapp hands each client the stream of the real that took it
back. cellapp-2's cell goes to a survivor at once, and the reals move
there. The bots play on and, when they settle, their views are checked
against where everyone is (--verify-aoi), with no client dropped. Every
entity is real exactly once.

Refusals: tessera-admin refuses giving a cell to a dead cellapp or moving a
line outside its region; a layout that names a dead cellapp written into
Redis by hand anyway (a later epoch, a valid tree) is not applied by the
cellapps, which keep the one they have and say why; and an epoch older than
the one a cellapp holds is ignored and logged."""
import json
import unittest

import harness

BOTS = 60
SECONDS = 40
NPCS_PER_CELLAPP = 3


class OffloadFaults(unittest.TestCase):
    def reals(self, cluster, name):
        return cluster.stat(name, "reals") or 0

    def total(self, cluster, name, field):
        return cluster.stat(name, field) or 0

    def test_destination_dies_mid_offload(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        settings = ["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP, "baseapp.cell_lost_grace_ms=10000"]
        with harness.Cluster(baseapps=1, cellapps=3, grid="3x1", spawn_radius=40, extra_set=settings) as cluster:
            everyone = BOTS + 3 * NPCS_PER_CELLAPP
            bots = harness.start_bots(cluster, BOTS, SECONDS,
                                      ["--verify-aoi", "--area", 40, "--speed", 3, "--calls-per-second", 0.5,
                                       "--settle-seconds", 4])
            try:
                harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == BOTS, 30,
                                 "every bot in the world")
                # Split 0 is the line between the first two columns.
                cluster.admin("move-line", "default", 0, 100)
                harness.wait_for(lambda: self.reals(cluster, "cellapp-1") == everyone, 20,
                                 "every entity gathered on cellapp-1")
                sent_before = self.total(cluster, "cellapp-1", "offloads_out")
                self.dead_id = cluster.registry_id("cellapp-2")
                cluster.kill("cellapp-2", "STOP")
                cluster.admin("move-line", "default", 0, -450)
                harness.wait_for(lambda: self.total(cluster, "cellapp-1", "offloads_out") >= sent_before + everyone, 20,
                                 "cellapp-1 to send everyone to the frozen cellapp-2")
                cluster.kill("cellapp-2", "KILL")
                harness.wait_for(lambda: self.total(cluster, "cellapp-1", "offloads_reclaimed") >= everyone, 20,
                                 "cellapp-1 to take every real back")
                dead_id = self.dead_id
                harness.wait_for(lambda: self.reals(cluster, "cellapp-1") + self.reals(cluster, "cellapp-3")
                                 == everyone, 20, "every real on the survivors")
                dumps = cluster.dump_states(["cellapp-1", "cellapp-3"])
                self.check_refusals(cluster, dead_id)
            finally:
                report = harness.finish_bots(bots)
            text = json.dumps(report, indent=2, sort_keys=True)
            self.assertEqual(report.get("errors"), 0, text)
            self.assertEqual(report.get("in_world_at_end"), BOTS, text)
            self.assertEqual(report.get("aoi_mismatches"), 0, text)
            self.assertEqual(report.get("aoi_position_mismatches"), 0, text)

            where = {}
            for name, document in dumps.items():
                for entity in document["entities"]:
                    where.setdefault(entity["id"], []).append(name)
            twice = {k: v for k, v in where.items() if len(v) > 1}
            self.assertEqual(twice, {}, "entities real twice")
            self.assertEqual(len(where), everyone, "%d reals, expected %d" % (len(where), everyone))
            harness.log("%d entities taken back after their destination died mid-offload; none lost, none twice"
                        % self.total(cluster, "cellapp-1", "offloads_reclaimed"))
            for name in ("baseapp-1", "cellapp-1", "cellapp-3"):
                self.assertTrue(cluster.alive(name), "%s died" % name)

    def check_refusals(self, cluster, dead_id):
        # cellapp-2 is dead: its cell went to a survivor, and no edit may
        # give a cell back to it.
        harness.wait_for(lambda: cluster.registry_hash("cellapp-2") is None, 15, "cellapp-2's registry entry to go")
        def handed_over():
            cells = harness.layout_cells(json.loads(cluster.admin("--json", "show", "default")))
            return cells if dead_id not in [cellapp for cellapp, _, _ in cells] else None
        cells = harness.wait_for(handed_over, 20, "the dead cellapp's cell handed over")
        result = cluster.admin_result("assign", "default", cells[0][1], dead_id)
        self.assertNotEqual(result.returncode, 0, result)
        self.assertIn("not alive", result.stderr, result)
        result = cluster.admin_result("move-line", "default", 0, 9999)
        self.assertNotEqual(result.returncode, 0, result)
        self.assertIn("can move within", result.stderr, result)
        # Written by hand, bypassing the tool: a later epoch naming a
        # cellapp that never existed.
        current = json.loads(cluster.admin("--json", "show", "default"))
        epoch = current["epoch"] + 1
        current["epoch"] = epoch
        leaf = current["tree"]
        while "cell" not in leaf:
            leaf = leaf["low"]
        leaf["cellapp"] = 987654
        cluster.redis.set("tessera:tessera:space:default", json.dumps(current))
        cluster.redis.hset("tessera:tessera:spaces", "default", str(epoch))
        # No cellapp applies it: each waits for the named cellapp and then
        # says why, unless the balancer's lease holder has given the cell
        # to a live cellapp first (a later epoch).
        logs = lambda: "".join(cluster.log(n) for n in ("cellapp-1", "cellapp-3"))
        harness.wait_for(lambda: "names cellapp 987654, which is not alive" in logs() or
                         "cellapp 987654 is gone: cell" in logs(), 30,
                         "the layout naming a cellapp that is not alive refused or repaired")
        self.assertNotIn("epoch %d: this cellapp" % epoch, logs(), "it was applied")
        # An epoch older than the one applied: ignored, and said so.
        cluster.redis.hset("tessera:tessera:spaces", "default", "1")
        harness.wait_for(lambda: "older than the" in cluster.log("cellapp-3") and "ignored" in cluster.log("cellapp-3"),
                         15, "cellapp-3 to ignore an older epoch and log it")


if __name__ == "__main__":
    unittest.main(verbosity=2)
