#!/usr/bin/env python3
"""bench_cells -- what splitting the world into cells costs and saves, on one box.

Runs real clusters (scripts/cluster up) with tessera-bots as the load and
measures, each figure against a baseline run in the same invocation:

1. Scaling. 1,000 bots walking in a 600 x 600 area (tessera-bots --area 300,
   default speed, --calls-per-second 0.2; spawn disc of radius 290, space
   bounds -300..300, 10 NPCs per cellapp) on 1, 2 and 4 cellapps, the
   default space split into one cell per cellapp. Once every bot is in the
   world (the baseapp's registry "clients") and 5 s more, a steady window
   (10 s) reads utime + stime of every cellapp, the baseapp and the bots
   from /proc/<pid>/stat. The figure is the cellapps' total CPU per
   client-tick, cpu_s * 1e6 / (clients * 10 ticks/s * window_s), in us,
   and its ratio to the 1-cellapp run. Per cellapp: reals, ghosts,
   interior_reals, tick_us (registry stats, means over the window). The
   bots' latency p50/p99 come from their JSON report.

2. Ghost traffic. For the 2- and 4-cellapp runs, bytes per ghost per
   second from the cellapps' ghost_bytes stat (its rate over the window,
   per cellapp, from the times its value was seen to change) over the
   cellapps' mean ghost count. Baseline: the previous version (git commit
   10199a1, where every cellapp mirrored every real of every other), built
   in a temporary worktree and run under the same load with 2 cellapps
   (and 1, for its own CPU ratio) through that tree's scripts/cluster.
   That version has no ghost_bytes, so for BOTH versions cellapp-to-cellapp
   bytes are also read from the kernel: `ss -tinpH`, the bytes_acked deltas
   over the window of every TCP socket whose two ends are cellapps of the
   run and one of whose ports is a cellapp's internal port (cluster.json).
   Both ends of a loopback connection are listed, so both directions count.

3. Offloads. 2 cellapps, 1,000 bots standing still (--speed 0) in --area
   100, spawn radius 100. The line (split 0 of the default space) is moved
   with tessera-admin move-line back and forth 10 times between x = -120
   and x = +120; each time the bench waits until one cellapp holds every
   real (registry "reals"). Per move: reals moved (offloads_in delta) /
   time from launching tessera-admin until the registry shows the last one
   arrived. Then the cellapps' offload_p50_us / offload_p99_us (send to
   acknowledgement), and the checks: total reals before == after, the bots'
   report has 0 errors, offloads_reclaimed is 0. This cluster runs with
   heartbeat_ms=100 so the registry shows arrivals within ~0.3 s (stats
   are computed every 200 ms and written at every heartbeat).

Before each cluster starts, the bench waits while a test run is active
(`pgrep -f "meson test"` or `pgrep -f scripts/test`) and, for up to 10
minutes, while something else keeps more than 0.3 cores busy. It measures
the CPU the rest of the machine used during each window (/proc/stat minus
the run's processes); a run during which that passed 0.3 cores is run
again (twice at most). Each configuration runs --repeat times (default 1),
in rounds (1, 2, 4, 1, 2, 4 cellapps); the run with the lowest cellapp CPU
per client-tick is kept and every run's figure is printed. The bots'
latency is over their whole run (logins included). Clusters are always
torn down (scripts/cluster down) and the baseline worktree removed, on
errors and Ctrl-C too.

    bench/bench_cells.py [--build /tmp/build-bench] [--json] [--save FILE] [--repeat N]
                         [--no-baseline] [--no-baseline-one] [--no-offloads]

Python 3 and python3-redis (through scripts/tessera_cluster.py); needs
iproute2's ss, git, meson and ninja
(for the baseline), and a build of this tree (default /tmp/build-bench:
`meson setup /tmp/build-bench -Dwerror=true && ninja -C /tmp/build-bench`).
"""

import argparse
import atexit
import calendar
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
import tessera_cluster  # noqa: E402  (after the path is set)

CLK_TCK = os.sysconf("SC_CLK_TCK")
TICK_HZ = 10

BASELINE_COMMIT = "10199a1"
BASELINE_DIR = "/tmp/tessera-baseline"
RUN_ROOT = "/tmp/tessera-bench-cells"

BOTS = 1000
SEED = 20240601
# Seconds after every bot is in the world before the window opens.
SETTLE_S = 5.0
WINDOW_S = 10.0
POLL_S = 0.05
IN_WORLD_TIMEOUT_S = 90.0
NPCS_PER_CELLAPP = 10

# Scaling load: --area 300 in bounds -300..300, spawn disc 290.
AREA = 300
SPAWN_RADIUS = 290
# Offload load.
OFFLOAD_AREA = 100
OFFLOAD_SPAWN_RADIUS = 100
OFFLOAD_MOVES = 10
OFFLOAD_X = 120.0
OFFLOAD_TIMEOUT_S = 60.0
OFFLOAD_HEARTBEAT_MS = 100

TARGETS = {2: 1.15, 4: 1.3}

_LOG_PROBLEM_RE = re.compile(r" (WARN|ERROR) ")


