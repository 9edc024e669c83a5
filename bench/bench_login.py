#!/usr/bin/env python3
"""bench_login -- password logins on one baseapp with its throttles in
place, and a real player's login under an attack of half-open logins,
against the same without the attack.

A real cluster (1 baseapp, 1 cellapp; scripts/cluster up through
tests/integration/harness.py) hashing passwords at the cost
deploy/config/baseapp.json sets (argon2id, 2 passes over 19 MiB;
--cheap-hashes: scripts/cluster's 1 pass over 8 MiB), with the login
path's defaults: login_hash_workers 2, login_hash_queue_max 256,
login_hashes_per_account 2, login_failures_per_account 10 a minute
(baseapp/login_queue.c, baseapp/login_throttle.c). Every connection of the
benchmark comes from 127.0.0.1, so the two per-address limits are raised
for its cluster (login_hashes_per_address 100000, login_failures_per_address
10^6): the attack stands for one from many addresses, which the
per-address caps would not stop; from one address they would refuse it
after 8 logins in progress. client_detached_grace_ms is 0 (a player who
leaves is written and goes at once) and the guards are off (npc_count 0).

1. Logins per second. --accounts distinct accounts log in, --concurrency
   at a time (each: connect, hello, login, until the login reply; then it
   closes): first logins (the account is created: one hash each), then,
   once every entity is gone, the same accounts again (one verify each).
   A login told to retry (a full queue, a cap) waits its retry hint and
   tries again on a new connection; retries are counted.

2. Under attack. --attackers threads in another process each loop:
   connect, hello, a login of a fresh account, a reset (SO_LINGER 0)
   --hold-ms later: half-open logins, each of which asks for a hash its
   client will never wait for. A second into the attack, one real player
   logs in --samples times, one at a time (returning accounts from 1.):
   p50 and p99 of connect to login reply, retries included; the same
   before the attack starts. The attack goes on for --attack-seconds
   after its first second, or until the samples are done. The ratio is attack / quiet. With the baseapp's figures
   over the attack: login_hashes (hashed), login_hashes_dropped (queued
   logins whose client had gone: never hashed), login_hashes_refused (a
   full queue or a cap).

    bench/bench_login.py [--build /tmp/build-bench] [--accounts 200] [--concurrency 16]
                         [--samples 40] [--attackers 16] [--attack-seconds 10] [--json]

Python 3 and python3-redis (through scripts/tessera_cluster.py), and a build
of this tree.
"""

import argparse
import json
import multiprocessing
import os
import re
import socket
import struct
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "integration"))

PASSWORD = "pw-bench"
# How long the benchmark waits for a login before calling it lost: the
# baseapp's own login_timeout_ms is 30 s.
LOGIN_WAIT_S = 40.0
# The attack runs this long before the first sample is taken: long enough
# for the hash queue to be in its steady state under it.
ATTACK_WARMUP_S = 1.0


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100.0 * (len(ordered) - 1))))]


def timed_login(harness, addr, account):
    """(ms from the first connect to the login reply, retries): a login
    told to retry waits its hint and starts again on a new connection."""
    retries = 0
    t0 = time.perf_counter()
    deadline = time.monotonic() + LOGIN_WAIT_S
    while True:
        sock = harness.connect(addr)
        try:
            sock.sendall(harness.frame(harness.msg_hello()))
            harness.read_until(sock, "hello")
            sock.sendall(harness.frame(harness.msg_login(account, PASSWORD)))
            msg = harness.read_until(sock, {"login_reply", "error"}, timeout=max(0.1, deadline - time.monotonic()))
        finally:
            sock.close()
        if msg and msg["kind"] == "login_reply":
            return (time.perf_counter() - t0) * 1e3, retries
        if not msg or not msg.get("retry_after_ms") or time.monotonic() > deadline:
            raise RuntimeError("login %r: %r" % (account, msg))
        retries += 1
        time.sleep(msg["retry_after_ms"] / 1000.0)


