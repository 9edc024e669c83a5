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
come back through the other baseapps their login reply named."""
import time
import unittest

import harness

BOTS = 30
NPCS_PER_CELLAPP = 3
SETTINGS = ["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]


class BaseRecovery(unittest.TestCase):
    def kill_and_come_back(self, victim):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=2, cellapps=2, extra_set=SETTINGS, timeout=60) as cluster:
            survivor = "baseapp-1" if victim == "baseapp-2" else "baseapp-2"
            bots = harness.start_bots(cluster, BOTS, 18,
                                      ["--verify-aoi", "--area", 60, "--speed", 3, "--calls-per-second", 0.5,
                                       "--settle-seconds", 4, "--login-spread-ms", 2000])

            def clients():
                return sum(cluster.stat(n, "clients") or 0 for n in ("baseapp-1", "baseapp-2"))
            try:
                harness.wait_for(lambda: clients() == BOTS, 30, "every bot in the world")
                harness.wait_for(lambda: (cluster.stat(victim, "clients") or 0) >= 3, 10,
                                 "%s to hold some players" % victim)
                time.sleep(3)  # every base backed up at least twice
                held = cluster.stat(victim, "clients")
                harness.log("%s holds %d of %d clients; killing it" % (victim, held, BOTS))
                killed_at = time.monotonic()
                cluster.kill(victim, "KILL")
                harness.wait_for(lambda: (cluster.stat(survivor, "clients") or 0) == BOTS, 30,
                                 "every player's base on %s (restored or there already)" % survivor)
                harness.log("every player's base on %s %.1f s after the kill" % (survivor, time.monotonic() - killed_at))
                everyone = BOTS + 2 * NPCS_PER_CELLAPP
                cellapps = cluster.names("cellapp")

                def settled(dumps):
                    where = harness.reals_by_id(dumps)
                    return len(where) >= everyone and all(len(v) == 1 for v in where.values())
                dumps = cluster.dump_states_settled(cellapps, settled)
            finally:
                report = harness.finish_bots(bots)
            text = harness.assert_bots_verified(self, report, BOTS)
            where = harness.reals_by_id(dumps)
            twice = {k: v for k, v in where.items() if len(v) != 1}
            self.assertFalse(twice, "real twice: %s" % twice)
            # Every client of the dead baseapp lost its connection and came
            # back by a reconnect; nobody typed a password again.
            self.assertEqual(report.get("server_losses"), held, text)
            self.assertEqual(report.get("recoveries"), held, text)
            self.assertEqual(report.get("recovery_failed"), 0, text)
            self.assertEqual(report.get("password_logins"), BOTS, text)
            survivor_log = cluster.log(survivor)
            self.assertIn("restored in", survivor_log)
            self.assertGreaterEqual(cluster.stat(survivor, "bases_restored") or 0, held)
            for name in [survivor] + cellapps:
                self.assertTrue(cluster.alive(name), "%s died" % name)
            # No cell entity was destroyed for want of its base.
            for name in cellapps:
                self.assertNotIn("was not restored within", cluster.log(name))

    # Under the sanitizers the login baseapp's case alone: it covers the
    # other's paths (a reconnect redirected or deferred, a restore, a
    # BaseMoved) and more, and the suite's time is kept in bounds.
    @unittest.skipIf(harness.SANITIZED, "the login baseapp's case covers it under the sanitizers")
    def test_kill_the_other_baseapp(self):
        self.kill_and_come_back("baseapp-2")

    def test_kill_the_login_baseapp(self):
        self.kill_and_come_back("baseapp-1")


if __name__ == "__main__":
    unittest.main(verbosity=2)
