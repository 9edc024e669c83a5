#!/usr/bin/env python3
"""test_operations -- what an operator sees and does, on real processes.

One baseapp and two cellapps (balancer on), with JSON log lines, and a
few players logged in:
  - every process's admin listener answers /healthz and /readyz, and its
    /metrics is well-formed exposition text (every line parsed, by
    python3-prometheus-client's parser and by the format's grammar, and
    linted as `promtool check metrics` lints: see exposition_problems) and
    carries the figures an operator pages on (tick histogram, load, reals
    per cell, clients, logins, Redis round trips, errors by reason);
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
import math
import re
import socket
import unittest
import urllib.error
import urllib.request

import harness

# Debian's python3-prometheus-client (scripts/deps --test).
prometheus_parser = harness.tessera_cluster.import_debian_module("prometheus_client.parser",
                                                                 "python3-prometheus-client")

PLAYERS = 4
NPCS = 5
ERROR_SERVER_SHUTDOWN = 12


def fetch(port, path, method="GET", cluster=None):
    """(status, body as str) from a process's admin listener; with the
    cluster's admin token when `cluster` is given (every route but the
    probes wants it)."""
    request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method)
    if cluster is not None:
        request.add_header("Authorization", "Bearer " + cluster.admin_token)
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


# ---- /metrics: the exposition format ------------------------------------------------
#
# What `promtool check metrics` refused (Prometheus's own parser, then its
# linter, promlint), checked here without the Prometheus server package:
# the text is parsed whole by python3-prometheus-client's parser, and line
# by line by the format's grammar (the library's parser is lax: it reads
# 'a{b=c,d="e"} 1', 'a{b="\\x"} 1' and "a 1 2 3" without complaint), the
# two readings of every sample must agree, and then each family is linted.

METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL_NAME = r"[a-zA-Z_][a-zA-Z0-9_]*"
LABEL_VALUE = r'"(?:[^"\\\n]|\\[\\"n])*"'
# Go's ParseFloat as the format uses it: decimal, exponent, +Inf, -Inf, NaN.
VALUE = r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?Inf|NaN"
SAMPLE_RE = re.compile(r"^(?P<name>%s)(?:\{(?P<labels>(?:%s=%s(?:,%s=%s)*,?)?)\})?[ \t]+(?P<value>%s)"
                       r"(?:[ \t]+(?P<timestamp>-?[0-9]+))?$"
                       % (METRIC_NAME, LABEL_NAME, LABEL_VALUE, LABEL_NAME, LABEL_VALUE, VALUE))
LABEL_RE = re.compile(r"(%s)=(%s),?" % (LABEL_NAME, LABEL_VALUE))
# Help text escapes only a backslash and a line feed.
HELP_RE = re.compile(r"^# HELP (?P<name>%s)(?: (?P<help>(?:[^\\]|\\[\\n])*))?$" % METRIC_NAME)
TYPE_RE = re.compile(r"^# TYPE (?P<name>%s) (?P<type>counter|gauge|histogram|summary|untyped)$" % METRIC_NAME)
# promlint's lists: base units with a scale prefix, and abbreviated units.
UNIT_PREFIXES = ("pico", "nano", "micro", "milli", "centi", "deci", "deca", "hecto", "kilo", "kibi", "mega",
                 "mibi", "giga", "gibi", "tera", "tebi", "peta", "pebi")
BASE_UNITS = ("amperes", "bytes", "candela", "grams", "kelvin", "kelvins", "meters", "metres", "moles", "seconds",
              "volts")
UNIT_ABBREVIATIONS = ("s", "ms", "us", "ns", "sec", "b", "kb", "mb", "gb", "tb", "pb", "m", "h", "d")


def _unescape(quoted):
    return re.sub(r'\\([\\"n])', lambda m: "\n" if m.group(1) == "n" else m.group(1), quoted[1:-1])


def _family_of(sample_name, families):
    """The declared family a sample belongs to: its own name, or for a
    histogram's _bucket/_sum/_count and a summary's _sum/_count, its base."""
    if sample_name in families:
        return sample_name
    for suffix, types in (("_bucket", ("histogram",)), ("_sum", ("histogram", "summary")),
                          ("_count", ("histogram", "summary"))):
        base = sample_name[:-len(suffix)]
        if sample_name.endswith(suffix) and families.get(base, {}).get("type") in types:
            return base
    return None


def exposition_problems(text):
    """Everything wrong with `text` as Prometheus exposition text (format
    0.0.4), one message each; an empty list when it is fine."""
    problems = []
    try:
        library = [(s.name, tuple(sorted(s.labels.items())), s.value)
                   for family in prometheus_parser.text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, IndexError, KeyError) as e:
        return ["prometheus_client cannot parse it: %s: %s" % (e.__class__.__name__, e)]
    if text and not text.endswith("\n"):
        problems.append("the last line does not end with a line feed")

    families = {}  # name -> {"help", "type", "samples": [(name, labels dict, value)]}
    ours = []
    seen = set()
    current = None  # the family of the latest HELP or TYPE line
    for number, line in enumerate(text.splitlines(), 1):
        where = "line %d %r" % (number, line[:80])
        if not line.strip():
            continue
        if line.startswith("#"):
            if line.startswith("# HELP") or line.startswith("# TYPE"):
                m = HELP_RE.match(line) or TYPE_RE.match(line)
                if m is None:
                    problems.append("%s: a malformed HELP or TYPE line" % where)
                    continue
                kind = "help" if line.startswith("# HELP") else "type"
                current = m.group("name")
                family = families.setdefault(m.group("name"), {"help": None, "type": None, "samples": []})
                if family[kind] is not None:
                    problems.append("%s: a second %s line for %s" % (where, kind.upper(), m.group("name")))
                elif kind == "type" and family["samples"]:
                    problems.append("%s: the TYPE line of %s comes after its first sample" % (where, m.group("name")))
                family[kind] = m.group(kind) or ""
            continue  # any other comment is free text
        m = SAMPLE_RE.match(line)
        if m is None:
            problems.append("%s: not a sample (name, {labels}, value, timestamp)" % where)
            continue
        name = m.group("name")
        labels = {}
        for label, quoted in LABEL_RE.findall(m.group("labels") or ""):
            if label in labels:
                problems.append("%s: label %s twice" % (where, label))
            if label.startswith("__"):
                problems.append("%s: label %s is reserved (a leading __)" % (where, label))
            labels[label] = _unescape(quoted)
        value = float(m.group("value").replace("Inf", "inf"))
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            problems.append("%s: the same name and labels as an earlier sample" % where)
        seen.add(key)
        ours.append((name, key[1], value))
        owner = _family_of(name, families)
        if owner is None:
            problems.append("%s: %s has no HELP and TYPE before it" % (where, name))
            continue
        # A family's samples follow its own HELP and TYPE lines, together
        # (the format says so; prometheus_client splits a family whose
        # samples are not).
        if owner != current:
            problems.append("%s: a sample of %s among the samples of %s" % (where, owner, current))
        families[owner]["samples"].append((name, labels, value))

    def same(a, b):
        return a[:2] == b[:2] and (a[2] == b[2] or (math.isnan(a[2]) and math.isnan(b[2])))

    if len(library) != len(ours) or not all(same(a, b) for a, b in zip(library, ours)):
        problems.append("prometheus_client reads other samples than the grammar does: %s"
                        % [(a, b) for a, b in zip(library, ours) if not same(a, b)][:3])

    for name, family in sorted(families.items()):
        kind, lower = family["type"], name.lower()
        if family["type"] is None:
            problems.append("%s: no TYPE line" % name)
        if not family["help"]:
            problems.append("%s: no help text" % name)
        if kind == "counter" and not name.endswith("_total"):
            problems.append('%s: a counter whose name does not end in "_total"' % name)
        if kind != "counter" and name.endswith("_total"):
            problems.append('%s: not a counter, yet its name ends in "_total"' % name)
        if kind != "histogram" and name.endswith("_bucket"):
            problems.append('%s: not a histogram, yet its name ends in "_bucket"' % name)
        if kind not in ("histogram", "summary") and name.endswith(("_count", "_sum")):
            problems.append('%s: neither a histogram nor a summary, yet its name ends in "_count" or "_sum"' % name)
        if ":" in name:
            problems.append("%s: a ':' in the name (reserved for recording rules)" % name)
        if re.search(r"[a-z][A-Z]", name):
            problems.append("%s: camelCase, not snake_case" % name)
        for t in ("counter", "gauge", "histogram", "summary"):
            if kind not in (None, "untyped") and ("_%s_" % t in lower or lower.endswith("_" + t)):
                problems.append("%s: the name includes the type %s" % (name, t))
        for part in lower.split("_"):
            if part in UNIT_ABBREVIATIONS:
                problems.append("%s: an abbreviated unit (%s)" % (name, part))
            for base in BASE_UNITS:
                if part != base and part.endswith(base) and part[:-len(base)] in UNIT_PREFIXES:
                    problems.append('%s: use the base unit "%s", not "%s"' % (name, base, part))
        series = {}
        for sample_name, labels, value in family["samples"]:
            for label in labels:
                if re.search(r"[a-z][A-Z]", label):
                    problems.append("%s: label %s is camelCase, not snake_case" % (name, label))
            if "le" in labels and not (kind == "histogram" and sample_name == name + "_bucket"):
                problems.append('%s: an "le" label outside a histogram\'s buckets' % sample_name)
            if "quantile" in labels and not (kind == "summary" and sample_name == name):
                problems.append('%s: a "quantile" label outside a summary\'s quantiles' % sample_name)
            if kind == "summary" and sample_name == name and "quantile" not in labels:
                problems.append('%s: a summary sample with no "quantile" label' % sample_name)
            if kind != "histogram":
                continue
            rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
            one = series.setdefault(rest, {"buckets": [], "count": None})
            if sample_name == name + "_bucket":
                try:
                    one["buckets"].append((float(labels["le"].replace("Inf", "inf")), value))
                except (KeyError, ValueError):
                    problems.append('%s%s: a bucket whose "le" is not a number' % (sample_name, dict(labels)))
            elif sample_name == name + "_count":
                one["count"] = value
        for rest, one in sorted(series.items()):
            what = "%s%s" % (name, dict(rest) if rest else "")
            bounds = [b for b, _ in one["buckets"]]
            counts = [c for _, c in one["buckets"]]
            if not bounds or bounds[-1] != math.inf:
                problems.append('%s: no le="+Inf" bucket last' % what)
            if bounds != sorted(set(bounds)):
                problems.append("%s: bucket bounds not increasing: %s" % (what, bounds))
            if counts != sorted(counts):
                problems.append("%s: bucket counts not cumulative: %s" % (what, counts))
            if one["count"] is None:
                problems.append("%s: no _count" % what)
            elif counts and counts[-1] != one["count"]:
                problems.append("%s: _count %g is not the +Inf bucket's %g" % (what, one["count"], counts[-1]))
    return problems


GOOD_EXPOSITION = """# HELP demo_requests_total requests served
# TYPE demo_requests_total counter
demo_requests_total{code="200",path="/a \\"b\\""} 3
demo_requests_total{code="500",path="/"} 0
# HELP demo_load busy share of a core
# TYPE demo_load gauge
demo_load 0.25
# HELP demo_seconds how long a request took
# TYPE demo_seconds histogram
demo_seconds_bucket{le="0.1"} 1
demo_seconds_bucket{le="1"} 3
demo_seconds_bucket{le="+Inf"} 3
demo_seconds_sum 1.5
demo_seconds_count 3
"""


class ExpositionCheck(unittest.TestCase):
    """exposition_problems passes well-formed text and refuses what
    promtool refused (no cluster needed)."""

    def test_good_text_passes(self):
        self.assertEqual(exposition_problems(GOOD_EXPOSITION), [])
        self.assertEqual(exposition_problems(""), [])

    def test_malformed_text_is_refused(self):
        good = GOOD_EXPOSITION
        bad = {
            "no HELP": good.replace("# HELP demo_load busy share of a core\n", ""),
            "empty HELP": good.replace("# HELP demo_load busy share of a core", "# HELP demo_load"),
            "a bad escape in HELP": good.replace("busy share of a core", "busy share\\t of a core"),
            "no TYPE": good.replace("# TYPE demo_load gauge\n", ""),
            "unknown TYPE": good.replace("# TYPE demo_load gauge", "# TYPE demo_load meter"),
            "TYPE without a type": good.replace("# TYPE demo_load gauge", "# TYPE demo_load"),
            "a second TYPE": good.replace("demo_load 0.25\n", "demo_load 0.25\n# TYPE demo_load gauge\n"),
            "a second family of one name": good + "# HELP demo_load again\n# TYPE demo_load gauge\ndemo_load 1\n",
            "TYPE after a sample": good.replace("# TYPE demo_load gauge\ndemo_load 0.25\n",
                                                "demo_load 0.25\n# TYPE demo_load gauge\n"),
            "a sample of no family": good + "stray_metric 1\n",
            "a counter without _total": good.replace("demo_requests_total", "demo_requests"),
            "a gauge with _total": good.replace("demo_load", "demo_load_total"),
            "a gauge named _count": good.replace("demo_load", "demo_load_count"),
            "an invalid name": good.replace("demo_load 0.25", "demo-load 0.25"),
            "a name with a colon": good.replace("demo_load", "demo:load"),
            "camelCase": good.replace("demo_load", "demo_busyShare"),
            "non-base units": good.replace("demo_seconds", "demo_milliseconds"),
            "abbreviated units": good.replace("demo_seconds", "demo_ms"),
            "the type in the name": good.replace("demo_load", "demo_load_gauge"),
            "a value that is no number": good.replace("demo_load 0.25", "demo_load 0.2.5"),
            "no value": good.replace("demo_load 0.25", "demo_load"),
            "trailing garbage": good.replace("demo_load 0.25", "demo_load 0.25 12 13"),
            "an unquoted label value": good.replace('code="500"', "code=500"),
            "a bad escape": good.replace('\\"b\\"', '\\x'),
            "junk in the braces": good.replace('path="/"}', 'path="/" junk}'),
            "a label twice": good.replace('code="500",path="/"', 'code="500",code="501"'),
            "a reserved label": good.replace('code="500"', '__code="500"'),
            "a duplicate sample": good.replace("demo_load 0.25\n", "demo_load 0.25\ndemo_load 0.5\n"),
            "le outside a histogram": good.replace("demo_load 0.25", 'demo_load{le="1"} 0.25'),
            "a bucket without le": good.replace('demo_seconds_bucket{le="1"} 3', "demo_seconds_bucket 3"),
            "buckets not cumulative": good.replace('demo_seconds_bucket{le="1"} 3', 'demo_seconds_bucket{le="1"} 0'),
            "no +Inf bucket": good.replace('demo_seconds_bucket{le="+Inf"} 3\n', ""),
            "_count off the +Inf bucket": good.replace("demo_seconds_count 3", "demo_seconds_count 4"),
            "no last line feed": good.rstrip("\n"),
            "a family split in two": good.replace("demo_load 0.25\n",
                                                  'demo_load 0.25\ndemo_requests_total{code="404",path="/"} 1\n'),
        }
        for what, text in bad.items():
            self.assertNotEqual(text, good, "the %r case changes nothing" % what)
            self.assertTrue(exposition_problems(text), "%s: not refused:\n%s" % (what, text))


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
            self.check_bad_http(cluster, ports["cellapp-1"])
            self.check_admin_cli(cluster, ports, sockets)
            self.check_json_logs(cluster)
            self.check_cellapp_drain(cluster, ports)
            self.check_baseapp_drain(cluster, ports, sockets[1:])

    def check_endpoints(self, cluster, ports):
        harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == PLAYERS, 10, "the players in the world")
        for name, port in ports.items():
            self.assertEqual(fetch(port, "/healthz"), (200, "ok\n"), name)
            status, text = harness.wait_for(lambda: (lambda r: r if r[0] == 200 else None)(fetch(port, "/readyz")),
                                            10, "%s to be ready" % name)
            self.assertEqual(text, "ready\n")
            status, metrics = fetch(port, "/metrics")
            self.assertEqual(status, 200, name)
            self.assertEqual(exposition_problems(metrics), [], "%s: /metrics is not well-formed" % name)
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
        status, text = fetch(ports["baseapp-1"], "/api/cluster", cluster=cluster)
        self.assertEqual(status, 200)
        document = json.loads(text)
        self.assertEqual(sorted(p["role"] for p in document["processes"]), ["baseapp", "cellapp", "cellapp"])
        self.assertIn("default", document["spaces"])
        self.assertEqual(len(document["loads"]), 2, document["loads"])
        reals = 0
        for name in cluster.names("cellapp"):
            status, text = fetch(ports[name], "/api/entities", cluster=cluster)
            self.assertEqual(status, 200)
            snapshot = json.loads(text)
            reals += sum(1 for c in snapshot["cells"] for e in c["entities"] if e[3] == 0)
        self.assertEqual(reals, PLAYERS + 2 * NPCS)
        status, page = fetch(ports["cellapp-2"], "/map", cluster=cluster)
        self.assertEqual(status, 200)
        self.assertIn("<html", page.lower())

    def check_bad_http(self, cluster, port):
        self.assertEqual(raw(port, b"BLAH\r\n\r\n"), "HTTP/1.1 400 Bad Request")
        self.assertEqual(raw(port, b"GET /healthz HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 20000 + b"\r\n\r\n"),
                         "HTTP/1.1 413 Payload Too Large")
        self.assertEqual(fetch(port, "/no-such-page")[0], 404)
        self.assertEqual(fetch(port, "/metrics", method="POST")[0], 405)
        self.assertEqual(fetch(port, "/api/entity?id=999999999", cluster=cluster)[0], 404)
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
        self.assertEqual(fetch(ports[victim], "/admin/shutdown", method="POST", cluster=cluster)[0], 202)
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
