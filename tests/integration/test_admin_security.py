#!/usr/bin/env python3
"""test_admin_security -- the admin listener's key, its Host and Origin
checks, and its connection budget (common/admin_http.h), through the real
admin ports of a real cluster (scripts/cluster gives it one token).

  - no token, a wrong token, a token in a POST's query: 401; the right
    token kicks a logged-in player (its client is told) and saves;
  - a foreign Origin is refused (403) and gets no Access-Control-Allow-
    Origin; a cross-site text/plain POST (what a web page can send without
    a preflight) is refused and does not save; another process's admin
    origin (the live map's case) is allowed and echoed; no answer says "*";
  - a Host that is not the listener's (DNS rebinding) is refused;
  - /healthz and /readyz answer while 140 connections from the same
    address trickle their requests a byte at a time;
  - event streams: past the cap the next gets 503; a stream is closed at
    the end of its lifetime (admin_stream_lifetime_ms, set short here);
  - a token file every user may read stops a process at start-up; a
    cluster without admin_token_file answers 403 saying so, and still
    serves the probes.
"""
import json
import os
import socket
import threading
import time
import unittest

import harness

# Short, so that a stream's end is seen within the test; long enough that
# the cap's streams all stay open while it is checked.
STREAM_LIFETIME_MS = 8000
TRICKLERS = 140
# A trickler sends one byte this often (well inside the request timeout).
TRICKLE_INTERVAL_S = 0.5
MAX_STREAMS = 32  # ADMIN_HTTP_MAX_STREAMS
FOREIGN = "http://evil.example"


def raw_request(port, head, timeout=5.0):
    """Sends head (bytes) to 127.0.0.1:port; returns (status line, the whole
    answer as bytes) once the server closes or the headers are in."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n", 1)[0].decode(), data


def open_stream(port, path):
    """Opens an event stream request; returns (socket, the response head as
    str) once the head is in."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (path, port)).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return s, data.split(b"\r\n\r\n", 1)[0].decode()


