#!/usr/bin/env python3
"""bench_recovery -- a cellapp killed (SIGKILL) under load: how long its
clients wait, how old the state they come back with is, whether anyone or
anything is lost, what the survivors' ticks do meanwhile, and what the
backups cost before it happens; each figure against BigWorld's published
figures and against this tree before recovery, in the same run.

One run (one command, a fresh cluster, torn down at the end):

  - scripts/cluster up: 3 cellapps in 3 columns of the default space (bounds
    -(A+10)..A+10, spawn disc of radius A = --area), --baseapps baseapps,
    cellapp.game.npc_count=--npcs stationary NPCs per cellapp (spawned in the
    disc), the balancer off (the lines stay where the bench puts them; the
    lease holder still decides deaths and hands cells over);
  - the victim: the middle column's cellapp unless it holds the balancer
    lease (then the left one); --leader kills the lease holder instead. The
    two lines are moved (tessera-admin move-line) so that the victim's
    column holds --victim-share of a uniform disc, the others half the
    rest each;
  - tessera-bots: --bots bots walking (--area, --speed, --calls-per-second
    0.2, --verify-aoi, the last --settle-seconds standing still);
  - once every bot is in the world (the baseapps' "clients") and every
    entity is real (cellapps' "reals" = bots + 3 x npcs), --settle seconds
    more; then a --window s baseline: every ~100 ms each cellapp's registry
    hash (tick_us; snapshot_us and snapshots) and its /metrics
    (tessera_tick_seconds histogram, tessera_cell_backups_total,
    tessera_cell_backup_bytes_total); utime+stime from /proc over the window;
  - the victim dumps its state (SIGUSR1: what it holds), then SIGKILL; its
    wall time is the kill's time. The same sampling of the survivors for
    --window s after the kill; then the bench waits for the survivors'
    restores to stop (restores_pending 0, no change for 2 s);
  - the survivors dump their state (SIGUSR1) until every entity is real
    exactly once, first while the bots walk, then again once they stand
    still (or the bots end); the bots end on their own, check their views
    (--verify-aoi) and report.

Figures: kill -> EntityRestored at each restored client (the bots'
restore_wall_ms minus the kill's wall time) p50/p99/max; the age of the
state each came back with (the bots' restore_age_ms; per entity, players and
NPCs, and from a ghost or a backup, from the survivors' logs) p50/p99/max;
clients dropped (logged_in - in_world_at_end) and the bots' errors;
entities lost or real twice (survivors' dumps against bots + NPCs); the
survivors' tick before and after (registry tick_us samples p99/max, and
every tick from the histogram: how many over 100 ms, the highest bucket);
backups: delta(snapshot_us) / delta(wall) (share of one core), the same
over the cellapp's own CPU, and delta(snapshot_bytes) / dt / reals.

Baselines (not measured here, stated in bench/README.md): BigWorld's
figures (a ~2 s pause; restored data up to twice the 10 s backup period
old; entities without a base not restored), and this tree before recovery
(commit eb1e6a0): every client the victim held told to log in again after
cell_lost_grace_ms (5 s there) with its entity as of its last writeToDB
(autosave_interval_ms, 300 s), every entity without a base lost.

    bench/bench_recovery.py [--build DIR] [--bots 1400] [--npcs 200] [--victim-share 0.5] [--leader]
                            [--baseapps 1] [--json FILE] [--repeat N] [--keep]

Exit status 0 when every goal was met, 1 when one was missed.

Python 3 and python3-redis (through scripts/tessera_cluster.py).
"""

import argparse
import calendar
import fcntl
import json
import math
import os
import re
import shutil
import signal
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
TICK_MS = 1000 // TICK_HZ
SEED = 20240601
CELLAPPS = ["cellapp-1", "cellapp-2", "cellapp-3"]
SAMPLE_S = 0.1
# Seconds past the login spread the bots may take to be in the world.
LOGIN_SLACK_S = 20

# BigWorld (the comparison, not measured): the pause a CellApp's death
# costs its clients, the backup period (bw.xml cellApp/backupPeriod) and
# "this copy can be up to twice the backup period" old (Server Programming
# Guide, Fault Tolerance); "cell entities without a base entity are not
# backed up, and therefore will not be restored" (Server Operations Guide).
BIGWORLD_PAUSE_MS = 2000
BIGWORLD_BACKUP_PERIOD_MS = 10000
BIGWORLD_MAX_AGE_MS = 2 * BIGWORLD_BACKUP_PERIOD_MS
# This tree before recovery (eb1e6a0): a client whose cell part died waited
# cell_lost_grace_ms (5 s) and was told to log in again; its entity came
# back from its last writeToDB (autosave every autosave_interval_ms, 300 s).
BEFORE_COMMIT = "eb1e6a0"
BEFORE_GRACE_MS = 5000
BEFORE_AUTOSAVE_MS = 300000

# cell_stream_gap_ms (2 s) and a second: a gap given up this soon after a
# restore is the restored stream waiting.
RESTORE_GAP_WINDOW_MS = 3000

GOAL_RESTORE_P99_MS = 2000
GOAL_BACKUP_AGE_MS = 1000
GOAL_GHOST_AGE_MS = TICK_MS
GOAL_BACKUP_SHARE = 0.05

LOCK_PATH = os.path.join(tempfile.gettempdir(), "tessera-loadtest.lock")
TEST_PATTERNS = ("meson test", "scripts/test", "tests/integration/test_")
BUSY_CORES = 0.3


