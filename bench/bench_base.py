#!/usr/bin/env python3
"""bench_base -- the base side on one box: writeToDB throughput and
reconnects, each against a baseline measured in the same run.

1. writeToDB. A real cluster (1 baseapp, 1 cellapp, scripts/cluster up:
   Redis durable, appendfsync always) with N bots standing still in the
   world (tessera-bots --speed 0 --calls-per-second 0). Each round asks the
   baseapp to save every entity (POST /admin/save: a backup from the cell
   part, then one SET of the stored form) and times until the baseapp's
   tessera_entity_writes_total (GET /metrics, polled every 2 ms) has grown
   by N: entities written per second, over --rounds rounds (the best and
   the median are printed), with the baseapp's and the cellapp's CPU per
   write (/proc/<pid>/stat) and the write latency p50/p99 from the
   baseapp's entity_write_seconds histogram (bucket edges, so an upper
   bound). Baseline: redis-benchmark on the same Redis, SET of a value as
   large as a stored entity, one connection with 16 commands in flight
   (-c 1 -P 16) -- what one Redis client could push at all -- and
   unpipelined (-c 1 -P 1), one round trip per write.

2. Reconnects. The same bots drop their connections at once and take
   their entities back with their session tokens (--reconnect-at): the
   time until the baseapp has counted N reconnects, against the time the
   same N bots took to log in with a password at the start of the run, all
   at once (argon2id at scripts/cluster's cost, 1 pass over 8 MiB, on
   libuv's thread pool).

    bench/bench_base.py [--build /tmp/build-bench] [--bots 1000] [--rounds 5] [--json]

Needs python3-redis (through scripts/tessera_cluster.py), redis-benchmark
(Debian's redis-tools; scripts/deps installs both) and a build of this tree.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
import tessera_cluster  # noqa: E402  (after the path is set)

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_ticks(pid):
    """utime + stime of pid in clock ticks."""
    with open("/proc/%d/stat" % pid, "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def http(url, method="GET", timeout=5.0, token=None):
    """The body of url's answer; token: the admin token, for the routes
    past the probes."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token:
        request.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read().decode("utf-8", "replace")


def metric(text, name):
    """The value of an unlabelled sample `name` in Prometheus text."""
    match = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(match.group(1)) if match else 0.0


def histogram(text, name):
    """[(upper edge seconds, cumulative count)] of histogram `name`."""
    out = []
    for edge, count in re.findall(r'^%s_bucket\{le="([^"]+)"\} (\S+)$' % re.escape(name), text, re.M):
        out.append((float("inf") if edge == "+Inf" else float(edge), float(count)))
    return out


def percentile_edge(before, after, percent):
    """The bucket edge under which `percent` of the samples added between
    two readings of a histogram lie."""
    deltas = [(edge, a - b) for (edge, a), (_e, b) in zip(after, before)]
    total = deltas[-1][1] if deltas else 0
    if total <= 0:
        return None
    for edge, cumulative in deltas:
        if cumulative >= total * percent / 100.0:
            return edge
    return None


def process(cluster, role):
    return next(p for p in cluster["processes"] if p["role"] == role)


def admin_url(cluster, redis, name):
    entries = tessera_cluster.registry_entries(redis, cluster.get("cluster_name", "tessera"))
    entry = tessera_cluster.match_entry(entries, process(cluster, name))
    return "http://127.0.0.1:%d" % tessera_cluster.stat_int(entry, "admin_port")


