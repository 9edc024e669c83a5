"""harness.py -- helpers for Tessera's multi-process integration tests.

Owns: starting and always stopping a real cluster (scripts/cluster up/down in
a fresh temporary directory), running the bot load generator, bounded
polling, and just enough of the protobuf wire format to hand-craft client
frames and read the server's answers. Python 3's standard library and
Debian's python3-redis (through scripts/tessera_cluster.py).

Environment (meson sets both):
    TESSERA_BUILD_DIR   the build to test (default <repo>/build)
    TESSERA_SOURCE_DIR  the repository (default: two levels above this file)
    TESSERA_KEEP_RUN=1  keep every run directory (by default it is removed
                        when the test passed and kept, with its path
                        printed, when it failed)

Cleanup: a Cluster is stopped in __exit__, and also from an atexit hook and
a SIGTERM handler (meson's timeout sends SIGTERM to the test's process
group, then SIGKILL half a second later), so processes never outlive a
test. The cluster's processes run in their own sessions: the handler
SIGKILLs them at once because there is no time for a graceful stop. What
else a test sets up outside the cluster (a network namespace) it removes
itself, and also hands to add_emergency_cleanup for those two paths.
"""

import atexit
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref

SOURCE_DIR = os.path.abspath(os.environ.get("TESSERA_SOURCE_DIR")
                             or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD_DIR = os.path.abspath(os.environ.get("TESSERA_BUILD_DIR") or os.path.join(SOURCE_DIR, "build"))
CLUSTER_SCRIPT = os.path.join(SOURCE_DIR, "scripts", "cluster")

sys.path.insert(0, os.path.join(SOURCE_DIR, "scripts"))
import tessera_cluster  # noqa: E402  (after the path is set)

redis_client = tessera_cluster.redis_client
RedisError = tessera_cluster.RedisError
free_ports = tessera_cluster.free_ports

BASEAPP_BIN = os.path.join(BUILD_DIR, "baseapp", "tessera-baseapp")
CELLAPP_BIN = os.path.join(BUILD_DIR, "cellapp", "tessera-cellapp")
BOTS_BIN = os.path.join(BUILD_DIR, "client", "tessera-bots")

POLL_S = 0.05

# The build under test runs with AddressSanitizer (meson sets it): several
# times slower, so the long tests carry a lighter load there.
SANITIZED = os.environ.get("TESSERA_SANITIZED", "") not in ("", "none", "0")


def log(msg):
    print("[harness %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def wait_for(predicate, timeout, what, interval=POLL_S):
    """Calls predicate() every `interval` seconds until it returns something
    truthy, and returns that; raises AssertionError(what) after `timeout`
    seconds. An exception from predicate propagates."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for: %s" % (timeout, what))
        time.sleep(interval)


# ---- cleanup of clusters that are still up ----------------------------------------

_live_clusters = []
_live_lock = threading.Lock()
_handlers_installed = False


_live_procs = []  # background programs (bots) to kill on SIGTERM
_live_cleanups = []  # callables to run after the clusters are stopped


def add_emergency_cleanup(fn):
    """Has fn() run, after every cluster still up is killed, at exit or on
    SIGTERM: for what a test made outside a cluster (a namespace, a veth).
    The test still cleans up itself, then calls remove_emergency_cleanup."""
    _install_handlers()
    with _live_lock:
        _live_cleanups.append(fn)


def remove_emergency_cleanup(fn):
    with _live_lock:
        if fn in _live_cleanups:
            _live_cleanups.remove(fn)


def _emergency_stop(grace):
    with _live_lock:
        clusters = list(_live_clusters)
        procs = list(_live_procs)
        cleanups = list(reversed(_live_cleanups))
        del _live_cleanups[:]
    for proc in procs:
        if proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass
    for c in clusters:
        try:
            c._stop(grace=grace)
        except Exception as e:  # cleanup must go on with the next one
            log("cleanup of %s failed: %s" % (c.dir, e))
    for fn in cleanups:
        try:
            fn()
        except Exception as e:
            log("cleanup %r failed: %s" % (fn, e))


def _on_sigterm(signum, frame):
    log("SIGTERM: killing the clusters still up")
    _emergency_stop(grace=0.0)
    os._exit(128 + signum)


def _install_handlers():
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(_emergency_stop, 1.0)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)


# ---- Cluster ------------------------------------------------------------------------


def assert_bots_verified(test, report, count):
    """The checks every --verify-aoi run ends with: all `count` bots logged
    in and stayed, no errors, views checked and never wrong."""
    text = json.dumps(report, indent=2, sort_keys=True)
    test.assertEqual(report.get("logged_in"), count, text)
    test.assertEqual(report.get("in_world_at_end"), count, text)
    test.assertEqual(report.get("errors"), 0, text)
    test.assertGreater(report.get("aoi_checked", 0), 0, text)
    test.assertEqual(report.get("aoi_mismatches"), 0, text)
    test.assertEqual(report.get("aoi_position_mismatches"), 0, text)
    return text


def layout_lines(layout):
    """[(axis, at)] of a layout's split lines (its JSON), top-down, pre-order."""
    out = []

    def walk(node):
        if not node or "cell" in node:
            return
        out.append((node["split"], node["at"]))
        walk(node.get("low"))
        walk(node.get("high"))
    walk(layout.get("tree"))
    return out


def layout_cells(layout):
    """[(cellapp id as str, cell id, retiring)] of a layout's cells."""
    out = []

    def walk(node):
        if not node:
            return
        if "cell" in node:
            out.append((str(node["cellapp"]), node["cell"], bool(node.get("retiring"))))
            return
        walk(node.get("low"))
        walk(node.get("high"))
    walk(layout.get("tree"))
    return out


def reals_by_id(dumps):
    """{entity id: [names of the processes whose dump lists it as a real]}."""
    where = {}
    for name, document in sorted(dumps.items()):
        for entity in document["entities"]:
            where.setdefault(entity["id"], []).append(name)
    return where


class Cluster:
    """A running cluster for one test: `with Cluster(baseapps=1, cellapps=2) as c:`.

    Attributes once entered: .dir (run directory), .login (host, port) of the
    first baseapp's client port, .baseapps [(host, port)], .redis (a redis-py
    client on the cluster's Redis, replies as str: tessera_cluster.redis_client),
    .info (cluster.json), .build_dir.
    """

    def __init__(self, baseapps=1, cellapps=2, extra_set=(), auto_create_accounts=True, timeout=30.0,
                 build_dir=None, grid=None, spawn_radius=None, bounds=None, balance=False, run_dir=None,
                 host=None, process_hosts=None, process_prefixes=None, game=None, keep_cellapps=False):
        # run_dir: start in this directory (the caller's, never removed
        # here), keeping what an earlier cluster there stored.
        # host, process_hosts {name: address}, process_prefixes {name:
        # [argv...]}: where the processes listen and how one is started
        # (scripts/cluster up --host, --process-host, --process-prefix).
        # Tests of fixed layouts keep the balancer off (it would move their
        # lines); the balancer's tests turn it on.
        if not balance:
            extra_set = ["cellapp.balance_enabled=false"] + list(extra_set)
        self.grid = grid
        self.spawn_radius = spawn_radius
        self.bounds = bounds
        self.baseapps_count = baseapps
        self.cellapps_count = cellapps
        self.extra_set = list(extra_set)
        self.auto_create_accounts = auto_create_accounts
        self.timeout = timeout
        self.build_dir = build_dir or BUILD_DIR
        self.run_dir = run_dir
        self.host = host
        self.process_hosts = dict(process_hosts or {})
        self.process_prefixes = dict(process_prefixes or {})
        # game: a folder with a game.json (scripts/cluster up --game);
        # keep_cellapps: no idle cellapp retired (--keep-cellapps).
        self.game = game
        self.keep_cellapps = keep_cellapps
        self.dir = None
        self.info = None
        self.login = None
        self.baseapps = []
        self.redis = None
        self._stopped = True

    # -- lifecycle

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        failed = exc_type is not None
        if failed and self.dir:
            self._dump_logs()
        self._stop(grace=tessera_cluster.DOWN_GRACE_S)
        # After a graceful stop, so LeakSanitizer's exit report is in the logs.
        findings = self.sanitizer_findings()
        if self.dir and not failed and not findings and not os.environ.get("TESSERA_KEEP_RUN") and not self.run_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        elif self.dir:
            log("run directory kept: %s" % self.dir)
        if findings:
            text = "\n".join("--- %s:\n%s" % (name, excerpt) for name, excerpt in findings)
            if failed:
                log("sanitizer reports:\n" + text)
            else:
                raise AssertionError("sanitizer reports in the cluster's logs:\n" + text)
        return False

    def start(self):
        _install_handlers()
        self.dir = self.run_dir or tempfile.mkdtemp(prefix="tessera-it-")
        argv = [sys.executable, CLUSTER_SCRIPT, "up", "--dir", self.dir, "--build", self.build_dir,
                "--baseapps", str(self.baseapps_count), "--cellapps", str(self.cellapps_count),
                "--timeout", str(self.timeout)]
        argv.append("--auto-create-accounts" if self.auto_create_accounts else "--no-auto-create-accounts")
        for item in self.extra_set:
            argv += ["--set", item]
        if self.grid:
            argv += ["--grid", self.grid]
        if self.spawn_radius is not None:
            argv += ["--spawn-radius", str(self.spawn_radius)]
        if self.bounds is not None:
            argv.append("--bounds=" + ",".join(str(v) for v in self.bounds))
        if self.host:
            argv += ["--host", self.host]
        for name, host in sorted(self.process_hosts.items()):
            argv += ["--process-host", "%s=%s" % (name, host)]
        for name, prefix in sorted(self.process_prefixes.items()):
            argv += ["--process-prefix", "%s=%s" % (name, " ".join(shlex.quote(a) for a in prefix))]
        if self.game:
            argv += ["--game", self.game]
        if self.keep_cellapps:
            argv.append("--keep-cellapps")
        with _live_lock:
            _live_clusters.append(self)
        self._stopped = False
        log("cluster up: %d baseapp(s), %d cellapp(s) in %s" % (self.baseapps_count, self.cellapps_count, self.dir))
        try:
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  timeout=self.timeout + 30)
        except subprocess.TimeoutExpired as e:
            self._stop(grace=0.0)
            raise RuntimeError("scripts/cluster up hung (%s)\n%s" % (self.dir, e.stderr or ""))
        if proc.returncode != 0:
            self._stop(grace=0.0)
            raise RuntimeError("scripts/cluster up failed (exit %d) in %s:\n%s"
                               % (proc.returncode, self.dir, proc.stderr))
        lines = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
        with open(os.path.join(self.dir, "cluster.json")) as f:
            self.info = json.load(f)
        self.login = _hostport(lines["login"])
        self.baseapps = [_hostport(x) for x in lines["baseapps"].split(",") if x]
        self.redis = redis_client("127.0.0.1", self.info["redis_port"], timeout=5.0)
        return self

    def _stop(self, grace):
        """Runs `scripts/cluster down` (or, with grace 0, kills in-process:
        quicker than a child Python under a SIGTERM deadline). Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        with _live_lock:
            if self in _live_clusters:
                _live_clusters.remove(self)
        if self.redis is not None:
            self.redis.close()
        if self.dir is None:
            return
        if grace <= 0:
            tessera_cluster.down(self.dir, grace=0.0, quiet=True)
            return
        try:
            subprocess.run([sys.executable, CLUSTER_SCRIPT, "down", "--dir", self.dir, "--grace", str(grace)],
                           timeout=4 * grace + 30, check=False)
        except subprocess.TimeoutExpired:
            pass
        # Whatever the script did, nothing of ours survives.
        tessera_cluster.down(self.dir, grace=0.0, quiet=True)

    def stop(self):
        self._stop(grace=tessera_cluster.DOWN_GRACE_S)

    def restart_redis(self, pause_s=0.5, hard=True):
        """Kills the cluster's redis-server (SIGKILL when hard) and starts it
        again on the same port and data; the processes reconnect."""
        if self.redis is not None:
            self.redis.close()
        tessera_cluster.restart_redis(self.dir, pause_s=pause_s, hard=hard)
        with open(os.path.join(self.dir, "cluster.json")) as f:
            self.info = json.load(f)
        self.redis = redis_client("127.0.0.1", self.info["redis_port"], timeout=5.0)

    def add_cellapp(self, extra_set=()):
        """Starts one more cellapp (scripts/cluster add-cellapp); returns its
        name once it is registered and connected to the other cellapps."""
        items = [i[len("cellapp."):] if i.startswith("cellapp.") else i for i in extra_set]
        with open(os.devnull, "w") as quiet:
            proc = tessera_cluster.add_cellapp(self.dir, overrides=tessera_cluster.parse_set(items), out=quiet)
        with open(os.path.join(self.dir, "cluster.json")) as f:
            self.info = json.load(f)
        log("added %s (id %s)" % (proc["name"], proc["registry_id"]))
        return proc["name"]

    def balance_view(self):
        """The leader, the layouts and the load reports (tessera_cluster.balance_view)."""
        return tessera_cluster.balance_view(self.info)

    # -- processes

    def names(self, role=None):
        return [p["name"] for p in self.info["processes"] if role is None or p["role"] == role]

    def process(self, name):
        """The cluster.json entry of one process (name, role, pid, ports, config, log)."""
        for p in self.info["processes"]:
            if p["name"] == name:
                return p
        raise KeyError("no process %s in the cluster" % name)

    def pid(self, name):
        return self.process(name)["pid"]

    def alive(self, name):
        pid = self.pid(name)
        return tessera_cluster.pid_alive(pid) and tessera_cluster.pid_is(pid, tessera_cluster.program_of(name))

    def kill(self, name, sig="KILL"):
        """Signals one process (sig: "KILL", "STOP", "CONT", "TERM" or a number)."""
        if isinstance(sig, int):
            sig = signal.Signals(sig).name
        log("signal %s -> %s" % (sig, name))
        return tessera_cluster.kill(self.dir, name, sig)

    def log(self, name):
        """Everything the process wrote so far (stdout and stderr)."""
        path = os.path.join(self.dir, "logs", name + ".log")
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def status(self):
        """scripts/cluster status --json, as a dict."""
        return tessera_cluster.status(self.dir)

    def registry(self):
        """The live registry entries (hash fields as str, plus "id")."""
        return tessera_cluster.registry_entries(self.redis, self.info.get("cluster_name", "tessera"))

    def registry_hash(self, name):
        """The registry hash of one of our processes (matched by pid), or None
        if it is not (or no longer) registered."""
        return tessera_cluster.match_entry(self.registry(), self.process(name))

    def stat(self, name, field):
        """A numeric field of a process's registry hash as int, or None."""
        return tessera_cluster.stat_int(self.registry_hash(name), field)

    def admin(self, *args, check=True):
        """Runs tessera-admin against this cluster; returns its stdout."""
        return tessera_cluster.admin(self.info, list(args), check=check)

    def admin_result(self, *args):
        """Runs tessera-admin; returns the CompletedProcess (text), whatever
        its exit status."""
        argv = [os.path.join(self.build_dir, "client", "tessera-admin"), "--redis",
                "127.0.0.1:%d" % self.info["redis_port"], "--cluster", self.info.get("cluster_name", "tessera")]
        if self.info.get("admin_token_file"):
            argv += ["--admin-token-file", self.info["admin_token_file"]]
        return subprocess.run(argv + [str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=30)

    @property
    def admin_token(self):
        """The cluster's admin token (scripts/cluster writes one per cluster)."""
        return tessera_cluster.admin_token(self.info)

    def admin_http(self, port, path, method="GET", token=True, headers=None, timeout=5.0):
        """One request to the admin listener on 127.0.0.1:port, with the
        cluster's token unless token is None (or another string); returns
        (status, body, headers) (see tessera_cluster.admin_http)."""
        return tessera_cluster.admin_http(self.info, port, path, method=method, token=token, headers=headers,
                                          timeout=timeout)

    def registry_id(self, name):
        """The registry (process) id of one of our processes, as a string."""
        entry = self.registry_hash(name)
        if entry is None:
            raise AssertionError("%s is not registered" % name)
        return entry["id"]

    def wait_rejoined(self, name, old_id, timeout=20):
        """Waits for `name`, continued after it was declared dead, to learn
        so and join again as a new process; returns its new registry id."""
        wait_for(lambda: "declared dead by the cluster" in self.log(name), 15,
                 "%s to learn it was declared dead" % name)

        def rejoined():
            # Between its old entry's removal and its new one (the
            # re-executed process starts and registers) it is in the
            # registry under neither: not yet.
            entry = self.registry_hash(name)
            new_id = entry["id"] if entry else None
            return new_id if new_id and new_id != old_id else None
        new_id = wait_for(rejoined, timeout, "%s to join again as a new process" % name)
        log("%s rejoined as %s" % (name, new_id))
        return new_id

    def dump_states(self, names=None, timeout=15):
        """SIGUSR1 to each named process (default: every baseapp and
        cellapp that is alive); returns {name: its state dump document}."""
        if names is None:
            names = [n for n in self.names("baseapp") + self.names("cellapp") if self.alive(n)]
        state_dir = os.path.join(self.dir, "state")
        paths = {}
        for name in names:
            path = os.path.join(state_dir, name + ".json")
            if os.path.exists(path):
                os.remove(path)
            os.kill(self.pid(name), signal.SIGUSR1)
            paths[name] = path
        wait_for(lambda: all(os.path.exists(p) for p in paths.values()), timeout, "state dumps of %s" % names)
        out = {}
        for name, path in paths.items():
            with open(path) as f:
                out[name] = json.load(f)
        return out

    def dump_states_settled(self, names, settled, timeout=20):
        """dump_states(names) again every half second until settled(dumps)
        holds, or timeout seconds have passed (then the last dumps): the
        cellapps are dumped one after another, so an entity that moves
        between two dumps shows up in neither or in both, and a check of
        where the reals are wants a moment when none is on its way. A real
        that is lost stays lost: the caller's check still fails."""
        deadline = time.monotonic() + timeout
        while True:
            dumps = self.dump_states(names)
            if settled(dumps) or time.monotonic() > deadline:
                return dumps
            time.sleep(0.5)

    def all_alive(self):
        return all(self.alive(n) for n in self.names())

    def sanitizer_findings(self):
        """[(process name, excerpt)] for every log with an ASan/LSan/UBSan report."""
        out = []
        for p in self.info["processes"] if self.info else []:
            excerpt = sanitizer_report(self.log(p["name"]))
            if excerpt:
                out.append((p["name"], excerpt))
        return out

    def _dump_logs(self, lines=40):
        for p in self.info["processes"] if self.info else []:
            log("--- %s (last %d lines of %s)\n%s"
                % (p["name"], lines, p["log"], tessera_cluster.log_tail(p["log"], lines)))


_SANITIZER_RE = re.compile(r"ERROR: (Address|Leak|Memory|Thread)Sanitizer|SUMMARY: \w+Sanitizer|: runtime error: ")


def sanitizer_report(text, lines=40):
    """The first `lines` lines of a sanitizer report in text (a log or a
    program's stderr), or "" if there is none."""
    m = _SANITIZER_RE.search(text or "")
    if not m:
        return ""
    start = text.rfind("\n", 0, m.start()) + 1
    return "\n".join(text[start:].splitlines()[:lines])


def _hostport(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


# ---- bots ----------------------------------------------------------------------------


def bots_argv(cluster, count, seconds, extra_args=(), demo=True):
    """demo: the demo game's calls (tessera_cluster.DEMO_BOT_ARGS); another
    game names its own in extra_args."""
    host, port = cluster.login
    return ([BOTS_BIN, "--connect", "%s:%d" % (host, port), "--count", str(count), "--seconds", str(seconds),
             "--json"] + (tessera_cluster.DEMO_BOT_ARGS if demo else []) + [str(a) for a in extra_args])


def start_bots(cluster, count, seconds, extra_args=(), demo=True):
    """Starts tessera-bots in the background; finish with finish_bots().
    Their log goes to logs/bots-N.log in the run directory (kept when a
    test fails), the last lines of it to stderr when they end."""
    argv = bots_argv(cluster, count, seconds, extra_args, demo)
    log("bots: %s" % " ".join(argv))
    _install_handlers()
    logs = os.path.join(cluster.dir, "logs")
    os.makedirs(logs, exist_ok=True)
    number = 1
    while os.path.exists(os.path.join(logs, "bots-%d.log" % number)):
        number += 1
    log_path = os.path.join(logs, "bots-%d.log" % number)
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL)
    proc.tessera_seconds = seconds
    proc.tessera_log = log_path
    with _live_lock:
        _live_procs.append(proc)
    return proc


def finish_bots(proc, timeout=None):
    """Waits for bots started with start_bots and returns their JSON report
    (a dict, with "_exit_code" added). Raises AssertionError if they hang
    or print no JSON."""
    if timeout is None:
        timeout = getattr(proc, "tessera_seconds", 10) + 60
    def log_text():
        path = getattr(proc, "tessera_log", None)
        if not path:
            return b""
        with open(path, "rb") as f:
            return f.read()
    try:
        out, _ = proc.communicate(timeout=timeout)
        err = log_text()
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        err = log_text()
        raise AssertionError("tessera-bots did not finish within %.0f s; stderr:\n%s"
                             % (timeout, _tail(err)))
    finally:
        with _live_lock:
            if proc in _live_procs:
                _live_procs.remove(proc)
    text = out.decode("utf-8", "replace").strip()
    report = _last_json_object(text)
    if report is None:
        raise AssertionError("tessera-bots (exit %s) printed no JSON report\nstdout:\n%s\nstderr:\n%s"
                             % (proc.returncode, _tail(out), _tail(err)))
    report["_exit_code"] = proc.returncode
    if err:
        sys.stderr.write(_tail(err, 30) + "\n")
    return report


def run_bots(cluster, count, seconds, extra_args=()):
    """Runs `tessera-bots --connect <login> --count N --seconds S --json
    [extra_args]` to completion and returns its JSON report as a dict."""
    return finish_bots(start_bots(cluster, count, seconds, extra_args))


def _tail(data, lines=60):
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    return "\n".join((data or "").splitlines()[-lines:])


def _last_json_object(text):
    try:
        value = json.loads(text)
        return value if isinstance(value, dict) else None
    except ValueError:
        pass
    # Tolerate log lines before the report: take the last line that parses.
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
                if isinstance(value, dict):
                    return value
            except ValueError:
                continue
    return None


# ---- protobuf wire, just enough -------------------------------------------------------
#
# A message is a sequence of fields: key = varint(field_number << 3 | wire_type),
# then the value: wire type 0 varint, 1 fixed64, 2 length-delimited (varint
# length + bytes: strings, nested messages, packed repeated), 5 fixed32
# (floats).

WT_VARINT, WT_FIXED64, WT_LEN, WT_FIXED32 = 0, 1, 2, 5


def varint(n):
    if n < 0:
        n &= (1 << 64) - 1  # int32/int64 negatives are 10-byte two's complement
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire_type):
    return varint((field << 3) | wire_type)


def field_varint(field, value):
    return key(field, WT_VARINT) + varint(int(value))


def field_bytes(field, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    return key(field, WT_LEN) + varint(len(data)) + data


field_string = field_bytes
field_message = field_bytes


def field_float(field, value):
    return key(field, WT_FIXED32) + struct.pack("<f", value)


def frame(body):
    """A client frame: 4-byte big-endian length, then the body."""
    return struct.pack(">I", len(body)) + body


# Client messages (proto/client.proto). Each returns a ClientToServer body.

PROTOCOL_VERSION = 3


def vector3(x, y, z):
    return field_float(1, x) + field_float(2, y) + field_float(3, z)


def msg_hello(protocol_version=PROTOCOL_VERSION, client_name="integration-test"):
    return field_message(1, field_varint(1, protocol_version) + field_string(2, client_name))


def msg_login(account, password):
    return field_message(2, field_string(1, account) + field_string(2, password))


def msg_reconnect(account, session_token):
    return field_message(5, field_string(1, account) + field_string(2, session_token))


def msg_move(x, y, z, yaw=0.0, sequence=1):
    return field_message(3, field_message(1, vector3(x, y, z)) + field_float(2, yaw) + field_varint(3, sequence))


def msg_call(entity_id, part, method_id, args=b""):
    """ClientToServer.call: args are the method's arguments in
    property_codec's bit encoding, padded to a byte."""
    body = field_varint(1, entity_id) + field_varint(2, part) + field_varint(3, method_id)
    if args:
        body += field_bytes(4, args)
    return field_message(4, body)


def read_varint(data, pos):
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise ValueError("varint too long")


def parse_fields(data):
    """[(field, wire_type, value)] of one message; value is int for varints,
    bytes for length-delimited, raw 4/8 bytes for fixed32/fixed64. Raises
    ValueError on anything malformed."""
    fields = []
    pos = 0
    while pos < len(data):
        k, pos = read_varint(data, pos)
        field, wt = k >> 3, k & 7
        if field == 0:
            raise ValueError("field number 0")
        if wt == WT_VARINT:
            value, pos = read_varint(data, pos)
        elif wt == WT_FIXED64:
            value, pos = data[pos:pos + 8], pos + 8
        elif wt == WT_LEN:
            n, pos = read_varint(data, pos)
            value, pos = data[pos:pos + n], pos + n
        elif wt == WT_FIXED32:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError("wire type %d" % wt)
        if pos > len(data):
            raise ValueError("truncated field %d" % field)
        fields.append((field, wt, value))
    return fields


def _first(fields, number, default=None):
    for f, _wt, v in fields:
        if f == number:
            return v
    return default


def _float(raw):
    return struct.unpack("<f", raw)[0] if isinstance(raw, bytes) and len(raw) == 4 else 0.0


def _vector(raw):
    f = parse_fields(raw or b"")
    return (_float(_first(f, 1)), _float(_first(f, 2)), _float(_first(f, 3)))


SERVER_BODIES = {1: "hello", 2: "login_reply", 3: "view", 4: "correction", 5: "error", 6: "base_properties",
                 7: "teleported", 8: "player_destroyed", 9: "player_created", 10: "entered_space",
                 11: "login_redirect", 12: "call", 13: "event"}
ERROR_CODES = {
    "MALFORMED_FRAME": 1, "FRAME_TOO_LARGE": 2, "UNKNOWN_MESSAGE": 3, "NOT_LOGGED_IN": 4,
    "PROTOCOL_VERSION_MISMATCH": 5, "BAD_CREDENTIALS": 6, "UNAVAILABLE": 7, "OUT_OF_ORDER": 8,
    "INVALID_ARGUMENT": 9, "REPLACED": 10, "SLOW_CONSUMER": 11, "SERVER_SHUTDOWN": 12,
    "NOT_EXPOSED": 13, "BAD_ARGUMENTS": 14, "UNKNOWN_ENTITY": 15, "RATE_LIMITED": 16, "SESSION_EXPIRED": 17,
}

# EntityCall.part (client.proto's MethodPart).
PART_BASE, PART_CELL, PART_CLIENT = 0, 1, 2


def _game_event(raw):
    """A GameEvent's (event_id, source_id, args bytes)."""
    fields = parse_fields(raw)
    return (_first(fields, 1, 0), _first(fields, 2, 0), _first(fields, 3, b"") or b"")


def decode_server(body):
    """Decodes a ServerToClient body into a dict: {"field": N, "kind":
    "hello"/"login_reply"/"view"/"correction"/"error"/None, ...}; for error
    also "code" and "message"; for login_reply "entity_id" and "position";
    for correction "position", "sequence" and "reason"; for hello
    "protocol_version"; for view "events" and for event "event", game
    events as (event_id, source_id, args)."""
    fields = parse_fields(body)
    out = {"field": None, "kind": None}
    for number, wt, value in fields:
        if number in SERVER_BODIES and wt == WT_LEN:
            out["field"], out["kind"] = number, SERVER_BODIES[number]
            raw, inner = value, parse_fields(value)
            break
    else:
        if fields:
            out["field"] = fields[0][0]
        return out
    kind = out["kind"]
    if kind == "error":
        out["code"] = _first(inner, 1, 0)
        out["message"] = (_first(inner, 2, b"") or b"").decode("utf-8", "replace")
        out["retry_after_ms"] = _first(inner, 3, 0)
    elif kind == "login_reply":
        out["entity_id"] = _first(inner, 1, 0)
        out["position"] = _vector(_first(inner, 2))
        out["max_speed"] = _float(_first(inner, 6))
        out["entity_type"] = (_first(inner, 18, b"") or b"").decode("utf-8", "replace")
        out["max_frame_bytes"] = _first(inner, 19, 0)
        out["calls_per_second"] = _float(_first(inner, 21))
        out["login_timeout_ms"] = _first(inner, 22, 0)
        out["alias_cooldown_ms"] = _first(inner, 23, 0)
        out["session_token"] = (_first(inner, 25, b"") or b"").decode("ascii", "replace")
        out["detached_grace_ms"] = _first(inner, 26, 0)
        out["reconnected"] = bool(_first(inner, 27, 0))
        out["no_space"] = bool(_first(inner, 28, 0))
        out["baseapps"] = [value.decode("utf-8", "replace") for number, wt, value in inner
                           if number == 29 and wt == WT_LEN]
    elif kind == "view":
        # GameEvents (ViewUpdate.events): (event_id, source_id, args).
        out["events"] = [_game_event(value) for number, wt, value in inner if number == 8 and wt == WT_LEN]
    elif kind == "event":
        out["event"] = _game_event(raw)
    elif kind == "call":
        out["entity_id"] = _first(inner, 1, 0)
        out["method_id"] = _first(inner, 2, 0)
        out["args"] = _first(inner, 3, b"") or b""
    elif kind == "player_destroyed":
        out["entity_id"] = _first(inner, 1, 0)
    elif kind == "player_created":
        out["entity_id"] = _first(inner, 1, 0)
        out["entity_type"] = (_first(inner, 2, b"") or b"").decode("utf-8", "replace")
        out["session_token"] = (_first(inner, 3, b"") or b"").decode("ascii", "replace")
    elif kind == "entered_space":
        out["entity_id"] = _first(inner, 1, 0)
        out["position"] = _vector(_first(inner, 2))
        out["space_name"] = (_first(inner, 8, b"") or b"").decode("utf-8", "replace")
        out["max_aliases"] = _first(inner, 11, 0)
    elif kind == "correction":
        out["position"] = _vector(_first(inner, 1))
        out["sequence"] = _first(inner, 3, 0)
        out["reason"] = (_first(inner, 4, b"") or b"").decode("utf-8", "replace")
    elif kind == "hello":
        out["protocol_version"] = _first(inner, 1, 0)
    elif kind == "login_redirect":
        out["host"] = (_first(inner, 1, b"") or b"").decode("utf-8", "replace")
        out["port"] = _first(inner, 2, 0)
        out["token"] = (_first(inner, 3, b"") or b"").decode("utf-8", "replace")
    elif kind == "base_properties":
        out["entity_id"] = _first(inner, 1, 0)
        out["changes"] = _first(inner, 2, b"") or b""
    return out


# ---- sockets ----------------------------------------------------------------------------


class Closed(Exception):
    """The peer closed the connection (EOF or reset)."""


def connect(addr, timeout=5.0):
    s = socket.create_connection(addr, timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


# The part of a frame read before a timeout, kept per socket so that the
# next read goes on from there: dropping it would leave the stream in the
# middle of a frame, and the next "header" would be body bytes.
_partial_frames = weakref.WeakKeyDictionary()


def _recv_into(sock, buf, n, deadline):
    """Reads until `buf` holds `n` bytes; raises socket.timeout at the
    deadline (what was read stays in `buf`) and Closed on EOF or reset."""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out reading %d bytes (got %d)" % (n, len(buf)))
        sock.settimeout(left)
        try:
            chunk = sock.recv(n - len(buf))
        except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError) as e:
            raise Closed(str(e))
        if not chunk:
            raise Closed("EOF after %d of %d bytes" % (len(buf), n))
        buf += chunk


def read_frame(sock, timeout=5.0, max_bytes=64 << 20):
    """Reads one frame and returns its body (bytes). Returns None if the
    server closed the connection cleanly before a new frame started; raises
    Closed if it closed mid-frame or reset it, socket.timeout after
    `timeout` seconds (a frame cut by the timeout is finished by the next
    call on the same socket)."""
    deadline = time.monotonic() + timeout
    buf = _partial_frames.pop(sock, None) or bytearray()
    try:
        _recv_into(sock, buf, 4, deadline)
        (n,) = struct.unpack(">I", bytes(buf[:4]))
        if n > max_bytes:
            raise ValueError("server sent a frame of %d bytes" % n)
        _recv_into(sock, buf, 4 + n, deadline)
    except socket.timeout:
        _partial_frames[sock] = buf
        raise
    except Closed as e:
        if not buf and "EOF after 0 of" in str(e):
            return None
        raise
    return bytes(buf[4:])


def read_message(sock, timeout=5.0):
    """Reads one frame and decodes it (decode_server); None on clean EOF."""
    body = read_frame(sock, timeout)
    return None if body is None else decode_server(body)


def read_until(sock, kinds, timeout=5.0):
    """Reads messages until one whose kind is in `kinds` (a str or a set)
    arrives and returns it, skipping others (view updates...). Returns None
    on EOF; raises socket.timeout when `timeout` passes."""
    if isinstance(kinds, str):
        kinds = {kinds}
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("no %s within %.1f s" % ("/".join(sorted(kinds)), timeout))
        msg = read_message(sock, left)
        if msg is None or msg["kind"] in kinds:
            return msg


def expect_closed(sock, timeout=5.0):
    """True once the server has closed the connection (EOF or reset) within
    `timeout`; any frames before that are read and dropped. False if it is
    still open when the time is up."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            if read_frame(sock, left) is None:
                return True
        except Closed:
            return True
        except (socket.timeout, TimeoutError):
            return False


def still_open(sock, seconds=1.0):
    """True if the server neither closed the connection nor sent an error
    during the next `seconds` (frames that arrive meanwhile are read)."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        try:
            msg = read_message(sock, left)
        except Closed:
            return False
        except (socket.timeout, TimeoutError):
            return True
        if msg is None or msg["kind"] == "error":
            return False


def login(addr, account, password, timeout=10.0):
    """Connects, says hello, logs in; returns (socket, login_reply dict).
    Raises AssertionError with the server's error if the login is refused."""
    s = connect(addr)
    try:
        s.sendall(frame(msg_hello()))
        hello = read_until(s, {"hello", "error"}, timeout)
        if hello is None or hello["kind"] != "hello":
            raise AssertionError("hello refused: %r" % (hello,))
        s.sendall(frame(msg_login(account, password)))
        reply = read_until(s, {"login_reply", "error"}, timeout)
        if reply is None or reply["kind"] != "login_reply":
            raise AssertionError("login %r refused: %r" % (account, reply))
        return s, reply
    except BaseException:
        s.close()
        raise


def reconnect(addr, account, session_token, timeout=10.0):
    """Connects, says hello, sends a Reconnect; returns (socket, reply) where
    reply is the login_reply or the error dict (the socket then closes)."""
    s = connect(addr)
    try:
        s.sendall(frame(msg_hello()))
        hello = read_until(s, {"hello", "error"}, timeout)
        if hello is None or hello["kind"] != "hello":
            raise AssertionError("hello refused: %r" % (hello,))
        s.sendall(frame(msg_reconnect(account, session_token)))
        return s, read_until(s, {"login_reply", "error"}, timeout)
    except BaseException:
        s.close()
        raise


# ---- WebSocket clients (the baseapp's websocket_port) --------------------------------------


class WebSocket:
    """A browser's side of a WebSocket to a baseapp's websocket_port, by
    hand (RFC 6455), so tests can also send what no browser would: one
    binary message carries one client frame body (no 4-byte length).
    `open()` does the upgrade and returns the server's status line and
    headers; `send(body)` sends a masked binary message; `read_frame()`
    returns (opcode, payload) of the next frame from the server."""

    GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    def __init__(self, addr, timeout=5.0, receive_buffer=None):
        if receive_buffer:
            # Set before connecting: the window the kernel offers follows it.
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            self.sock.settimeout(timeout)
            self.sock.connect(addr)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        else:
            self.sock = connect(addr, timeout)
        self.buffer = bytearray()

    def close(self):
        self.sock.close()

    def open(self, path="/", headers=None, timeout=5.0):
        """The upgrade; returns (status line, {header: value}, leftover).
        Raises AssertionError unless it was answered 101 with the right
        accept key (pass headers to send other ones: then nothing is
        checked)."""
        import base64
        import hashlib
        key = base64.b64encode(os.urandom(16))
        lines = headers if headers is not None else [
            "Host: %s:%d" % self.sock.getpeername()[:2], "Upgrade: websocket", "Connection: Upgrade",
            "Sec-WebSocket-Key: " + key.decode(), "Sec-WebSocket-Version: 13"]
        self.sock.sendall(("GET %s HTTP/1.1\r\n" % path + "".join(h + "\r\n" for h in lines) + "\r\n").encode())
        status, answer = self.read_http(timeout)
        if headers is None:
            expected = base64.b64encode(hashlib.sha1(key + self.GUID).digest()).decode()
            if not status.startswith("HTTP/1.1 101") or answer.get("sec-websocket-accept") != expected:
                raise AssertionError("WebSocket upgrade refused: %s %r" % (status, answer))
        return status, answer

    def read_http(self, timeout=5.0):
        """The server's HTTP answer head: (status line, {lowercase header: value})."""
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buffer:
            self._more(deadline)
        head, _, rest = bytes(self.buffer).partition(b"\r\n\r\n")
        self.buffer = bytearray(rest)
        lines = head.decode("latin-1").split("\r\n")
        answer = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            answer[name.strip().lower()] = value.strip()
        return lines[0], answer

    def _more(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out reading from the WebSocket")
        self.sock.settimeout(left)
        try:
            chunk = self.sock.recv(65536)
        except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError) as e:
            raise Closed(str(e))
        if not chunk:
            raise Closed("EOF")
        self.buffer += chunk

    @staticmethod
    def encode(opcode, payload, fin=True, mask=True, rsv=0):
        """One client frame (masked unless told otherwise)."""
        head = bytearray([(0x80 if fin else 0) | rsv << 4 | opcode])
        n = len(payload)
        bit = 0x80 if mask else 0
        if n < 126:
            head.append(bit | n)
        elif n < 65536:
            head.append(bit | 126)
            head += struct.pack(">H", n)
        else:
            head.append(bit | 127)
            head += struct.pack(">Q", n)
        if not mask:
            return bytes(head) + payload
        key = os.urandom(4)
        return bytes(head) + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))

    def send(self, body, opcode=0x2):
        self.sock.sendall(self.encode(opcode, body))

    def read_frame(self, timeout=5.0):
        """(opcode, payload) of the next frame; raises Closed on EOF."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buffer) >= 2:
                n = self.buffer[1] & 0x7F
                at = 2
                if n == 126 and len(self.buffer) >= 4:
                    n = struct.unpack(">H", bytes(self.buffer[2:4]))[0]
                    at = 4
                elif n == 127 and len(self.buffer) >= 10:
                    n = struct.unpack(">Q", bytes(self.buffer[2:10]))[0]
                    at = 10
                if (self.buffer[1] & 0x7F) < 126 or at > 2:
                    if self.buffer[1] & 0x80:
                        raise AssertionError("the server masked a frame")
                    if len(self.buffer) >= at + n:
                        opcode = self.buffer[0] & 0x0F
                        payload = bytes(self.buffer[at:at + n])
                        del self.buffer[:at + n]
                        return opcode, payload
            self._more(deadline)

    def read_message(self, timeout=5.0):
        """The next binary message decoded (decode_server); control frames
        are returned as {"kind": "ws_close", "code": N} or skipped (pongs)."""
        deadline = time.monotonic() + timeout
        while True:
            opcode, payload = self.read_frame(max(0.01, deadline - time.monotonic()))
            if opcode == 0x2:
                return decode_server(payload)
            if opcode == 0x8:
                code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
                return {"kind": "ws_close", "code": code, "reason": payload[2:].decode("utf-8", "replace")}
            if opcode == 0xA:
                continue
            raise AssertionError("unexpected WebSocket opcode %d" % opcode)

    def read_until(self, kinds, timeout=5.0):
        """Messages until one of `kinds` (or a Close) arrives; returns it."""
        if isinstance(kinds, str):
            kinds = {kinds}
        deadline = time.monotonic() + timeout
        while True:
            msg = self.read_message(max(0.01, deadline - time.monotonic()))
            if msg["kind"] in kinds or msg["kind"] == "ws_close":
                return msg


def websocket_login(addr, account, password, timeout=10.0, receive_buffer=None):
    """login() over a WebSocket: returns (WebSocket, login_reply dict)."""
    ws = WebSocket(addr, receive_buffer=receive_buffer)
    try:
        ws.open()
        ws.send(msg_hello())
        hello = ws.read_until({"hello", "error"}, timeout)
        if hello["kind"] != "hello":
            raise AssertionError("hello refused: %r" % (hello,))
        ws.send(msg_login(account, password))
        reply = ws.read_until({"login_reply", "error"}, timeout)
        if reply["kind"] != "login_reply":
            raise AssertionError("login %r refused: %r" % (account, reply))
        return ws, reply
    except BaseException:
        ws.close()
        raise


# ---- running a program with a deadline ----------------------------------------------------


def run_with_timeout(argv, timeout, **kwargs):
    """subprocess.run(argv) capturing text stdout/stderr; the process is
    killed if it runs longer than `timeout`. Returns (returncode or None if
    it had to be killed, stdout, stderr, seconds taken)."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, errors="replace", **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        rc = None
    return rc, out, err, time.monotonic() - t0


