#!/usr/bin/env python3
"""loadtest -- the load kit: one command starts a cluster, runs a named
scenario with tessera-bots, and prints one table (and writes JSON).

    bench/loadtest.py SCENARIO [--build /tmp/build-bench] [--json FILE] [--compare EARLIER.json]
                      [--repeat N] [--profile DIR] [--tls] [--websocket] [--baseline BUILD]
    bench/loadtest.py --list

--baseline BUILD runs the scenario with another build (the previous version)
and this one in turn, --repeat N pairs (3 unless given), and prints the
baseline's medians, then this build's with their ratios to them, then each
role's ratio pair by pair and the median of those. On a shared machine whose
speed drifts from minute to minute, the pairs' ratios are steadier than two
medians taken one after the other.

--tls runs the scenario twice on fresh clusters, over plaintext and then
with TLS 1.3 on the client port (a self-signed certificate made with the
openssl command; the bots verify it), and prints the TLS run's table with
each figure's ratio to the plaintext run's: what encryption costs per
client-tick. (The baseapp's client bytes in count what arrived on the wire,
encrypted; bytes out count frames before encryption.)

--websocket runs it twice likewise, the bots over TCP and then over
WebSocket (tessera-bots --websocket to the baseapps' websocket_port, as a
browser's client would speak), and prints WebSocket's ratio to TCP: what
the WebSocket framing costs per client-tick. With --tls too, both runs are
encrypted (wss for the WebSocket one).

A scenario sets the bot count, the area (so the density), the walking speed,
whether the balancer runs (off unless the scenario says, as in world-5k),
the method-call rate, the NPCs, the cellapp and baseapp counts, and the
duration; `--list` prints them. The run:

  - starts the cluster (scripts/cluster up, spawn disc and space bounds to
    fit the area; one cell per cellapp) and the bots, which log in over
    --login-spread seconds;
  - once every bot is in the world and 5 s more (or, for the login storm,
    from the first login), reads a steady window of utime+stime from
    /proc/<pid>/stat for every cellapp, baseapp and the bots, their RSS
    (VmRSS), and the baseapp's client bytes in and out (its /metrics);
  - stops the bots, which report their latency (the cell's stamp of a move
    to the bot receiving it), errors and logins.

The table, one row per role: CPU per client-tick (cpu_s * 1e6 / (clients *
10 ticks/s * window_s), in microseconds), cores, RSS per client (KB), how
often each process slept and woke (voluntary context switches a second); then
latency p50/p99/max, bytes per client per second in and out, errors and
logins. --compare prints each figure's ratio to an earlier run's JSON (of
the same scenario). Python 3 and python3-redis (through
scripts/tessera_cluster.py).
"""

import argparse
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
import tessera_cluster  # noqa: E402  (after the path is set)

CLK_TCK = os.sysconf("SC_CLK_TCK")
TICK_HZ = 10