class AdminSecurity(unittest.TestCase):
    cluster = None

    @classmethod
    def setUpClass(cls):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        cls._ctx = harness.Cluster(baseapps=1, cellapps=1, extra_set=[
            "cellapp.admin_stream_lifetime_ms=%d" % STREAM_LIFETIME_MS])
        cls.cluster = cls._ctx.__enter__()
        cls.base_port = int(cls.cluster.registry_hash("baseapp-1")["admin_port"])
        cls.cell_port = int(cls.cluster.registry_hash("cellapp-1")["admin_port"])

    @classmethod
    def tearDownClass(cls):
        if cls.cluster is not None:
            cls._ctx.__exit__(None, None, None)

    def ask(self, port, path, method="GET", token=True, headers=None):
        return self.cluster.admin_http(port, path, method=method, token=token, headers=headers)

    def saves(self):
        return self.cluster.log("baseapp-1").count("admin: saving")

    # -- the key

    def test_token(self):
        for method, path in (("GET", "/api/cluster"), ("GET", "/map"), ("POST", "/admin/save"),
                             ("POST", "/admin/shutdown"), ("POST", "/admin/kick?account=x")):
            status, body, headers = self.ask(self.base_port, path, method=method, token=None)
            self.assertEqual(status, 401, "%s %s without a token: %s" % (method, path, body))
            self.assertIn("Bearer", headers.get("www-authenticate", ""))
            status, body, _ = self.ask(self.base_port, path, method=method, token="x" * 64)
            self.assertEqual(status, 401, "%s %s with a wrong token: %s" % (method, path, body))
        token = self.cluster.admin_token
        # GETs may carry it in the query (EventSource cannot set a header).
        self.assertEqual(self.ask(self.base_port, "/api/cluster?token=" + token, token=None)[0], 200)
        self.assertEqual(self.ask(self.base_port, "/api/cluster?token=" + "y" * 64, token=None)[0], 401)
        # A POST takes the header alone.
        before = self.saves()
        self.assertEqual(self.ask(self.base_port, "/admin/save?token=" + token, method="POST", token=None)[0], 401)
        self.assertEqual(self.saves(), before, "a POST with the token in its query saved")
        # The probes need none.
        for path in ("/healthz", "/metrics"):
            self.assertEqual(self.ask(self.base_port, path, token=None)[0], 200, path)

    def test_right_token_kicks_and_saves(self):
        sock, reply = harness.login(self.cluster.login, "kickme", "pw")
        self.addCleanup(sock.close)
        self.assertEqual(reply.get("kind"), "login_reply", reply)
        before = self.saves()
        status, body, _ = self.ask(self.base_port, "/admin/save", method="POST")
        self.assertEqual(status, 202, body)
        harness.wait_for(lambda: self.saves() > before, 10, "the baseapp to log the save")
        status, body, _ = self.ask(self.base_port, "/admin/kick?account=kickme", method="POST")
        self.assertEqual(status, 200, body)
        error = harness.read_until(sock, "error", 10)
        self.assertIsNotNone(error, "the kicked client was not told")
        self.assertIn("kicked by an operator", error["message"])

    # -- Origin and Host

    def test_foreign_origin_refused(self):
        for port, path in ((self.base_port, "/api/cluster"), (self.base_port, "/api/entity?id=1"),
                           (self.cell_port, "/api/entities")):
            status, body, headers = self.ask(port, path, headers={"Origin": FOREIGN})
            self.assertEqual(status, 403, "%s from %s: %s" % (path, FOREIGN, body))
            self.assertNotIn("access-control-allow-origin", headers, path)
        self.assertEqual(self.ask(self.base_port, "/api/cluster", headers={"Origin": "null"})[0], 403)

    def test_cross_site_text_plain_post_refused(self):
        """What a page elsewhere can send without a preflight: a text/plain
        POST, no Authorization (and, had it learnt the token, in the query)."""
        before = self.saves()
        body = b"x=1"
        for path in ("/admin/save", "/admin/save?token=" + self.cluster.admin_token):
            head = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nOrigin: %s\r\nContent-Type: text/plain\r\n"
                    "Content-Length: %d\r\n\r\n" % (path, self.base_port, FOREIGN, len(body))).encode()
            status, answer = raw_request(self.base_port, head + body)
            self.assertEqual(status, "HTTP/1.1 403 Forbidden", answer)
            self.assertNotIn(b"Access-Control-Allow-Origin", answer)
        # Nothing was saved: a save is logged on the loop before its answer.
        self.assertEqual(self.ask(self.base_port, "/healthz")[0], 200)
        self.assertEqual(self.saves(), before, "a cross-site POST ran /admin/save")

    def test_cluster_origin_allowed_and_echoed(self):
        """The live map's case: the page served by the cellapp reads the
        baseapp (and the other way round)."""
        for port, other in ((self.base_port, self.cell_port), (self.cell_port, self.base_port)):
            origin = "http://127.0.0.1:%d" % other
            status, body, headers = self.ask(port, "/api/cluster" if port == self.base_port else "/api/entities",
                                             headers={"Origin": origin})
            self.assertEqual(status, 200, body)
            self.assertEqual(headers.get("access-control-allow-origin"), origin)
        # No answer, of any kind, allows every origin.
        for path, token in (("/healthz", None), ("/metrics", None), ("/api/cluster", True), ("/nope", None)):
            _, _, headers = self.ask(self.base_port, path, token=token, headers={"Origin": FOREIGN})
            self.assertNotEqual(headers.get("access-control-allow-origin"), "*", path)
            self.assertNotIn("access-control-allow-origin", headers, path)

    def test_host_mismatch_refused(self):
        for host in ("evil.example:%d" % self.base_port, "evil.example", "127.0.0.1:%d" % (self.base_port + 1),
                     "localhost:%d" % self.base_port):
            status, body, _ = self.ask(self.base_port, "/api/cluster", headers={"Host": host})
            self.assertEqual(status, 403, "Host %s: %s" % (host, body))
        head = b"GET /api/cluster HTTP/1.0\r\nAuthorization: Bearer " + self.cluster.admin_token.encode() + b"\r\n\r\n"
        self.assertEqual(raw_request(self.base_port, head)[0], "HTTP/1.1 403 Forbidden", "no Host at all")
        self.assertEqual(self.ask(self.base_port, "/api/cluster")[0], 200)

    # -- the budget

    def test_probes_answer_while_connections_trickle(self):
        socks, all_socks = [], []
        stop = threading.Event()

        def trickle():
            while not stop.wait(TRICKLE_INTERVAL_S):
                for s in list(socks):
                    try:
                        s.send(b"a")
                    except OSError:
                        socks.remove(s)  # closed by the listener: it gave way

        try:
            for _ in range(TRICKLERS):
                s = socket.create_connection(("127.0.0.1", self.base_port), timeout=5)
                s.sendall(b"GET /api/cluster HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ")
                socks.append(s)
                all_socks.append(s)
            thread = threading.Thread(target=trickle, daemon=True)
            thread.start()
            for _ in range(5):
                self.assertEqual(self.ask(self.base_port, "/healthz", token=None)[:2], (200, "ok\n"))
                status, body, _ = self.ask(self.base_port, "/readyz", token=None)
                self.assertEqual(status, 200, body)
                time.sleep(TRICKLE_INTERVAL_S)
            _, metrics, _ = self.ask(self.base_port, "/metrics", token=None)
            self.assertRegex(metrics, r'admin_connections_closed_total\{reason="evicted"\} [1-9]')
        finally:
            stop.set()
            for s in all_socks:
                s.close()

    def test_event_streams_capped_and_timed_out(self):
        path = "/api/events?token=" + self.cluster.admin_token
        streams = []
        try:
            for i in range(MAX_STREAMS):
                s, head = open_stream(self.cell_port, path)
                streams.append(s)
                self.assertTrue(head.startswith("HTTP/1.1 200"), "stream %d: %s" % (i, head))
            s, head = open_stream(self.cell_port, path)
            streams.append(s)
            self.assertTrue(head.startswith("HTTP/1.1 503"), "one past the cap: %s" % head)
        finally:
            for s in streams:
                s.close()
        # A stream ends at its lifetime (the client then reconnects).
        s, head = open_stream(self.cell_port, path)
        self.addCleanup(s.close)
        self.assertTrue(head.startswith("HTTP/1.1 200"), head)
        s.settimeout(1.0)

        def ended():
            try:
                return s.recv(65536) == b""
            except socket.timeout:
                return False
            except OSError:
                return True
        harness.wait_for(ended, STREAM_LIFETIME_MS / 1000.0 + 30, "the stream to be closed at its lifetime")

    # -- configuration

    def test_world_readable_token_file_refused(self):
        path = os.path.join(self.cluster.dir, "open_token")
        with open(path, "w") as f:
            f.write("a" * 40 + "\n")
        os.chmod(path, 0o644)
        with open(self.cluster.process("cellapp-1")["config"]) as f:
            conf = json.load(f)
        conf.update({"admin_port": 0, "internal_port": 0, "admin_token_file": path,
                     "state_dump_path": os.path.join(self.cluster.dir, "refused.json")})
        conf_path = os.path.join(self.cluster.dir, "refused.json.conf")
        with open(conf_path, "w") as f:
            json.dump(conf, f)
        rc, out, err, _ = harness.run_with_timeout([harness.CELLAPP_BIN, "--config", conf_path], 30)
        self.assertNotIn(rc, (None, 0), "a cellapp started with a world-readable token file")
        self.assertIn("readable by every user", out + err)
        self.assertNotIn("a" * 40, out + err, "the token was printed")


class NoTokenConfigured(unittest.TestCase):
    def test_protected_routes_refused_probes_served(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=["admin_token_file="]) as cluster:
            port = int(cluster.registry_hash("baseapp-1")["admin_port"])
            for method, path in (("GET", "/api/cluster"), ("POST", "/admin/save")):
                status, body, _ = cluster.admin_http(port, path, method=method, token="z" * 64)
                self.assertEqual(status, 403, body)
                self.assertIn("admin_token_file is not set", body)
            self.assertEqual(cluster.admin_http(port, "/healthz", token=None)[0], 200)
            self.assertIn("admin_token_file is not set", cluster.log("baseapp-1"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
