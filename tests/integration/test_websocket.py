#!/usr/bin/env python3
"""test_websocket -- browsers' clients on the baseapp's websocket_port.

One binary WebSocket message carries one client frame body (RFC 6455 by
hand here, so what no browser would send can be sent too):

  - a WebSocket client logs in, plays beside a TCP client (each hears the
    other's join), moves, and reconnects with its session token;
  - bad handshakes get their HTTP answer (400, 405, 426) and the end of
    the connection; text frames, unmasked frames and reserved bits get a
    Close with 1003 or 1002; a message over client_max_frame_bytes gets
    FRAME_TOO_LARGE then a Close 1009; a malformed body gets the same
    error as over TCP; a ping its pong; a message in fragments is one
    frame; a handshake never finished is dropped after
    client_frame_timeout_ms -- and after all that the baseapp still serves
    a new WebSocket login;
  - with two baseapps, what a WebSocket client is told names WebSocket
    ports: the login reply's list of other baseapps, and the redirect of
    a Reconnect sent to the baseapp that does not hold the session;
  - bots over wss (the C SDK's WebSocket client, TLS 1.3 inside:
    websocket_tls) play beside bots over TCP with TLS on two baseapps and
    two cellapps, logins redirected by load, and both see exactly what they
    should (--verify-aoi); a plaintext WebSocket on that port gets nowhere.
Every process started here is stopped at the end, whatever happens."""
import shutil
import socket
import tempfile
import time
import unittest

import harness
from harness import msg_hello, msg_login, msg_move, msg_reconnect

FRAME_TIMEOUT_MS = 1500
SETTINGS = ["baseapp.websocket_port=0", "baseapp.client_frame_timeout_ms=%d" % FRAME_TIMEOUT_MS]


def websocket_address(cluster, name="baseapp-1"):
    entry = cluster.registry_hash(name)
    return (cluster.login[0], int(entry["websocket_port"]))