def wait(predicate, timeout, what, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise RuntimeError("timed out waiting for " + what)


def redis_benchmark(port, size, pipeline, requests):
    proc = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", "set", "-n", str(requests),
                           "-d", str(size), "-c", "1", "-P", str(pipeline), "--csv"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    for line in proc.stdout.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells and cells[0] == "SET":
            return float(cells[1])
    raise RuntimeError("redis-benchmark printed no SET line:\n" + proc.stdout + proc.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="/tmp/build-bench")
    parser.add_argument("--bots", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    bots_bin = os.path.join(build, "client", "tessera-bots")
    run_dir = tempfile.mkdtemp(prefix="tessera-bench-base-")
    overrides = {"baseapp.autosave_interval_ms": 0, "baseapp.client_detached_grace_ms": 60000,
                 "baseapp.max_clients": args.bots + 100, "baseapp.login_timeout_ms": 300000, "cellapp.balance_enabled": False,
                 "cellapp.game.npc_count": 0}
    results = {"bots": args.bots, "rounds": args.rounds}
    bots = None
    try:
        with open(os.devnull, "w") as quiet:
            cluster = tessera_cluster.up(run_dir, baseapps=1, cellapps=1, build=build, timeout=60,
                                         overrides=tessera_cluster.parse_set(
                                             ["%s=%s" % (k, json.dumps(v)) for k, v in overrides.items()]),
                                         out=quiet)
        redis = tessera_cluster.redis_client("127.0.0.1", cluster["redis_port"], timeout=10.0)
        base_url = admin_url(cluster, redis, "baseapp")
        base_pid = process(cluster, "baseapp")["pid"]
        cell_pid = process(cluster, "cellapp")["pid"]
        seconds = 120 + args.rounds * 10
        bots = subprocess.Popen([bots_bin, "--connect", cluster["login"], "--count", str(args.bots), "--seconds",
                                 str(seconds), "--json", "--speed", "0", "--calls-per-second", "0",
                                 "--login-spread-ms", "0", "--reconnect-at", str(seconds - 20),
                                 "--reconnect-delay-ms", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        started = time.monotonic()
        wait(lambda: metric(http(base_url + "/metrics"), "tessera_logins_total") >= args.bots, 120,
             "every bot to log in")
        results["login_seconds"] = time.monotonic() - started
        wait(lambda: tessera_cluster.stat_int(tessera_cluster.match_entry(
            tessera_cluster.registry_entries(redis, "tessera"), process(cluster, "baseapp")), "clients", 0)
            >= args.bots, 30, "every bot in the world")
        time.sleep(2.0)
        # What the processes spend with nothing saved (the cellapp ticks its
        # 1,000 witnesses), to take off each round's CPU.
        idle_before = (cpu_ticks(base_pid), cpu_ticks(cell_pid), time.monotonic())
        time.sleep(3.0)
        idle_after = (cpu_ticks(base_pid), cpu_ticks(cell_pid), time.monotonic())
        idle_window = idle_after[2] - idle_before[2]
        idle_rate = ((idle_after[0] - idle_before[0]) / CLK_TCK / idle_window,
                     (idle_after[1] - idle_before[1]) / CLK_TCK / idle_window)
        results["idle_cores"] = {"baseapp": idle_rate[0], "cellapp": idle_rate[1]}

        rounds = []
        for _ in range(args.rounds):
            text = http(base_url + "/metrics")
            before = metric(text, "tessera_entity_writes_total")
            hist_before = histogram(text, "tessera_entity_write_seconds")
            cpu_before = (cpu_ticks(base_pid), cpu_ticks(cell_pid))
            t0 = time.monotonic()
            http(base_url + "/admin/save", "POST", token=tessera_cluster.admin_token(cluster))
            while True:
                text = http(base_url + "/metrics")
                if metric(text, "tessera_entity_writes_total") >= before + args.bots:
                    break
                if time.monotonic() - t0 > 60:
                    raise RuntimeError("the save did not finish within 60 s")
                time.sleep(0.002)
            elapsed = time.monotonic() - t0
            cpu_after = (cpu_ticks(base_pid), cpu_ticks(cell_pid))
            hist_after = histogram(text, "tessera_entity_write_seconds")
            rounds.append({
                "seconds": elapsed,
                "writes_per_second": args.bots / elapsed,
                "baseapp_us_per_write": max(0.0, (cpu_after[0] - cpu_before[0]) / CLK_TCK - idle_rate[0] * elapsed) *
                1e6 / args.bots,
                "cellapp_us_per_write": max(0.0, (cpu_after[1] - cpu_before[1]) / CLK_TCK - idle_rate[1] * elapsed) *
                1e6 / args.bots,
                "latency_p50_s_at_most": percentile_edge(hist_before, hist_after, 50),
                "latency_p99_s_at_most": percentile_edge(hist_before, hist_after, 99),
            })
            time.sleep(0.5)
        stored = redis.get("tessera:tessera:entity:Avatar:bot0")
        size = len(stored) if stored else 300
        results["stored_bytes"] = size
        results["writes"] = rounds
        rates = [r["writes_per_second"] for r in rounds]
        results["writes_per_second_best"] = max(rates)
        results["writes_per_second_median"] = statistics.median(rates)
        results["redis_set_pipelined_per_second"] = redis_benchmark(cluster["redis_port"], size, 16, 50000)
        results["redis_set_unpipelined_per_second"] = redis_benchmark(cluster["redis_port"], size, 1, 10000)

        # Reconnects: every bot drops at --reconnect-at (after the bots'
        # start) and comes back at once.
        dropped_at = started + (seconds - 20)
        time.sleep(max(0.0, dropped_at - time.monotonic()))
        wait(lambda: metric(http(base_url + "/metrics"), "tessera_reconnects_total") >= args.bots, 60,
             "every bot to reconnect", interval=0.005)
        results["reconnect_seconds"] = time.monotonic() - dropped_at
        report = json.loads(bots.communicate(timeout=seconds + 60)[0].strip().splitlines()[-1])
        results["bot_errors"] = report.get("errors")
        results["reconnects_other_entity"] = report.get("reconnects_other_entity")
        redis.close()
    finally:
        if bots and bots.poll() is None:
            bots.kill()
        tessera_cluster.down(run_dir, grace=10.0, quiet=True)
        subprocess.run(["rm", "-rf", run_dir])

    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    n = args.bots
    print("1. writeToDB: %d entities saved at once (POST /admin/save), %d rounds, stored form %d bytes"
          % (n, args.rounds, results["stored_bytes"]))
    print("CPU per write is the processes' CPU over the round less their idle rate (baseapp %.2f, cellapp %.2f "
          "cores with nothing saved)" % (results["idle_cores"]["baseapp"], results["idle_cores"]["cellapp"]))
    print("%-8s %10s %12s %14s %14s %12s %12s" % ("round", "seconds", "writes/s", "baseapp us/w", "cellapp us/w",
                                                   "p50 <= ms", "p99 <= ms"))
    for i, r in enumerate(results["writes"], 1):
        print("%-8d %10.3f %12.0f %14.1f %14.1f %12s %12s" % (
            i, r["seconds"], r["writes_per_second"], r["baseapp_us_per_write"], r["cellapp_us_per_write"],
            "%.1f" % (r["latency_p50_s_at_most"] * 1e3) if r["latency_p50_s_at_most"] else "-",
            "%.1f" % (r["latency_p99_s_at_most"] * 1e3) if r["latency_p99_s_at_most"] else "-"))
    best, median = results["writes_per_second_best"], results["writes_per_second_median"]
    piped, single = results["redis_set_pipelined_per_second"], results["redis_set_unpipelined_per_second"]
    print("writeToDB best %.0f/s, median %.0f/s" % (best, median))
    print("baseline redis-benchmark SET -d %d: %.0f/s pipelined (-P 16), %.0f/s one at a time"
          % (results["stored_bytes"], piped, single))
    print("ratio: writeToDB / pipelined SET = %.2fx, / unpipelined SET = %.2fx" % (median / piped, median / single))
    print()
    print("2. reconnects: %d bots dropped at once and took their entities back" % n)
    print("reconnect %.2f s (%.0f/s) against logging in %.2f s (%.0f/s): ratio %.2fx; %s errors, %s came back to "
          "another entity" % (results["reconnect_seconds"], n / results["reconnect_seconds"],
                              results["login_seconds"], n / results["login_seconds"],
                              results["login_seconds"] / results["reconnect_seconds"], results["bot_errors"],
                              results["reconnects_other_entity"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
