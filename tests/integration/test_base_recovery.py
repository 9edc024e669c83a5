#!/usr/bin/env python3
"""test_base_recovery -- no player lost when a baseapp dies.

Two baseapps and two cellapps; bots log in (spread over both baseapps by
the login redirect) and walk with --verify-aoi. Every base is backed up to
the other baseapp once a second (baseapp/base_backup.h). One baseapp is
killed with SIGKILL: the balancer's lease holder declares it dead (its
connections reset), the survivor turns the backups it holds into live bases
(their cell parts, which lived on, answer to it: BaseMoved), and every
client that was on the dead baseapp reconnects to the survivor with its
session token -- from the addresses its login reply listed, or through the
login address -- without its password. Every bot is in the world at the
end, the views were right, and every entity is real exactly once.

The first test kills the baseapp that is not the bots' login address; the
second kills the login address itself, so that the clients there can only
come back through the other baseapps their login reply named. The third
stops a baseapp (SIGSTOP) past its lease, so that it is declared dead and
its bases restored on the other while its clients are still connected to
it, then lets it go on (SIGCONT): it fences itself (acts for none of its
bases, holds what its clients send), learns it was declared dead, tells
each of its clients where its session lives now (a LoginRedirect without
a token: the client reconnects there) and rejoins as a new process: no
account lives twice."""
import os
import signal
import time
import unittest

import harness