def login_crowd(harness, addr, accounts, concurrency):
    """Logs every account in, `concurrency` at a time: (seconds, retries)."""
    queue = list(accounts)
    lock = threading.Lock()
    retries = [0]
    errors = []

    def worker():
        while True:
            with lock:
                if not queue or errors:
                    return
                account = queue.pop()
            try:
                _, r = timed_login(harness, addr, account)
            except (RuntimeError, OSError) as e:
                errors.append(str(e))
                return
            with lock:
                retries[0] += r

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("a login failed: %s" % errors[0])
    return time.monotonic() - t0, retries[0]


def wait_all_gone(harness, cluster):
    """Until the baseapp holds no client and no player's base (the Census
    stays), so a returning login finds its entity written and gone."""
    harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == 0 and
                     (cluster.stat("baseapp-1", "bases") or 0) <= 1, 60.0, "every player written and gone")


def attack(addr, threads, hold_ms, stop, sent):
    """In its own process (the measuring one keeps its interpreter): each
    thread sends half-open logins until `stop` is set; `sent` counts them."""
    from harness import frame, msg_hello, msg_login  # noqa: E402  (the path is set by the parent)

    def one(index):
        n = 0
        while not stop.is_set():
            n += 1
            try:
                s = socket.create_connection(addr, timeout=5.0)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.sendall(frame(msg_hello()))
                s.recv(4096)
                s.sendall(frame(msg_login("attack-%d-%d-%d" % (os.getpid(), index, n), "wrong")))
                time.sleep(hold_ms / 1000.0)
                s.close()  # SO_LINGER 0: a reset, not a FIN
                with sent.get_lock():
                    sent.value += 1
            except OSError:
                time.sleep(0.01)

    workers = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


# The baseapp's login figures, as /metrics names them (baseapp/baseapp_figures.c).
LOGIN_METRICS = ("login_hashes", "login_hashes_dropped", "login_hashes_refused")