def say(msg):
    print("[bench-recovery %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# ---- the machine ------------------------------------------------------------------


def cpu_ticks(pid):
    """utime + stime of pid in clock ticks (None once it is gone)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def machine_busy_ticks():
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:9]]
    return sum(values) - values[3] - values[4]


def test_runs():
    found = []
    for pattern in TEST_PATTERNS:
        proc = subprocess.run(["pgrep", "-f", pattern], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        found += [int(p) for p in proc.stdout.split() if int(p) != os.getpid()]
    return found


def wait_until_quiet(max_wait_s):
    """Waits (up to max_wait_s) while a test run is active or something else
    keeps more than BUSY_CORES busy. Returns the seconds waited."""
    t0 = time.monotonic()
    told = set()
    while time.monotonic() - t0 < max_wait_s:
        if test_runs():
            why = "a test run is active"
        else:
            b0 = machine_busy_ticks()
            time.sleep(2.0)
            if (machine_busy_ticks() - b0) / CLK_TCK / 2.0 <= BUSY_CORES:
                break
            why = "the machine is busy"
        if why not in told:
            say("%s; waiting (at most %.0f s in all)" % (why, max_wait_s))
            told.add(why)
        time.sleep(5.0)
    return time.monotonic() - t0


def build_source(build):
    """The source tree the build was configured from (meson-info), or this
    script's."""
    try:
        with open(os.path.join(build, "meson-info", "meson-info.json")) as f:
            return json.load(f)["directories"]["source"]
    except (OSError, ValueError, KeyError):
        return REPO_ROOT


def build_commit(build):
    return subprocess.run(["git", "-C", build_source(build), "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True).stdout.strip()


def tree_changes(build):
    """C, header and meson files of the build's source tree that differ
    from its commit (another engineer's work in progress is in the build)."""
    out = subprocess.run(["git", "-C", build_source(build), "status", "--porcelain", "--", "*.c", "*.h", "*.cpp", "*.proto",
                          "*meson.build"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return [line[3:] for line in out.splitlines() if line.strip()]


def binaries_mtime(build):
    return [os.path.getmtime(os.path.join(build, rel)) for rel in
            ("cellapp/tessera-cellapp", "baseapp/tessera-baseapp", "client/tessera-bots")]


def build_type(build):
    try:
        with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
            return next(o["value"] for o in json.load(f) if o["name"] == "buildtype")
    except (OSError, ValueError, StopIteration):
        return "?"


# ---- the cluster ------------------------------------------------------------------


class Run:
    """One cluster, its processes and its Redis."""

    def __init__(self, info):
        self.info = info
        self.dir = info["dir"]
        self.redis = tessera_cluster.redis_client("127.0.0.1", info["redis_port"], timeout=5.0)
        self.procs = {p["name"]: p for p in info["processes"]}
        self.admin_urls = {}

    def registry(self):
        """{name: registry hash} of our cellapps and baseapps (those registered)."""
        entries = tessera_cluster.registry_entries(self.redis, self.info.get("cluster_name", "tessera"))
        out = {}
        for name, p in self.procs.items():
            if p["role"] in ("cellapp", "baseapp"):
                e = tessera_cluster.match_entry(entries, p)
                if e is not None:
                    out[name] = e
        return out

    def metrics(self, name):
        """{sample name with labels: value} of one process's /metrics (None if it does not answer)."""
        url = self.admin_urls.get(name)
        if url is None:
            return None
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=2) as response:
                text = response.read().decode()
        except OSError:
            return None
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                try:
                    out[key] = float(value)
                except ValueError:
                    pass
        return out

    def dump(self, names, timeout=15.0):
        """SIGUSR1 to each; {name: its state dump}."""
        paths = {}
        for name in names:
            path = os.path.join(self.dir, "state", name + ".json")
            if os.path.exists(path):
                os.remove(path)
            os.kill(self.procs[name]["pid"], signal.SIGUSR1)
            paths[name] = path
        deadline = time.monotonic() + timeout
        while not all(os.path.exists(p) for p in paths.values()):
            if time.monotonic() > deadline:
                raise RuntimeError("no state dump from %s within %.0f s" % (names, timeout))
            time.sleep(0.01)
        out = {}
        for name, path in paths.items():
            with open(path) as f:
                out[name] = json.load(f)
        return out

    def close(self):
        self.redis.close()


def stat(entry, field):
    return tessera_cluster.stat_int(entry, field, 0)


def disc_cdf(u):
    """Share of a uniform disc of radius 1 at x <= u."""
    u = max(-1.0, min(1.0, u))
    return 0.5 + (u * math.sqrt(1 - u * u) + math.asin(u)) / math.pi


def disc_quantile(p):
    lo, hi = -1.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if disc_cdf(mid) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def line_targets(column, share, radius):
    """x of the two lines so that column 0, 1 or 2 holds `share` of a
    uniform disc of `radius` and the other two half the rest each."""
    rest = (1 - share) / 2
    cuts = {0: (share, share + rest), 1: (rest, rest + share), 2: (rest, 2 * rest)}[column]
    return [round(disc_quantile(c) * radius, 1) for c in cuts]


def columns(layout):
    """[(cellapp id as str, line index on its right or None)], left to right,
    for a 3-column default layout (tree: line 0, then line 1 on its high side)."""
    cells = []

    def walk(node):
        if "cell" in node:
            cells.append(str(node["cellapp"]))
            return
        walk(node["low"])
        walk(node["high"])
    walk(layout["tree"])
    return cells


def move_lines(info, targets, current):
    """Moves line 0 and line 1 of the default space to `targets`, in an order
    that keeps them ordered."""
    order = [0, 1] if targets[0] < current[1] else [1, 0]
    for i in order:
        tessera_cluster.admin(info, ["move-line", "default", i, targets[i]])


# ---- bots ----------------------------------------------------------------------------


def start_bots(build, run_dir, login, args, seconds):
    argv = [os.path.join(build, "client", "tessera-bots"), "--connect", login, "--count", str(args.bots),
            "--seconds", str(seconds), "--json", "--seed", str(SEED), "--area", str(args.area), "--speed",
            str(args.speed), "--calls-per-second", "0.2", "--login-spread-ms", str(int(args.login_spread * 1000)),
            "--verify-aoi", "--settle-seconds", str(args.settle_seconds)] + tessera_cluster.DEMO_BOT_ARGS
    say("bots: %s" % " ".join(argv))
    out = open(os.path.join(run_dir, "bots.json"), "wb")
    err = open(os.path.join(run_dir, "bots.log"), "wb")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
    finally:
        out.close()
        err.close()
    return proc


def bots_report(run_dir, proc):
    with open(os.path.join(run_dir, "bots.json"), "rb") as f:
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
    raise RuntimeError("tessera-bots printed no report (exit %s); see %s" % (proc.returncode, run_dir))


# ---- logs ----------------------------------------------------------------------------

_STAMP_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z ")
_RESTORED_RE = re.compile(r"entity (\d+) \((\w+)\) restored as incarnation \d+ from (its ghost|its backup) "
                          r"\((\d+) ms old\)")
_DECLARED_RE = re.compile(r"process (\d+) declared dead: (.*)$")
_EPOCH_RE = re.compile(r"space 'default' epoch (\d+): (.*)$")
_GAP_RE = re.compile(r"entity (\d+): (\d+) messages never arrived; going on without them")
_BASE_DEAD_RE = re.compile(r"cellapp \d+ dead \(.*\): (\d+) cell parts being restored, (\d+) without a backup wait, "
                           r"(\d+) dropped")
_PROBLEM_RE = re.compile(r" (WARN|ERROR) |PANIC")


def log_lines(path, since_wall):
    """[(wall seconds, text)] of the log lines stamped at or after since_wall."""
    out = []
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return out
    for line in text.splitlines():
        m = _STAMP_RE.match(line)
        if not m:
            continue
        t = calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")) + int(m.group(2)) / 1000.0
        if t >= since_wall - 0.001:
            out.append((t, line))
    return out


def read_logs(run, names, kill_wall):
    """What the logs say about the kill: the death's declaration, the layout
    changes, each restore (entity, class, from, age, time), and the WARN and
    ERROR lines, from the kill on."""
    res = {"declared": None, "epochs": [], "restored": [], "gaps": [], "base_dead": None, "problems": {},
           "tick_behind": {}}
    for name in names:
        lines = log_lines(run.procs[name]["log"], kill_wall)
        problems = []
        for t, line in lines:
            m = _DECLARED_RE.search(line)
            if m and res["declared"] is None:
                res["declared"] = {"by": name, "at_ms": (t - kill_wall) * 1000, "why": m.group(2)}
            m = _EPOCH_RE.search(line)
            if m and name.startswith("cellapp"):
                res["epochs"].append({"by": name, "at_ms": (t - kill_wall) * 1000, "epoch": int(m.group(1)),
                                      "what": m.group(2)})
            m = _RESTORED_RE.search(line)
            if m:
                res["restored"].append({"id": int(m.group(1)), "class": m.group(2), "on": name,
                                        "from_ghost": m.group(3) == "its ghost", "age_ms": int(m.group(4)),
                                        "at_ms": (t - kill_wall) * 1000})
            m = _GAP_RE.search(line)
            if m:
                res["gaps"].append({"id": int(m.group(1)), "skipped": int(m.group(2)), "on": name,
                                    "at_ms": (t - kill_wall) * 1000})
            m = _BASE_DEAD_RE.search(line)
            if m:
                b = res["base_dead"] or {"by": [], "restoring": 0, "without_backup": 0, "dropped": 0}
                b["by"].append(name)
                b["restoring"] += int(m.group(1))
                b["without_backup"] += int(m.group(2))
                b["dropped"] += int(m.group(3))
                res["base_dead"] = b
            if "tick fell" in line:
                res["tick_behind"][name] = res["tick_behind"].get(name, 0) + 1
            if _PROBLEM_RE.search(line):
                problems.append(line)
        if problems:
            kinds = {}
            for line in problems:
                kind = re.sub(r"\d+(\.\d+)?", "N", line[25:])
                kinds[kind] = kinds.get(kind, 0) + 1
            res["problems"][name] = {"count": len(problems), "lines": problems[:8],
                                     "kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1]))}
    return res


# ---- figures ---------------------------------------------------------------------------


def pct(values, p):
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, min(len(v) - 1, int(math.ceil(p / 100.0 * len(v))) - 1))]


def spread(values):
    return {"n": len(values), "min": min(values) if values else None, "p50": pct(values, 50), "p99": pct(values, 99),
            "max": max(values) if values else None}


TICK_EDGES = ["0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5", "1", "+Inf"]


def tick_histogram(m):
    """[(edge, cumulative count)] of tessera_tick_seconds in a metrics dict."""
    return [(e, m.get('tessera_tick_seconds_bucket{le="%s"}' % e, 0.0)) for e in TICK_EDGES]


def tick_figures(first, last):
    """From two /metrics samples: ticks, ticks over 100 ms, the highest bucket
    a tick fell in (its upper edge, ms), p99's bucket, the mean."""
    if not first or not last:
        return None
    a, b = tick_histogram(first), tick_histogram(last)
    counts = [(edge, b[i][1] - a[i][1]) for i, (edge, _) in enumerate(a)]
    n = counts[-1][1]
    per_bucket = [(edge, c - (counts[i - 1][1] if i else 0)) for i, (edge, c) in enumerate(counts)]
    highest = None
    for edge, c in per_bucket:
        if c > 0:
            highest = edge
    over_100 = n - dict(counts)["0.1"]
    p99_edge = None
    for edge, c in counts:
        if n and c >= 0.99 * n:
            p99_edge = edge
            break
    ms = lambda e: None if e is None else ("> 1000" if e == "+Inf" else "%g" % (float(e) * 1000))  # noqa: E731
    s = last.get("tessera_tick_seconds_sum", 0) - first.get("tessera_tick_seconds_sum", 0)
    return {"ticks": int(n), "over_100ms": int(over_100), "max_bucket_ms": ms(highest), "p99_bucket_ms": ms(p99_edge),
            "mean_ms": s * 1000 / n if n else None}


def sample_window(run, names, seconds, cpu_pids):
    """Every SAMPLE_S for `seconds`: the registry tick_us of `names` and their
    /metrics. Returns {"t0", "t1", "registry": {name: [tick_us]}, "metrics":
    {name: [(t, dict)]}, "cpu_s": {name: s}, "other_cores"}."""
    ours = dict(cpu_pids)
    cpu0 = {k: cpu_ticks(p) for k, p in ours.items()}
    busy0 = machine_busy_ticks()
    t0 = time.monotonic()
    series = {n: [] for n in names}
    metrics = {n: [] for n in names}
    seen = {n: None for n in names}
    distinct = {n: [] for n in names}
    hashes = {n: [] for n in names}
    next_at = t0
    while True:
        now = time.monotonic()
        if now - t0 >= seconds:
            break
        regs = run.registry()
        for n in names:
            e = regs.get(n)
            if e is not None:
                series[n].append(stat(e, "tick_us"))
                key = (e.get("tick_us"), e.get("frames_in"), e.get("bytes_out"))
                if key != seen[n]:
                    seen[n] = key
                    distinct[n].append(stat(e, "tick_us"))
                    hashes[n].append(e)
            m = run.metrics(n)
            if m is not None:
                metrics[n].append((time.monotonic(), m))
        next_at += SAMPLE_S
        time.sleep(max(0.0, next_at - time.monotonic()))
    t1 = time.monotonic()
    cpu1 = {k: cpu_ticks(p) for k, p in ours.items()}
    busy1 = machine_busy_ticks()
    cpu = {k: ((cpu1[k] - cpu0[k]) / CLK_TCK if cpu0[k] is not None and cpu1[k] is not None else None) for k in ours}
    mine = sum(v for v in cpu.values() if v is not None)
    return {"t0": t0, "t1": t1, "registry": series, "registry_distinct": distinct, "hashes": hashes,
            "metrics": metrics, "cpu_s": cpu,
            "cores_busy": (busy1 - busy0) / CLK_TCK / (t1 - t0),
            "other_cores": max(0.0, (busy1 - busy0) / CLK_TCK - mine) / (t1 - t0)}


def backup_figures(window, name, reals):
    """Backups of one cellapp over a window: share of one core, share of the
    CPU it used, bytes per entity per second, backups a second. The time
    spent (snapshot_us) is a registry figure, written at each heartbeat
    with the count (snapshots): their deltas between the first and the last
    hash seen give the time per backup exactly; the rate comes from
    /metrics (tessera_cell_backups_total, read on the spot), so the share of
    a core is (time per backup) x (backups a second)."""
    ms = window["metrics"][name]
    hs = window["hashes"][name]
    if len(ms) < 2 or len(hs) < 2:
        return None
    (ta, a), (tb, b) = ms[0], ms[-1]
    dt = tb - ta
    nbytes = b.get("tessera_cell_backup_bytes_total", 0) - a.get("tessera_cell_backup_bytes_total", 0)
    count = b.get("tessera_cell_backups_total", 0) - a.get("tessera_cell_backups_total", 0)
    reg_us = stat(hs[-1], "snapshot_us") - stat(hs[0], "snapshot_us")
    reg_count = stat(hs[-1], "snapshots") - stat(hs[0], "snapshots")
    us_per_backup = reg_us / reg_count if reg_count else None
    rate = count / dt
    share = us_per_backup * rate / 1e6 if us_per_backup is not None else None
    cpu = window["cpu_s"].get(name)
    cores = cpu / (window["t1"] - window["t0"]) if cpu else None
    return {"share_of_core": share, "share_of_cpu": share / cores if share is not None and cores else None,
            "cellapp_cores": cores, "bytes_per_entity_s": nbytes / dt / reals if reals else None,
            "backups_per_s": rate, "bytes_per_backup": nbytes / count if count else None,
            "us_per_backup": us_per_backup, "registry_backups": reg_count}


# ---- one run -------------------------------------------------------------------------------


def one_run(args, build, label):
    run_dir = tempfile.mkdtemp(prefix="tessera-bench-recovery-")
    run = None
    bots = None
    res = {"label": label, "dir": run_dir}
    area = args.area
    npcs = args.npcs
    expected = args.bots + len(CELLAPPS) * npcs
    overrides = {"cellapp.game.npc_count": npcs, "baseapp.max_clients": args.bots + 100,
                 "baseapp.login_timeout_ms": 120000, "cellapp.max_entities": 100000,
                 "cellapp.balance_enabled": False}
    try:
        say("%s: cluster up in %s (3 cellapps, %d baseapp(s), %d NPCs each)" % (label, run_dir, args.baseapps, npcs))
        with open(os.devnull, "w") as quiet:
            info = tessera_cluster.up(run_dir, baseapps=args.baseapps, cellapps=3, build=build, timeout=90, out=quiet,
                                      grid="3x1", bounds=(-area - 10, -area - 10, area + 10, area + 10),
                                      spawn_radius=area,
                                      overrides=tessera_cluster.parse_set(
                                          ["%s=%s" % (k, json.dumps(v)) for k, v in overrides.items()]))
        run = Run(info)
        regs = run.registry()
        for name in CELLAPPS:
            run.admin_urls[name] = "http://127.0.0.1:%d" % stat(regs[name], "admin_port")
        ids = {regs[n]["id"]: n for n in CELLAPPS}
        deadline = time.monotonic() + 20
        while True:
            view = tessera_cluster.balance_view(info)
            if view["leader"] and view["leader"][0] in ids:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("no cellapp took the balancer lease within 20 s")
            time.sleep(0.1)
        leader = ids[view["leader"][0]]
        layout = view["spaces"]["default"]
        order = [ids[c] for c in columns(layout)]
        if args.leader:
            victim = leader
        else:
            victim = order[1] if order[1] != leader else order[0]
        survivors = [n for n in CELLAPPS if n != victim]
        column = order.index(victim)
        current = _lines(layout)
        targets = line_targets(column, args.victim_share, area)
        say("%s: lease holder %s; victim %s (column %d of 3); lines %s -> %s"
            % (label, leader, victim, column + 1, current, targets))
        move_lines(info, targets, current)
        res.update({"leader": leader, "victim": victim, "survivors": survivors, "victim_column": column,
                    "lines": targets, "columns": order})

        # The bots' run: logins, in the world, settle, window, kill, window,
        # walking on while the restores finish, then standing still.
        seconds = args.login_spread + LOGIN_SLACK_S + args.settle + 2 * args.window + args.walk_after + \
            args.settle_seconds
        started = time.monotonic()
        bots = start_bots(build, run_dir, info["login"], args, seconds)
        end_at = started + seconds
        still_at = end_at - args.settle_seconds
        while True:
            regs = run.registry()
            clients = sum(stat(e, "clients") for n, e in regs.items() if n.startswith("baseapp"))
            reals = sum(stat(regs.get(n), "reals") for n in CELLAPPS)
            if clients >= args.bots and reals >= expected:
                break
            if bots.poll() is not None:
                raise RuntimeError("tessera-bots ended early (exit %s); see %s/bots.log" % (bots.returncode, run_dir))
            if time.monotonic() > started + args.login_spread + LOGIN_SLACK_S:
                raise RuntimeError("only %d of %d bots in the world (reals %d of %d) after %.0f s"
                                   % (clients, args.bots, reals, expected, time.monotonic() - started))
            time.sleep(0.2)
        res["in_world_s"] = time.monotonic() - started
        say("%s: every bot in the world after %.1f s; settling %.0f s" % (label, res["in_world_s"], args.settle))
        time.sleep(args.settle)

        pids = {n: run.procs[n]["pid"] for n in run.procs if run.procs[n]["role"] in ("cellapp", "baseapp", "redis")}
        pids["bots"] = bots.pid
        before = sample_window(run, CELLAPPS, args.window, pids)
        regs = run.registry()
        held_registry = {n: stat(regs.get(n), "reals") for n in CELLAPPS}

        # What the victim holds, then the kill.
        dump = run.dump([victim])[victim]
        reals_v = dump["entities"]
        players = [e for e in reals_v if e.get("baseapp")]
        held = {"reals": len(reals_v), "players": len(players), "without_base": len(reals_v) - len(players),
                "with_ghosts": sum(1 for e in reals_v if e.get("haunts")), "ghosts_it_held": len(dump["ghosts"]),
                "registry_reals": held_registry}
        pid = run.procs[victim]["pid"]
        if not tessera_cluster.pid_alive(pid):
            raise RuntimeError("%s died before the kill" % victim)
        kill_wall = time.time()
        kill_mono = time.monotonic()
        res["kill_monotonic_ms"] = time.clock_gettime(time.CLOCK_MONOTONIC) * 1000
        os.kill(pid, signal.SIGKILL)
        say("%s: SIGKILL -> %s holding %d reals (%d players, %d without a base; %d with ghosts elsewhere)"
            % (label, victim, held["reals"], held["players"], held["without_base"], held["with_ghosts"]))
        if kill_mono > still_at - args.window - 3:
            raise RuntimeError("the kill came too late in the bots' run; raise --walk-after")
        pids.pop(victim)
        after = sample_window(run, survivors, args.window, pids)

        # Until the survivors stop restoring.
        last, last_change = None, time.monotonic()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            regs = run.registry()
            now = tuple(stat(regs.get(n), f) for n in survivors
                        for f in ("restores_from_ghost", "restores_from_backup", "restores_refused", "restores_failed",
                                  "restores_pending"))
            if now != last:
                last, last_change = now, time.monotonic()
            elif time.monotonic() - last_change > 2.0 and sum(stat(regs.get(n), "restores_pending")
                                                              for n in survivors) == 0:
                break
            time.sleep(0.2)
        counters = {n: {f: stat(regs.get(n), f) for f in ("restores_from_ghost", "restores_from_backup",
                                                        "restores_forwarded", "restores_refused", "restores_failed",
                                                        "restores_pending", "orphans_dropped", "deaths_declared",
                                                        "reals")} for n in survivors}

        # Every entity real exactly once: the first dumps of the survivors
        # that show it while the bots still walk (two dumps are not one
        # moment: a real crossing a line between them is in neither or
        # both, so they are taken again), then the check that counts, once
        # the bots stand still.
        def exactly_once():
            dumps = run.dump(survivors)
            where = {}
            for name, d in dumps.items():
                for e in d["entities"]:
                    where.setdefault(e["id"], []).append(name)
            twice = {k: v for k, v in where.items() if len(v) > 1}
            return {"found": len(where), "expected": expected, "lost": max(0, expected - len(where)),
                    "extra": max(0, len(where) - expected), "twice": len(twice),
                    "twice_ids": sorted(twice)[:10], "at_s": time.monotonic() - kill_mono}

        walking = None
        attempts = 0
        while time.monotonic() < still_at - 0.5:
            c = exactly_once()
            attempts += 1
            if c["found"] == expected and not c["twice"]:
                walking = c
                break
            time.sleep(0.3)
        time.sleep(max(0.0, still_at + 1.0 - time.monotonic()))
        while True:
            check = exactly_once()
            if (check["found"] == expected and not check["twice"]) or time.monotonic() > end_at - 1.0:
                break
            time.sleep(0.5)
        check["walking_at_s"] = walking["at_s"] if walking else None
        check["walking_attempts"] = attempts
        regs = run.registry()
        res["baseapp_clients_at_end"] = sum(stat(e, "clients") for n, e in regs.items() if n.startswith("baseapp"))
        bots.wait(timeout=max(10.0, end_at - time.monotonic() + 60))
        report = bots_report(run_dir, bots)
        bots = None
        logs = read_logs(run, survivors + [n for n in run.procs if n.startswith("baseapp")], kill_wall)
        res.update(figures(args, report, held, before, after, survivors, counters, check, logs, kill_wall,
                           res["kill_monotonic_ms"]))
        res["bots_report"] = {k: v for k, v in report.items() if k not in ("restore_wall_ms", "restore_age_ms")}
    finally:
        if bots is not None and bots.poll() is None:
            bots.kill()
            bots.wait()
        if run is not None:
            run.close()
        tessera_cluster.down(run_dir, grace=5.0, quiet=True)
        if args.keep:
            say("run directory kept: %s" % run_dir)
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    return res


def _lines(layout):
    out = []

    def walk(node):
        if "cell" in node:
            return
        out.append(node["at"])
        walk(node["low"])
        walk(node["high"])
    walk(layout["tree"])
    return out


def figures(args, report, held, before, after, survivors, counters, check, logs, kill_wall, kill_monotonic_ms):
    kill_ms = kill_wall * 1000.0
    # An age as large as the monotonic clock itself (the time since boot)
    # is a restore from a ghost whose heard stamp was never set.
    unset = [r for r in logs["restored"] if abs(r["age_ms"] - kill_monotonic_ms) < 2000]
    delays = [w - kill_ms for w in report.get("restore_wall_ms") or []]
    restored = logs["restored"]
    players = [r for r in restored if r["class"] == "Avatar"]
    npcs = [r for r in restored if r["class"] != "Avatar"]
    # A restored real's stream from its base resumes when the messages that
    # went to the dead cellapp are given up (cell_stream_gap_ms): until then
    # what its client sends waits. Per restored player: the later of its
    # restore and that moment.
    # A gap given up later than that is another stream's (a sender whose
    # first messages went to the dead cellapp), counted apart.
    restored_at = {r["id"]: r["at_ms"] for r in restored}
    gap_at, later_gaps = {}, 0
    for g in logs["gaps"]:
        at = restored_at.get(g["id"])
        if at is not None and g["at_ms"] - at <= RESTORE_GAP_WINDOW_MS:
            gap_at.setdefault(g["id"], g["at_ms"])
        else:
            later_gaps += 1
    resumed = [max(r["at_ms"], gap_at.get(r["id"], r["at_ms"])) for r in players]
    out = {
        "held": held,
        "restore_ms": spread(delays),
        "restore_age_ms": spread(report.get("restore_age_ms") or []),
        "client_restores": report.get("restores", 0),
        "client_restores_from_ghost": report.get("restores_from_ghost", 0),
        "entities_restored": len(restored),
        "entities_restored_players": len(players),
        "entities_from_ghost": sum(1 for r in restored if r["from_ghost"]),
        "age_player_ghost_ms": spread([r["age_ms"] for r in players if r["from_ghost"]]),
        "age_player_backup_ms": spread([r["age_ms"] for r in players if not r["from_ghost"]]),
        "age_npc_ghost_ms": spread([r["age_ms"] for r in npcs if r["from_ghost"]]),
        "age_npc_backup_ms": spread([r["age_ms"] for r in npcs if not r["from_ghost"]]),
        "cellapp_restore_ms": spread([r["at_ms"] for r in restored]),
        "ages_unset": len(unset),
        "ages_unset_ids": [r["id"] for r in unset][:10],
        "age_player_ghost_ms_stamped": spread([r["age_ms"] for r in players if r["from_ghost"] and r not in unset]),
        "stream_gaps": len(logs["gaps"]),
        "later_stream_gaps": later_gaps,
        "stream_gap_players": sum(1 for r in players if r["id"] in gap_at),
        "stream_gap_ms": spread([gap_at[r["id"]] for r in players if r["id"] in gap_at]),
        "input_resumed_ms": spread(resumed),
        "declared": logs["declared"],
        "epochs": logs["epochs"],
        "base_dead": logs["base_dead"],
        "tick_behind": logs["tick_behind"],
        "problems": logs["problems"],
        "logged_in": report.get("logged_in"),
        "in_world_at_end": report.get("in_world_at_end"),
        "dropped": (report.get("logged_in") or 0) - (report.get("in_world_at_end") or 0),
        "errors": report.get("errors"),
        "error_reasons": report.get("error_reasons"),
        "aoi_checked": report.get("aoi_checked"),
        "aoi_mismatches": report.get("aoi_mismatches"),
        "aoi_position_mismatches": report.get("aoi_position_mismatches"),
        "update_gaps": report.get("update_gaps"),
        "longest_update_gap_ms": report.get("longest_update_gap_ms"),
        "corrections": report.get("corrections"),
        "call_failures": report.get("call_failures"),
        "check": check,
        "counters": counters,
        "other_cores_before": before["other_cores"],
        "other_cores_after": after["other_cores"],
        "cores_busy_before": before["cores_busy"],
        "cores_busy_after": after["cores_busy"],
        "cellapps": {},
    }
    for name in CELLAPPS:
        row = {"role": "victim" if name not in survivors else "survivor"}
        row["tick_before"] = {"registry": spread(before["registry"].get(name) or []),
                              "registry_distinct": spread(before["registry_distinct"].get(name) or []),
                              "histogram": tick_figures(*_ends(before["metrics"].get(name)))}
        if name in survivors:
            row["tick_after"] = {"registry": spread(after["registry"][name]),
                                 "registry_distinct": spread(after["registry_distinct"][name]),
                                 "histogram": tick_figures(*_ends(after["metrics"].get(name)))}
        reals = held["registry_reals"].get(name) or 0
        row["reals_before"] = reals
        row["backups"] = backup_figures(before, name, reals)
        row["cores_before"] = (before["cpu_s"].get(name) or 0) / (before["t1"] - before["t0"])
        if name in survivors:
            row["cores_after"] = (after["cpu_s"].get(name) or 0) / (after["t1"] - after["t0"])
        out["cellapps"][name] = row
    out["roles_cores_before"] = {k: (v or 0) / (before["t1"] - before["t0"]) for k, v in before["cpu_s"].items()}
    out["roles_cores_after"] = {k: (v or 0) / (after["t1"] - after["t0"]) for k, v in after["cpu_s"].items()}
    return out


def _ends(samples):
    if not samples or len(samples) < 2:
        return (None, None)
    return samples[0][1], samples[-1][1]


# ---- the report -----------------------------------------------------------------------------


def _f(v, fmt="%.0f", none="-"):
    return none if v is None else fmt % v


def _sp(s, fmt="%.0f"):
    return "%s / %s / %s" % (_f(s["p50"], fmt), _f(s["p99"], fmt), _f(s["max"], fmt)) if s and s["n"] else "-"


def _ratio(a, b):
    return "%.2fx" % (a / b) if a is not None and b else "-"


def _verdict(ok):
    return "ok" if ok else "MISSED"


def _table(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _max_of(*spreads):
    values = [s["max"] for s in spreads if s and s["n"]]
    return max(values) if values else None


def goals(r):
    """{goal: (measured text, ok)}. The backup share is the brief's
    delta(snapshot_us) / delta(wall): a share of one core."""
    shares = [c["backups"]["share_of_core"] for c in r["cellapps"].values() if c.get("backups")]
    backup_max = _max_of(r["age_player_backup_ms"], r["age_npc_backup_ms"])
    ghost_max = _max_of(r["age_player_ghost_ms"])
    chk = r["check"]
    p99 = r["restore_ms"]["p99"]
    return {
        "0 clients dropped": ("%d dropped, %s errors" % (r["dropped"], r["errors"]),
                              r["dropped"] == 0 and r["errors"] == 0),
        "0 entities lost or duplicated": ("%d lost, %d twice, %d extra" % (chk["lost"], chk["twice"], chk["extra"]),
                                          chk["lost"] == 0 and chk["twice"] == 0 and chk["extra"] == 0),
        "state <= 1 s old from a backup": ("max %s ms" % _f(backup_max),
                                           r["entities_restored"] > 0 and (backup_max or 0) <= GOAL_BACKUP_AGE_MS),
        "<= 1 tick from a ghost (players)": ("max %s ms" % _f(ghost_max), (ghost_max or 0) <= GOAL_GHOST_AGE_MS),
        "backups <= 5 % of a cellapp's CPU": ("max %.2f %% of a core" % (100 * max(shares or [0])),
                                              bool(shares) and max(shares) <= GOAL_BACKUP_SHARE),
        "p99 restore <= 2 s from the kill": ("%s ms" % _f(p99), p99 is not None and p99 <= GOAL_RESTORE_P99_MS and
                                             r["client_restores"] >= r["entities_restored_players"]),
    }


def format_report(res):
    out = []
    for r in res["runs"]:
        h = r["held"]
        out.append("%s: %s (%s) killed with SIGKILL under load; %d bots, %d NPCs per cellapp, 3 cellapps, "
                   "%d baseapp(s), lines at x = %s; build %s (%s)"
                   % (r["label"], r["victim"], "the lease holder" if r["victim"] == r["leader"] else
                      "not the lease holder, %s is" % r["leader"], res["bots"], res["npcs"], res["baseapps"],
                      ", ".join("%g" % v for v in r["lines"]),
                      r.get("commit", res["commit"]) + (" + uncommitted changes to %s" % ", ".join(r["uncommitted"])
                                                        if r.get("uncommitted") else ""), res["buildtype"]))
        out.append("victim held %d reals: %d players, %d without a base (NPCs); %d had a ghost on another cellapp"
                   % (h["reals"], h["players"], h["without_base"], h["with_ghosts"]))
        d = r["declared"]
        if d:
            out.append("declared dead %.0f ms after the kill by %s (%s)" % (d["at_ms"], d["by"], d["why"]))
        if r["base_dead"]:
            b = r["base_dead"]
            out.append("%s: %d cell parts being restored, %d without a backup, %d dropped"
                       % (" + ".join(b["by"]), b["restoring"], b["without_backup"], b["dropped"]))
        if r["epochs"]:
            e = min(r["epochs"], key=lambda x: x["at_ms"])
            out.append("layout epoch %d %.0f ms after the kill (%s: %s)" % (e["epoch"], e["at_ms"], e["by"], e["what"]))
        cr = r["cellapp_restore_ms"]
        if cr["n"]:
            out.append("restored on the survivors (their logs): %d entities (%d players, %d from a ghost) "
                       "%.0f .. %.0f ms after the kill" % (r["entities_restored"], r["entities_restored_players"],
                                                          r["entities_from_ghost"], cr["min"], cr["max"]))
        if r.get("ages_unset"):
            out.append("%d restores from a ghost report an age as large as the monotonic clock (the time since boot: "
                       "the ghost's heard stamp was never set; entities %s); players' ghost ages without them: %s"
                       % (r["ages_unset"], r["ages_unset_ids"], _sp(r["age_player_ghost_ms_stamped"])))
        if r["stream_gap_players"]:
            out.append("streams held after a restore, then given up: %d players (%s ms after the kill, p50 / p99 / "
                       "max)" % (r["stream_gap_players"], _sp(r["stream_gap_ms"])))
        if r.get("later_stream_gaps"):
            out.append("later stream gaps (not within %d ms of the entity's restore): %d"
                       % (RESTORE_GAP_WINDOW_MS, r["later_stream_gaps"]))
        out.append("")
        g = goals(r)
        rows = [("figure", "measured", "BigWorld", "ours / BigWorld", "before recovery (%s)" % BEFORE_COMMIT, "goal",
                 "")]
        rows.append(("kill -> EntityRestored, p50 / p99 / max ms", _sp(r["restore_ms"]),
                     "~%d pause" % BIGWORLD_PAUSE_MS, _ratio(r["restore_ms"]["p99"], BIGWORLD_PAUSE_MS) + " (p99)",
                     "dropped after %d, log in again" % BEFORE_GRACE_MS, "p99 <= %d" % GOAL_RESTORE_P99_MS,
                     _verdict(g["p99 restore <= 2 s from the kill"][1])))
        rows.append(("kill -> the player's input applied again", _sp(r["input_resumed_ms"]), "",
                     _ratio(r["input_resumed_ms"]["p99"], BIGWORLD_PAUSE_MS) + " (p99)", "", "", ""))
        rows.append(("observers: longest update gap ms, gaps", "%s, %s" % (_f(r["longest_update_gap_ms"]),
                                                                           r["update_gaps"]), "", "", "", "", ""))
        rows.append(("clients restored (EntityRestored) / held", "%d / %d (%d from a ghost)"
                     % (r["client_restores"], h["players"], r["client_restores_from_ghost"]), "", "",
                     "0 / %d" % h["players"], "all", ""))
        rows.append(("state age at the clients, p50 / p99 / max ms", _sp(r["restore_age_ms"]),
                     "up to %d" % BIGWORLD_MAX_AGE_MS, _ratio(r["restore_age_ms"]["max"], BIGWORLD_MAX_AGE_MS) +
                     " (max)", "up to %d (writeToDB)" % BEFORE_AUTOSAVE_MS, "", ""))
        for label, key, goal in (("  players from a backup", "age_player_backup_ms", "<= %d" % GOAL_BACKUP_AGE_MS),
                                 ("  players from a ghost", "age_player_ghost_ms", "<= %d" % GOAL_GHOST_AGE_MS),
                                 ("  NPCs from a backup (Redis)", "age_npc_backup_ms", "<= %d" % GOAL_BACKUP_AGE_MS),
                                 ("  NPCs from a ghost (since last change)", "age_npc_ghost_ms", "")):
            sp = r[key]
            verdict = ""
            if key == "age_player_ghost_ms":
                verdict = _verdict(g["<= 1 tick from a ghost (players)"][1])
            elif key == "age_player_backup_ms":
                verdict = _verdict(g["state <= 1 s old from a backup"][1])
            rows.append((label, "%s  (n=%d)" % (_sp(sp), sp["n"]), "", "", "", goal, verdict))
        share_ghost = (r["entities_from_ghost"] / r["entities_restored"]) if r["entities_restored"] else None
        rows.append(("  share restored from ghosts", _f(share_ghost and 100 * share_ghost, "%.1f %%"), "0 %", "",
                     "0 %", "", ""))
        rows.append(("clients dropped (logged_in - in_world_at_end), errors", "%d, %s" % (r["dropped"], r["errors"]),
                     "0", "", "%d" % h["players"], "0", _verdict(g["0 clients dropped"][1])))
        chk = r["check"]
        rows.append(("entities lost / real twice (of %d)" % chk["expected"], "%d / %d" % (chk["lost"], chk["twice"]),
                     "%d lost (no base)" % h["without_base"], "", "%d lost (no base)" % h["without_base"], "0 / 0",
                     _verdict(g["0 entities lost or duplicated"][1])))
        rows.append(("views checked at the end (--verify-aoi), wrong", "%s, %s" % (r["aoi_checked"],
                                                                             r["aoi_mismatches"]), "", "", "", "0",
                     ""))
        for name in r["survivors"]:
            c = r["cellapps"][name]
            tb, ta = c["tick_before"], c["tick_after"]
            hb, ha = tb["histogram"] or {}, ta["histogram"] or {}
            rows.append(("%s tick_us p99 / max, before -> after" % name, "%s / %s -> %s / %s" % (
                _f(tb["registry"]["p99"]), _f(tb["registry"]["max"]), _f(ta["registry"]["p99"]),
                _f(ta["registry"]["max"])), "", "", "", "", ""))
            rows.append(("  every tick: top bucket ms, ticks > 100 ms", "%s, %s -> %s, %s" % (
                hb.get("max_bucket_ms"), hb.get("over_100ms"), ha.get("max_bucket_ms"), ha.get("over_100ms")),
                "", "", "", "", ""))
        shares = [(n, c["backups"]) for n, c in r["cellapps"].items() if c.get("backups")]
        rows.append(("backups: share of a core (max cellapp)",
                     "%.2f %%" % (100 * max(b["share_of_core"] for _, b in shares)), "", "", "none", "<= 5 %",
                     _verdict(g["backups <= 5 % of a cellapp's CPU"][1])))
        rows.append(("  share of the CPU the cellapp used (max)",
                     "%.2f %%" % (100 * max(b["share_of_cpu"] or 0 for _, b in shares)), "", "", "", "", ""))
        rows.append(("  bytes per entity per second (each cellapp)",
                     " / ".join("%.0f" % (b["bytes_per_entity_s"] or 0) for _, b in shares), "", "", "0", "", ""))
        out += _table(rows)
        out.append("")
        rows = [("cellapp", "role", "reals", "cores before -> after", "backups/s", "B/backup", "us/backup", "% core",
                 "% its CPU", "tick_us p99/max before", "after", "ticks >100ms before/after", "restored ghost/backup")]
        for name, c in r["cellapps"].items():
            b = c["backups"] or {}
            ta = c.get("tick_after")
            cnt = r["counters"].get(name, {})
            rows.append((name, c["role"] + (" (lease)" if name == r["leader"] else ""), c["reals_before"],
                         "%.2f" % c["cores_before"] + (" -> %.2f" % c["cores_after"] if "cores_after" in c else ""),
                         _f(b.get("backups_per_s")), _f(b.get("bytes_per_backup")), _f(b.get("us_per_backup"), "%.1f"),
                         _f(b.get("share_of_core") and 100 * b["share_of_core"], "%.2f"),
                         _f(b.get("share_of_cpu") and 100 * b["share_of_cpu"], "%.2f"),
                         "%s/%s" % (_f(c["tick_before"]["registry"]["p99"]), _f(c["tick_before"]["registry"]["max"])),
                         "%s/%s" % (_f(ta["registry"]["p99"]), _f(ta["registry"]["max"])) if ta else "-",
                         "%s/%s" % ((c["tick_before"]["histogram"] or {}).get("over_100ms"),
                                    (ta["histogram"] or {}).get("over_100ms") if ta else "-"),
                         "%s/%s" % (cnt.get("restores_from_ghost", "-"), cnt.get("restores_from_backup", "-"))))
        out += _table(rows)
        rc, ra = r["roles_cores_before"], r["roles_cores_after"]
        out.append("")
        out.append("cores before the kill: %s; the machine %.2f busy (others %.2f)"
                   % (", ".join("%s %.2f" % (k, v) for k, v in sorted(rc.items())), r["cores_busy_before"],
                      r["other_cores_before"]))
        out.append("cores after the kill:  %s; the machine %.2f busy (others %.2f)"
                   % (", ".join("%s %.2f" % (k, v) for k, v in sorted(ra.items())), r["cores_busy_after"],
                      r["other_cores_after"]))
        out.append("every entity real once: at %s s after the kill with the bots walking (dump %d), and at %.1f s "
                   "standing still; restores refused %d, failed %d; bots' call failures %s, corrections %s"
                   % (_f(chk.get("walking_at_s"), "%.1f"), chk.get("walking_attempts", 0), chk["at_s"],
                      sum(c["restores_refused"] for c in r["counters"].values()),
                      sum(c["restores_failed"] for c in r["counters"].values()), r["call_failures"], r["corrections"]))
        if r["tick_behind"]:
            out.append("'tick fell behind' after the kill: %s" % r["tick_behind"])
        if r["problems"]:
            out.append("WARN/ERROR lines after the kill (numbers as N):")
            for n, p in r["problems"].items():
                for kind, count in list(p["kinds"].items())[:6]:
                    out.append("  %-10s %5d  %s" % (n, count, kind[:110]))
        out.append("")
        out.append("goals: " + "; ".join("%s: %s (%s)" % (k, _verdict(ok), text) for k, (text, ok) in g.items()))
        out.append("")
    if len(res["runs"]) > 1:
        out.append("%d runs: p99 kill -> EntityRestored ms %s; max state age at clients ms %s; dropped %s; "
                   "lost/twice %s" % (len(res["runs"]), [r["restore_ms"]["p99"] for r in res["runs"]],
                                      [r["restore_age_ms"]["max"] for r in res["runs"]],
                                      [r["dropped"] for r in res["runs"]],
                                      ["%d/%d" % (r["check"]["lost"], r["check"]["twice"]) for r in res["runs"]]))
    return "\n".join(out)


# ---- main ----------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench/bench_recovery.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO_ROOT, "build"), help="build of this tree")
    ap.add_argument("--bots", type=int, default=1400)
    ap.add_argument("--npcs", type=int, default=200, help="NPCs per cellapp (cellapp.game.npc_count)")
    ap.add_argument("--area", type=int, default=300, help="half-width of the bots' walking area and spawn radius (m)")
    ap.add_argument("--speed", type=float, default=5.0)
    ap.add_argument("--baseapps", type=int, default=1)
    ap.add_argument("--victim-share", type=float, default=0.5,
                    help="share of the spawn disc in the victim's column (the others: half the rest each)")
    ap.add_argument("--leader", action="store_true", help="kill the balancer's lease holder")
    ap.add_argument("--window", type=float, default=5.0, help="seconds sampled before and after the kill")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds after every bot is in before the window")
    ap.add_argument("--login-spread", type=float, default=10.0, help="seconds the bots' logins are spread over")
    ap.add_argument("--walk-after", type=float, default=12.0, help="seconds the bots walk on after the window")
    ap.add_argument("--settle-seconds", type=float, default=6.0, help="the bots' last seconds standing still")
    ap.add_argument("--repeat", type=int, default=1, help="runs, each on a fresh cluster")
    ap.add_argument("--json", metavar="FILE", help="write every figure here")
    ap.add_argument("--wait-quiet", type=float, default=300.0,
                    help="at most this long, wait while tests run or the machine is busy")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    args = ap.parse_args(argv)

    def on_term(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    build = os.path.abspath(args.build)
    for rel in ("cellapp/tessera-cellapp", "baseapp/tessera-baseapp", "client/tessera-bots", "client/tessera-admin"):
        if not os.access(os.path.join(build, rel), os.X_OK):
            print("bench_recovery: %s not built (ninja -C %s)" % (os.path.join(build, rel), build), file=sys.stderr)
            return 2
    lock = open(LOCK_PATH, "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    res = {"bots": args.bots, "npcs": args.npcs, "baseapps": args.baseapps, "area": args.area,
           "victim_share": args.victim_share, "leader_mode": args.leader, "commit": build_commit(build),
           "buildtype": build_type(build), "machine_cpus": os.cpu_count(), "runs": [],
           "bigworld": {"pause_ms": BIGWORLD_PAUSE_MS, "backup_period_ms": BIGWORLD_BACKUP_PERIOD_MS,
                        "max_age_ms": BIGWORLD_MAX_AGE_MS},
           "before_recovery": {"commit": BEFORE_COMMIT, "grace_ms": BEFORE_GRACE_MS,
                               "autosave_ms": BEFORE_AUTOSAVE_MS}}
    t0 = time.monotonic()
    try:
        for i in range(max(1, args.repeat)):
            res.setdefault("waited_s", 0.0)
            res["waited_s"] += wait_until_quiet(args.wait_quiet)
            changes = tree_changes(build)
            built = binaries_mtime(build)
            r = one_run(args, build, "run %d" % (i + 1))
            r["commit"] = build_commit(build)
            r["uncommitted"] = changes
            if binaries_mtime(build) != built:
                r["uncommitted"] = changes + ["(the build was rebuilt during the run)"]
            res["runs"].append(r)
    except KeyboardInterrupt:
        say("interrupted; the cluster is torn down")
        return 130
    res["seconds"] = time.monotonic() - t0
    for r in res["runs"]:
        r["goals"] = {k: {"measured": text, "ok": ok} for k, (text, ok) in goals(r).items()}
    print(format_report(res))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2, default=str)
            f.write("\n")
    return 0 if all(g["ok"] for r in res["runs"] for g in r["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
