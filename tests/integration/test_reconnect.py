#!/usr/bin/env python3
"""test_reconnect -- a connection is not an entity: a player whose client
drops keeps its entity for client_detached_grace_ms and takes it back with
its session token; a second login of the account takes the entity over and
kicks the first client.

  - within the grace period, a Reconnect with the login reply's token gets
    the same entity (reconnected set, a new token), and its view starts
    afresh: 30 bots drop at once and reconnect, and at the end every bot's
    view matches the truth (--verify-aoi);
  - a wrong token, an old token (each login or reconnect makes a new one)
    and a token after the grace period get ERROR_SESSION_EXPIRED; a fresh
    login after the grace period gets a new entity;
  - while detached, the entity stays in the world (the cell still holds it)
    and the baseapp drops the old witness's messages instead of sending
    them anywhere;
  - a second login of the account: the first client gets ERROR_REPLACED,
    the second the same entity."""
import time
import unittest

import harness
from harness import ERROR_CODES

GRACE_MS = 3000


class Reconnect(unittest.TestCase):
    def setUp(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)

    def test_sessions(self):
        settings = ["baseapp.client_detached_grace_ms=%d" % GRACE_MS]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings) as cluster:
            addr = cluster.login
            sock, first = harness.login(addr, "alice", "pw-alice")
            self.assertTrue(first["session_token"], first)
            self.assertEqual(first["detached_grace_ms"], GRACE_MS)
            self.assertFalse(first["reconnected"])
            entity = first["entity_id"]
            sock.close()

            # A wrong token is refused, and tells nothing about why.
            bad, reply = harness.reconnect(addr, "alice", "0" * len(first["session_token"]))
            self.assertEqual(reply and reply.get("code"), ERROR_CODES["SESSION_EXPIRED"], reply)
            bad.close()

            # Within the grace: the same entity, reconnected, a new token.
            sock, again = harness.reconnect(addr, "alice", first["session_token"])
            self.assertEqual(again and again["kind"], "login_reply", again)
            self.assertTrue(again["reconnected"])
            self.assertEqual(again["entity_id"], entity)
            self.assertNotEqual(again["session_token"], first["session_token"])
            # The new witness streams: a view update comes.
            self.assertIsNotNone(harness.read_until(sock, "view", timeout=5.0))
            sock.close()

            # The old token is spent.
            old, reply = harness.reconnect(addr, "alice", first["session_token"])
            self.assertEqual(reply and reply.get("code"), ERROR_CODES["SESSION_EXPIRED"], reply)
            old.close()

            # After the grace the entity is gone, and so is the session.
            time.sleep(GRACE_MS / 1000.0 + 2.0)
            late, reply = harness.reconnect(addr, "alice", again["session_token"])
            self.assertEqual(reply and reply.get("code"), ERROR_CODES["SESSION_EXPIRED"], reply)
            late.close()
            sock, fresh = harness.login(addr, "alice", "pw-alice")
            self.assertNotEqual(fresh["entity_id"], entity)
            self.assertFalse(fresh["reconnected"])

            # A second login takes the entity over; the first is kicked.
            other, second = harness.login(addr, "alice", "pw-alice")
            self.assertEqual(second["entity_id"], fresh["entity_id"])
            kicked = harness.read_until(sock, {"error"}, timeout=5.0)
            self.assertEqual(kicked and kicked.get("code"), ERROR_CODES["REPLACED"], kicked)
            self.assertTrue(harness.expect_closed(sock))
            self.assertIsNotNone(harness.read_until(other, "view", timeout=5.0))
            other.close()
            sock.close()
            self.assertGreaterEqual(cluster.stat("baseapp-1", "reconnects") or 0, 1)
            self.assertTrue(cluster.all_alive())

    def test_bots_reconnect_and_their_views_resync(self):
        bots = 30
        settings = ["baseapp.client_detached_grace_ms=20000"]
        with harness.Cluster(baseapps=1, cellapps=2, extra_set=settings) as cluster:
            report = harness.run_bots(cluster, bots, 12, ["--verify-aoi", "--reconnect-at", "4",
                                                          "--reconnect-delay-ms", "300", "--area", "60",
                                                          "--calls-per-second", "0.5"])
            harness.assert_bots_verified(self, report, bots)
            self.assertEqual(report["reconnects"], bots, report)
            self.assertEqual(report["reconnects_other_entity"], 0, report)
            self.assertEqual(report["logged_in"], bots, report)
            self.assertEqual(cluster.stat("baseapp-1", "reconnects"), bots)
            self.assertTrue(cluster.all_alive())


if __name__ == "__main__":
    unittest.main()