def figures(cluster):
    """The baseapp's login figures now, from its /metrics (the registry's
    copy is up to a heartbeat old)."""
    port = int(cluster.registry_hash("baseapp-1")["admin_port"])
    status, body, _ = cluster.admin_http(port, "/metrics")
    if status != 200:
        raise RuntimeError("/metrics answered %s" % status)
    text = body.decode() if isinstance(body, bytes) else body
    out = {}
    for name in LOGIN_METRICS:
        m = re.search(r"^tessera_%s_total (\S+)$" % name, text, re.M)
        if not m:
            raise RuntimeError("/metrics has no tessera_%s_total" % name)
        out[name] = int(float(m.group(1)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="/tmp/build-bench")
    parser.add_argument("--accounts", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--attackers", type=int, default=16)
    parser.add_argument("--hold-ms", type=float, default=5.0, help="login to reset, per half-open login")
    parser.add_argument("--attack-seconds", type=float, default=10.0,
                        help="how long the attack runs after its first second (longer if the samples take longer)")
    parser.add_argument("--cheap-hashes", action="store_true", help="1 pass over 8 MiB, as scripts/cluster")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.accounts < 2 * args.samples:
        parser.error("--accounts must be at least twice --samples (each sample is a returning account)")
    os.environ["TESSERA_BUILD_DIR"] = os.path.abspath(args.build)
    import harness  # noqa: E402  (after the build directory is set)

    with open(os.path.join(REPO_ROOT, "deploy", "config", "baseapp.json")) as f:
        production = json.load(f)
    ops, mem = (1, 8192) if args.cheap_hashes else (production["password_ops_limit"],
                                                    production["password_mem_limit_kib"])
    settings = ["baseapp.login_hashes_per_address=100000", "baseapp.login_failures_per_address=1000000",
                "baseapp.password_ops_limit=%d" % ops, "baseapp.password_mem_limit_kib=%d" % mem,
                "baseapp.client_detached_grace_ms=0", "cellapp.game.npc_count=0"]
    results = {"hash": {"ops_limit": ops, "mem_limit_kib": mem}}
    accounts = ["player%d" % i for i in range(args.accounts)]
    with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings, timeout=60) as cluster:
        addr = cluster.login
        seconds, retries = login_crowd(harness, addr, accounts, args.concurrency)
        results["first_logins"] = {"logins": len(accounts), "seconds": seconds,
                                   "per_second": len(accounts) / seconds, "retries": retries}
        wait_all_gone(harness, cluster)
        seconds, retries = login_crowd(harness, addr, accounts, args.concurrency)
        results["returning_logins"] = {"logins": len(accounts), "seconds": seconds,
                                       "per_second": len(accounts) / seconds, "retries": retries}
        wait_all_gone(harness, cluster)

        quiet = [timed_login(harness, addr, a) for a in accounts[:args.samples]]
        wait_all_gone(harness, cluster)

        context = multiprocessing.get_context("fork")
        stop, sent = context.Event(), context.Value("q", 0)
        proc = context.Process(target=attack, args=(addr, args.attackers, args.hold_ms, stop, sent))
        before = figures(cluster)
        proc.start()
        try:
            # The attack is under way, and has been for a second (the
            # queue in its steady state), before the first sample.
            harness.wait_for(lambda: sent.value >= args.attackers, 10.0, "the attack to start")
            time.sleep(ATTACK_WARMUP_S)
            t0 = time.monotonic()
            attacked = []
            for a in accounts[args.samples:2 * args.samples]:
                attacked.append(timed_login(harness, addr, a))
            # The rest of the attack, so that its figures cover a steady run.
            while time.monotonic() - t0 < args.attack_seconds:
                time.sleep(0.1)
            attack_s = time.monotonic() - t0 + ATTACK_WARMUP_S
        finally:
            stop.set()
            proc.join(10.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
        after = figures(cluster)
        results["attack"] = {
            "attackers": args.attackers, "hold_ms": args.hold_ms, "seconds": attack_s,
            "half_open_logins": sent.value, "half_open_per_second": sent.value / attack_s if attack_s else 0.0,
            "baseapp": {k: after[k] - before[k] for k in after},
        }
        for name, samples in (("quiet", quiet), ("attacked", attacked)):
            ms = [s[0] for s in samples]
            results[name] = {"samples": len(ms), "p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
                             "retries": sum(s[1] for s in samples)}
        results["ratio"] = {"p50": results["attacked"]["p50_ms"] / results["quiet"]["p50_ms"],
                            "p99": results["attacked"]["p99_ms"] / results["quiet"]["p99_ms"]}

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    first, back = results["first_logins"], results["returning_logins"]
    print("argon2id: %d pass(es) over %d KiB; 2 hash workers, a queue of 256; per-address caps raised "
          "(every connection is 127.0.0.1)" % (ops, mem))
    print("1. %d distinct accounts, %d logins at a time" % (args.accounts, args.concurrency))
    print("   first logins (account created): %.1f/s (%.2f s, %d retries)"
          % (first["per_second"], first["seconds"], first["retries"]))
    print("   returning logins (verified):    %.1f/s (%.2f s, %d retries)"
          % (back["per_second"], back["seconds"], back["retries"]))
    a, q, w = results["attack"], results["quiet"], results["attacked"]
    print("2. a real player's login, connect to login reply, one at a time")
    print("   quiet:        p50 %.1f ms, p99 %.1f ms over %d logins (%d retries)"
          % (q["p50_ms"], q["p99_ms"], q["samples"], q["retries"]))
    print("   under attack: p50 %.1f ms, p99 %.1f ms over %d logins (%d retries)"
          % (w["p50_ms"], w["p99_ms"], w["samples"], w["retries"]))
    print("   ratio attack/quiet: p50 %.2fx, p99 %.2fx" % (results["ratio"]["p50"], results["ratio"]["p99"]))
    print("   attack: %d threads, %d half-open logins in %.1f s (%.0f/s, reset %.0f ms after the login)"
          % (a["attackers"], a["half_open_logins"], a["seconds"], a["half_open_per_second"], a["hold_ms"]))
    b = a["baseapp"]
    print("   baseapp meanwhile: %d hashed (the player's included), %d dropped unhashed (client gone), %d refused"
          % (b["login_hashes"], b["login_hashes_dropped"], b["login_hashes_refused"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