BOTS = 30
NPCS_PER_CELLAPP = 3
SETTINGS = ["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]


def census_home(cluster):
    """(the global Census's entity id, the id of the baseapp holding it), as
    the cluster's directories in Redis say."""
    cluster_name = cluster.info.get("cluster_name", "tessera")
    entity = cluster.redis.hget("tessera:%s:globals" % cluster_name, "census")
    holder = cluster.redis.hget("tessera:%s:base_directory" % cluster_name, entity) if entity else None
    return (entity, holder)


# The bots walk in a small area (so that ghosts and offloads happen) and
# check their views at the end.
BOT_ARGS = ["--verify-aoi", "--area", 60, "--speed", 3, "--calls-per-second", 0.5, "--settle-seconds", 4,
            "--login-spread-ms", 2000]


def clients(cluster, name):
    return cluster.stat(name, "clients") or 0


def players_placed(cluster, victim):
    """Waits for every bot in the world and some on `victim`, then for every
    base to be backed up at least twice; returns how many `victim` holds."""
    names = cluster.names("baseapp")
    harness.wait_for(lambda: sum(clients(cluster, n) for n in names) == BOTS, 30, "every bot in the world")
    harness.wait_for(lambda: clients(cluster, victim) >= 3, 10, "%s to hold some players" % victim)
    time.sleep(3)
    return clients(cluster, victim)


def every_real_once(dumps):
    """Whether the cellapps' dumps hold every player and NPC, each real once."""
    where = harness.reals_by_id(dumps)
    return len(where) >= BOTS + 2 * NPCS_PER_CELLAPP and all(len(v) == 1 for v in where.values())


class BaseRecovery(unittest.TestCase):
    def assert_nobody_lost(self, cluster, report, dumps, living):
        """Every bot verified and in the world, every real once, no recovery
        failed, no password typed again, the `living` processes alive and no
        cell entity destroyed for want of its base. Returns the report's
        text."""
        text = harness.assert_bots_verified(self, report, BOTS)
        where = harness.reals_by_id(dumps)
        twice = {k: v for k, v in where.items() if len(v) != 1}
        self.assertFalse(twice, "real twice: %s" % twice)
        self.assertEqual(report.get("recovery_failed"), 0, text)
        self.assertEqual(report.get("password_logins"), BOTS, text)
        for name in living:
            self.assertTrue(cluster.alive(name), "%s died" % name)
            if name.startswith("cellapp"):
                self.assertNotIn("was not restored within", cluster.log(name))
        return text

    def kill_and_come_back(self, victim, cellapp_victim=None):
        """Kills `victim` (a baseapp) with SIGKILL, and `cellapp_victim` with
        it when named: then a player whose base and cell part were both on
        the dead pair comes back from its base's backup (its properties and
        its cell backup) on the surviving baseapp and cellapp."""
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=2, cellapps=2, extra_set=SETTINGS, timeout=60) as cluster:
            survivor = "baseapp-1" if victim == "baseapp-2" else "baseapp-2"
            bots = harness.start_bots(cluster, BOTS, 18, BOT_ARGS)
            try:
                held = players_placed(cluster, victim)
                census = census_home(cluster)
                harness.log("%s holds %d of %d clients; the Census (entity %s) is on process %s; killing it"
                            % (victim, held, BOTS, census[0], census[1]))
                pair = []
                if cellapp_victim:
                    # Players with both halves on the dead pair: their cell
                    # parts come back from their bases' backups alone.
                    victim_id = cluster.registry_id(victim)

                    def on_the_pair():
                        document = cluster.dump_states([cellapp_victim])[cellapp_victim]
                        pair[:] = [e["id"] for e in document["entities"] if str(e.get("baseapp")) == str(victim_id)]
                        return pair
                    harness.wait_for(on_the_pair, 10, "a player with its base on %s and its real on %s"
                                     % (victim, cellapp_victim))
                    harness.log("%d players have both halves on %s and %s" % (len(pair), victim, cellapp_victim))
                killed_at = time.monotonic()
                cluster.kill(victim, "KILL")
                if cellapp_victim:
                    cluster.kill(cellapp_victim, "KILL")
                harness.wait_for(lambda: clients(cluster, survivor) == BOTS, 30,
                                 "every player's base on %s (restored or there already)" % survivor)
                harness.log("every player's base on %s %.1f s after the kill" % (survivor, time.monotonic() - killed_at))
                # The global Census lives on: the same entity, under the same
                # name, now (restored, if it was the victim's) on the survivor.
                survivor_id = str(cluster.registry_id(survivor))
                harness.wait_for(lambda: census_home(cluster) == (census[0], survivor_id), 10,
                                 "the Census on %s" % survivor)
                cellapps = [n for n in cluster.names("cellapp") if n != cellapp_victim]
                dumps = cluster.dump_states_settled(cellapps, every_real_once)
            finally:
                report = harness.finish_bots(bots)
            text = self.assert_nobody_lost(cluster, report, dumps, [survivor] + cellapps)
            self.assertFalse([e for e in pair if e not in harness.reals_by_id(dumps)], "lost with the dead pair")
            # Every client of the dead baseapp lost its connection and came
            # back by a reconnect; nobody typed a password again.
            self.assertEqual(report.get("server_losses"), held, text)
            self.assertEqual(report.get("recoveries"), held, text)
            self.assertIn("restored in", cluster.log(survivor))
            self.assertGreaterEqual(cluster.stat(survivor, "bases_restored") or 0, held)

    # Under the sanitizers the kill of the login baseapp covers the restore
    # paths, and the suite's time is kept in bounds.
    @unittest.skipIf(harness.SANITIZED, "the kill of the login baseapp covers the restores under the sanitizers")
    def test_stopped_baseapp_fences_and_its_clients_follow(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        victim, survivor = "baseapp-2", "baseapp-1"
        with harness.Cluster(baseapps=2, cellapps=2, extra_set=SETTINGS, timeout=60) as cluster:
            bots = harness.start_bots(cluster, BOTS, 25, BOT_ARGS)
            try:
                held = players_placed(cluster, victim)
                old_id = cluster.registry_id(victim)
                harness.log("%s (id %s) holds %d of %d clients; stopping it" % (victim, old_id, held, BOTS))
                cluster.kill(victim, "STOP")
                harness.wait_for(lambda: (cluster.stat(survivor, "bases_restored") or 0) >= held, 20,
                                 "%s to restore the stopped baseapp's players" % survivor)
                cluster.kill(victim, "CONT")
                cluster.wait_rejoined(victim, old_id)
                harness.wait_for(lambda: clients(cluster, survivor) == BOTS, 30,
                                 "every player on %s, which restored the stopped one's" % survivor)
                cellapps = cluster.names("cellapp")
                dumps = cluster.dump_states_settled(cellapps, every_real_once)
                # No account lives twice: the rejoined baseapp holds none.
                self.assertEqual(clients(cluster, victim), 0)
                self.assertEqual(cluster.stat(victim, "bases") or 0, 0)
            finally:
                report = harness.finish_bots(bots)
            text = self.assert_nobody_lost(cluster, report, dumps, [survivor, victim] + cellapps)
            # Told where their sessions live now (a LoginRedirect without a
            # token), its clients reconnected there: none had to find its
            # way back on its own.
            self.assertEqual(report.get("handed_off"), held, text)
            self.assertGreaterEqual(report.get("reconnects"), held, text)
            self.assertEqual(report.get("server_losses"), 0, text)
            victim_log = cluster.log(victim)
            self.assertIn("fenced: this baseapp's lease lapsed", victim_log)
            self.assertIn("declared dead by the cluster: %d clients are sent" % held, victim_log)
            self.assertIn("rejoining the cluster as a new process", victim_log)

    # Under the sanitizers the login baseapp's case alone: it covers the
    # other's paths (a reconnect redirected or deferred, a restore, a
    # BaseMoved) and more, and the suite's time is kept in bounds.
    @unittest.skipIf(harness.SANITIZED, "the login baseapp's case covers it under the sanitizers")
    def test_kill_the_other_baseapp(self):
        self.kill_and_come_back("baseapp-2")

    def test_kill_the_login_baseapp(self):
        self.kill_and_come_back("baseapp-1")

    # A drain cut short: baseapp-2 is told to stop (SIGTERM: it destroys
    # each player's cell part, writes its entity, and then sends its client
    # to baseapp-1 with a one-time token) and killed before the writes are
    # done (Redis is held still meanwhile, so that the kill lands there every
    # time). Its bases are restored on baseapp-1 from their backups; no cell
    # part answers their adoption (the drain destroyed them), so each is made
    # again from the cell backup its base backup carried. The clients lost
    # their connection and reconnect with their session tokens: nobody types
    # a password again and no account lives twice.
    @unittest.skipIf(harness.SANITIZED, "the login baseapp's case covers the restore paths under the sanitizers")
    def test_kill_during_a_drain(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        victim, survivor = "baseapp-2", "baseapp-1"
        with harness.Cluster(baseapps=2, cellapps=2, extra_set=SETTINGS, timeout=60) as cluster:
            bots = harness.start_bots(cluster, BOTS, 18, BOT_ARGS)
            try:
                held = players_placed(cluster, victim)
                harness.log("%s holds %d of %d clients; draining it, then killing it" % (victim, held, BOTS))
                with open(os.path.join(cluster.dir, "pids", "redis.pid")) as f:
                    redis_pid = int(f.read())
                os.kill(redis_pid, signal.SIGSTOP)
                try:
                    cluster.kill(victim, "TERM")
                    harness.wait_for(lambda: "draining:" in cluster.log(victim), 5, "the drain to begin")
                    time.sleep(0.3)  # its cell parts destroyed; its writes wait for Redis
                    cluster.kill(victim, "KILL")
                finally:
                    os.kill(redis_pid, signal.SIGCONT)
                harness.wait_for(lambda: clients(cluster, survivor) == BOTS, 30, "every player on %s" % survivor)
                cellapps = cluster.names("cellapp")
                dumps = cluster.dump_states_settled(cellapps, every_real_once)
            finally:
                report = harness.finish_bots(bots)
            self.assert_nobody_lost(cluster, report, dumps, [survivor] + cellapps)
            harness.log("of %d players: %d sent on by the drain, %d recovered after the kill"
                        % (held, report.get("handed_off", 0), report.get("recoveries", 0)))
            remade = sum(cluster.log(n).count("made again for its restored base") for n in cellapps)
            self.assertGreater(remade, 0, "no cell part was made again")

    # Redis killed (SIGKILL) and started again on its data (append-only,
    # fsync always: what it acknowledged is on disk) while the bots play:
    # the processes reconnect, renew their leases and go on; nobody is
    # declared dead, nothing is restored, no player is dropped, and what was
    # written before is still there.
    def test_redis_restarted_costs_nothing(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=2, cellapps=2, extra_set=SETTINGS, timeout=60) as cluster:
            bots = harness.start_bots(cluster, BOTS, 18, BOT_ARGS)
            names = cluster.names("baseapp") + cluster.names("cellapp")
            try:
                players_placed(cluster, "baseapp-2")
                census = census_home(cluster)
                harness.log("restarting Redis under %d players" % BOTS)
                cluster.restart_redis(pause_s=3.0, hard=True)
                time.sleep(4)  # leases renewed; a death watch that would act has acted
                self.assertEqual(census_home(cluster), census)
                harness.wait_for(lambda: sum(clients(cluster, n) for n in cluster.names("baseapp")) == BOTS, 10,
                                 "every player still in the world")
                cellapps = cluster.names("cellapp")
                dumps = cluster.dump_states_settled(cellapps, every_real_once)
            finally:
                report = harness.finish_bots(bots)
            text = self.assert_nobody_lost(cluster, report, dumps, names)
            self.assertEqual(report.get("server_losses"), 0, text)
            for name in names:
                for field in ("deaths_declared", "restores_from_ghost", "restores_from_backup", "bases_restored"):
                    self.assertFalse(cluster.stat(name, field), "%s: %s" % (name, field))

    # Both at once: a baseapp and a cellapp killed together. The players
    # whose base and cell part were both on the dead pair are restored from
    # the base backup alone.
    @unittest.skipIf(harness.SANITIZED, "the login baseapp's case covers the restore paths under the sanitizers")
    def test_kill_a_baseapp_and_a_cellapp_together(self):
        self.kill_and_come_back("baseapp-2", "cellapp-2")


if __name__ == "__main__":
    unittest.main(verbosity=2)
