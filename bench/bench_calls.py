#!/usr/bin/env python3
"""bench_calls -- entity calls, giveClientTo and redirected logins on real
processes, each against a baseline in the same run.

1. Entity-call round trips. A cluster of 2 baseapps and 1 cellapp; alice
   and carol on baseapp-1, bob on baseapp-2 (each logged in where it is
   sent: login_redirect off). alice's client calls echoTo(target, n): her
   base calls target.echo(n, alice), whose base calls alice.echoed(n),
   which tells alice's client onEcho(n). With carol as the target the two
   calls stay within baseapp-1; with bob they cross to baseapp-2 and back.
   One call at a time for the latency (p50/p99 of --calls round trips),
   then --window calls in flight for the rate. Baseline: the same round
   trip within one process; the ratio is between / within. The client's
   own hops (to its base and back) are in both.

2. giveClientTo latency. bob's client is handed between two Avatars on
   the same baseapp (POST /admin/give-client), and between baseapps: from
   the request until the client hears its new space (EnteredSpace), or,
   across baseapps, until its TokenLogin there is answered (the login
   reply). Baseline: a fresh login of the same client (connect, hello,
   login, until the login reply).

3. Logins through the redirect. --bots bots (tessera-bots) all log in at
   baseapp-1 of a 2-baseapp cluster: with login_redirect, half of them are
   sent on to baseapp-2 with a one-time token; without, all stay. Logins
   a second (the bots' logins over the time until the last is in the
   world) and their ratio.

    bench/bench_calls.py [--build /tmp/build-bench] [--calls 2000] [--window 32] [--bots 600] [--json]

Python 3 and python3-redis (through scripts/tessera_cluster.py), and a build
of this tree.
"""

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "integration"))

ECHO_TO = 5      # Avatar's base method echoTo(entity target, uint32 n)
ON_ECHO = 3      # its client method onEcho(uint32 n)


def uvar(n):
    """A uint32 argument in property_codec's bits: a 4-bit nibble count
    less one, then the nibbles, least significant bits first."""
    nibbles = 1
    while nibbles < 8 and n >> (4 * nibbles):
        nibbles += 1
    value = (nibbles - 1) | (n << 4)
    return value.to_bytes((4 + 4 * nibbles + 7) // 8, "little")


def read_uvar(data):
    nibbles = (data[0] & 0x0F) + 1
    value = int.from_bytes(data, "little") >> 4
    return value & ((1 << (4 * nibbles)) - 1)


def post(cluster, port, path):
    """The status of an operator's POST, with the cluster's admin token."""
    return cluster.admin_http(port, path, method="POST")[0]


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100.0 * (len(ordered) - 1))))]


def echo_round_trips(harness, sock, me, target, calls, window):
    """(latencies in ms, one at a time; calls a second with `window` in flight)."""
    latencies = []
    for n in range(calls):
        t0 = time.perf_counter()
        sock.sendall(harness.frame(harness.msg_call(me, harness.PART_BASE, ECHO_TO, struct.pack("<Q", target) +
                                                    uvar(n))))
        while True:
            msg = harness.read_until(sock, {"call", "error"}, timeout=10.0)
            if msg is None or msg["kind"] == "error":
                raise RuntimeError("echo %d: %r" % (n, msg))
            if msg["method_id"] == ON_ECHO and read_uvar(msg["args"]) == n:
                break
        latencies.append((time.perf_counter() - t0) * 1e3)
    sent = answered = 0
    t0 = time.perf_counter()
    while answered < calls:
        while sent < calls and sent - answered < window:
            sock.sendall(harness.frame(harness.msg_call(me, harness.PART_BASE, ECHO_TO, struct.pack("<Q", target) +
                                                        uvar(sent))))
            sent += 1
        msg = harness.read_until(sock, {"call", "error"}, timeout=10.0)
        if msg is None or msg["kind"] == "error":
            raise RuntimeError("echo burst: %r" % (msg,))
        if msg["method_id"] == ON_ECHO:
            answered += 1
    return latencies, calls / (time.perf_counter() - t0)


