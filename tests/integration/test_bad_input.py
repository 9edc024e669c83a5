#!/usr/bin/env python3
"""test_bad_input -- hostile client input gets a clear Error and that one
connection is closed; everyone else plays on.

While 50 bots play, raw sockets send: garbage, an oversized length prefix,
an envelope with no known body, a move before login, a wrong protocol
version, a wrong password; and a logged-in client teleports, which is
refused with a Correction but not disconnected. Afterwards every bot is still
fine and every process still runs."""
import json
import random
import re
import struct
import unittest

import harness
from harness import frame, msg_hello, msg_login, msg_move

BOTS = 50
BOTS_SECONDS = 12
# How long the server may take to answer and to close a bad connection.
ANSWER_S = 5

E = harness.ERROR_CODES


class BadInput(unittest.TestCase):
    cluster = None

    @classmethod
    def setUpClass(cls):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        cls._ctx = harness.Cluster(baseapps=1, cellapps=2)
        cls.cluster = cls._ctx.__enter__()

    @classmethod
    def tearDownClass(cls):
        if cls.cluster is not None:
            cls._ctx.__exit__(None, None, None)

    # -- helpers

    def connect(self):
        sock = harness.connect(self.cluster.login)
        self.addCleanup(sock.close)
        return sock

    def hello(self, sock):
        sock.sendall(frame(msg_hello()))
        msg = harness.read_until(sock, {"hello", "error"}, ANSWER_S)
        self.assertIsNotNone(msg, "connection closed after hello")
        self.assertEqual(msg["kind"], "hello", "hello refused: %r" % (msg,))

    def expect_error(self, sock, code, what):
        """The next non-view message is Error(code); then the server closes."""
        msg = harness.read_until(sock, {"error", "hello", "login_reply", "correction"}, ANSWER_S)
        self.assertIsNotNone(msg, "%s: closed without an Error frame" % what)
        self.assertEqual(msg["kind"], "error", "%s: expected Error %d, got %r" % (what, code, msg))
        self.assertEqual(msg["code"], code, "%s: wrong error code: %r" % (what, msg))
        self.assertTrue(harness.expect_closed(sock, ANSWER_S), "%s: connection left open after the error" % what)
        return msg

    # -- the cases, all while the bots play

    def test_bad_input_while_bots_play(self):
        bots = harness.start_bots(self.cluster, BOTS, BOTS_SECONDS)
        try:
            self.run_cases()
        finally:
            report = harness.finish_bots(bots)
        text = json.dumps(report, indent=2, sort_keys=True)
        self.assertEqual(report.get("logged_in"), BOTS, text)
        self.assertEqual(report.get("errors"), 0, text)
        status = self.cluster.status()
        dead = [p["name"] for p in status["processes"] if not p["alive"]]
        self.assertEqual(dead, [], "processes died:\n" + json.dumps(status, indent=2))

    def run_cases(self):
        for name in ("garbage", "too_large", "unknown_message", "move_before_login",
                     "protocol_mismatch", "bad_credentials", "teleport", "move_flood"):
            with self.subTest(case=name):
                getattr(self, "case_" + name)()

    def case_garbage(self):
        # 0x07 = field 0, wire type 7: invalid either way, so the 63 random
        # bytes after it cannot happen to decode.
        body = bytes([0x07]) + random.Random(1234).randbytes(63)
        sock = self.connect()
        sock.sendall(frame(body))
        self.expect_error(sock, E["MALFORMED_FRAME"], "64 random bytes")

    def case_too_large(self):
        sock = self.connect()
        sock.sendall(struct.pack(">I", 100 * 1024 * 1024))
        self.expect_error(sock, E["FRAME_TOO_LARGE"], "100 MB length prefix")

    def case_unknown_message(self):
        sock = self.connect()
        self.hello(sock)
        sock.sendall(frame(harness.field_varint(15, 1)))
        self.expect_error(sock, E["UNKNOWN_MESSAGE"], "envelope with only field 15")

    def case_move_before_login(self):
        sock = self.connect()
        self.hello(sock)
        sock.sendall(frame(msg_move(1.0, 0.0, 1.0, 0.0, 1)))
        self.expect_error(sock, E["NOT_LOGGED_IN"], "move before login")

    def case_protocol_mismatch(self):
        sock = self.connect()
        sock.sendall(frame(msg_hello(protocol_version=999)))
        msg = self.expect_error(sock, E["PROTOCOL_VERSION_MISMATCH"], "hello with version 999")
        self.assertIn("999", msg["message"], msg)
        self.assertRegex(msg["message"].replace("999", ""), re.compile(r"(?<!\d)1(?!\d)"),
                         "the error does not name the server's version 1: %r" % msg["message"])

    def case_bad_credentials(self):
        sock, _reply = harness.login(self.cluster.login, "victim", "right")
        sock.close()
        sock = self.connect()
        self.hello(sock)
        sock.sendall(frame(msg_login("victim", "wrong")))
        self.expect_error(sock, E["BAD_CREDENTIALS"], "wrong password for an existing account")

    def case_teleport(self):
        sock, reply = harness.login(self.cluster.login, "mover", "pw")
        self.addCleanup(sock.close)
        x, y, z = reply["position"]
        sock.sendall(frame(msg_move(x + 1000.0, y, z, 0.0, 1)))
        msg = harness.read_until(sock, {"correction", "error"}, ANSWER_S)
        self.assertIsNotNone(msg, "closed instead of correcting a teleport")
        self.assertEqual(msg["kind"], "correction", "teleport: expected a Correction, got %r" % (msg,))
        self.assertEqual(msg["field"], 4)
        self.assertTrue(harness.still_open(sock, 1.0), "the connection was dropped after the correction")

    def case_move_flood(self):
        # 400 legal moves in one burst, far above the 30/s a client may send:
        # the excess is dropped (counted in the registry), the client is not
        # dropped, and nothing else notices.
        sock, reply = harness.login(self.cluster.login, "flooder", "pw")
        self.addCleanup(sock.close)
        x, y, z = reply["position"]
        burst = b"".join(frame(msg_move(x + 0.001 * (i % 2), y, z, 0.0, i + 1)) for i in range(400))
        sock.sendall(burst)
        harness.wait_for(lambda: (self.cluster.stat("baseapp-1", "moves_dropped") or 0) > 0, ANSWER_S,
                         "the baseapp never reported dropping flooded moves")
        self.assertTrue(harness.still_open(sock, 1.0), "a client was dropped for sending too many moves")


if __name__ == "__main__":
    unittest.main(verbosity=2)
