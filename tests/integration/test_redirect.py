#!/usr/bin/env python3
"""test_redirect -- many baseapps: a client may log in at any of them.

  - a login at a busier baseapp is redirected, with a one-time token, to
    the least-loaded one, where a TokenLogin gets the player in without the
    password; the token is good once;
  - a second login of an account whose entity lives on another baseapp is
    sent there, and the first client is kicked with ERROR_REPLACED;
  - 40 bots that all log in at baseapp-1 end up spread over both, and see
    each other across them;
  - a draining baseapp hands its clients to the other once their entities
    are written: the bots stay in the world (each rejoins through the
    other baseapp, its position kept), with no error;
  - a baseapp's public address (client_public_host, client_public_port):
    baseapp-2 listens on its client port but is reached on another port,
    through a TCP relay in this test (as a node's host port reaches a pod).
    Every redirect from baseapp-1 names the public address, a TokenLogin
    through it gets the player in on baseapp-2, and baseapp-1's login
    reply lists baseapp-2 there; a giveClientTo from baseapp-1 to an
    entity on baseapp-2 sends the client there too (the handover's
    answer); baseapp-1, without one, is named by the port it listens
    on."""
import json
import socket
import threading
import time
import unittest

import harness
from harness import ERROR_CODES, field_message, field_string, frame


def msg_token_login(account, token):
    return field_message(6, field_string(1, account) + field_string(2, token))


def decode_redirect(sock, timeout=10.0):
    """Reads until a login_redirect, a login_reply or an error; returns
    (kind, fields) with the redirect's host, port and token."""
    deadline = time.monotonic() + timeout
    while True:
        body = harness.read_frame(sock, max(0.1, deadline - time.monotonic()))
        if body is None:
            return "closed", {}
        fields = harness.parse_fields(body)
        number, _wt, inner = fields[0]
        if number == 11:
            f = harness.parse_fields(inner)
            return "login_redirect", {
                "host": (harness._first(f, 1, b"") or b"").decode(),
                "port": harness._first(f, 2, 0),
                "token": (harness._first(f, 3, b"") or b"").decode(),
                "reason": (harness._first(f, 4, b"") or b"").decode(),
            }
        msg = harness.decode_server(body)
        if msg["kind"] in ("login_reply", "error"):
            return msg["kind"], msg


def login_anywhere(addr, account, password, intruder=None):
    """Logs in at `addr`, following one redirect; returns (socket, reply,
    redirect fields or None). With `intruder`, a TokenLogin of that account
    with the redirect's token comes first, and one of `account` at `addr`
    (which issued it): both must be refused, without spending the token."""
    s = harness.connect(addr)
    s.sendall(frame(harness.msg_hello()))
    harness.read_until(s, "hello")
    s.sendall(frame(harness.msg_login(account, password)))
    kind, got = decode_redirect(s)
    if kind == "login_reply":
        return s, got, None
    if kind != "login_redirect":
        raise AssertionError("login %r: %s %r" % (account, kind, got))
    s.close()
    if intruder:
        # Another account's TokenLogin there, and the account's own at the
        # baseapp that issued the token (it is good only where it sends).
        for who, where in ((intruder, (got["host"], got["port"])), (account, addr)):
            t = harness.connect(where)
            t.sendall(frame(harness.msg_hello()))
            harness.read_until(t, "hello")
            t.sendall(frame(msg_token_login(who, got["token"])))
            refused = harness.read_until(t, {"login_reply", "error"}, timeout=10.0)
            t.close()
            if not refused or refused.get("code") != ERROR_CODES["SESSION_EXPIRED"]:
                raise AssertionError("%r's token taken by %r at %r: %r" % (account, who, where, refused))
    t = harness.connect((got["host"], got["port"]))
    t.sendall(frame(harness.msg_hello()))
    harness.read_until(t, "hello")
    t.sendall(frame(msg_token_login(account, got["token"])))
    reply = harness.read_until(t, {"login_reply", "error"}, timeout=10.0)
    if not reply or reply["kind"] != "login_reply":
        raise AssertionError("token login %r refused: %r" % (account, reply))
    return t, reply, got