def until_kind(harness, sock, kind, timeout=10.0):
    while True:
        msg = harness.read_until(sock, {kind, "error"}, timeout=timeout)
        if msg is None or msg["kind"] == "error":
            raise RuntimeError("waiting for %s: %r" % (kind, msg))
        return msg


def read_redirect(harness, sock, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        body = harness.read_frame(sock, max(0.1, deadline - time.monotonic()))
        if body is None:
            raise RuntimeError("closed before a redirect")
        number, _wt, inner = harness.parse_fields(body)[0]
        if number == 11:
            f = harness.parse_fields(inner)
            return (harness._first(f, 1, b"").decode(), harness._first(f, 2, 0), harness._first(f, 3, b"").decode())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="/tmp/build-bench")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--handovers", type=int, default=100)
    parser.add_argument("--bots", type=int, default=600)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ["TESSERA_BUILD_DIR"] = os.path.abspath(args.build)
    import harness  # noqa: E402  (after the build directory is set)

    results = {}
    settings = ["baseapp.login_redirect=false", "baseapp.client_calls_per_second=10000",
                "baseapp.client_detached_grace_ms=600000", "cellapp.game.npc_count=0"]
    with harness.Cluster(baseapps=2, cellapps=1, extra_set=settings) as cluster:
        first, second = cluster.baseapps
        a_sock, a = harness.login(first, "alice", "pw")
        c_sock, c = harness.login(first, "carol", "pw")
        b_sock, b = harness.login(second, "bob", "pw")
        alice, carol, bob = a["entity_id"], c["entity_id"], b["entity_id"]
        within, within_rate = echo_round_trips(harness, a_sock, alice, carol, args.calls, args.window)
        between, between_rate = echo_round_trips(harness, a_sock, alice, bob, args.calls, args.window)
        results["calls"] = {
            "within_p50_ms": percentile(within, 50), "within_p99_ms": percentile(within, 99),
            "within_per_second": within_rate,
            "between_p50_ms": percentile(between, 50), "between_p99_ms": percentile(between, 99),
            "between_per_second": between_rate,
        }

        # giveClientTo: bob's client between bob's and dave's Avatars on
        # baseapp-2, then to alice's on baseapp-1 and back.
        port1 = int(cluster.registry_hash("baseapp-1")["admin_port"])
        port2 = int(cluster.registry_hash("baseapp-2")["admin_port"])
        d_sock, d = harness.login(second, "dave", "pw")
        dave = d["entity_id"]
        d_sock.close()
        time.sleep(0.5)
        local = []
        holder, other = bob, dave
        for _ in range(args.handovers):
            t0 = time.perf_counter()
            if post(cluster, port2, "/admin/give-client?from=%d&to=%d" % (holder, other)) != 200:
                raise RuntimeError("a local giveClientTo was refused")
            until_kind(harness, b_sock, "entered_space")
            local.append((time.perf_counter() - t0) * 1e3)
            holder, other = other, holder
        # Across: alice's client leaves, and bob's goes to alice's Avatar.
        a_sock.close()
        time.sleep(0.5)
        remote = []
        sock, here_port, there_port = b_sock, port2, port1
        here_entity, there_entity = holder, alice
        for _ in range(min(args.handovers, 40)):
            t0 = time.perf_counter()
            if post(cluster, here_port, "/admin/give-client?from=%d&to=%d" % (here_entity, there_entity)) != 202:
                raise RuntimeError("a giveClientTo across baseapps was not offered")
            host, port, token = read_redirect(harness, sock)
            sock.close()
            sock = harness.connect((host, port))
            sock.sendall(harness.frame(harness.msg_hello()))
            harness.read_until(sock, "hello")
            sock.sendall(harness.frame(harness.field_message(6, harness.field_string(1, "bob") +
                                                             harness.field_string(2, token))))
            until_kind(harness, sock, "login_reply")
            remote.append((time.perf_counter() - t0) * 1e3)
            until_kind(harness, sock, "view")
            here_port, there_port = there_port, here_port
            here_entity, there_entity = there_entity, here_entity
        sock.close()
        logins = []
        for i in range(40):
            t0 = time.perf_counter()
            s, _ = harness.login(first, "fresh%d" % i, "pw")
            logins.append((time.perf_counter() - t0) * 1e3)
            s.close()
        results["handover"] = {
            "local_p50_ms": percentile(local, 50), "local_p99_ms": percentile(local, 99),
            "across_p50_ms": percentile(remote, 50), "across_p99_ms": percentile(remote, 99),
            "login_p50_ms": percentile(logins, 50), "login_p99_ms": percentile(logins, 99),
        }
        c_sock.close()

    # Logins through the redirect against logins that stay.
    rates = {}
    for redirect in (False, True):
        extra = ["baseapp.login_redirect=%s" % ("true" if redirect else "false"), "cellapp.game.npc_count=0",
                 "baseapp.max_clients=%d" % (args.bots + 100), "baseapp.login_timeout_ms=120000"]
        with harness.Cluster(baseapps=2, cellapps=1, extra_set=extra, timeout=60) as cluster:
            t0 = time.monotonic()
            proc = harness.start_bots(cluster, args.bots, 60, ["--speed", "0", "--calls-per-second", "0",
                                                               "--login-spread-ms", "0"])
            harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) +
                             (cluster.stat("baseapp-2", "clients") or 0) >= args.bots, 120, "every bot in")
            elapsed = time.monotonic() - t0
            spread = [cluster.stat("baseapp-1", "clients"), cluster.stat("baseapp-2", "clients")]
            proc.terminate()
            harness.finish_bots(proc)
            rates["redirected" if redirect else "direct"] = {"seconds": elapsed, "per_second": args.bots / elapsed,
                                                            "clients_per_baseapp": spread}
    results["logins"] = rates

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    calls = results["calls"]
    print("1. entity-call round trips (client -> base -> other base -> base -> client), %d calls" % args.calls)
    print("   within one baseapp: p50 %.3f ms, p99 %.3f ms, %.0f/s with %d in flight"
          % (calls["within_p50_ms"], calls["within_p99_ms"], calls["within_per_second"], args.window))
    print("   between baseapps:   p50 %.3f ms, p99 %.3f ms, %.0f/s with %d in flight"
          % (calls["between_p50_ms"], calls["between_p99_ms"], calls["between_per_second"], args.window))
    print("   ratio between/within: p50 %.2fx, p99 %.2fx, rate %.2fx"
          % (calls["between_p50_ms"] / calls["within_p50_ms"], calls["between_p99_ms"] / calls["within_p99_ms"],
             calls["between_per_second"] / calls["within_per_second"]))
    h = results["handover"]
    print("2. giveClientTo, request to the client hearing its new space")
    print("   same baseapp:   p50 %.2f ms, p99 %.2f ms" % (h["local_p50_ms"], h["local_p99_ms"]))
    print("   across:         p50 %.2f ms, p99 %.2f ms (redirect and token login included)"
          % (h["across_p50_ms"], h["across_p99_ms"]))
    print("   baseline login: p50 %.2f ms, p99 %.2f ms; ratios %.2fx (same) and %.2fx (across)"
          % (h["login_p50_ms"], h["login_p99_ms"], h["local_p50_ms"] / h["login_p50_ms"],
             h["across_p50_ms"] / h["login_p50_ms"]))
    lg = results["logins"]
    print("3. %d logins at baseapp-1 of 2" % args.bots)
    print("   staying:    %.0f/s (%.2f s), clients per baseapp %s"
          % (lg["direct"]["per_second"], lg["direct"]["seconds"], lg["direct"]["clients_per_baseapp"]))
    print("   redirected: %.0f/s (%.2f s), clients per baseapp %s; ratio %.2fx"
          % (lg["redirected"]["per_second"], lg["redirected"]["seconds"], lg["redirected"]["clients_per_baseapp"],
             lg["redirected"]["per_second"] / lg["direct"]["per_second"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