_tls_stand_ins = {}


def make_tls_certificate(directory, name, common_name):
    """A self-signed EC certificate for `common_name` (its own CA), made
    with the openssl command: (certificate path, key path)."""
    certificate = os.path.join(directory, name + ".pem")
    key = os.path.join(directory, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=" + common_name,
                    "-addext", "subjectAltName=DNS:" + common_name], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return certificate, key


def tls_stand_in_sets():
    """--set arguments that point a production config's TLS files
    (/etc/tessera/tls/... do not exist here) at a certificate and key made
    for this run, so --check, which loads them, can pass."""
    if not _tls_stand_ins:
        directory = tempfile.mkdtemp(prefix="tessera-tls-stand-in-")
        atexit.register(shutil.rmtree, directory, True)
        _tls_stand_ins["files"] = make_tls_certificate(directory, "client", "tessera.test")
    certificate, key = _tls_stand_ins["files"]
    return ["--set", "client_tls_certificate_file=" + certificate, "--set", "client_tls_key_file=" + key]


def game_stand_in_sets():
    """--set arguments that point a production config's game (its entity
    definitions and module under /etc/tessera and /usr/local/lib/tessera,
    which do not exist here) at the demo's in this tree and build, so
    --check, which loads them, can pass."""
    return ["--set", "entity_definitions=" + os.path.join(SOURCE_DIR, "demo", "entities"),
            "--set", "game_module=" + os.path.join(BUILD_DIR, "demo", "libtessera_demo.so")]


_secret_stand_ins = {}


def secret_stand_in_sets():
    """--set arguments that point a production config's secret files
    (admin_token_file, redis_password_file: Secret mounts that do not exist
    here) at owner-only files made for this run, so --check, which reads
    them, can pass."""
    if not _secret_stand_ins:
        directory = tempfile.mkdtemp(prefix="tessera-secret-stand-in-")
        atexit.register(shutil.rmtree, directory, True)
        for key in ("admin_token_file", "redis_password_file"):
            path = os.path.join(directory, key)
            with open(path, "w") as f:
                f.write("stand-in-%s-0123456789abcdef\n" % key.replace("_", "-"))
            os.chmod(path, 0o600)
            _secret_stand_ins[key] = path
    sets = []
    for key, path in sorted(_secret_stand_ins.items()):
        sets += ["--set", "%s=%s" % (key, path)]
    return sets


def require_binaries(*paths):
    """Fails the test (clearly) if a program under test has not been built."""
    missing = [p for p in paths if not os.access(p, os.X_OK)]
    if missing:
        raise AssertionError("not built: %s (TESSERA_BUILD_DIR=%s)" % (", ".join(missing), BUILD_DIR))
