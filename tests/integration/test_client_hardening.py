#!/usr/bin/env python3
"""test_client_hardening -- the limits an outside client meets, each on a
real baseapp, and the other players never notice.

  - an unknown account and a wrong password get the same error, code and
    text (the log tells them apart), and take about as long: the unknown
    one is hashed like a real one;
  - a client_name over its documented 64 bytes is refused by name, and
    one with a newline or a terminal escape is logged escaped, on one line;
  - a frame begun and never finished is dropped after
    client_frame_timeout_ms, in the world as well as before login;
  - method calls far above client_calls_per_second are dropped and
    counted, and a client that keeps it up is disconnected with
    ERROR_RATE_LIMITED, while one within the rate keeps going;
  - forged Reconnects and TokenLogins in an account's name are refused
    and counted against their address, never locking the owner out;
  - failed logins are throttled per account: past
    login_failures_per_account a minute, even the right password is
    refused at once with ERROR_RATE_LIMITED and when to retry, while other
    accounts from the same address log in;
  - the login reply names the player's class and the limits a client must
    keep to."""
import ctypes
import ctypes.util
import struct
import time
import unittest

import harness
from harness import PART_CELL, frame, msg_call, msg_hello, msg_login

ERROR_MALFORMED_FRAME = 1
ERROR_BAD_CREDENTIALS = 6
ERROR_INVALID_ARGUMENT = 9
ERROR_RATE_LIMITED = 16
ERROR_SESSION_EXPIRED = 17
PING = 2            # Avatar's cell method ping(uint32 n): the third cell method
CALLS_PER_SECOND = 10
FRAME_TIMEOUT_MS = 1500
FAILURES_PER_ACCOUNT = 3


def argon2id(password):
    """An argon2id string as the baseapp stores it (libsodium, cheapest limits)."""
    sodium = ctypes.CDLL(ctypes.util.find_library("sodium") or "libsodium.so.23")
    if sodium.sodium_init() < 0:
        raise RuntimeError("libsodium did not initialise")
    out = ctypes.create_string_buffer(128)  # crypto_pwhash_STRBYTES
    rc = sodium.crypto_pwhash_str(out, password, ctypes.c_ulonglong(len(password)), ctypes.c_ulonglong(1),
                                  ctypes.c_size_t(8192 * 1024))
    if rc != 0:
        raise RuntimeError("crypto_pwhash_str failed")
    return out.value


