#!/usr/bin/env python3
"""test_recovery -- no player lost when a cellapp dies, stalls, or when
Redis stops for a while.

kill -9: three cellapps hold the default space in three columns; bots walk
across all of them (--verify-aoi) with NPCs on every cellapp. cellapp-2 is
killed with SIGKILL. The balancer's lease holder declares it dead (its
connections reset: within a second), hands its cell to a survivor, and
every real it held comes back on the cellapp that owns its position: from
the ghost there when there is one, else from the base's backup (players)
or the backup in Redis (NPCs). No bot is dropped, every view is right when
they settle, and every entity is real exactly once.

SIGSTOP: cellapp-2 is frozen past its registry lease. It is declared dead
and restored elsewhere as above; on SIGCONT it finds itself fenced and
revoked, and joins again as a new process with nothing of its own: no
entity is real twice.

Redis paused: with Redis stopped (SIGSTOP) for 5 s nobody can renew a
lease and nobody can decide a death; the world keeps ticking, and when
Redis is back no process was declared dead and nothing was restored."""
import json
import os
import signal
import time
import unittest

import harness

BOTS = 45
NPCS_PER_CELLAPP = 3
SETTINGS = ["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]


def counter(cluster, names, field):
    return sum(cluster.stat(name, field) or 0 for name in names)


def restored(cluster, names):
    return counter(cluster, names, "restores_from_ghost") + counter(cluster, names, "restores_from_backup")


class Recovery(unittest.TestCase):
    def check_once(self, cluster, names, everyone, timeout=20):
        """Every entity real exactly once among `names`; returns the dumps."""
        def settled():
            dumps = cluster.dump_states(names)
            where = harness.reals_by_id(dumps)
            return where if len(where) == everyone and all(len(v) == 1 for v in where.values()) else None
        try:
            return harness.wait_for(settled, timeout, "every entity real exactly once")
        except AssertionError:
            where = harness.reals_by_id(cluster.dump_states(names))
            twice = {k: v for k, v in where.items() if len(v) > 1}
            self.fail("%d reals (expected %d), real twice: %s" % (len(where), everyone, twice))

    def pick(self, cluster, leader):
        """The cellapp to fail: the balancer's lease holder (leader) or,
        preferably the middle column, one that is not. Returns (victim,
        survivors)."""
        names = ["cellapp-1", "cellapp-2", "cellapp-3"]
        held = harness.wait_for(lambda: cluster.balance_view()["leader"], 15, "a cellapp to take the lease")
        ids = {cluster.registry_id(n): n for n in names}
        lead = ids[held[0]]
        if leader:
            victim = lead
        else:
            victim = "cellapp-2" if lead != "cellapp-2" else "cellapp-1"
        harness.log("lease holder %s; failing %s" % (lead, victim))
        return victim, [n for n in names if n != victim]

    def kill_and_restore(self, leader):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=3, grid="3x1", spawn_radius=60, extra_set=SETTINGS,
                             timeout=60) as cluster:
            everyone = BOTS + 3 * NPCS_PER_CELLAPP
            bots = self.start(cluster, 30)
            victim, survivors = self.pick(cluster, leader)
            try:
                harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == BOTS, 30,
                                 "every bot in the world")
                harness.wait_for(lambda: (cluster.stat(victim, "reals") or 0) >= NPCS_PER_CELLAPP + 3, 20,
                                 "%s to hold some players" % victim)
                time.sleep(3)  # backups of everyone, walking across lines
                held = cluster.stat(victim, "reals")
                harness.log("%s holds %d reals; killing it" % (victim, held))
                killed_at = time.monotonic()
                cluster.kill(victim, "KILL")
                self.check_once(cluster, survivors, everyone, 20)
                harness.log("every entity real once %.1f s after the kill; %d reals restored (%d from ghosts)"
                            % (time.monotonic() - killed_at, restored(cluster, survivors),
                               counter(cluster, survivors, "restores_from_ghost")))
                harness.wait_for(lambda: restored(cluster, survivors) > 0, 10, "the restores in the survivors' figures")
            finally:
                report = harness.finish_bots(bots)
            text = harness.assert_bots_verified(self, report, BOTS)
            self.assertGreater(report.get("restores", 0), 0, text)
            self.assertEqual(counter(cluster, survivors, "restores_failed"), 0)
            for name in ["baseapp-1"] + survivors:
                self.assertTrue(cluster.alive(name), "%s died" % name)

    def test_kill_restores_every_real(self):
        self.kill_and_restore(leader=False)

    def test_leader_killed_restores_every_real(self):
        # The cellapp that would decide the death is the one that died: the
        # next lease holder decides it, and restores, once the lease lapsed.
        self.kill_and_restore(leader=True)

    def start(self, cluster, seconds):
        # Three narrow columns around the spawn disc, so every cellapp
        # holds players and many walk across lines (ghosts on both sides).
        cluster.admin("move-line", "default", 0, -20)
        cluster.admin("move-line", "default", 1, 20)
        return harness.start_bots(cluster, BOTS, seconds,
                                  ["--verify-aoi", "--area", 60, "--speed", 3, "--calls-per-second", 0.5,
                                   "--settle-seconds", 4])

    def test_stopped_cellapp_fences_and_rejoins_empty(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=3, grid="3x1", spawn_radius=60, extra_set=SETTINGS,
                             timeout=60) as cluster:
            everyone = BOTS + 3 * NPCS_PER_CELLAPP
            bots = self.start(cluster, 35)
            victim, survivors = self.pick(cluster, False)
            try:
                harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == BOTS, 30,
                                 "every bot in the world")
                time.sleep(3)
                old_id = cluster.registry_id(victim)
                held = cluster.stat(victim, "reals")
                harness.log("%s (id %s) holds %d reals; stopping it" % (victim, old_id, held))
                cluster.kill(victim, "STOP")
                self.check_once(cluster, survivors, everyone, 30)
                harness.wait_for(lambda: restored(cluster, survivors) > 0, 10, "the restores in the survivors' figures")
                cluster.kill(victim, "CONT")
                harness.wait_for(lambda: "declared dead by the cluster" in cluster.log(victim), 15,
                                 "%s to learn it was declared dead" % victim)

                def rejoined():
                    new_id = cluster.registry_id(victim)
                    return new_id if new_id and new_id != old_id else None
                new_id = harness.wait_for(rejoined, 20, "%s to join again as a new process" % victim)
                harness.log("%s rejoined as %s" % (victim, new_id))
                self.check_once(cluster, ["cellapp-1", "cellapp-2", "cellapp-3"], everyone)
            finally:
                report = harness.finish_bots(bots)
            harness.assert_bots_verified(self, report, BOTS)
            self.assertIn("fenced: this cellapp's lease lapsed", cluster.log(victim))
            self.assertIn("rejoining the cluster as a new process", cluster.log(victim))

    def test_redis_paused_kills_nobody(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=3, grid="3x1", spawn_radius=60, extra_set=SETTINGS,
                             timeout=60) as cluster:
            names = ["cellapp-1", "cellapp-2", "cellapp-3"]
            everyone = BOTS + 3 * NPCS_PER_CELLAPP
            bots = self.start(cluster, 25)
            try:
                harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == BOTS, 30,
                                 "every bot in the world")
                time.sleep(2)
                with open(os.path.join(cluster.dir, "pids", "redis.pid")) as f:
                    redis_pid = int(f.read())
                os.kill(redis_pid, signal.SIGSTOP)
                try:
                    time.sleep(5)
                finally:
                    os.kill(redis_pid, signal.SIGCONT)
                time.sleep(4)  # leases renewed, a death watch that would act has acted
                self.assertEqual(counter(cluster, names, "deaths_declared"), 0)
                self.assertEqual(restored(cluster, names), 0)
                self.check_once(cluster, names, everyone)
            finally:
                report = harness.finish_bots(bots)
            harness.assert_bots_verified(self, report, BOTS)
            for name in ["baseapp-1"] + names:
                self.assertTrue(cluster.alive(name), "%s died" % name)
            self.assertEqual(report.get("restores", 0), 0, json.dumps(report))


if __name__ == "__main__":
    unittest.main()