class Relay:
    """A TCP relay on 127.0.0.1:`port` to `target` (set once it is known):
    each connection is copied both ways until either side closes."""

    def __init__(self, port):
        self.target = None
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", port))
        self.sockets = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=5.0)
            except (OSError, TypeError):
                client.close()
                continue
            server.settimeout(None)
            self.connections += 1
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._copy, args=(a, b), daemon=True).start()

    @staticmethod
    def _copy(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        for s in self.sockets:
            s.close()


def login_here(addr, account, password):
    """Logs in at `addr`, following no redirect: ("login_redirect", its
    fields, None) or ("login_reply", {"entity_id", "others": the reply's
    other baseapps ["host:port"]}, the socket)."""
    s = harness.connect(addr)
    s.sendall(frame(harness.msg_hello()))
    harness.read_until(s, "hello")
    s.sendall(frame(harness.msg_login(account, password)))
    deadline = time.monotonic() + 10.0
    while True:
        body = harness.read_frame(s, max(0.1, deadline - time.monotonic()))
        if body is None:
            raise AssertionError("login %r at %r: the connection closed" % (account, addr))
        number, _wt, inner = harness.parse_fields(body)[0]
        if number == 11:
            s.close()
            f = harness.parse_fields(inner)
            return "login_redirect", {"host": (harness._first(f, 1, b"") or b"").decode(),
                                      "port": harness._first(f, 2, 0),
                                      "token": (harness._first(f, 3, b"") or b"").decode()}, None
        if number == 2:  # LoginReply: 1 its entity id; 29 lists the other baseapps
            f = harness.parse_fields(inner)
            return "login_reply", {"entity_id": harness._first(f, 1, 0),
                                   "others": [v.decode() for n, _w, v in f if n == 29]}, s
        msg = harness.decode_server(body)
        if msg["kind"] == "error":
            raise AssertionError("login %r at %r: %r" % (account, addr, msg))


class Redirect(unittest.TestCase):
    def setUp(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)

    def test_logins_go_where_they_should(self):
        with harness.Cluster(baseapps=2, cellapps=1) as cluster:
            # One player somewhere makes that baseapp the busier one; a
            # login there goes to the other.
            busy, _, went = login_anywhere(cluster.baseapps[0], "busy", "pw")
            first = (went["host"], went["port"]) if went else cluster.baseapps[0]
            second = [a for a in cluster.baseapps if a != first][0]
            busier = "baseapp-%d" % (cluster.baseapps.index(first) + 1)
            harness.wait_for(lambda: (cluster.stat(busier, "load") or 0) >= 1, 5.0, "the busier baseapp's load")
            sock, reply, redirect = login_anywhere(first, "alice", "pw-alice")
            self.assertIsNotNone(redirect, "a login at the busier baseapp was not redirected")
            self.assertEqual((redirect["host"], redirect["port"]), second)
            self.assertIn("least-loaded", redirect["reason"])
            alice = reply["entity_id"]

            # The token is spent.
            t = harness.connect(second)
            t.sendall(frame(harness.msg_hello()))
            harness.read_until(t, "hello")
            t.sendall(frame(msg_token_login("alice", redirect["token"])))
            spent = harness.read_until(t, {"login_reply", "error"})
            self.assertEqual(spent and spent.get("code"), ERROR_CODES["SESSION_EXPIRED"], spent)
            t.close()

            # A second login of alice at baseapp-1 goes where her entity is,
            # and the first client is kicked.
            other, again, redirect = login_anywhere(first, "alice", "pw-alice", intruder="mallory")
            self.assertIsNotNone(redirect)
            self.assertEqual((redirect["host"], redirect["port"]), second)
            self.assertIn("entity lives", redirect["reason"])
            self.assertEqual(again["entity_id"], alice)
            kicked = harness.read_until(sock, {"error"}, timeout=5.0)
            self.assertEqual(kicked and kicked.get("code"), ERROR_CODES["REPLACED"], kicked)

            # Her connection drops; her Reconnect at the other baseapp is sent,
            # without a token, to the one that holds her session, where the
            # same Reconnect takes her entity back.
            other.close()
            r = harness.connect(first)
            r.sendall(frame(harness.msg_hello()))
            harness.read_until(r, "hello")
            r.sendall(frame(harness.msg_reconnect("alice", again["session_token"])))
            kind, sent = decode_redirect(r)
            r.close()
            self.assertEqual(kind, "login_redirect", sent)
            self.assertEqual(((sent["host"], sent["port"]), sent["token"]), (second, ""))
            back, reply = harness.reconnect(second, "alice", again["session_token"])
            self.assertEqual((reply["kind"], reply["entity_id"]), ("login_reply", alice), reply)
            for s in (sock, back, busy):
                s.close()

            report = harness.run_bots(cluster, 40, 10, ["--verify-aoi", "--area", "50"])
            harness.assert_bots_verified(self, report, 40)
            self.assertGreater(report["redirects"], 0, report)
            self.assertGreater((cluster.stat("baseapp-1", "token_logins") or 0) +
                               (cluster.stat("baseapp-2", "token_logins") or 0), 10)
            self.assertTrue(cluster.all_alive())

    def test_redirects_name_the_public_address(self):
        relay_port = harness.free_ports(1)[0]
        relay = Relay(relay_port)
        self.addCleanup(relay.close)
        public = ("127.0.0.1", relay_port)
        settings = ["baseapp-2.client_public_host=127.0.0.1", "baseapp-2.client_public_port=%d" % relay_port]
        with harness.Cluster(baseapps=2, cellapps=1, extra_set=settings) as cluster:
            first, second = cluster.baseapps
            self.assertNotEqual(second, public)
            relay.target = second
            # Logins at baseapp-1 until one is redirected (the least-loaded
            # baseapp, or where the account lives, can only be baseapp-2)
            # and one is kept (baseapp-1 no busier than baseapp-2).
            redirected = kept = None
            kept_sock = redirected_entity = None
            sockets = []
            for n in range(12):
                kind, got, sock = login_here(first, "public-%d" % n, "pw")
                if kind == "login_redirect":
                    self.assertEqual((got["host"], got["port"]), public, got)
                    redirected = redirected or got
                    t = harness.connect(public)
                    self.addCleanup(t.close)
                    t.sendall(frame(harness.msg_hello()))
                    harness.read_until(t, "hello")
                    t.sendall(frame(msg_token_login("public-%d" % n, got["token"])))
                    reply = harness.read_until(t, {"login_reply", "error"}, timeout=10.0)
                    self.assertEqual(reply and reply["kind"], "login_reply", reply)
                    if redirected_entity is None:
                        redirected_entity = reply["entity_id"]
                        t.close()  # its entity stays, detached, for the handover below
                else:
                    self.addCleanup(sock.close)
                    if kept is None:
                        kept, kept_sock = got, sock
                sockets.append(kind)
                if redirected and kept:
                    break
                harness.wait_for(lambda: (cluster.stat("baseapp-2", "clients") or 0) +
                                 (cluster.stat("baseapp-1", "clients") or 0) >= len(sockets), 5.0,
                                 "the baseapps' client counts")
            self.assertIsNotNone(redirected, sockets)
            self.assertIsNotNone(kept, sockets)
            self.assertGreaterEqual(relay.connections, 1)
            self.assertGreaterEqual(cluster.stat("baseapp-2", "clients") or 0, 1)
            # baseapp-1's login reply names baseapp-2 where clients reach it.
            self.assertEqual(kept["others"], ["%s:%d" % public], kept)
            # giveClientTo across baseapps: the client is sent to baseapp-2's
            # public address with the handover's token, and gets in there.
            connections = relay.connections
            port1 = int(cluster.registry_hash("baseapp-1")["admin_port"])
            status = cluster.admin_http(port1, "/admin/give-client?from=%d&to=%d" % (
                kept["entity_id"], redirected_entity), method="POST")[0]
            self.assertEqual(status, 202)
            kind, sent = decode_redirect(kept_sock)
            self.assertEqual(kind, "login_redirect", sent)
            self.assertEqual((sent["host"], sent["port"]), public, sent)
            h = harness.connect(public)
            self.addCleanup(h.close)
            h.sendall(frame(harness.msg_hello()))
            harness.read_until(h, "hello")
            # The token is the handed client's: its own account's.
            h.sendall(frame(msg_token_login("public-%d" % sockets.index("login_reply"), sent["token"])))
            reply = harness.read_until(h, {"login_reply", "error"}, timeout=10.0)
            self.assertEqual((reply and reply["kind"], reply and reply["entity_id"]),
                             ("login_reply", redirected_entity), reply)
            self.assertEqual(relay.connections, connections + 1)
            # baseapp-1 has no public address: it is named by its own port.
            kind, got, sock = login_here(second, "public-direct", "pw")
            if kind == "login_redirect":
                self.assertEqual((got["host"], got["port"]), first, got)
            else:
                self.addCleanup(sock.close)
                self.assertEqual(got["others"], ["%s:%d" % first], got)
            self.assertTrue(cluster.all_alive())

    def test_a_draining_baseapp_hands_its_clients_over(self):
        bots = 30
        settings = ["baseapp.client_detached_grace_ms=20000"]
        with harness.Cluster(baseapps=2, cellapps=1, extra_set=settings) as cluster:
            proc = harness.start_bots(cluster, bots, 16, ["--verify-aoi", "--area", "50"])
            harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) +
                             (cluster.stat("baseapp-2", "clients") or 0) >= bots, 20.0, "every bot in the world")
            on_second = cluster.stat("baseapp-2", "clients") or 0
            self.assertGreater(on_second, 0, "no bot plays on baseapp-2")
            time.sleep(2.0)
            cluster.kill("baseapp-2", "TERM")
            harness.wait_for(lambda: not cluster.alive("baseapp-2"), 20.0, "baseapp-2 to drain and stop")
            log = cluster.log("baseapp-2")
            self.assertIn("every entity written", log)
            report = harness.finish_bots(proc)
            harness.assert_bots_verified(self, report, bots)
            self.assertEqual(report["handed_off"], on_second, report)
            self.assertEqual(report["rejoined"], on_second, report)
            self.assertEqual(cluster.stat("baseapp-1", "clients"), bots)


if __name__ == "__main__":
    unittest.main()