class ClientHardening(unittest.TestCase):
    def test_limits(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        settings = ["baseapp.client_calls_per_second=%d" % CALLS_PER_SECOND,
                    "baseapp.login_failures_per_account=%d" % FAILURES_PER_ACCOUNT,
                    "baseapp.client_frame_timeout_ms=%d" % FRAME_TIMEOUT_MS]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings, auto_create_accounts=False) as cluster:
            self.cluster = cluster
            for name in ("alice", "bob", "carol", "dave", "erin", "frank"):
                cluster.redis.hset("tessera:tessera:account:%s" % name, "password_hash", argon2id(b"pw"))
            self.check_credentials()
            self.check_login_throttle()
            self.check_forged_tokens_lock_nobody_out()
            self.check_client_name()
            witness, witness_reply = harness.login(cluster.login, "erin", "pw")
            self.addCleanup(witness.close)
            self.check_login_reply(witness_reply)
            self.check_trickled_frame_before_login()
            self.check_trickled_frame_in_world()
            self.check_call_flood()
            # The bystander was never disturbed.
            self.assertTrue(harness.still_open(witness, 1.0), "a bystander was dropped")
            self.assertTrue(cluster.alive("baseapp-1"))

    def refused(self, account, password):
        sock = harness.connect(self.cluster.login)
        self.addCleanup(sock.close)
        sock.sendall(frame(msg_hello()))
        self.assertEqual(harness.read_until(sock, {"hello", "error"}, 5)["kind"], "hello")
        started = time.monotonic()
        sock.sendall(frame(msg_login(account, password)))
        error = harness.read_until(sock, {"login_reply", "error"}, 10)
        return error, time.monotonic() - started

    def check_credentials(self):
        wrong, wrong_s = self.refused("alice", "not-the-password")
        unknown, unknown_s = self.refused("nobody-at-all", "pw")
        harness.log("wrong password: %r in %.1f ms; unknown account: %r in %.1f ms"
                    % (wrong["message"], wrong_s * 1000, unknown["message"], unknown_s * 1000))
        self.assertEqual(wrong["kind"], "error")
        self.assertEqual((wrong["code"], wrong["message"]), (ERROR_BAD_CREDENTIALS, "unknown account or wrong password"))
        self.assertEqual((unknown["code"], unknown["message"]), (wrong["code"], wrong["message"]))
        log = self.cluster.log("baseapp-1")
        self.assertIn("wrong password for account 'alice'", log)
        self.assertIn("unknown account 'nobody-at-all'", log)

    def check_login_throttle(self):
        for _ in range(FAILURES_PER_ACCOUNT):
            error, _ = self.refused("frank", "guess")
            self.assertEqual(error["code"], ERROR_BAD_CREDENTIALS, error)
        error, took = self.refused("frank", "pw")
        harness.log("after %d failures, the right password: %r in %.1f ms"
                    % (FAILURES_PER_ACCOUNT, error["message"], took * 1000))
        self.assertEqual(error["kind"], "error", error)
        self.assertEqual(error["code"], ERROR_RATE_LIMITED, error)
        self.assertIn("try again in", error["message"])
        sock, _ = harness.login(self.cluster.login, "alice", "pw")
        sock.close()

    def check_forged_tokens_lock_nobody_out(self):
        """Reconnects and TokenLogins with made-up tokens in dave's name are
        refused, and are counted against the address that sent them, not
        against dave: his right password still gets him in."""
        for n in range(FAILURES_PER_ACCOUNT + 2):
            sock, reply = harness.reconnect(self.cluster.login, "dave", "forged-session-%d" % n)
            sock.close()
            self.assertEqual((reply["kind"], reply["code"]), ("error", ERROR_SESSION_EXPIRED), reply)
            sock = harness.connect(self.cluster.login)
            sock.sendall(frame(msg_hello()))
            harness.read_until(sock, "hello")
            sock.sendall(frame(harness.field_message(6, harness.field_string(1, "dave") +
                                                     harness.field_string(2, "forged-token-%d" % n))))
            reply = harness.read_until(sock, {"login_reply", "error"}, 10)
            sock.close()
            self.assertEqual((reply["kind"], reply["code"]), ("error", ERROR_SESSION_EXPIRED), reply)
        sock, reply = harness.login(self.cluster.login, "dave", "pw")
        sock.close()
        self.assertEqual(reply["kind"], "login_reply")

    def check_client_name(self):
        sock = harness.connect(self.cluster.login)
        self.addCleanup(sock.close)
        sock.sendall(frame(msg_hello(client_name="x" * 65)))
        error = harness.read_until(sock, {"hello", "error"}, 5)
        self.assertEqual(error["kind"], "error", error)
        self.assertEqual(error["code"], ERROR_INVALID_ARGUMENT)
        self.assertIn("client_name is 65 bytes; at most 64", error["message"])
        sock = harness.connect(self.cluster.login)
        self.addCleanup(sock.close)
        sock.sendall(frame(msg_hello(client_name="y" * 64)))
        self.assertEqual(harness.read_until(sock, {"hello", "error"}, 5)["kind"], "hello")
        self.assertIn("says it is '%s'" % ("y" * 64), self.cluster.log("baseapp-1"))
        # A name that tries to write a line of its own into the log (a
        # newline, a forged ERROR line, a terminal escape) is logged on its
        # own line, its control characters escaped.
        forged = "2026-01-01T00:00:00.000Z baseapp[9] ERROR forged"
        sock = harness.connect(self.cluster.login)
        self.addCleanup(sock.close)
        sock.sendall(frame(msg_hello(client_name="z\n" + forged[:40] + "\x1b[2J")))
        self.assertEqual(harness.read_until(sock, {"hello", "error"}, 5)["kind"], "hello")
        log = self.cluster.log("baseapp-1")
        self.assertIn("says it is 'z\\n%s\\x1b[2J'" % forged[:40], log)
        self.assertFalse([line for line in log.splitlines() if line.startswith(forged[:24])], "a forged log line")
        self.assertNotIn("\x1b", log)

    def check_login_reply(self, reply):
        harness.log("login reply: class %s, max frame %d B, %g calls/s, login timeout %d ms, alias cooldown %d ms"
                    % (reply["entity_type"], reply["max_frame_bytes"], reply["calls_per_second"],
                       reply["login_timeout_ms"], reply["alias_cooldown_ms"]))
        self.assertEqual(reply["entity_type"], "Avatar")
        self.assertGreater(reply["max_frame_bytes"], 0)
        self.assertAlmostEqual(reply["calls_per_second"], CALLS_PER_SECOND)
        self.assertGreater(reply["login_timeout_ms"], 0)
        self.assertEqual(reply["alias_cooldown_ms"], 1000)

    def expect_dropped(self, sock, code, within):
        error = harness.read_until(sock, "error", within)
        self.assertIsNotNone(error, "no error before the connection closed")
        self.assertEqual(error["code"], code, error)
        return error

    def check_trickled_frame_before_login(self):
        sock = harness.connect(self.cluster.login)
        self.addCleanup(sock.close)
        sock.sendall(struct.pack(">I", 100) + b"\x0a")  # 5 of 104 bytes
        started = time.monotonic()
        error = self.expect_dropped(sock, ERROR_MALFORMED_FRAME, FRAME_TIMEOUT_MS / 1000.0 + 5)
        harness.log("a trickled frame before login dropped after %.1f s: %s" % (time.monotonic() - started,
                                                                               error["message"]))
        self.assertIn("still incomplete", error["message"])

    def check_trickled_frame_in_world(self):
        sock, _ = harness.login(self.cluster.login, "bob", "pw")
        self.addCleanup(sock.close)
        sock.sendall(struct.pack(">I", 64) + b"\x22\x05")
        started = time.monotonic()
        error = self.expect_dropped(sock, ERROR_MALFORMED_FRAME, FRAME_TIMEOUT_MS / 1000.0 + 5)
        harness.log("a trickled frame in the world dropped after %.1f s" % (time.monotonic() - started))
        self.assertIn("still incomplete", error["message"])

    def check_call_flood(self):
        # Within the rate: half of it for three seconds, nothing dropped.
        calm, calm_reply = harness.login(self.cluster.login, "carol", "pw")
        self.addCleanup(calm.close)
        dropped_before = self.cluster.stat("baseapp-1", "calls_dropped") or 0
        for n in range(int(CALLS_PER_SECOND * 1.5)):
            calm.sendall(frame(msg_call(calm_reply["entity_id"], PART_CELL, PING, b"\x00")))
            time.sleep(2.0 / CALLS_PER_SECOND)
        self.assertTrue(harness.still_open(calm, 0.5), "a client within the rate was dropped")
        harness.wait_for(lambda: self.cluster.stat("baseapp-1", "calls_dropped") is not None, 5, "stats")
        self.assertEqual(self.cluster.stat("baseapp-1", "calls_dropped") or 0, dropped_before)
        # Far above it: dropped, then the client goes.
        flood, flood_reply = harness.login(self.cluster.login, "dave", "pw")
        self.addCleanup(flood.close)
        call = frame(msg_call(flood_reply["entity_id"], PART_CELL, PING, b"\x00"))
        sent = 0
        error = None
        deadline = time.monotonic() + 10
        try:
            while time.monotonic() < deadline and sent < 5000:
                flood.sendall(call * 50)
                sent += 50
        except (BrokenPipeError, ConnectionResetError):
            pass
        error = self.expect_dropped(flood, ERROR_RATE_LIMITED, 5)
        harness.log("a flood of %d calls: %s" % (sent, error["message"]))
        harness.wait_for(lambda: (self.cluster.stat("baseapp-1", "calls_dropped") or 0) > dropped_before, 5,
                         "the dropped calls to be counted")


if __name__ == "__main__":
    unittest.main(verbosity=2)
