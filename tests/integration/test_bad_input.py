#!/usr/bin/env python3
"""test_bad_input -- hostile client input gets a clear Error and that one
connection is closed; everyone else plays on.

While 50 bots play, raw sockets send: garbage, an oversized length prefix,
an envelope with no known body, a move before login, a wrong protocol
version, a wrong password; logged-in clients call methods they may not
(not exposed, unknown, on an entity they do not see, with arguments of the
wrong types or trailing bytes, a client method), each dropped with its own
error; a legal call is answered and keeps its client; and a logged-in client
teleports, which is refused with a Correction but not disconnected.
Afterwards every bot is still fine and every process still runs."""
import json
import random
import re
import struct
import unittest

import harness
from harness import PART_BASE, PART_CELL, PART_CLIENT, frame, msg_call, msg_hello, msg_login, msg_move

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
                     "protocol_mismatch", "bad_credentials", "teleport", "move_flood",
                     "call_not_exposed", "call_unknown_method", "call_unknown_entity",
                     "call_wrong_argument_types", "call_trailing_bytes", "call_client_method",
                     "call_base_of_other_entity", "call_legal"):
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
        self.assertRegex(msg["message"].replace("999", ""), re.compile(r"(?<!\d)%d(?!\d)" % harness.PROTOCOL_VERSION),
                         "the error does not name the server's version: %r" % msg["message"])

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


    # -- method calls. The demo's Avatar (demo/entities/Avatar.json): base
    # method 0 chat(string text, max 200); cell method 0 castSpell(uint16
    # spell_id, entity target), exposed; cell method 1 takeDamage(int16
    # amount, entity attacker), not exposed. Arguments are property_codec
    # bits: uint16 in 16 bits, int16 as v + 32768 in 16 bits, an entity in
    # 64, a string as an 8-bit length (max 200) then its bytes.

    def logged_in(self, account):
        sock, reply = harness.login(self.cluster.login, account, "pw")
        self.addCleanup(sock.close)
        return sock, reply["entity_id"]

    def case_call_not_exposed(self):
        sock, me = self.logged_in("caller1")
        sock.sendall(frame(msg_call(me, PART_CELL, 1, struct.pack("<HQ", 32768 - 500, me))))
        msg = self.expect_error(sock, E["NOT_EXPOSED"], "takeDamage called by a client")
        self.assertIn("takeDamage", msg["message"])

    def case_call_unknown_method(self):
        sock, me = self.logged_in("caller2")
        sock.sendall(frame(msg_call(me, PART_CELL, 99, b"")))
        self.expect_error(sock, E["INVALID_ARGUMENT"], "cell method 99")

    def case_call_unknown_entity(self):
        sock, _me = self.logged_in("caller3")
        sock.sendall(frame(msg_call(987654321987, PART_CELL, 0, struct.pack("<HQ", 1, 0))))
        self.expect_error(sock, E["UNKNOWN_ENTITY"], "castSpell on an entity nobody sees")

    def case_call_wrong_argument_types(self):
        sock, me = self.logged_in("caller4")
        # castSpell wants 80 bits; 3 bytes is a uint16 and half an entity.
        sock.sendall(frame(msg_call(me, PART_CELL, 0, b"\x01\x00\x07")))
        self.expect_error(sock, E["BAD_ARGUMENTS"], "castSpell with 3 bytes")
        sock, me = self.logged_in("caller5")
        # chat's string declares 250 bytes, above its max_length of 200.
        sock.sendall(frame(msg_call(me, PART_BASE, 0, b"\xfa" + b"x" * 250)))
        self.expect_error(sock, E["BAD_ARGUMENTS"], "chat with a 250-byte string")

    def case_call_trailing_bytes(self):
        sock, me = self.logged_in("caller6")
        sock.sendall(frame(msg_call(me, PART_CELL, 0, struct.pack("<HQ", 1, 0) + b"\xff")))
        self.expect_error(sock, E["BAD_ARGUMENTS"], "castSpell with a byte after its arguments")

    def case_call_client_method(self):
        sock, me = self.logged_in("caller7")
        sock.sendall(frame(msg_call(me, PART_CLIENT, 0, struct.pack("<H", 32768 + 5))))
        self.expect_error(sock, E["NOT_EXPOSED"], "a client method called by a client")

    def case_call_base_of_other_entity(self):
        sock, me = self.logged_in("caller8")
        sock.sendall(frame(msg_call(me + 1000000, PART_BASE, 0, b"\x02hi")))
        self.expect_error(sock, E["UNKNOWN_ENTITY"], "chat on another entity")

    def case_call_legal(self):
        sock, me = self.logged_in("caller9")
        # The first BaseProperties (gold 0) comes with the login; each chat
        # earns a coin and another BaseProperties.
        first = harness.read_until(sock, {"base_properties", "error"}, ANSWER_S)
        self.assertEqual(first["kind"], "base_properties", first)
        sock.sendall(frame(msg_call(me, PART_BASE, 0, b"\x02hi")))
        sock.sendall(frame(msg_call(me, PART_CELL, 0, struct.pack("<HQ", 3, 0))))
        msg = harness.read_until(sock, {"base_properties", "error"}, ANSWER_S)
        self.assertEqual(msg["kind"], "base_properties", msg)
        self.assertEqual(msg["entity_id"], me)
        self.assertNotEqual(msg["changes"], first["changes"], "gold did not change")
        self.assertTrue(harness.still_open(sock, 1.0), "a legal call dropped its client")


if __name__ == "__main__":
    unittest.main(verbosity=2)
