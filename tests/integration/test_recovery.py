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

Two at once: a cellapp is killed and, the moment the lease holder has
declared it dead, the holder too; the last cellapp takes the lease back,
gets every cell in one layout, and holds every entity exactly once.

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
import urllib.request

import harness

BOTS = 45
NPCS_PER_CELLAPP = 3
SETTINGS = ["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]


def counter(cluster, names, field):
    return sum(cluster.stat(name, field) or 0 for name in names)


def metric(port, family):
    """A cellapp's /metrics sample of `family` (no labels), or 0."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(family + " "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0


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
            bots = self.start(cluster, 22)
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
            # The game heard it (the demo's restored hook).
            self.assertTrue(any("demo: restored from" in cluster.log(n) for n in survivors))
            self.assertEqual(counter(cluster, survivors, "restores_failed"), 0)
            for name in ["baseapp-1"] + survivors:
                self.assertTrue(cluster.alive(name), "%s died" % name)
            if leader:
                # A survivor saw the holder's connection reset and took the
                # lease back rather than wait for it to expire.
                self.assertTrue(any("balancer lease taken back from process" in cluster.log(n) for n in survivors),
                                "no survivor took the dead holder's lease back")

    @unittest.skipIf(harness.SANITIZED, "test_leader_killed_during_a_restore kills a cellapp and the leader under the sanitizers")
    def test_kill_restores_every_real(self):
        self.kill_and_restore(leader=False)

    def test_leader_killed_during_a_restore(self):
        # A second failure while the first is being repaired: a cellapp
        # that does not hold the lease is killed, and the moment the holder
        # has declared it dead (its cell handed over, the restores under
        # way) the holder is killed too. The last cellapp takes the lease
        # back, declares the holder dead, and ends up with every entity
        # real exactly once: the first victim's, whether the holder had
        # restored them already or not, and the holder's own.
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=3, grid="3x1", spawn_radius=60, extra_set=SETTINGS,
                             timeout=60) as cluster:
            everyone = BOTS + 3 * NPCS_PER_CELLAPP
            bots = self.start(cluster, 20)
            leader, _ = self.pick(cluster, True)
            first, _ = self.pick(cluster, False)
            last = [n for n in ("cellapp-1", "cellapp-2", "cellapp-3") if n not in (leader, first)][0]
            try:
                harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == BOTS, 30,
                                 "every bot in the world")
                harness.wait_for(lambda: (cluster.stat(first, "reals") or 0) >= NPCS_PER_CELLAPP + 3, 20,
                                 "%s to hold some players" % first)
                time.sleep(3)  # backups of everyone, walking across lines
                first_id = cluster.registry_id(first)
                cluster.kill(first, "KILL")
                declared = "process %s declared dead" % first_id
                harness.wait_for(lambda: declared in cluster.log(leader), 10, "%s to declare %s dead" % (leader, first),
                                 interval=0.02)
                cluster.kill(leader, "KILL")
                harness.log("killed %s, then %s once it had declared %s dead; %s is left" % (first, leader, first,
                                                                                         last))
                self.check_once(cluster, [last], everyone, 30)
            finally:
                report = harness.finish_bots(bots)
            harness.assert_bots_verified(self, report, BOTS)
            self.assertIn("balancer lease taken back from process", cluster.log(last))
            self.assertEqual(counter(cluster, [last], "restores_failed"), 0)
            for name in ["baseapp-1", last]:
                self.assertTrue(cluster.alive(name), "%s died" % name)

    @unittest.skipIf(harness.SANITIZED, "test_leader_killed_during_a_restore kills the leader under the sanitizers")
    def test_leader_killed_restores_every_real(self):
        # The cellapp that would decide the death is the one that died: a
        # survivor that saw its connection reset takes the lease back (it
        # renewed nothing since), and then decides the death and restores.
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
            bots = self.start(cluster, 25)
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
                cluster.wait_rejoined(victim, old_id)
                self.check_once(cluster, ["cellapp-1", "cellapp-2", "cellapp-3"], everyone)
            finally:
                report = harness.finish_bots(bots)
            harness.assert_bots_verified(self, report, BOTS)
            self.assertIn("fenced: this cellapp's lease lapsed", cluster.log(victim))
            self.assertIn("rejoining the cluster as a new process", cluster.log(victim))

    def test_kill_during_bulk_offload(self):
        # Every entity gathered on cellapp-1, then the line moved so that
        # cellapp-2 owns them all: hundreds of offloads at once, and
        # cellapp-1, their sender, killed as they arrive. Each entity ends
        # up real exactly once: on cellapp-2 (its offload arrived, the
        # directory names cellapp-2: a restore of it is refused) or
        # restored from its base's backup or the ghost (its offload was
        # lost with the sender), never both.
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        npcs = 50
        settings = ["cellapp.game.npc_count=%d" % npcs]
        with harness.Cluster(baseapps=1, cellapps=3, grid="3x1", spawn_radius=40, extra_set=settings,
                             timeout=60) as cluster:
            everyone = BOTS + 3 * npcs
            port = int(cluster.registry_hash("cellapp-2")["admin_port"])
            bots = harness.start_bots(cluster, BOTS, 22, ["--verify-aoi", "--area", 40, "--speed", 3,
                                                          "--settle-seconds", 4])
            try:
                harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == BOTS, 30,
                                 "every bot in the world")
                cluster.admin("move-line", "default", 0, 100)
                harness.wait_for(lambda: (cluster.stat("cellapp-1", "reals") or 0) == everyone, 20,
                                 "every entity gathered on cellapp-1")
                time.sleep(1.5)  # every one backed up where it is
                cluster.admin("move-line", "default", 0, -450)
                harness.wait_for(lambda: metric(port, "tessera_offloads_in_total") > 0, 10,
                                 "the first offloads to reach cellapp-2", interval=0.005)
                cluster.kill("cellapp-1", "KILL")
                survivors = ["cellapp-2", "cellapp-3"]
                self.check_once(cluster, survivors, everyone, 30)
                harness.log("after the kill: %d arrived on cellapp-2, %d restored, %d restores refused"
                            % (metric(port, "tessera_offloads_in_total"), restored(cluster, survivors),
                               counter(cluster, survivors, "restores_refused")))
            finally:
                report = harness.finish_bots(bots)
            harness.assert_bots_verified(self, report, BOTS)

    def test_busy_baseapp_loses_nothing(self):
        # A baseapp too busy to renew its registry lease in time: logins
        # storm in while its loop stalls for 0.6 s at a time (SIGSTOP and
        # SIGCONT, as a long burst of work would), past its 350 ms lease,
        # ten times. Its lease lapses again and again, but it is never
        # silent for a second: nobody takes it for dead, no entity of it is
        # destroyed, no login fails.
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        storm = 300
        settings = ["baseapp.registry_ttl_ms=350", "baseapp.heartbeat_ms=300", "cellapp.game.npc_count=2"]
        with harness.Cluster(baseapps=1, cellapps=2, extra_set=settings, timeout=60) as cluster:
            names = ["cellapp-1", "cellapp-2"]
            baseapp_id = cluster.registry_id("baseapp-1")
            # 24 s: the stalls end at about 11 s, and the logins they held
            # back (hashes wait while the loop is stopped) finish after.
            bots = harness.start_bots(cluster, storm, 24, ["--login-spread-ms", 3000, "--area", 200, "--speed", 2])
            try:
                time.sleep(1.0)
                for _ in range(10):
                    cluster.kill("baseapp-1", "STOP")
                    time.sleep(0.6)
                    cluster.kill("baseapp-1", "CONT")
                    time.sleep(0.4)
            finally:
                cluster.kill("baseapp-1", "CONT")
                report = harness.finish_bots(bots)
            text = json.dumps(report, indent=2, sort_keys=True)
            self.assertEqual(report.get("logged_in"), storm, text)
            self.assertEqual(report.get("in_world_at_end"), storm, text)
            self.assertEqual(report.get("errors"), 0, text)
            lapsed = "process %s: its registry lease lapsed" % baseapp_id
            self.assertTrue(any(lapsed in cluster.log(n) for n in names),
                            "the baseapp's lease never lapsed: the test proved nothing")
            self.assertEqual(counter(cluster, names, "deaths_declared"), 0)
            for name in names:
                self.assertNotIn("entities of dead baseapp", cluster.log(name))
                self.assertTrue(cluster.alive(name), "%s died" % name)

    def test_map_entity_comes_back_with_its_state(self):
        # tests/maps/split.json: a plate west of the line at x = 0 opens a
        # gate east of it (a map entity without a base, on the other
        # cellapp). The gate is opened, then its cellapp is killed: the
        # survivor restores it from the dead cellapp's backups in Redis,
        # still open, under its name.
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        split = os.path.join(harness.SOURCE_DIR, "tests", "maps", "split.json")
        settings = ["cellapp.game.npc_count=0", "cellapp.maps.default=" + split, "cellapp.navmesh_cell_size=1"]
        with harness.Cluster(baseapps=1, cellapps=2, grid="2x1", extra_set=settings, spawn_radius=0) as cluster:
            def doors(names=("cellapp-1", "cellapp-2")):
                return [(name, e) for name, d in cluster.dump_states(list(names)).items()
                        for e in d["entities"] if e["class"] == "Door"]
            harness.wait_for(lambda: len(doors()) == 1, 20, "the map's gate")
            holder = doors()[0][0]
            survivor = "cellapp-1" if holder == "cellapp-2" else "cellapp-2"
            sock, reply = harness.login(cluster.login, "walker", "pw")
            self.addCleanup(sock.close)
            time.sleep(1.0)
            for step in range(1, 21):  # west onto the plate
                sock.sendall(harness.frame(harness.msg_move(-float(step), 0, 0, 0, step)))
                time.sleep(0.1)
            harness.wait_for(lambda: "the door 'east_gate' opens" in cluster.log(holder), 10, "the gate to open")
            time.sleep(1.5)  # backed up since
            cluster.kill(holder, "KILL")
            found = harness.wait_for(lambda: [e for n, e in doors([survivor])], 20,
                                     "the gate restored on %s" % survivor)
            self.assertEqual(len(found), 1, found)
            self.assertEqual(found[0]["properties"]["open"], True, found)
            self.assertEqual(found[0].get("name"), "east_gate", found)
            self.assertTrue(cluster.alive(survivor))

    def test_redis_paused_kills_nobody(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=3, grid="3x1", spawn_radius=60, extra_set=SETTINGS,
                             timeout=60) as cluster:
            names = ["cellapp-1", "cellapp-2", "cellapp-3"]
            everyone = BOTS + 3 * NPCS_PER_CELLAPP
            bots = self.start(cluster, 20)
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