def say(msg):
    print("[bench-cells %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# ---- the machine ------------------------------------------------------------------


def test_run_active():
    """The pids of a running test suite (meson test, scripts/test), if any."""
    found = []
    for pattern in ("meson test", "scripts/test"):
        proc = subprocess.run(["pgrep", "-f", pattern], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        found += [int(p) for p in proc.stdout.split() if p.strip() and int(p) != os.getpid()]
    return found


_WAITED = [0.0]
# A run during which the rest of the machine used more than this many cores
# is disturbed (a build, a test run): it is run again, up to RETRIES times.
DISTURBED_CORES = 0.3
RETRIES = 2
# Longest wait for a quiet machine (test runs are always waited for).
BUSY_WAIT_MAX_S = 600.0


def machine_busy_cores(seconds=2.0):
    """Cores the whole machine kept busy over the next `seconds`."""
    b0 = machine_busy_ticks()
    time.sleep(seconds)
    return (machine_busy_ticks() - b0) / CLK_TCK / seconds


def wait_until_quiet(interval=20.0):
    """Sleeps while a test run is active (it would disturb our figures and we
    theirs), and while something else keeps more than DISTURBED_CORES busy
    (for at most BUSY_WAIT_MAX_S). Returns the seconds waited (also added
    to _WAITED)."""
    t0 = time.monotonic()
    announced = set()
    while True:
        if test_run_active():
            why = "a test run is active"
        elif time.monotonic() - t0 < BUSY_WAIT_MAX_S and machine_busy_cores() > DISTURBED_CORES:
            why = "the machine is busy with something else"
        else:
            break
        if why not in announced:
            say("%s; waiting (checking every %.0f s)" % (why, interval))
            announced.add(why)
        time.sleep(interval)
    waited = time.monotonic() - t0
    _WAITED[0] += waited
    return waited


def cpu_ticks(pid):
    """utime + stime of pid in clock ticks (None if it is gone)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    # Fields 14 and 15 of stat(5); the list starts at field 3 (state).
    return int(fields[11]) + int(fields[12])


def machine_busy_ticks():
    """All CPUs' non-idle ticks since boot (/proc/stat "cpu" line)."""
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    values = [int(v) for v in parts[:8]]
    idle = values[3] + values[4]
    return sum(values) - idle


def ss_sockets(ports):
    """{(local, peer): (pid, bytes_acked)} for the established TCP sockets
    with a local or peer port in `ports`, from `ss -tinpH`."""
    if not ports:
        return {}
    expr = " or ".join("sport = :%d or dport = :%d" % (p, p) for p in sorted(ports))
    proc = subprocess.run(["ss", "-tinpH", "state", "established", "( %s )" % expr], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=20)
    if proc.returncode != 0:
        raise RuntimeError("ss failed: %s" % proc.stderr.strip())
    out = {}
    current = None
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            cols = line.split()
            # Recv-Q Send-Q Local Peer [users:(...)]
            if len(cols) < 4:
                current = None
                continue
            m = re.search(r"pid=(\d+)", line)
            current = (cols[2], cols[3])
            out[current] = [int(m.group(1)) if m else None, 0]
        elif current is not None:
            m = re.search(r"\bbytes_acked:(\d+)", line)
            if m:
                out[current][1] = int(m.group(1))
    return {k: tuple(v) for k, v in out.items()}


def _port(endpoint):
    return int(endpoint.rsplit(":", 1)[1])


def cellapp_link_bytes(sockets, cellapp_pids, internal_ports):
    """Bytes acked on sockets between two cellapps: both ends owned by
    cellapps of the run, one end a cellapp's internal port. {key: bytes}."""
    owner = {local: pid for (local, _peer), (pid, _b) in sockets.items()}
    out = {}
    for (local, peer), (pid, acked) in sockets.items():
        if pid not in cellapp_pids or owner.get(peer) not in cellapp_pids:
            continue
        if _port(local) not in internal_ports and _port(peer) not in internal_ports:
            continue
        out[(local, peer)] = acked
    return out


# ---- clusters ----------------------------------------------------------------------


_REDIS_BIN_DIR = []


def launcher_env():
    """The environment a tree's scripts/cluster runs in. A baseline's
    launcher only looks for `redis-server` on PATH, which a machine set up
    by scripts/deps (redis-tools alone) does not have: then a directory with
    a symlink of that name to redis-tools' binary (the one Debian's
    redis-server runs: tessera_cluster.find_redis_server) comes first."""
    env = dict(os.environ)
    if shutil.which("redis-server") is None:
        if not _REDIS_BIN_DIR:
            path = tempfile.mkdtemp(prefix="tessera-bench-bin-")
            atexit.register(shutil.rmtree, path, True)
            os.symlink(tessera_cluster.find_redis_server(), os.path.join(path, "redis-server"))
            _REDIS_BIN_DIR.append(path)
        env["PATH"] = _REDIS_BIN_DIR[0] + os.pathsep + env.get("PATH", "")
    return env


def cluster_up(tree, run_dir, build_dir, cellapps, extra):
    """scripts/cluster up of `tree` in run_dir; returns its cluster.json."""
    argv = [sys.executable, os.path.join(tree, "scripts", "cluster"), "up", "--dir", run_dir, "--build", build_dir,
            "--baseapps", "1", "--cellapps", str(cellapps), "--timeout", "60"] + list(extra)
    say("up: %s" % " ".join(argv[1:]))
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120,
                          env=launcher_env())
    if proc.returncode != 0:
        raise RuntimeError("cluster up failed (exit %d):\n%s" % (proc.returncode, proc.stderr))
    with open(os.path.join(run_dir, "cluster.json")) as f:
        return json.load(f)


def cluster_down(tree, run_dir):
    """scripts/cluster down, then this tree's down() as a backstop."""
    try:
        subprocess.run([sys.executable, os.path.join(tree, "scripts", "cluster"), "down", "--dir", run_dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pass
    tessera_cluster.down(run_dir, grace=0.0, quiet=True)


def registry(cluster, redis):
    """{process name: registry hash} for the cluster's baseapps and cellapps."""
    entries = tessera_cluster.registry_entries(redis, cluster.get("cluster_name", "tessera"))
    out = {}
    for p in cluster["processes"]:
        if p["role"] == "redis":
            continue
        e = tessera_cluster.match_entry(entries, p)
        if e is not None:
            out[p["name"]] = e
    return out


def stat(entry, field):
    return tessera_cluster.stat_int(entry, field, 0)


def log_sizes(cluster):
    """{log path: its size now}: log_problems reads up to there, so the
    warnings of the teardown itself (peers gone) are left out."""
    out = {}
    for p in cluster["processes"]:
        path = p.get("log")
        if path:
            try:
                out[path] = os.path.getsize(path)
            except OSError:
                pass
    return out


def log_problems(cluster, sizes=None, limit=12):
    """{process name: {"count", "lines"}}: the WARN/ERROR lines of the run's
    logs (the first `limit`), each read up to sizes[path] if given."""
    out = {}
    for p in cluster["processes"]:
        path = p.get("log")
        if not path:
            continue
        try:
            with open(path, "rb") as f:
                data = f.read() if sizes is None or path not in sizes else f.read(sizes[path])
        except OSError:
            continue
        text = data.decode("utf-8", "replace")
        lines = [line for line in text.splitlines() if _LOG_PROBLEM_RE.search(line) or "PANIC" in line]
        if lines:
            out[p["name"]] = {"count": len(lines), "lines": lines[:limit]}
    return out


def demo_calls(bots_bin):
    """The demo's random calls, for bots that take them by name (--call);
    older bots made the same two calls of their own accord."""
    usage = subprocess.run([bots_bin, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    return ["--call", "base:chat", "--call", "cell:castSpell"] if "--call PART:METHOD" in usage else []


def start_bots(bots_bin, login, run_dir, extra):
    argv = [bots_bin, "--connect", login, "--count", str(BOTS), "--seconds", "600", "--json",
            "--seed", str(SEED)] + demo_calls(bots_bin) + [str(a) for a in extra]
    say("bots: %s" % " ".join(argv))
    out = open(os.path.join(run_dir, "bots.json"), "wb")
    err = open(os.path.join(run_dir, "bots.log"), "wb")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
    finally:
        out.close()
        err.close()
    proc.bench_argv = argv
    proc.bench_dir = run_dir
    return proc


def stop_bots(proc, timeout=30.0):
    """SIGINT (they end the run and print their report), then the report."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    with open(os.path.join(proc.bench_dir, "bots.json"), "rb") as f:
        text = f.read().decode("utf-8", "replace")
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                report = json.loads(line)
                report["_exit_code"] = proc.returncode
                return report
            except ValueError:
                continue
    raise RuntimeError("tessera-bots printed no report (exit %s); see %s" % (proc.returncode, proc.bench_dir))


def kill_bots(proc):
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def wait_in_world(cluster, redis, bots_proc, want_reals):
    """Until the baseapp counts every bot as a client in the world and the
    cellapps' reals add up to want_reals. Returns the seconds it took."""
    t0 = time.monotonic()
    while True:
        regs = registry(cluster, redis)
        clients = sum(stat(e, "clients") for e in regs.values() if e.get("role") == "baseapp")
        reals = sum(stat(e, "reals") for e in regs.values() if e.get("role") == "cellapp")
        if clients >= BOTS and reals >= want_reals:
            return time.monotonic() - t0
        if bots_proc.poll() is not None:
            raise RuntimeError("tessera-bots exited early (status %s); see %s" % (bots_proc.returncode,
                                                                                 bots_proc.bench_dir))
        if time.monotonic() - t0 > IN_WORLD_TIMEOUT_S:
            raise RuntimeError("only %d of %d bots in the world (reals %d of %d) after %.0f s"
                               % (clients, BOTS, reals, want_reals, IN_WORLD_TIMEOUT_S))
        time.sleep(0.2)


# ---- one load run ----------------------------------------------------------------------


def measure_window(cluster, redis, bots_proc, window_s):
    """CPU, kernel bytes between cellapps and registry stats over one window."""
    cellapps = [p for p in cluster["processes"] if p["role"] == "cellapp"]
    baseapps = [p for p in cluster["processes"] if p["role"] == "baseapp"]
    cellapp_pids = {p["pid"] for p in cellapps}
    internal_ports = {p["internal_port"] for p in cellapps if p.get("internal_port")}
    pids = {p["name"]: p["pid"] for p in cellapps + baseapps}
    pids["bots"] = bots_proc.pid

    # Registry series: (seen at, hash) whenever a cellapp's hash changes.
    series = {p["name"]: [] for p in cellapps}

    def poll_registry():
        now = time.monotonic()
        regs = registry(cluster, redis)
        for name in series:
            e = regs.get(name)
            if e is None:
                continue
            s = series[name]
            if not s or s[-1][1] != e:
                s.append((now, e))
        return regs

    poll_registry()
    ss0 = cellapp_link_bytes(ss_sockets(internal_ports), cellapp_pids, internal_ports)
    busy0 = machine_busy_ticks()
    cpu0 = {name: cpu_ticks(pid) for name, pid in pids.items()}
    t0 = time.monotonic()
    ghost_samples = {name: [] for name in series}
    tick_samples = {name: [] for name in series}
    interior_samples = {name: [] for name in series}
    reals_samples = {name: [] for name in series}
    next_sample = t0
    while True:
        now = time.monotonic()
        if now - t0 >= window_s:
            break
        regs = poll_registry()
        if now >= next_sample:
            next_sample += 0.5
            for name in series:
                e = regs.get(name)
                if e is None:
                    continue
                ghost_samples[name].append(stat(e, "ghosts"))
                reals_samples[name].append(stat(e, "reals"))
                interior_samples[name].append(stat(e, "interior_reals"))
                tick_samples[name].append(stat(e, "tick_us"))
        time.sleep(POLL_S)
    cpu1 = {name: cpu_ticks(pid) for name, pid in pids.items()}
    busy1 = machine_busy_ticks()
    t1 = time.monotonic()
    ss1 = cellapp_link_bytes(ss_sockets(internal_ports), cellapp_pids, internal_ports)
    # Keep polling briefly so every cellapp's series gets a change after t1.
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        poll_registry()
        time.sleep(POLL_S)
    window = t1 - t0

    cpu = {}
    for name in pids:
        if cpu0[name] is None or cpu1[name] is None:
            raise RuntimeError("%s (pid %d) went away during the window" % (name, pids[name]))
        cpu[name] = (cpu1[name] - cpu0[name]) / CLK_TCK
    ours = sum(cpu.values())
    machine = (busy1 - busy0) / CLK_TCK
    link_bytes = sum(b - ss0.get(k, 0) for k, b in ss1.items())

    per_cellapp = []
    ghost_byte_rate = 0.0
    have_ghost_bytes = True
    for p in cellapps:
        name = p["name"]
        # The first entry is whatever was there at the start; the others
        # were seen within POLL_S of being written.
        s = series[name][1:]
        first, last = (s[0], s[-1]) if s else (None, None)
        row = {
            "name": name,
            "cpu_s": cpu[name],
            "reals": _mean(reals_samples[name]),
            "ghosts": _mean(ghost_samples[name]),
            "interior_reals": _mean(interior_samples[name]),
            "tick_us": _mean(tick_samples[name]),
            # Offloads of players crossing lines, send to acknowledgement,
            # over the cellapp's life so far (new version only).
            "offload_p50_us": stat(regs.get(name), "offload_p50_us"),
            "offload_p99_us": stat(regs.get(name), "offload_p99_us"),
        }
        if first is None or "ghost_bytes" not in last[1]:
            have_ghost_bytes = False
            row["ghost_bytes_per_s"] = None
        else:
            dt = last[0] - first[0]
            rate = (stat(last[1], "ghost_bytes") - stat(first[1], "ghost_bytes")) / dt if dt > 0 else 0.0
            row["ghost_bytes_per_s"] = rate
            ghost_byte_rate += rate
            offloads = (stat(last[1], "offloads_out") - stat(first[1], "offloads_out")) / dt if dt > 0 else 0.0
            row["offloads_out_per_s"] = offloads
        per_cellapp.append(row)

    ghosts = sum(r["ghosts"] for r in per_cellapp)
    cellapp_cpu = sum(r["cpu_s"] for r in per_cellapp)
    link_rate = link_bytes / window
    return {
        "window_s": window,
        "cellapp_cpu_s": cellapp_cpu,
        "cpu_us_per_client_tick": cellapp_cpu * 1e6 / (BOTS * TICK_HZ * window),
        "cellapp_cores": cellapp_cpu / window,
        "baseapp_cores": sum(cpu[p["name"]] for p in baseapps) / window,
        "bots_cores": cpu["bots"] / window,
        "other_cores": max(0.0, machine - ours) / window,
        "cellapps": per_cellapp,
        "ghosts": ghosts,
        "ghost_bytes_per_s": ghost_byte_rate if have_ghost_bytes else None,
        "ghost_bytes_per_ghost_s": (ghost_byte_rate / ghosts if have_ghost_bytes and ghosts else None),
        "link_bytes_per_s": link_rate,
        "link_sockets": len(ss1),
        "link_bytes_per_ghost_s": link_rate / ghosts if ghosts else None,
    }


def _mean(values):
    return statistics.fmean(values) if values else 0.0


def run_load(label, tree, build_dir, bots_bin, cellapps, up_extra, run_root, window_s):
    """One scaling run: a cluster, the walking bots, one window."""
    wait_until_quiet()
    run_dir = os.path.join(run_root, label)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    cluster = None
    bots = None
    redis = None
    try:
        cluster = cluster_up(tree, run_dir, build_dir, cellapps, up_extra)
        redis = tessera_cluster.redis_client("127.0.0.1", cluster["redis_port"], timeout=5.0)
        bots = start_bots(bots_bin, cluster["login"], run_dir,
                          ["--area", AREA, "--calls-per-second", "0.2"])
        in_world_s = wait_in_world(cluster, redis, bots, BOTS + NPCS_PER_CELLAPP * cellapps)
        say("%s: %d bots in the world after %.1f s; settling %.0f s" % (label, BOTS, in_world_s, SETTLE_S))
        time.sleep(SETTLE_S)
        disturbed = test_run_active()
        result = measure_window(cluster, redis, bots, window_s)
        disturbed = disturbed or test_run_active()
        report = stop_bots(bots)
        bots = None
        result.update({
            "label": label,
            "cellapp_count": cellapps,
            "in_world_s": in_world_s,
            "disturbed_by_tests": bool(disturbed),
            "bots": _bots_summary(report),
            "up_args": up_extra,
        })
        say("%s: %.2f us/client-tick (cellapps %.2f cores, baseapp %.2f, bots %.2f, others %.2f), "
            "ghosts %.0f, cellapp links %.0f B/s"
            % (label, result["cpu_us_per_client_tick"], result["cellapp_cores"], result["baseapp_cores"],
               result["bots_cores"], result["other_cores"], result["ghosts"], result["link_bytes_per_s"]))
        return result
    finally:
        sizes = log_sizes(cluster) if cluster is not None else None
        kill_bots(bots)
        if redis is not None:
            redis.close()
        cluster_down(tree, run_dir)
        if cluster is not None:
            problems = log_problems(cluster, sizes)
            if problems:
                _record_problems(label, problems)


_PROBLEMS = {}


def _record_problems(label, problems):
    _PROBLEMS[label] = problems
    for name, p in problems.items():
        say("%s: %s logged %d WARN/ERROR lines, e.g. %s" % (label, name, p["count"], p["lines"][0]))


def _bots_summary(report):
    keys = ("logged_in", "in_world_at_end", "errors", "error_reasons", "corrections", "latency_p50_ms",
            "latency_p99_ms", "latency_max_ms", "latency_samples", "update_gaps", "flickers", "seconds",
            "interrupted", "_exit_code")
    return {k: report.get(k) for k in keys}


def best_of(runs):
    """The run with the least cellapp CPU per client-tick, among the
    undisturbed ones if there are any."""
    quiet = [r for r in runs if r["other_cores"] <= DISTURBED_CORES and not r["disturbed_by_tests"]]
    return min(quiet or runs, key=lambda r: r["cpu_us_per_client_tick"])


def run_load_quiet(*args):
    """run_load, again (up to RETRIES times) if the machine was disturbed."""
    for attempt in range(RETRIES + 1):
        r = run_load(*args)
        if (r["other_cores"] <= DISTURBED_CORES and not r["disturbed_by_tests"]) or attempt == RETRIES:
            r["attempts"] = attempt + 1
            return r
        say("%s: the rest of the machine used %.2f cores; running it again" % (r["label"], r["other_cores"]))


# ---- offloads ----------------------------------------------------------------------------


def run_offloads(build_dir, run_root):
    wait_until_quiet()
    label = "offloads"
    run_dir = os.path.join(run_root, label)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    bots_bin = os.path.join(build_dir, "client", "tessera-bots")
    up_extra = ["--spawn-radius", str(OFFLOAD_SPAWN_RADIUS), "--set", "cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP,
                "--set", "heartbeat_ms=%d" % OFFLOAD_HEARTBEAT_MS]
    cluster = None
    bots = None
    redis = None
    try:
        cluster = cluster_up(REPO_ROOT, run_dir, build_dir, 2, up_extra)
        redis = tessera_cluster.redis_client("127.0.0.1", cluster["redis_port"], timeout=5.0)
        bots = start_bots(bots_bin, cluster["login"], run_dir, ["--speed", "0", "--area", OFFLOAD_AREA])
        want = BOTS + 2 * NPCS_PER_CELLAPP
        wait_in_world(cluster, redis, bots, want)
        time.sleep(2.0)
        regs = registry(cluster, redis)
        names = sorted(n for n, e in regs.items() if e.get("role") == "cellapp")
        reals_before = sum(stat(regs[n], "reals") for n in names)
        say("offloads: %d reals (%s); moving the line %d times" % (
            reals_before, ", ".join("%s %d" % (n, stat(regs[n], "reals")) for n in names), OFFLOAD_MOVES))
        moves = []
        holder = None
        for i in range(OFFLOAD_MOVES):
            at = -OFFLOAD_X if i % 2 == 0 else OFFLOAD_X
            regs = registry(cluster, redis)
            in_before = sum(stat(regs[n], "offloads_in") for n in names)
            wall0 = time.time()
            t0 = time.monotonic()
            tessera_cluster.admin(cluster, ["move-line", "default", "0", "%g" % at])
            while True:
                regs = registry(cluster, redis)
                reals = {n: stat(regs.get(n), "reals") for n in names}
                full = [n for n in names if reals[n] == reals_before]
                if full and full[0] != holder and all(reals[n] == 0 for n in names if n != full[0]):
                    t1 = time.monotonic()
                    holder = full[0]
                    break
                if time.monotonic() - t0 > OFFLOAD_TIMEOUT_S:
                    raise RuntimeError("move %d to x=%g: reals still %s after %.0f s"
                                       % (i + 1, at, reals, OFFLOAD_TIMEOUT_S))
                time.sleep(0.02)
            moved = sum(stat(regs[n], "offloads_in") for n in names) - in_before
            seconds = t1 - t0
            moves.append({"to_x": at, "reals_moved": moved, "seconds": seconds, "wall_start": wall0,
                          "offloads_per_s": moved / seconds if seconds > 0 else None, "holder": holder})
            say("offloads: move %d to x=%+g: %d reals to %s in %.2f s (%.0f/s)"
                % (i + 1, at, moved, holder, seconds, moved / seconds if seconds > 0 else 0))
            time.sleep(0.5)
        time.sleep(1.0)
        regs = registry(cluster, redis)
        reals_after = sum(stat(regs[n], "reals") for n in names)
        per_cellapp = [{"name": n, "offload_p50_us": stat(regs[n], "offload_p50_us"),
                        "offload_p99_us": stat(regs[n], "offload_p99_us"),
                        "offload_acks": stat(regs[n], "offload_acks"),
                        "offloads_out": stat(regs[n], "offloads_out"), "offloads_in": stat(regs[n], "offloads_in"),
                        "offloads_reclaimed": stat(regs[n], "offloads_reclaimed"),
                        "reals": stat(regs[n], "reals"), "ghosts": stat(regs[n], "ghosts")} for n in names]
        disturbed = test_run_active()
        report = stop_bots(bots)
        bots = None
        layout_seen(cluster, moves)
        rates = [m["offloads_per_s"] for m in moves if m["offloads_per_s"]]
        full_moves = [m for m in moves[1:]]
        return {
            "moves": moves,
            "offloads_per_s_median": statistics.median(rates) if rates else None,
            "offloads_per_s_best": max(rates) if rates else None,
            "seconds_median_full_moves": statistics.median(m["seconds"] for m in full_moves) if full_moves else None,
            "cellapps": per_cellapp,
            "offload_p50_us_max": max(c["offload_p50_us"] for c in per_cellapp),
            "offload_p99_us_max": max(c["offload_p99_us"] for c in per_cellapp),
            "reals_before": reals_before,
            "reals_after": reals_after,
            "offloads_reclaimed": sum(c["offloads_reclaimed"] for c in per_cellapp),
            "bots": _bots_summary(report),
            "disturbed_by_tests": bool(disturbed),
            "up_args": up_extra,
            "heartbeat_ms": OFFLOAD_HEARTBEAT_MS,
        }
    finally:
        sizes = log_sizes(cluster) if cluster is not None else None
        kill_bots(bots)
        if redis is not None:
            redis.close()
        cluster_down(REPO_ROOT, run_dir)
        if cluster is not None:
            problems = log_problems(cluster, sizes)
            if problems:
                _record_problems(label, problems)


_EPOCH_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z .* space '[^']*' epoch (\d+):")


def layout_seen(cluster, moves):
    """Adds to each move "layout_seen_s": from launching tessera-admin until
    the first cellapp logged the new epoch (its log's UTC timestamps)."""
    seen = []
    for p in cluster["processes"]:
        if p["role"] != "cellapp":
            continue
        try:
            with open(p["log"], "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        for line in text.splitlines():
            m = _EPOCH_RE.match(line)
            if m:
                t = calendar.timegm(time.strptime(m.group(1)[:19], "%Y-%m-%dT%H:%M:%S")) + int(m.group(1)[20:]) / 1e3
                seen.append(t)
    seen.sort()
    for m in moves:
        later = [t for t in seen if t >= m["wall_start"] - 0.002]
        m["layout_seen_s"] = later[0] - m["wall_start"] if later else None


# ---- the baseline tree -----------------------------------------------------------------------


def baseline_setup(commit, path):
    """A worktree of `commit` at path, built in path/build. Returns the build dir."""
    if os.path.exists(path):
        baseline_remove(path)
    say("baseline: worktree of %s at %s" % (commit, path))
    subprocess.run(["git", "-C", REPO_ROOT, "worktree", "add", "--detach", path, commit], check=True,
                   stdout=subprocess.DEVNULL)
    build = os.path.join(path, "build")
    wait_until_quiet()
    say("baseline: building (meson setup %s && ninja -C %s)" % (build, build))
    t0 = time.monotonic()
    # From inside the worktree: `meson setup DIR` takes the current
    # directory as the source.
    for argv in (["meson", "setup", build], ["ninja", "-C", build]):
        proc = subprocess.run(argv, cwd=path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise RuntimeError("%s failed:\n%s" % (" ".join(argv), proc.stdout[-4000:]))
    say("baseline: built in %.0f s" % (time.monotonic() - t0))
    return build


def baseline_remove(path):
    subprocess.run(["git", "-C", REPO_ROOT, "worktree", "remove", "--force", path], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    shutil.rmtree(path, ignore_errors=True)


# ---- the report ----------------------------------------------------------------------------


def _f(value, fmt="%.2f", none="-"):
    return none if value is None else fmt % value


def _ratio(a, b):
    return a / b if a is not None and b else None


def format_report(res):
    out = []
    new = res["new"]
    one = new.get(1)
    out.append("1. scaling: %d bots, --area %d, --calls-per-second 0.2, %.0f s window (cellapp CPU per "
               "client-tick = cpu_s * 1e6 / (clients * 10 * window))" % (BOTS, AREA, res["window_s"]))
    out.append("")
    head = ("version", "cellapps", "us/client-tick", "runs", "ratio", "target", "cellapp cores", "baseapp",
            "bots", "others", "p50 ms", "p99 ms", "errors")
    rows = [head]
    for version, runs in (("new", new), ("old (mirror-all)", res.get("old") or {})):
        base = runs.get(1)
        for n in sorted(runs):
            r = runs[n]
            ratio = _ratio(r["cpu_us_per_client_tick"], base["cpu_us_per_client_tick"] if base else None)
            target = TARGETS.get(n) if version == "new" else None
            verdict = "-"
            if target is not None and ratio is not None:
                verdict = "<= %.2f %s" % (target, "ok" if ratio <= target else "MISSED")
            each = "/".join("%.1f" % v for v in r.get("runs_cpu_us_per_client_tick", []))
            rows.append((version, str(n), _f(r["cpu_us_per_client_tick"]), each, _f(ratio, "%.2fx"), verdict,
                         _f(r["cellapp_cores"]), _f(r["baseapp_cores"]), _f(r["bots_cores"]),
                         _f(r["other_cores"]), _f(r["bots"]["latency_p50_ms"]), _f(r["bots"]["latency_p99_ms"]),
                         str(r["bots"]["errors"])))
    out += _table(rows)
    out.append("")
    out.append("per cellapp (means over the window):")
    rows = [("version", "cellapps", "cellapp", "reals", "ghosts", "interior", "tick_us", "cpu cores",
             "offloads/s", "offload p50/p99 ms")]
    for version, runs in (("new", new), ("old", res.get("old") or {})):
        for n in sorted(runs):
            r = runs[n]
            for c in r["cellapps"]:
                rows.append((version, str(n), c["name"], "%.0f" % c["reals"], "%.0f" % c["ghosts"],
                             "%.0f" % c["interior_reals"] if version == "new" else "-", "%.0f" % c["tick_us"],
                             "%.2f" % (c["cpu_s"] / r["window_s"]), _f(c.get("offloads_out_per_s"), "%.1f"),
                             "%.1f/%.1f" % (c["offload_p50_us"] / 1000.0, c["offload_p99_us"] / 1000.0)
                             if c.get("offload_p50_us") is not None and c.get("offload_p99_us") is not None
                             else "-"))
    out += _table(rows)
    out.append("")
    out.append("2. ghost traffic between cellapps (ss: bytes_acked of cellapp-to-cellapp sockets, both directions)")
    out.append("")
    rows = [("version", "cellapps", "ghosts", "ghosts/cellapp", "ghost_bytes B/s", "B/ghost/s (stat)",
             "ss B/s", "B/ghost/s (ss)", "ss B/s new/old")]
    old2 = (res.get("old") or {}).get(2)
    for version, runs in (("new", new), ("old (mirror-all)", res.get("old") or {})):
        for n in sorted(runs):
            if n < 2:
                continue
            r = runs[n]
            vs = _ratio(r["link_bytes_per_s"], old2["link_bytes_per_s"]) if version == "new" and old2 else None
            rows.append((version, str(n), "%.0f" % r["ghosts"], "%.0f" % (r["ghosts"] / n),
                         _f(r["ghost_bytes_per_s"], "%.0f"), _f(r["ghost_bytes_per_ghost_s"], "%.1f"),
                         "%.0f" % r["link_bytes_per_s"], _f(r["link_bytes_per_ghost_s"], "%.1f"),
                         _f(vs, "%.3fx")))
    out += _table(rows)
    off = res.get("offloads")
    if off:
        out.append("")
        out.append("3. offloads: 2 cellapps, %d bots still (--speed 0 --area %d, spawn radius %d), line moved "
                   "%d times between x=-%g and x=+%g (heartbeat_ms=%d)"
                   % (BOTS, OFFLOAD_AREA, OFFLOAD_SPAWN_RADIUS, OFFLOAD_MOVES, OFFLOAD_X, OFFLOAD_X,
                      off["heartbeat_ms"]))
        out.append("")
        rows = [("move", "to x", "reals moved", "seconds", "offloads/s", "layout seen s")]
        for i, m in enumerate(off["moves"]):
            rows.append((str(i + 1), "%+g" % m["to_x"], str(m["reals_moved"]), "%.2f" % m["seconds"],
                         _f(m["offloads_per_s"], "%.0f"), _f(m.get("layout_seen_s"), "%.3f")))
        out += _table(rows)
        out.append("")
        out.append("offloads/s: median %s, best %s" % (_f(off["offloads_per_s_median"], "%.0f"),
                                                       _f(off["offloads_per_s_best"], "%.0f")))
        for c in off["cellapps"]:
            over = " (past the histogram's 1 s range: the maximum)" if c["offload_p99_us"] > 1000000 else ""
            out.append("%s: offload p50 %d us, p99 %d us%s over %d acks; out %d, in %d, reclaimed %d"
                       % (c["name"], c["offload_p50_us"], c["offload_p99_us"], over, c["offload_acks"],
                          c["offloads_out"], c["offloads_in"], c["offloads_reclaimed"]))
        lost = off["reals_before"] - off["reals_after"]
        out.append("reals before %d, after %d (%s); bots errors %s; offloads_reclaimed %d"
                   % (off["reals_before"], off["reals_after"], "none lost" if lost == 0 else "%d LOST" % lost,
                      off["bots"]["errors"], off["offloads_reclaimed"]))
    if res.get("problems"):
        out.append("")
        out.append("WARN/ERROR lines in the logs:")
        for label, procs in res["problems"].items():
            for name, p in procs.items():
                out.append("  %s %s: %d lines" % (label, name, p["count"]))
                for line in p["lines"][:5]:
                    out.append("    " + line)
    if res.get("disturbed"):
        out.append("")
        out.append("a test run was active during: %s" % ", ".join(res["disturbed"]))
    out.append("")
    out.append("bench took %.0f s (%.0f s waiting for test runs)" % (res["seconds"], res["waited_s"]))
    return "\n".join(out)


def _table(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


# ---- main ----------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/bench_cells.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="/tmp/build-bench", help="build of this tree (absolute path)")
    ap.add_argument("--json", action="store_true", help="print every figure as one JSON object")
    ap.add_argument("--save", metavar="FILE", help="also write the JSON object to FILE")
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration; the best is kept")
    ap.add_argument("--window", type=float, default=WINDOW_S, help="seconds of the steady window")
    ap.add_argument("--cellapps", default="1,2,4", help="cellapp counts of the new version")
    ap.add_argument("--no-baseline", action="store_true", help="skip the mirror-all version")
    ap.add_argument("--no-baseline-one", action="store_true", help="skip the mirror-all version's 1-cellapp run")
    ap.add_argument("--no-offloads", action="store_true")
    ap.add_argument("--baseline-commit", default=BASELINE_COMMIT)
    ap.add_argument("--baseline-dir", default=BASELINE_DIR)
    ap.add_argument("--run-root", default=RUN_ROOT, help="run directories go here")
    args = ap.parse_args(argv)

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    build = os.path.abspath(args.build)
    for rel in ("cellapp/tessera-cellapp", "baseapp/tessera-baseapp", "client/tessera-bots", "client/tessera-admin"):
        if not os.access(os.path.join(build, rel), os.X_OK):
            print("bench_cells: %s not built; run: meson setup %s -Dwerror=true && ninja -C %s"
                  % (os.path.join(build, rel), build, build), file=sys.stderr)
            return 2
    os.makedirs(args.run_root, exist_ok=True)
    t_start = time.monotonic()
    wait_until_quiet()
    res = {"window_s": args.window, "bots": BOTS, "seed": SEED, "repeat": args.repeat, "new": {}, "old": {},
           "machine_cpus": os.cpu_count(), "baseline_commit": args.baseline_commit}
    baseline_made = False
    try:
        new_bots = os.path.join(build, "client", "tessera-bots")
        new_extra = ["--spawn-radius", str(SPAWN_RADIUS), "--bounds=%d,%d,%d,%d" % (-AREA, -AREA, AREA, AREA),
                     "--set", "cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]
        # Rounds of every count (1, 2, 4, 1, 2, 4): a passing disturbance
        # then hits one run of a configuration, not all of them.
        counts = [int(v) for v in args.cellapps.split(",") if v.strip()]
        runs = {n: [] for n in counts}
        for k in range(args.repeat):
            for n in counts:
                runs[n].append(run_load_quiet("new-%d-%d" % (n, k + 1), REPO_ROOT, build, new_bots, n, new_extra,
                                        args.run_root, args.window))
        for n in counts:
            res["new"][n] = best_of(runs[n])
            res["new"][n]["runs_cpu_us_per_client_tick"] = [r["cpu_us_per_client_tick"] for r in runs[n]]
        if not args.no_offloads:
            res["offloads"] = run_offloads(build, args.run_root)
        if not args.no_baseline:
            old_build = baseline_setup(args.baseline_commit, args.baseline_dir)
            baseline_made = True
            old_bots = os.path.join(old_build, "client", "tessera-bots")
            old_extra = ["--set", "cellapp.spawn_radius=%d" % SPAWN_RADIUS,
                         "--set", "cellapp.world_min_x=%d" % -AREA, "--set", "cellapp.world_max_x=%d" % AREA,
                         "--set", "cellapp.world_min_z=%d" % -AREA, "--set", "cellapp.world_max_z=%d" % AREA,
                         "--set", "cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]
            counts = [2] if args.no_baseline_one else [1, 2]
            runs = {n: [] for n in counts}
            for k in range(args.repeat):
                for n in counts:
                    runs[n].append(run_load_quiet("old-%d-%d" % (n, k + 1), args.baseline_dir, old_build, old_bots, n,
                                            old_extra, args.run_root, args.window))
            for n in counts:
                res["old"][n] = best_of(runs[n])
                res["old"][n]["runs_cpu_us_per_client_tick"] = [r["cpu_us_per_client_tick"] for r in runs[n]]
    except KeyboardInterrupt:
        say("interrupted; everything is torn down")
        return 130
    finally:
        if baseline_made or os.path.exists(args.baseline_dir):
            say("baseline: removing the worktree %s" % args.baseline_dir)
            baseline_remove(args.baseline_dir)
    res["problems"] = _PROBLEMS
    res["disturbed"] = [r["label"] for v in ("new", "old") for r in res[v].values() if r["disturbed_by_tests"]]
    if res.get("offloads") and res["offloads"]["disturbed_by_tests"]:
        res["disturbed"].append("offloads")
    res["seconds"] = time.monotonic() - t_start
    res["waited_s"] = _WAITED[0]
    if args.save:
        with open(args.save, "w") as f:
            json.dump(res, f, indent=2, default=str)
            f.write("\n")
    if args.json:
        json.dump(res, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(format_report(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
