#!/usr/bin/env python3
"""test_operations -- what an operator sees and does, on real processes.

One baseapp and two cellapps (balancer on), with JSON log lines, and a
few players logged in:
  - every process's admin listener answers /healthz and /readyz, and its
    /metrics passes `promtool check metrics` and carries the figures an
    operator pages on (tick histogram, load, reals per cell, clients,
    logins, Redis round trips, errors by reason);
  - bad HTTP gets a clear status (400, 404, 405, 413) and the listener
    keeps serving;
  - /api/cluster and /api/entities describe the cluster;
  - tessera-admin status, cells, entity, kick and shutdown work against it;
  - every log line is one JSON object with ts, level, role, process, msg;
  - a cellapp told to shut down over HTTP drains: not ready, its cell goes
    to the other, it exits, and no entity is lost;
  - a baseapp given SIGTERM drains: every client is told
    ERROR_SERVER_SHUTDOWN with a retry hint, and the baseapp exits."""
import json
import shutil
import socket
import subprocess
import time
import unittest
import urllib.error
import urllib.request

import harness

PLAYERS = 4
NPCS = 5
ERROR_SERVER_SHUTDOWN = 12


def fetch(port, path, method="GET"):
    """(status, body as str) from a process's admin listener."""
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def raw(port, data):
    """Sends raw bytes to the admin listener; returns the status line."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        reply = b""
        while b"\r\n" not in reply:
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
    return reply.split(b"\r\n", 1)[0].decode()


class Operations(unittest.TestCase):
    def test_operator_tools(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        settings = ["log_format=json", "cellapp.game.npc_count=%d" % NPCS, "cellapp.balance_retire_below=0"]
        with harness.Cluster(baseapps=1, cellapps=2, extra_set=settings, balance=True) as cluster:
            sockets = []
            for i in range(PLAYERS):
                sock, reply = harness.login(cluster.login, "player%d" % i, "pw")
                sockets.append((sock, reply["entity_id"]))
                self.addCleanup(sock.close)
            ports = {n: int(cluster.registry_hash(n)["admin_port"]) for n in cluster.names("baseapp") +
                     cluster.names("cellapp")}
            harness.log("admin ports %s" % ports)
            self.check_endpoints(cluster, ports)
            self.check_bad_http(ports["cellapp-1"])
            self.check_admin_cli(cluster, ports, sockets)
            self.check_json_logs(cluster)
            self.check_cellapp_drain(cluster, ports)
            self.check_baseapp_drain(cluster, ports, sockets[1:])

    def check_endpoints(self, cluster, ports):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool (Debian's prometheus package) is missing: run scripts/deps")
        harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == PLAYERS, 10, "the players in the world")
        for name, port in ports.items():
            self.assertEqual(fetch(port, "/healthz"), (200, "ok\n"), name)
            status, text = harness.wait_for(lambda: (lambda r: r if r[0] == 200 else None)(fetch(port, "/readyz")),
                                            10, "%s to be ready" % name)
            self.assertEqual(text, "ready\n")
            status, metrics = fetch(port, "/metrics")
            self.assertEqual(status, 200, name)
            check = subprocess.run([promtool, "check", "metrics"], input=metrics, text=True, capture_output=True)
            self.assertEqual(check.returncode, 0, "%s: promtool: %s%s" % (name, check.stdout, check.stderr))
            self.assertIn("tessera_redis_command_seconds_count", metrics, name)
            if name.startswith("cellapp"):
                for family in ("tessera_tick_seconds_bucket", "tessera_load ", 'tessera_reals{space="default"',
                               "tessera_offloads_out_total", "tessera_witness_bytes_total",
                               'tessera_errors_total{reason="message_failed"}', "tessera_channel_bytes_out_total"):
                    self.assertIn(family, metrics, name)
            else:
                self.assertIn("tessera_clients %d\n" % PLAYERS, metrics)
                self.assertIn("tessera_logins_total %d\n" % PLAYERS, metrics)
                self.assertIn("tessera_login_failures_total", metrics)
        status, text = fetch(ports["baseapp-1"], "/api/cluster")
        self.assertEqual(status, 200)
        document = json.loads(text)
        self.assertEqual(sorted(p["role"] for p in document["processes"]), ["baseapp", "cellapp", "cellapp"])
        self.assertIn("default", document["spaces"])
        self.assertEqual(len(document["loads"]), 2, document["loads"])
        reals = 0
        for name in cluster.names("cellapp"):
            status, text = fetch(ports[name], "/api/entities")
            self.assertEqual(status, 200)
            snapshot = json.loads(text)
            reals += sum(1 for c in snapshot["cells"] for e in c["entities"] if e[3] == 0)
        self.assertEqual(reals, PLAYERS + 2 * NPCS)
        status, page = fetch(ports["cellapp-2"], "/map")
        self.assertEqual(status, 200)
        self.assertIn("<html", page.lower())

    def check_bad_http(self, port):
        self.assertEqual(raw(port, b"BLAH\r\n\r\n"), "HTTP/1.1 400 Bad Request")
        self.assertEqual(raw(port, b"GET /healthz HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 20000 + b"\r\n\r\n"),
                         "HTTP/1.1 413 Payload Too Large")
        self.assertEqual(fetch(port, "/no-such-page")[0], 404)
        self.assertEqual(fetch(port, "/metrics", method="POST")[0], 405)
        self.assertEqual(fetch(port, "/api/entity?id=999999999")[0], 404)
        self.assertEqual(fetch(port, "/healthz"), (200, "ok\n"), "the listener stopped serving after bad input")

    def check_admin_cli(self, cluster, ports, sockets):
        status = cluster.admin("status")
        harness.log("tessera-admin status:\n" + status)
        self.assertEqual(status.count(" ok\n"), 3, status)
        cells = cluster.admin("cells")
        self.assertIn("space default", cells)
        self.assertEqual(cells.count("cell "), 2, cells)
        self.assertIn("balancer: lease held by", cells)
        entity = json.loads(cluster.admin("--json", "entity", sockets[0][1]))
        self.assertEqual(entity["base"]["account"], "player0", entity)
        self.assertEqual(entity["cell"]["kind"], "real", entity)
        self.assertTrue(entity["cell"]["has_client"], entity)
        harness.log("tessera-admin entity %d: cell on cellapp %s, base on baseapp %s"
                    % (sockets[0][1], entity["cell"]["cellapp"], entity["base"]["baseapp"]))
        self.assertIn("kicked 'player0'", cluster.admin("kick", "player0"))
        error = harness.read_until(sockets[0][0], "error", 5)
        self.assertIsNotNone(error)
        self.assertIn("kicked by an operator", error["message"])
        result = cluster.admin_result("kick", "player0")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("not logged in", result.stderr)

    def check_json_logs(self, cluster):
        for name in cluster.names("baseapp") + cluster.names("cellapp"):
            lines = [l for l in cluster.log(name).splitlines() if l.strip()]
            self.assertGreater(len(lines), 5, name)
            for line in lines:
                entry = json.loads(line)
                for field in ("ts", "level", "role", "process", "msg"):
                    self.assertIn(field, entry, "%s: %s" % (name, line))
            peers = [json.loads(l) for l in lines if '"peer"' in l]
            self.assertTrue(peers, "%s: no line names its peer" % name)

    def check_cellapp_drain(self, cluster, ports):
        victim, other = "cellapp-2", "cellapp-1"
        self.assertEqual(fetch(ports[victim], "/admin/shutdown", method="POST")[0], 202)
        status, text = fetch(ports[victim], "/readyz")
        harness.log("%s after /admin/shutdown: %d %s" % (victim, status, text.strip()))
        self.assertEqual(status, 503)
        self.assertIn("draining", text)
        harness.wait_for(lambda: not cluster.alive(victim), 40, "the drained cellapp to exit")
        self.assertIn("drained", cluster.log(victim))
        expected = (PLAYERS - 1) + 2 * NPCS
        harness.wait_for(lambda: cluster.stat(other, "reals") == expected, 15,
                         "every real on the cellapp left (%d)" % expected)

    def check_baseapp_drain(self, cluster, ports, sockets):
        cluster.kill("baseapp-1", "TERM")
        for sock, entity_id in sockets:
            error = harness.read_until(sock, "error", 10)
            self.assertIsNotNone(error, "entity %d's client got no error" % entity_id)
            self.assertEqual(error["code"], ERROR_SERVER_SHUTDOWN, error)
            self.assertEqual(error["retry_after_ms"], 1000, error)
        harness.wait_for(lambda: not cluster.alive("baseapp-1"), 15, "the drained baseapp to exit")
        self.assertIn("drained: every client was told", cluster.log("baseapp-1"))
        harness.log("baseapp drained: %d clients told ERROR_SERVER_SHUTDOWN (retry after 1000 ms)" % len(sockets))


if __name__ == "__main__":
    unittest.main(verbosity=2)