def ws_close_code(ws, timeout=5.0):
    """The code of the Close the server sends next (binary messages before
    it are skipped); None if the connection ends without one."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            message = ws.read_message(max(0.05, deadline - time.monotonic()))
        except harness.Closed:
            return None
        if message["kind"] == "ws_close":
            return message["code"]


def ends(ws, timeout=5.0):
    """True once the server has ended the connection (anything it sent
    before is read and dropped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            ws.read_frame(max(0.05, deadline - time.monotonic()))
        except harness.Closed:
            return True
        except (socket.timeout, TimeoutError):
            return False
    return False


class WebSocketClients(unittest.TestCase):
    cluster = None

    @classmethod
    def setUpClass(cls):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        cls._ctx = harness.Cluster(baseapps=1, cellapps=1, extra_set=SETTINGS)
        cls.cluster = cls._ctx.__enter__()
        cls.addr = websocket_address(cls.cluster)

    @classmethod
    def tearDownClass(cls):
        # Stops every process and fails on a sanitizer report in the logs.
        if cls.cluster is not None:
            cls._ctx.__exit__(None, None, None)

    def open_ws(self):
        ws = harness.WebSocket(self.addr)
        self.addCleanup(ws.close)
        ws.open()
        return ws

    def test_plays_beside_tcp_and_reconnects(self):
        ws, reply = harness.websocket_login(self.addr, "ws-player", "pw")
        self.addCleanup(ws.close)
        me = reply["entity_id"]
        self.assertTrue(reply["session_token"])
        s, tcp_reply = harness.login(self.cluster.login, "tcp-player", "pw")
        self.addCleanup(s.close)
        other = tcp_reply["entity_id"]
        # The WebSocket client hears of the TCP player (a game event it
        # sourced) and gets view updates of its own.
        heard, views = False, 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (heard and views):
            try:
                message = ws.read_message(1)
            except (socket.timeout, TimeoutError):
                continue
            self.assertNotIn(message["kind"], ("error", "ws_close"), message)
            if message["kind"] == "event" and message["event"][1] == other:
                heard = True
            views += message["kind"] == "view"
        self.assertTrue(heard, "the WebSocket client never heard of the TCP player %d" % other)
        self.assertGreater(views, 0)
        # A move within the rules is taken (no correction, no error).
        position = reply["position"]
        ws.send(msg_move(position[0] + 1.0, position[1], position[2], sequence=1))
        self.assertTrue(self.still_playing(ws, 1.0))
        # Gone, then back with the session token: the same entity.
        ws.close()
        again = harness.WebSocket(self.addr)
        self.addCleanup(again.close)
        again.open()
        again.send(msg_hello())
        self.assertEqual(again.read_until({"hello", "error"})["kind"], "hello")
        again.send(msg_reconnect("ws-player", reply["session_token"]))
        back = again.read_until({"login_reply", "error"}, timeout=10)
        self.assertEqual(back["kind"], "login_reply", back)
        self.assertTrue(back["reconnected"])
        self.assertEqual(back["entity_id"], me)

    def still_playing(self, ws, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                message = ws.read_message(max(0.05, deadline - time.monotonic()))
            except (socket.timeout, TimeoutError):
                return True
            except harness.Closed:
                return False
            if message["kind"] in ("error", "ws_close", "correction"):
                return False
        return True

    def test_bad_handshakes(self):
        cases = [
            ("not HTTP", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", "400"),
            ("plain GET", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "426"),
            ("POST", b"POST / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", "405"),
            ("version 8", b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n", "426"),
            ("no key", b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       b"Sec-WebSocket-Version: 13\r\n\r\n", "400"),
            ("a client frame instead", harness.frame(msg_hello()) + b"\r\n\r\n", "400"),
        ]
        for name, request, status in cases:
            with self.subTest(case=name):
                ws = harness.WebSocket(self.addr)
                self.addCleanup(ws.close)
                ws.sock.sendall(request)
                line, _ = ws.read_http()
                self.assertTrue(line.startswith("HTTP/1.1 " + status), line)
                self.assertTrue(ends(ws), "the connection stayed open after " + line)

    def test_bad_frames(self):
        def bad(name, wire, code):
            with self.subTest(case=name):
                ws = self.open_ws()
                ws.sock.sendall(wire)
                self.assertEqual(ws_close_code(ws), code)
                self.assertTrue(ends(ws))

        bad("text", harness.WebSocket.encode(0x1, b"hello"), 1003)
        bad("unmasked", harness.WebSocket.encode(0x2, msg_hello(), mask=False), 1002)
        bad("reserved bits", harness.WebSocket.encode(0x2, msg_hello(), rsv=4), 1002)
        bad("stray continuation", harness.WebSocket.encode(0x0, msg_hello()), 1002)
        bad("reserved opcode", harness.WebSocket.encode(0x5, b"x"), 1002)

        # Over client_max_frame_bytes (65536): FRAME_TOO_LARGE, as over TCP,
        # then the Close 1009 -- before the rest of the message is read.
        ws = self.open_ws()
        ws.sock.sendall(harness.WebSocket.encode(0x2, b"\x00" * 70000)[:5000])
        message = ws.read_message()
        self.assertEqual(message["kind"], "error", message)
        self.assertEqual(message["code"], harness.ERROR_CODES["FRAME_TOO_LARGE"])
        self.assertEqual(ws_close_code(ws), 1009)
        self.assertTrue(ends(ws))

        # A body that is no message: the same error as over TCP.
        ws = self.open_ws()
        ws.send(b"\xff\xff\xff\xff")
        message = ws.read_until({"error"})
        self.assertEqual(message["kind"], "error", message)
        self.assertEqual(message["code"], harness.ERROR_CODES["MALFORMED_FRAME"])
        self.assertTrue(ends(ws))

    def test_ping_fragments_and_trickle(self):
        ws = self.open_ws()
        ws.sock.sendall(harness.WebSocket.encode(0x9, b"are you there"))
        self.assertEqual(ws.read_frame(), (0xA, b"are you there"))
        # A hello in three fragments, a ping between them: one frame.
        hello = msg_hello()
        ws.sock.sendall(harness.WebSocket.encode(0x2, hello[:3], fin=False) +
                        harness.WebSocket.encode(0x9, b"") +
                        harness.WebSocket.encode(0x0, hello[3:6], fin=False) +
                        harness.WebSocket.encode(0x0, hello[6:]))
        self.assertEqual(ws.read_until({"hello", "error"})["kind"], "hello")
        # A Close from the client is answered with its code.
        ws.sock.sendall(harness.WebSocket.encode(0x8, b"\x03\xe8bye"))
        self.assertEqual(ws_close_code(ws), 1000)
        self.assertTrue(ends(ws))

        # A handshake begun and never finished: dropped after
        # client_frame_timeout_ms (the sweep runs once a second).
        slow = harness.WebSocket(self.addr)
        self.addCleanup(slow.close)
        slow.sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        self.assertTrue(ends(slow, FRAME_TIMEOUT_MS / 1000.0 + 10), "a half-sent handshake was kept")
        self.assertGreaterEqual(time.monotonic() - started, FRAME_TIMEOUT_MS / 1000.0 - 0.2)

        # Through all of it the baseapp kept serving.
        fresh, reply = harness.websocket_login(self.addr, "after-the-abuse", "pw")
        self.addCleanup(fresh.close)
        self.assertGreater(reply["entity_id"], 0)


class WebSocketAddresses(unittest.TestCase):
    def test_redirects_name_websocket_ports(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        # Logins stay where they land (no redirect by load): the test knows
        # which baseapp holds the session.
        settings = SETTINGS + ["baseapp.login_redirect=false"]
        with harness.Cluster(baseapps=2, cellapps=1, extra_set=settings) as cluster:
            first, second = websocket_address(cluster, "baseapp-1"), websocket_address(cluster, "baseapp-2")

            def lists_the_other():
                s, reply = harness.login(cluster.baseapps[0], "probe", "pw")
                s.close()
                return reply["baseapps"]
            tcp_list = harness.wait_for(lists_the_other, 15, "baseapp-1 to list baseapp-2 in its login replies")
            self.assertEqual(tcp_list, ["%s:%d" % cluster.baseapps[1]])
            # A WebSocket client is given the other's WebSocket address.
            ws, reply = harness.websocket_login(first, "browser", "pw")
            self.addCleanup(ws.close)
            self.assertEqual(reply["baseapps"], ["%s:%d" % second])
            # A Reconnect at the baseapp not holding the session is sent to
            # the holder's WebSocket port.
            ws.close()
            other = harness.WebSocket(second)
            self.addCleanup(other.close)
            other.open()
            other.send(msg_hello())
            self.assertEqual(other.read_until({"hello", "error"})["kind"], "hello")
            other.send(msg_reconnect("browser", reply["session_token"]))
            answer = other.read_until({"login_redirect", "login_reply", "error"}, timeout=10)
            self.assertEqual(answer["kind"], "login_redirect", answer)
            self.assertEqual((answer["host"], answer["port"]), first, answer)

    def test_bots_over_wss_beside_tls(self):
        # One cluster with TLS on both ports: bots over wss (the C SDK's
        # WebSocket client inside TLS) play beside bots over TCP with TLS on
        # two baseapps and two cellapps, logins redirected by load, and both
        # see exactly what they should.
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        if not shutil.which("openssl"):
            self.skipTest("openssl is not installed (scripts/deps installs it)")
        keys = tempfile.mkdtemp(prefix="tessera-wss-")
        self.addCleanup(shutil.rmtree, keys, True)
        certificate, key = harness.make_tls_certificate(keys, "cluster", "tessera.test")
        settings = SETTINGS + ["baseapp.websocket_tls=true", "baseapp.client_tls_certificate_file=" + certificate,
                               "baseapp.client_tls_key_file=" + key]
        tls = ["--tls-name", "tessera.test", "--tls-ca", certificate]
        with harness.Cluster(baseapps=2, cellapps=2, extra_set=settings) as cluster:
            ws = "%s:%d" % websocket_address(cluster)
            tcp = harness.start_bots(cluster, 10, 8, ["--verify-aoi", "--area", "40", "--account-prefix", "tcp"] + tls)
            web = harness.start_bots(cluster, 10, 8, ["--verify-aoi", "--area", "40", "--account-prefix", "web",
                                                      "--websocket", "--connect", ws] + tls)
            for report in (harness.finish_bots(tcp), harness.finish_bots(web)):
                harness.assert_bots_verified(self, report, 10)
            # A plaintext WebSocket on the wss port gets nowhere.
            plain = harness.WebSocket(websocket_address(cluster))
            self.addCleanup(plain.close)
            with self.assertRaises((harness.Closed, AssertionError, socket.timeout, TimeoutError)):
                plain.open()


if __name__ == "__main__":
    unittest.main(verbosity=2)