# bots, half-width of the walking area (m), speed (m/s), calls a second per
# bot, NPCs per cellapp, cellapps, baseapps, steady window (s), login spread (s).
SCENARIOS = {
    "uniform-1k": dict(bots=1000, area=300, speed=5, calls=0.2, npcs=10, cellapps=2, baseapps=1, window=10,
                       spread=10, note="1,000 walkers in 600 x 600 m (about 34 in each view)"),
    "uniform-500": dict(bots=500, area=212, speed=5, calls=0.2, npcs=5, cellapps=2, baseapps=1, window=10,
                        spread=5, note="500 walkers at uniform-1k's density (the WebSocket comparison)"),
    "uniform-1k-1cell": dict(bots=1000, area=300, speed=5, calls=0.2, npcs=20, cellapps=1, baseapps=1, window=10,
                             spread=10, note="uniform-1k on one cellapp: the scaling baseline"),
    "uniform-2k": dict(bots=2000, area=424, speed=5, calls=0.2, npcs=10, cellapps=2, baseapps=1, window=10,
                       spread=20, note="2,000 walkers at the same density"),
    "uniform-5k": dict(bots=5000, area=671, speed=5, calls=0.2, npcs=10, cellapps=2, baseapps=1, window=10,
                       spread=50, note="5,000 walkers at the same density"),
    "world-5k": dict(bots=5000, area=671, speed=5, calls=0.2, npcs=10, cellapps=2, baseapps=1, window=10, spread=50,
                     balance=True, note="uniform-5k with the balancer on: the cells follow the load"),
    "crowd": dict(bots=1000, area=158, speed=5, calls=0.2, npcs=10, cellapps=2, baseapps=1, window=10, spread=10,
                  note="1,000 walkers about 100 in each view"),
    "sparse-npcs": dict(bots=500, area=1000, speed=5, calls=0.2, npcs=5000, cellapps=2, baseapps=1, window=10,
                        spread=5, note="500 players among 10,000 idle NPCs"),
    "login-storm": dict(bots=2000, area=300, speed=0, calls=0, npcs=10, cellapps=2, baseapps=2, window=10,
                        spread=5, storm=True, note="2,000 logins in 5 s over 2 baseapps"),
}


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid, "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def status_field(pid, name):
    """One number from /proc/<pid>/status (0 when absent)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0


def rss_kb(pid):
    return status_field(pid, "VmRSS")


def wakeups(pid):
    """Voluntary context switches so far: how often the process slept and woke."""
    return status_field(pid, "voluntary_ctxt_switches")


def metric(url, name, labels):
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    match = re.search(r"^%s\{%s\} (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(match.group(1)) if match else 0.0


def build_commit(build):
    """The commit the build was made from (its meson source tree), not this script's."""
    source = REPO_ROOT
    try:
        with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
            source = json.load(f)["directories"]["source"]
    except (OSError, ValueError, KeyError):
        pass
    return subprocess.run(["git", "-C", source, "rev-parse", "--short", "HEAD"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout.strip()


def registry(redis, cluster):
    return tessera_cluster.registry_entries(redis, cluster.get("cluster_name", "tessera"))


def entry_of(redis, cluster, proc):
    return tessera_cluster.match_entry(registry(redis, cluster), proc)


def start_profiles(profile_dir, procs, bots, seconds):
    """perf record every cellapp, baseapp and the bots for the window (perf from linux-perf)."""
    os.makedirs(profile_dir, exist_ok=True)
    recorders = []
    for name, pid in [(p["name"], p["pid"]) for p in procs] + [("bots", bots.pid)]:
        out = os.path.join(profile_dir, name + ".perf.data")
        recorders.append((name, out, subprocess.Popen(
            ["perf", "record", "-F", os.environ.get("LOADTEST_PERF_HZ", "499"), "--call-graph", "fp", "-p", str(pid), "-o", out, "--", "sleep", str(seconds)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    return recorders


def finish_profiles(recorders):
    """Wait for the recorders and write each one's flat top 25 next to its data."""
    for name, out, recorder in recorders:
        recorder.wait(timeout=60)
        report = subprocess.run(["perf", "report", "-i", out, "--no-children", "--stdio", "--percent-limit", "0.7",
                                 "-g", "none", "--sort", "symbol"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
        lines = [line for line in report.splitlines() if line.strip() and not line.startswith("#")]
        with open(out.replace(".perf.data", ".top.txt"), "w") as f:
            f.write("\n".join(lines[:25]) + "\n")


TLS_NAME = "tessera.loadtest"


def make_certificate(directory):
    """A self-signed certificate for TLS_NAME: (certificate, key) paths."""
    certificate, key = os.path.join(directory, "client-tls.pem"), os.path.join(directory, "client-tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=" + TLS_NAME,
                    "-addext", "subjectAltName=DNS:" + TLS_NAME], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return certificate, key


def run(name, scenario, build, profile_dir=None, tls=False, websocket=False):
    run_dir = tempfile.mkdtemp(prefix="tessera-loadtest-")
    bots_bin = os.path.join(build, "client", "tessera-bots")
    area = scenario["area"]
    overrides = {"cellapp.game.npc_count": scenario["npcs"], "baseapp.max_clients": scenario["bots"] + 100,
                 "baseapp.login_timeout_ms": 120000, "cellapp.max_entities": 100000,
                 "cellapp.balance_enabled": bool(scenario.get("balance")),
                 # Every bot logs in from 127.0.0.1.
                 "baseapp.login_hashes_per_address": scenario["bots"], "baseapp.login_failures_per_address": 0}
    tls_args = []
    if tls:
        certificate, key = make_certificate(run_dir)
        overrides.update({"baseapp.client_tls_certificate_file": certificate, "baseapp.client_tls_key_file": key})
        tls_args = ["--tls-name", TLS_NAME, "--tls-ca", certificate]
        if websocket:
            overrides["baseapp.websocket_tls"] = True
    bots = None
    result = {"scenario": name, "settings": scenario, "tls": tls, "websocket": websocket}
    try:
        with open(os.devnull, "w") as quiet:
            cluster = tessera_cluster.up(run_dir, baseapps=scenario["baseapps"], cellapps=scenario["cellapps"],
                                         build=build, timeout=90, out=quiet,
                                         bounds=(-area - 10, -area - 10, area + 10, area + 10),
                                         spawn_radius=area,
                                         overrides=tessera_cluster.parse_set(
                                             ["%s=%s" % (k, json.dumps(v)) for k, v in overrides.items()]))
        redis = tessera_cluster.redis_client("127.0.0.1", cluster["redis_port"], timeout=10.0)
        procs = [p for p in cluster["processes"] if p["role"] in ("cellapp", "baseapp")]
        # Long enough for the slowest login wait below (spread + 60 s), the
        # settling 5 s, the window and the profiles: the bots are stopped
        # with SIGINT after the window anyway, and must not end inside it.
        seconds = scenario["spread"] + 60 + 5 + scenario["window"] + 40
        argv = [bots_bin, "--connect", cluster["login"], "--count", str(scenario["bots"]), "--seconds", str(seconds),
                "--json", "--seed", "20240601", "--area", str(area), "--speed", str(scenario["speed"]),
                "--calls-per-second", str(scenario["calls"]), "--login-spread-ms", str(scenario["spread"] * 1000),
                "--call", "base:chat", "--call", "cell:castSpell"] + tls_args
        if websocket:
            argv += ["--websocket", "--connect", cluster["websockets"][0]]
        out_path = os.path.join(run_dir, "bots.json")
        with open(out_path, "wb") as out, open(os.path.join(run_dir, "bots.log"), "wb") as err:
            bots = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        started = time.monotonic()

        def clients():
            return sum(tessera_cluster.stat_int(entry_of(redis, cluster, p), "clients", 0)
                       for p in procs if p["role"] == "baseapp")

        if not scenario.get("storm"):
            deadline = started + scenario["spread"] + 60
            while clients() < scenario["bots"] and time.monotonic() < deadline:
                time.sleep(0.5)
            result["all_in_after_s"] = time.monotonic() - started
            time.sleep(5.0)
        base_urls = ["http://127.0.0.1:%d" % tessera_cluster.stat_int(entry_of(redis, cluster, p), "admin_port")
                     for p in procs if p["role"] == "baseapp"]
        before = {p["name"]: cpu_ticks(p["pid"]) for p in procs}
        before["bots"] = cpu_ticks(bots.pid)
        woke_before = {p["name"]: wakeups(p["pid"]) for p in procs}
        woke_before["bots"] = wakeups(bots.pid)
        bytes_before = [sum(metric(u, "tessera_channel_bytes_%s_total" % d, 'side="clients"') for u in base_urls)
                        for d in ("in", "out")]
        recorders = start_profiles(profile_dir, procs, bots, scenario["window"]) if profile_dir else []
        t0 = time.monotonic()
        time.sleep(scenario["window"])
        window = time.monotonic() - t0
        after = {p["name"]: cpu_ticks(p["pid"]) for p in procs}
        after["bots"] = cpu_ticks(bots.pid)
        woke_after = {p["name"]: wakeups(p["pid"]) for p in procs}
        woke_after["bots"] = wakeups(bots.pid)
        bytes_after = [sum(metric(u, "tessera_channel_bytes_%s_total" % d, 'side="clients"') for u in base_urls)
                       for d in ("in", "out")]
        in_world = clients()
        rss = {p["name"]: rss_kb(p["pid"]) for p in procs}
        rss["bots"] = rss_kb(bots.pid)
        if scenario.get("storm"):
            deadline = started + 120
            while clients() < scenario["bots"] and time.monotonic() < deadline:
                time.sleep(0.2)
            result["all_in_after_s"] = time.monotonic() - started
        finish_profiles(recorders)
        bots.send_signal(2)
        bots.wait(timeout=60)
        with open(out_path) as f:
            text = f.read().strip()
        report = json.loads(text[text.index("{"):]) if "{" in text else {}
        n = max(1, in_world)
        roles = {}
        for role in ("cellapp", "baseapp", "bots"):
            names = [p["name"] for p in procs if p["role"] == role] if role != "bots" else ["bots"]
            cpu = sum(after[k] - before[k] for k in names) / CLK_TCK
            roles[role] = {
                "processes": len(names),
                "cores": cpu / window,
                "us_per_client_tick": cpu * 1e6 / (n * TICK_HZ * window),
                "rss_kb_per_client": sum(rss[k] for k in names) / n,
                "wakeups_per_second": sum(woke_after[k] - woke_before[k] for k in names) / window / len(names),
            }
        result.update({
            "clients": in_world,
            "window_s": window,
            "roles": roles,
            "latency_p50_ms": report.get("latency_p50_ms"),
            "latency_p99_ms": report.get("latency_p99_ms"),
            "latency_max_ms": report.get("latency_max_ms"),
            "bytes_in_per_client_s": (bytes_after[0] - bytes_before[0]) / n / window,
            "bytes_out_per_client_s": (bytes_after[1] - bytes_before[1]) / n / window,
            "errors": report.get("errors"),
            "error_reasons": report.get("error_reasons"),
            "logins": report.get("logged_in"),
            "logins_per_second": (report.get("logged_in") or 0) / max(0.001, result["all_in_after_s"]),
            "commit": build_commit(build),
        })
        redis.close()
    finally:
        if bots and bots.poll() is None:
            bots.kill()
        tessera_cluster.down(run_dir, grace=10.0, quiet=True)
        subprocess.run(["rm", "-rf", run_dir])
    return result


def print_table(result, earlier=None):
    def ratio(path):
        if not earlier:
            return ""
        a, b = result, earlier
        for key in path:
            a, b = (a or {}).get(key), (b or {}).get(key)
        return "  (%.2fx)" % (a / b) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else ""

    s = result["settings"]
    print("%s: %s; %d bots, %d cellapps, %d baseapps, %.0f s window, commit %s" % (
        result["scenario"], s["note"], s["bots"], s["cellapps"], s["baseapps"], result["window_s"], result["commit"]))
    print("%-8s %9s %8s %22s %18s %18s" % ("role", "processes", "cores", "us per client-tick", "RSS KB per client",
                                           "wakeups/s each"))
    for role, r in result["roles"].items():
        print("%-8s %9d %8.2f %14.1f%-8s %10.1f%-8s %10.0f" % (
            role, r["processes"], r["cores"], r["us_per_client_tick"], ratio(["roles", role, "us_per_client_tick"]),
            r["rss_kb_per_client"], ratio(["roles", role, "rss_kb_per_client"]), r.get("wakeups_per_second", 0)))
    fmt = lambda v: "-" if v is None else "%.1f" % v  # noqa: E731
    print("latency p50 %s ms%s, p99 %s ms%s, max %s ms" % (
        fmt(result["latency_p50_ms"]), ratio(["latency_p50_ms"]), fmt(result["latency_p99_ms"]),
        ratio(["latency_p99_ms"]), fmt(result["latency_max_ms"])))
    print("bytes per client per second: in %.0f, out %.0f%s" % (
        result["bytes_in_per_client_s"], result["bytes_out_per_client_s"], ratio(["bytes_out_per_client_s"])))
    print("clients %d, logins %s (%.0f/s, every bot in after %.1f s), errors %s %s" % (
        result["clients"], result["logins"], result["logins_per_second"], result["all_in_after_s"],
        result["errors"], result["error_reasons"] or ""))


def median_of(results):
    """One result whose every figure is the median over `results` (the runs
    of one scenario), with the runs themselves under "runs". This machine
    class is noisy; a median of three is what bench/README.md reports."""
    def median(values):
        values = sorted(v for v in values if isinstance(v, (int, float)))
        return values[len(values) // 2] if values else None

    combined = dict(results[0])
    for key, value in results[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            combined[key] = median(r.get(key) for r in results)
    combined["roles"] = {
        role: {key: median(r["roles"][role][key] for r in results) for key in figures}
        for role, figures in results[0]["roles"].items()
    }
    combined["errors"] = sum(r.get("errors") or 0 for r in results)
    combined["runs"] = results
    return combined


def alternate(args):
    """--baseline: the baseline and this build in turn, pair by pair."""
    pairs = args.repeat if args.repeat > 1 else 3
    scenario = SCENARIOS[args.scenario]
    baseline_runs, runs_here = [], []
    for i in range(pairs):
        print("pair %d of %d" % (i + 1, pairs), flush=True)
        baseline_runs.append(run(args.scenario, scenario, os.path.abspath(args.baseline), None))
        runs_here.append(run(args.scenario, scenario, os.path.abspath(args.build), None))
    baseline, result = median_of(baseline_runs), median_of(runs_here)
    print("baseline (%s), the median of %d runs:" % (args.baseline, pairs))
    print_table(baseline)
    print("this build (%s), the median of %d runs, ratios to the baseline's:" % (args.build, pairs))
    print_table(result, baseline)
    print("us per client-tick, this build over the baseline, pair by pair (run alternately):")
    ratios = {}
    for role in result["roles"]:
        ratios[role] = [mine["roles"][role]["us_per_client_tick"] / theirs["roles"][role]["us_per_client_tick"]
                        for mine, theirs in zip(runs_here, baseline_runs)
                        if theirs["roles"][role]["us_per_client_tick"]]
        values = sorted(ratios[role])
        print("  %-8s %s  median %.3fx" % (role, " ".join("%.3f" % r for r in ratios[role]),
                                         values[len(values) // 2] if values else float("nan")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"baseline": baseline, "result": result, "pair_ratios": ratios}, f, indent=2)
            f.write("\n")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("scenario", nargs="?")
    parser.add_argument("--build", default="/tmp/build-bench")
    parser.add_argument("--json", help="write the result here too")
    parser.add_argument("--compare", help="an earlier run's JSON: print each figure's ratio to it")
    parser.add_argument("--profile", metavar="DIR",
                        help="perf record each process over the window; DIR/<name>.top.txt has its top symbols")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run the scenario N times (fresh cluster each) and report the median of each figure")
    parser.add_argument("--tls", action="store_true",
                        help="run over plaintext, then over TLS 1.3, and print TLS's ratio to plaintext")
    parser.add_argument("--websocket", action="store_true",
                        help="run with the bots over TCP, then over WebSocket, and print WebSocket's ratio to TCP")
    parser.add_argument("--baseline", metavar="BUILD",
                        help="alternate runs with this build (the previous version) and print the ratios pair by pair")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list or not args.scenario:
        for name, s in SCENARIOS.items():
            print("%-12s %s" % (name, s["note"]))
        return 0 if args.list else 2
    if args.scenario not in SCENARIOS:
        print("loadtest: no scenario '%s' (--list)" % args.scenario, file=sys.stderr)
        return 2
    # One load test at a time on a box: two would share its cores and both
    # figures would be wrong. A second run waits for the first.
    lock = open(os.path.join(tempfile.gettempdir(), "tessera-loadtest.lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    def runs(tls, websocket=False):
        results = [run(args.scenario, SCENARIOS[args.scenario], os.path.abspath(args.build),
                       os.path.abspath(args.profile) if args.profile and i == 0 else None, tls=tls,
                       websocket=websocket)
                   for i in range(max(1, args.repeat))]
        if len(results) > 1:
            print("%d runs; each figure below is their median" % len(results))
        return results[0] if len(results) == 1 else median_of(results)

    if args.baseline:
        return alternate(args)
    earlier = None
    if args.compare:
        with open(args.compare) as f:
            earlier = json.load(f)
    if args.websocket:
        # The TCP run is the baseline of the WebSocket one, in this run.
        earlier = runs(args.tls)
        print("TCP%s:" % (" (TLS 1.3)" if args.tls else ""))
        print_table(earlier)
        print("WebSocket%s (ratios to TCP):" % (" (wss)" if args.tls else ""))
    elif args.tls:
        # The plaintext run is the baseline of the TLS one, in this run.
        earlier = runs(False)
        print("plaintext:")
        print_table(earlier)
        print("TLS 1.3 (ratios to plaintext):")
    result = runs(args.tls, args.websocket)
    print_table(result, earlier)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
