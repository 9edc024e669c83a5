"""tessera_cluster -- start, inspect and stop a local Tessera cluster.

Owns the operator side of a cluster on one machine: a private redis-server,
M cellapps and K baseapps on free 127.0.0.1 ports, each with its own flat JSON
config, log and pid file under one run directory:

    DIR/conf/<name>.json     the config the process was started with
    DIR/logs/<name>.log      its stdout + stderr (redis: DIR/logs/redis.log)
    DIR/pids/<name>.pid      its pid, while it is ours to stop
    DIR/redis/               redis's working directory: its append-only file
                             (appendfsync always: an acknowledged write
                             survives a crash); a later `up` in the same DIR
                             keeps accounts and stored entities (a cold start
                             clears only the control plane: registry, layouts,
                             directory, balancer lease)
    DIR/cluster.json         ports, pids and paths of everything, once ready
    DIR/admin_token          the cluster's admin token (mode 600), new at each
                             `up`: every process's admin_token_file

Processes are named redis, cellapp-1..M, baseapp-1..K. Each runs in its own
session (start_new_session) so a Ctrl-C in the terminal that ran `up` does not
reach it; `down` is the way to stop them.

Addresses: by default everything listens on 127.0.0.1. `--host ADDR` puts the
cluster on another local address instead (the processes' internal and client
listeners, and Redis, which also keeps 127.0.0.1 for the tools here);
`--process-host NAME=ADDR` moves one process's listeners to ADDR and
`--process-prefix NAME=COMMAND` starts it under COMMAND (e.g. `ip netns exec
NS`, with ADDR an address of that namespace). Admin listeners stay on
127.0.0.1 of wherever the process runs.

A game from a folder: `up --game DIR` runs the game DIR/game.json describes
instead of the demo (game_manifest): its entity definitions, its module
(optional: a game of definitions alone runs with the engine's rules), the
player's class and the game's own settings, paths relative to DIR. The
balancer retires a cellapp whose cells carry almost nothing (a load under
balance_retire_below, 0.02 by default) after a while: an idle world soon
runs on fewer cellapps than it was started with. `up --keep-cellapps` turns
that off for the run (balance_retire_below 0), for a test that needs its
cellapps. `up --lua` is the demo with its rules in Lua scripts instead of
its module (`--game demo/lua`: the same definitions, demo/lua/*.lua).

Admin listeners (common/admin_http.h): `up` gives each process a fixed free
admin_port, writes one random token per cluster to DIR/admin_token and sets
admin_token_file to it in every config, with admin_allowed_origins listing
every process's admin origin (http://127.0.0.1:<admin_port>), so the live map
served by one process may read the others. The map URL it prints carries the
token (?token=...); `admin_http` here sends it as a bearer header.

Also here: `redis_client`, the Redis client the integration tests and the
benchmarks use too (Debian's python3-redis, which scripts/deps installs),
and the registry readers (`registry_entries`).

The Redis server is whatever `redis-server` is on PATH, else redis-tools'
redis-check-rdb started as redis-server (`find_redis_server`): scripts/deps
installs redis-tools alone, not Debian's redis-server package and its
system service.

The registry (common/registry.h): every process keeps a hash
tessera:<cluster>:process:<id> alive with a TTL heartbeat and lists its id in
the set tessera:<cluster>:processes. The hash holds role, host, port, pid,
started_ms and the numbers it publishes (load, clients, entities, frames_in,
frames_out, cellapps, baseapps, ...).
"""

import argparse
import errno
import http.client
import importlib
import json
import os
import random
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time

# Where Debian installs its Python packages (python3-redis and the others
# scripts/deps installs), for its own /usr/bin/python3.
DEBIAN_DIST_PACKAGES = "/usr/lib/python3/dist-packages"


def import_debian_module(name, package):
    """Imports module `name`, which scripts/deps installs as the Debian
    package `package`. Debian installs it for /usr/bin/python3; a python3 of
    another installation that comes first on PATH (pyenv, a virtualenv)
    does not look there, so that directory is tried after this
    interpreter's own paths. Raises ImportError saying what to install."""
    try:
        return importlib.import_module(name)
    except ImportError:
        pass
    if os.path.isdir(DEBIAN_DIST_PACKAGES) and DEBIAN_DIST_PACKAGES not in sys.path:
        sys.path.append(DEBIAN_DIST_PACKAGES)
        try:
            return importlib.import_module(name)
        except ImportError:
            pass
    raise ImportError("the Python module '%s' is missing (Debian package %s): run scripts/deps"
                      % (name, package))


redis = import_debian_module("redis", "python3-redis")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEFAULT_CLUSTER_NAME = "tessera"

# Polling period while waiting for something (redis PING, readiness, exit).
POLL_S = 0.1
# How long `down` waits for each group after SIGTERM before SIGKILL.
DOWN_GRACE_S = 5.0
# Lines of a process's log shown when it fails to come up.
LOG_TAIL_LINES = 20

ROLE_BINARIES = {
    "baseapp": os.path.join("baseapp", "tessera-baseapp"),
    "cellapp": os.path.join("cellapp", "tessera-cellapp"),
}
ADMIN_BINARY = os.path.join("client", "tessera-admin")
# The demo game's module (demo/meson.build), which every process loads.
DEMO_MODULE = os.path.join("demo", "libtessera_demo.so")
# The demo game with its rules in Lua (demo/lua/game.json: the same
# definitions, scripts instead of the module): `up --lua`.
DEMO_LUA = os.path.join(REPO_ROOT, "demo", "lua")
# What tessera-bots calls in the demo game (demo/entities/Avatar.json):
# chat and castSpell at random, the numbered ping and relayPing, and the
# GM teleport. The bots know no game; these name the demo's methods.
DEMO_BOT_ARGS = ["--call", "base:chat", "--call", "cell:castSpell", "--ping-call", "cell:ping",
                 "--ping-call", "base:relayPing", "--teleport-call", "teleport"]

# The space every cluster starts with (the demo's world): -500 .. 500 on X
# and Z, split into one cell per cellapp.
DEFAULT_SPACE = "default"
DEFAULT_BOUNDS = (-500, -500, 500, 500)


class ClusterError(Exception):
    """An operator-facing failure; the message is what to print."""


# ---- Redis client -------------------------------------------------------------

# Any failure of a command: the server unreachable or gone
# (redis.ConnectionError), a timeout (redis.TimeoutError), an error reply
# (redis.ResponseError).
RedisError = redis.RedisError


class _Redis(redis.Redis):
    """redis.Redis whose close() closes its connections (python3-redis 4.3
    only hands them back to the client's own pool, where they stay open)."""

    def close(self):
        super().close()
        self.connection_pool.disconnect()


def redis_client(host="127.0.0.1", port=6379, timeout=5.0):
    """A client of the Redis at host:port (redis-py; use it with `with` or
    close() it). Replies come decoded to str (bytes that are not UTF-8
    replaced); every command waits up to `timeout` seconds, and a failure
    raises RedisError. It connects at its first command, and again at the
    next one after its connection was lost."""
    return _Redis(host=host, port=int(port), socket_timeout=timeout, socket_connect_timeout=timeout,
                  decode_responses=True, encoding_errors="replace")


def redis_error_text(e):
    """What went wrong, for a message: the socket's own words where the
    failure was one ("[Errno 111] Connection refused", "timed out"), else
    redis-py's."""
    cause = e.__cause__ or e.__context__
    if isinstance(e, (redis.ConnectionError, redis.TimeoutError)) and isinstance(cause, OSError) and str(cause):
        return str(cause)
    return str(e) or e.__class__.__name__


def redis_alive(port, host="127.0.0.1", timeout=0.5):
    try:
        with redis_client(host, port, timeout=timeout) as r:
            return r.ping()
    except (OSError, RedisError, ValueError):
        return False


# ---- registry -------------------------------------------------------------------


def registry_prefix(cluster_name=DEFAULT_CLUSTER_NAME):
    return "tessera:%s:" % cluster_name


def registry_entries(r, cluster_name=DEFAULT_CLUSTER_NAME):
    """The live registered processes (read with `r`, a redis_client): a list
    of their hashes (str -> str) with an added "id" field, sorted by id. Ids in the set whose hash has expired
    are left out (that is how the registry says a process is gone)."""
    prefix = registry_prefix(cluster_name)
    entries = []
    for pid in sorted(r.smembers(prefix + "processes")):
        h = r.hgetall(prefix + "process:" + pid)
        if h:
            h["id"] = pid
            entries.append(h)
    entries.sort(key=lambda h: (len(h["id"]), h["id"]))
    return entries


def stat_int(entry, field, default=None):
    """A numeric registry field as int (None/default if absent or not a number)."""
    if entry is None:
        return default
    try:
        return int(float(entry.get(field)))
    except (TypeError, ValueError):
        return default


def match_entry(entries, proc):
    """The registry entry of one of our processes (matched by pid and role),
    or None."""
    for e in entries:
        if stat_int(e, "pid") == proc["pid"] and e.get("role", proc["role"]) == proc["role"]:
            return e
    return None


# ---- processes ----------------------------------------------------------------


def _ephemeral_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(n, host="127.0.0.1"):
    """n distinct TCP ports that were free a moment ago, all held open
    together while choosing so they differ.

    Ports come from below the kernel's ephemeral range when there is room
    there: a port that bind(0) handed out is free again once we close it, and
    until the server binds it, any outgoing connection (a process's Redis
    connection, say) may take it as its source port. Below the range only
    another explicit bind can. Where there is no room, bind(0) and read back."""
    lo, _hi = _ephemeral_range()
    rng = random.Random(os.urandom(16))
    low_band = (10000, lo - 1) if lo - 10000 >= 2000 else None
    socks = []
    try:
        tries = 0
        while len(socks) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            port = 0
            if low_band is not None and tries < 50 * n:
                port = rng.randint(*low_band)
                tries += 1
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def pid_alive(pid):
    """True if pid is a running (or stopped) process; a zombie counts as dead."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
        # The state follows the ")" that ends the command name.
        state = stat[stat.rindex(b")") + 2:][:1]
        return state not in (b"Z", b"X")
    except (OSError, ValueError):
        return True


def pid_state(pid):
    """"running", "stopped" (SIGSTOP, tracing) or "dead" (gone or a zombie)."""
    if not pid_alive(pid):
        return "dead"
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
        if stat[stat.rindex(b")") + 2:][:1] in (b"T", b"t"):
            return "stopped"
    except (OSError, ValueError):
        pass
    return "running"


def pid_is(pid, expected):
    """True if pid still runs the program `expected` (a basename such as
    "tessera-baseapp" or "redis-server"), so a recycled pid is never
    signalled. Where /proc is unreadable, trusts the pid."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        with open("/proc/%d/comm" % pid, "rb") as f:
            comm = f.read().strip().decode("utf-8", "replace")
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return expected in cmdline or expected.startswith(comm) and len(comm) >= 8


def role_of(name):
    return name.split("-", 1)[0]


def program_of(name):
    role = role_of(name)
    return "redis-server" if role == "redis" else "tessera-" + role


def name_order(name):
    """baseapps first, then cellapps, then redis; numerically within a role."""
    role = role_of(name)
    rank = {"baseapp": 0, "cellapp": 1}.get(role, 2 if role == "redis" else 1)
    try:
        n = int(name.split("-", 1)[1])
    except (IndexError, ValueError):
        n = 0
    return (rank, n, name)


class RunDir:
    """Paths inside a cluster's run directory."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.logs = os.path.join(self.path, "logs")
        self.pids = os.path.join(self.path, "pids")
        self.conf = os.path.join(self.path, "conf")
        self.redis = os.path.join(self.path, "redis")
        self.cluster_json = os.path.join(self.path, "cluster.json")
        self.sample_json = os.path.join(self.path, ".status-sample.json")

    def make(self):
        for d in (self.path, self.logs, self.pids, self.conf, self.redis, os.path.join(self.path, "state")):
            os.makedirs(d, exist_ok=True)

    def log(self, name):
        return os.path.join(self.logs, name + ".log")

    def pidfile(self, name):
        return os.path.join(self.pids, name + ".pid")

    def config(self, name):
        return os.path.join(self.conf, name + ".json")

    @property
    def admin_token_file(self):
        return os.path.join(self.path, "admin_token")

    def state_dump(self, name):
        return os.path.join(self.path, "state", name + ".json")

    def read_pids(self):
        """{name: pid} from DIR/pids/*.pid (unreadable files are skipped)."""
        out = {}
        try:
            names = os.listdir(self.pids)
        except FileNotFoundError:
            return out
        for fn in names:
            if not fn.endswith(".pid"):
                continue
            try:
                with open(os.path.join(self.pids, fn)) as f:
                    out[fn[:-4]] = int(f.read().strip())
            except (OSError, ValueError):
                continue
        return out

    def write_pid(self, name, pid):
        tmp = self.pidfile(name) + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % pid)
        os.replace(tmp, self.pidfile(name))

    def remove_pid(self, name):
        try:
            os.unlink(self.pidfile(name))
        except FileNotFoundError:
            pass

    def load_cluster(self):
        try:
            with open(self.cluster_json) as f:
                return json.load(f)
        except FileNotFoundError:
            raise ClusterError("no cluster in %s (no cluster.json; did `up` succeed?)" % self.path)
        except ValueError as e:
            raise ClusterError("%s: unreadable: %s" % (self.cluster_json, e))


def log_tail(path, lines=LOG_TAIL_LINES):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError as e:
        return "(no log: %s)" % e
    tail = data.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(log is empty)"


def _spawn(argv, log_path, env=None, executable=None):
    """Starts argv in its own session, output to log_path; `executable`
    is the file to run when it is not argv[0] (which the program is then
    only told as its name). argv may start with a command that execs the
    rest (`ip netns exec NS`): the pid is then the program's own."""
    with open(log_path, "wb") as log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, env=env, executable=executable)


def parse_set(items):
    """["key=value", ...] -> {key: value}; value is JSON if it parses, else a string."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise ClusterError("--set %r: expected KEY=VALUE" % item)
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key:
            raise ClusterError("--set %r: empty key" % item)
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


PROCESS_NAME = re.compile(r"^(baseapp|cellapp)-[0-9]+$")


def overrides_for(role, overrides, name=None):
    """The overrides that apply to a process of `role` (named `name`): plain
    keys apply to every process, "cellapp.KEY" and "baseapp.KEY" to that
    role only, "baseapp-2.KEY" to that process only. A key with a dot left
    ("game.npc_count") names a member of an object setting (the game
    module's "game" object)."""
    out = {}
    for key, value in overrides.items():
        prefix, dot, rest = key.partition(".")
        if dot and (prefix in ("baseapp", "cellapp") or PROCESS_NAME.match(prefix)):
            if prefix not in (role, name):
                continue
            key = rest
        group, dot, member = key.partition(".")
        if dot:
            out.setdefault(group, {})[member] = value
        else:
            out[key] = value
    return out


def apply_overrides(conf, overrides):
    """conf.update(overrides), merging object settings member by member."""
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(conf.get(key), dict):
            conf[key].update(value)
        else:
            conf[key] = value


def _signal(name, pid, sig):
    """Sends sig to pid if it is still the process we started; True if sent."""
    if not pid_alive(pid) or not pid_is(pid, program_of(name)):
        return False
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def down(rundir, grace=DOWN_GRACE_S, children=None, quiet=False):
    """Stops every process with a pid file in rundir: SIGTERM to the baseapps,
    up to `grace` seconds for them to exit, then SIGKILL to what is left;
    then the same for the cellapps (with SIGINT: the whole cluster is
    stopping, so they stop at once rather than drain their cells to each
    other, which is what SIGTERM asks of one cellapp), then redis. Removes
    the pid files.
    Idempotent: nothing running is fine. `children` ({name: Popen}) are
    reaped when they are our own children. Returns the names it had to
    SIGKILL."""
    rd = rundir if isinstance(rundir, RunDir) else RunDir(rundir)
    pids = rd.read_pids()
    killed = []
    groups = {}
    for name in sorted(pids, key=name_order):
        groups.setdefault(name_order(name)[0], []).append(name)
    for rank in sorted(groups):
        names = groups[rank]
        live = []
        for name in names:
            pid = pids[name]
            stop = signal.SIGINT if role_of(name) == "cellapp" else signal.SIGTERM
            if _signal(name, pid, stop):
                # A stopped process cannot act on SIGTERM until it runs again.
                _signal(name, pid, signal.SIGCONT)
                live.append(name)
        deadline = time.monotonic() + grace
        while live:
            _reap(children)
            live = [n for n in live if pid_alive(pids[n])]
            if not live or time.monotonic() >= deadline:
                break
            time.sleep(POLL_S / 2)
        for name in live:
            if _signal(name, pids[name], signal.SIGKILL):
                killed.append(name)
                if not quiet:
                    print("down: %s (pid %d) did not stop within %.0f s; killed" % (name, pids[name], grace),
                          file=sys.stderr)
        if live:
            deadline = time.monotonic() + 2.0
            while any(pid_alive(pids[n]) for n in live) and time.monotonic() < deadline:
                _reap(children)
                time.sleep(POLL_S / 2)
        for name in names:
            rd.remove_pid(name)
    _reap(children)
    return killed


def _reap(children):
    for proc in (children or {}).values():
        try:
            proc.poll()
        except OSError:
            pass


def _stderr(msg):
    print(msg, file=sys.stderr, flush=True)


def _check_not_running(rd):
    running = [n for n, pid in rd.read_pids().items() if pid_alive(pid) and pid_is(pid, program_of(n))]
    if running:
        raise ClusterError("a cluster is already running in %s (%s); run `scripts/cluster down --dir %s` first"
                           % (rd.path, ", ".join(sorted(running, key=name_order)), rd.path))
    for name in rd.read_pids():
        rd.remove_pid(name)


def write_admin_token(path):
    """Writes a new random admin token to path (mode 600, made so before a
    byte is written); returns it."""
    token = secrets.token_hex(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)
    return token


def admin_token(cluster):
    """The cluster's admin token (from cluster.json's admin_token_file), or
    None when it has none."""
    path = cluster.get("admin_token_file")
    if not path:
        return None
    with open(path) as f:
        return f.read().strip()


def admin_http(cluster, port, path, method="GET", token=True, headers=None, host="127.0.0.1", timeout=5.0):
    """One request to a process's admin listener at host:port. token: True
    sends the cluster's token as "Authorization: Bearer", a string sends
    that one, None sends none. Returns (status, body as str, headers as a
    dict with lower-case names)."""
    send = {"Host": "%s:%d" % (host, port)}
    if token is True:
        token = admin_token(cluster)
    if token:
        send["Authorization"] = "Bearer " + token
    send.update(headers or {})
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in send.items():
            conn.putheader(name, value)
        conn.endheaders(b"" if method == "POST" else None)
        response = conn.getresponse()
        body = response.read().decode(errors="replace")
        return response.status, body, {k.lower(): v for k, v in response.getheaders()}
    finally:
        conn.close()


def admin(cluster, args, check=True):
    """Runs tessera-admin against the cluster's Redis (with the cluster's
    admin token); returns its stdout. Raises ClusterError with its stderr
    when it fails and `check`."""
    binary = os.path.join(cluster["build_dir"], ADMIN_BINARY)
    argv = [binary, "--redis", "127.0.0.1:%d" % cluster["redis_port"],
            "--cluster", cluster.get("cluster_name", DEFAULT_CLUSTER_NAME)]
    if cluster.get("admin_token_file"):
        argv += ["--admin-token-file", cluster["admin_token_file"]]
    argv += [str(a) for a in args]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise ClusterError("tessera-admin %s failed (exit %d): %s"
                           % (" ".join(str(a) for a in args), proc.returncode, proc.stderr.strip()))
    return proc.stdout


def _grid_for(count, grid=None):
    """(columns, rows) for `count` cells: `grid` ("CxR") if given, else as
    square as the count allows (4 -> 2x2, 2 -> 2x1, 6 -> 3x2)."""
    if grid:
        try:
            columns, rows = (int(v) for v in grid.lower().split("x"))
        except ValueError:
            raise ClusterError("--grid %r: expected COLUMNSxROWS, e.g. 2x2" % grid)
        if columns * rows != count:
            raise ClusterError("--grid %s has %d cells, but there are %d cellapps (one cell each)"
                               % (grid, columns * rows, count))
        return columns, rows
    columns = int(count ** 0.5 + 0.999999)
    while count % columns:
        columns -= 1
    rows = count // columns
    return max(columns, rows), min(columns, rows)


def _create_default_space(cluster, procs, grid, bounds, spawn_radius, deadline):
    """Writes the default space split into one cell per cellapp, then waits
    until every cellapp holds its cell."""
    cellapp_ids = [p["registry_id"] for p in procs if p["role"] == "cellapp"]
    columns, rows = _grid_for(len(cellapp_ids), grid)
    args = ["create", DEFAULT_SPACE, "--grid", "%dx%d" % (columns, rows),
            "--bounds", ",".join(str(v) for v in bounds), "--cellapps", ",".join(cellapp_ids)]
    if spawn_radius is not None:
        centre_x = (bounds[0] + bounds[2]) / 2.0
        centre_z = (bounds[1] + bounds[3]) / 2.0
        args += ["--spawn", "%g,%g,%g" % (centre_x, centre_z, spawn_radius)]
    admin(cluster, args)
    with redis_client("127.0.0.1", cluster["redis_port"], timeout=2.0) as r:
        while True:
            entries = registry_entries(r, cluster.get("cluster_name", DEFAULT_CLUSTER_NAME))
            holding = [e for e in entries if e.get("role") == "cellapp" and stat_int(e, "cells", 0) >= 1]
            if len(holding) >= len(cellapp_ids):
                return
            if time.monotonic() >= deadline:
                raise ClusterError("cellapps did not take their cells of space '%s' in time (%d of %d hold one)"
                                   % (DEFAULT_SPACE, len(holding), len(cellapp_ids)))
            time.sleep(POLL_S)


def game_manifest(game_dir):
    """What DIR/game.json says a game is, its paths made absolute:
    {"entity_definitions": DIR (required), "game_module": FILE or "" (a
    module is optional), "game_scripts": DIR or "" (Lua scripts, optional;
    docs/lua.md), "player_entity_type": CLASS (required), "game": {its own
    settings} (optional)}. Raises ClusterError naming the file and the
    problem."""
    path = os.path.join(game_dir, "game.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except OSError as e:
        raise ClusterError("--game %s: cannot read %s: %s" % (game_dir, path, e.strerror))
    except ValueError as e:
        raise ClusterError("--game %s: %s is not JSON: %s" % (game_dir, path, e))
    if not isinstance(manifest, dict):
        raise ClusterError("%s: expected an object" % path)
    known = {"entity_definitions", "game_module", "game_scripts", "player_entity_type", "game"}
    unknown = sorted(set(manifest) - known)
    if unknown:
        raise ClusterError("%s: unknown key(s) %s (known: %s)" % (path, ", ".join(unknown), ", ".join(sorted(known))))
    for key in ("entity_definitions", "player_entity_type"):
        if not isinstance(manifest.get(key), str) or not manifest[key]:
            raise ClusterError("%s: %s is required (a string)" % (path, key))
    if (not isinstance(manifest.get("game_module", ""), str) or not isinstance(manifest.get("game_scripts", ""), str)
            or not isinstance(manifest.get("game", {}), dict)):
        raise ClusterError("%s: game_module and game_scripts are paths and game an object" % path)
    base = os.path.dirname(os.path.abspath(path))
    resolved = {"entity_definitions": os.path.join(base, manifest["entity_definitions"]),
                "game_module": os.path.join(base, manifest["game_module"]) if manifest.get("game_module") else "",
                "game_scripts": os.path.join(base, manifest["game_scripts"]) if manifest.get("game_scripts") else "",
                "player_entity_type": manifest["player_entity_type"],
                "game": manifest.get("game", {})}
    if not os.path.isdir(resolved["entity_definitions"]):
        raise ClusterError("%s: entity_definitions %s is not a directory" % (path, resolved["entity_definitions"]))
    if resolved["game_module"] and not os.path.isfile(resolved["game_module"]):
        raise ClusterError("%s: game_module %s does not exist (build it first)" % (path, resolved["game_module"]))
    if resolved["game_scripts"] and not os.path.isdir(resolved["game_scripts"]):
        raise ClusterError("%s: game_scripts %s is not a directory" % (path, resolved["game_scripts"]))
    return resolved


def up(dir_path, baseapps=1, cellapps=2, build="build", auto_create_accounts=True, overrides=None,
       timeout=30.0, redis_server=None, out=sys.stdout, grid=None, bounds=DEFAULT_BOUNDS, spawn_radius=None,
       host="127.0.0.1", process_hosts=None, process_prefixes=None, game=None, keep_cellapps=False):
    """Starts a cluster in dir_path and waits until it is ready (see the
    module doc). Returns the cluster description (what cluster.json holds).
    Raises ClusterError after tearing down whatever it started.
    host: the local address the processes and Redis listen on (Redis on
    127.0.0.1 too); process_hosts {name: address} and process_prefixes
    {name: [argv...]}: one process elsewhere (see the module doc); game: a
    folder with a game.json (game_manifest; None: the demo); keep_cellapps:
    the balancer retires none for being idle."""
    if baseapps < 1 or cellapps < 1:
        raise ClusterError("need at least one baseapp and one cellapp (got %d and %d)" % (baseapps, cellapps))
    overrides = dict(overrides or {})
    build_dir = build if os.path.isabs(build) else os.path.join(REPO_ROOT, build)
    binaries = {}
    for role, rel in list(ROLE_BINARIES.items()) + [("admin", ADMIN_BINARY)]:
        path = os.path.join(build_dir, rel)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise ClusterError("%s not found at %s; build first (scripts/build)" % (role, path))
        binaries[role] = path
    _grid_for(cellapps, grid)  # a bad --grid fails before anything starts
    process_hosts = dict(process_hosts or {})
    process_prefixes = dict(process_prefixes or {})
    known = ["cellapp-%d" % i for i in range(1, cellapps + 1)] + ["baseapp-%d" % j for j in range(1, baseapps + 1)]
    for name in sorted(set(process_hosts) | set(process_prefixes)):
        if name not in known:
            raise ClusterError("no process %s in a cluster of %d baseapp(s) and %d cellapp(s)"
                               % (name, baseapps, cellapps))
    redis_server = redis_server or find_redis_server()
    manifest = game_manifest(game) if game else None

    rd = RunDir(dir_path)
    rd.make()
    _check_not_running(rd)
    for stale in (rd.cluster_json, rd.sample_json):
        try:
            os.unlink(stale)
        except FileNotFoundError:
            pass

    cluster_name = overrides.get("cluster_name", DEFAULT_CLUSTER_NAME)
    children = {}
    procs = []
    ok = False
    try:
        # Redis first; everything else registers with it.
        (redis_port,) = free_ports(1, host)
        redis_log = rd.log("redis")
        kept = os.path.isdir(os.path.join(rd.redis, REDIS_AOF_DIR))
        deadline = time.monotonic() + timeout
        children["redis"] = _start_redis(rd, redis_server, redis_port, deadline, timeout, host)
        if kept:
            _cold_start(redis_port, cluster_name, out)

        # Configs and starts: cellapps before baseapps.
        names = ["cellapp-%d" % i for i in range(1, cellapps + 1)] + \
                ["baseapp-%d" % j for j in range(1, baseapps + 1)]
        # Admin listeners stay on 127.0.0.1 (see the module doc); each gets
        # its port now, chosen with the others so that none is taken twice,
        # so that every config can list every admin origin.
        chosen = free_ports(cellapps + 3 * baseapps + len(names), host)
        admin_ports = dict(zip(names, chosen[:len(names)]))
        ports = iter(chosen[len(names):])
        write_admin_token(rd.admin_token_file)
        admin_origins = ",".join("http://127.0.0.1:%d" % admin_ports[n] for n in names)
        for name in names:
            role = role_of(name)
            own_host = process_hosts.get(name, host)
            conf = {
                "cluster_name": DEFAULT_CLUSTER_NAME,
                "redis_host": host,
                "redis_port": redis_port,
                "internal_host": own_host,
                "internal_port": next(ports),
                "log_level": "info",
                "heartbeat_ms": 500,
                "registry_ttl_ms": 2000,
                # The demo game's entity types: every process loads the same.
                "entity_definitions": (manifest["entity_definitions"] if manifest
                                       else os.path.join(REPO_ROOT, "demo", "entities")),
                # Where SIGUSR1 writes the process's entity state.
                "state_dump_path": rd.state_dump(name),
                "admin_port": admin_ports[name],
                "admin_token_file": rd.admin_token_file,
                "admin_allowed_origins": admin_origins,
            }
            # The demo game's rules, as the module scripts/build made; its
            # own settings go in "game" (--set cellapp.game.NAME=V).
            conf["game_module"] = manifest["game_module"] if manifest else os.path.join(build_dir, DEMO_MODULE)
            conf["game"] = dict(manifest["game"]) if manifest else {}
            if manifest and manifest["game_scripts"]:
                conf["game_scripts"] = manifest["game_scripts"]
            if role == "cellapp" and keep_cellapps:
                conf["balance_retire_below"] = 0
            if role == "baseapp":
                conf.update({
                    "player_entity_type": manifest["player_entity_type"] if manifest else "Avatar",
                    "client_host": own_host,
                    "client_port": next(ports),
                    # Browsers' clients (WebSocket), on the same host.
                    "websocket_port": next(ports),
                    "auto_create_accounts": bool(auto_create_accounts),
                    # Cheap password hashing: tests log in hundreds of bots.
                    "password_ops_limit": 1,
                    "password_mem_limit_kib": 8192,
                })
            apply_overrides(conf, overrides_for(role, overrides, name))
            with open(rd.config(name), "w") as f:
                json.dump(conf, f, indent=2)
                f.write("\n")
            proc = {
                "name": name,
                "role": role,
                "binary": binaries[role],
                "config": rd.config(name),
                "log": rd.log(name),
                "host": conf.get("internal_host"),
                "internal_port": conf.get("internal_port"),
            }
            if role == "baseapp":
                proc["client_port"] = conf.get("client_port")
                proc["client_host"] = conf.get("client_host")
                proc["websocket_port"] = conf.get("websocket_port")
            prefix = list(process_prefixes.get(name, []))
            if prefix:
                proc["prefix"] = prefix
            children[name] = _spawn(prefix + [binaries[role], "--config", rd.config(name)], rd.log(name))
            proc["pid"] = children[name].pid
            rd.write_pid(name, proc["pid"])
            procs.append(proc)
        _stderr("cluster: redis on %s:%d, started %s; waiting (up to %.0f s) for the registry"
                % (host, redis_port, ", ".join(names), timeout))

        _wait_ready(rd, procs, children, redis_port, cluster_name, baseapps, cellapps, deadline, timeout)

        first_baseapp = next(p for p in procs if p["role"] == "baseapp")
        redis_proc = {"name": "redis", "role": "redis", "pid": children["redis"].pid, "host": host,
                      "port": redis_port, "log": redis_log, "config": None}
        cluster = {
            "dir": rd.path,
            "build_dir": build_dir,
            "cluster_name": cluster_name,
            # The tools here reach Redis on 127.0.0.1 whatever `host` is.
            "redis_host": "127.0.0.1",
            "redis_port": redis_port,
            "host": host,
            "started_at": time.time(),
            "admin_token_file": rd.admin_token_file,
            "login": "%s:%d" % (first_baseapp["client_host"], first_baseapp["client_port"]),
            "baseapps": ["%s:%d" % (p["client_host"], p["client_port"]) for p in procs if p["role"] == "baseapp"],
            "websockets": ["%s:%d" % (p["client_host"], p["websocket_port"]) for p in procs
                           if p["role"] == "baseapp" and int(p.get("websocket_port") or -1) > 0],
            "processes": [redis_proc] + procs,
        }
        _create_default_space(cluster, procs, grid, bounds, spawn_radius, deadline)
        tmp = rd.cluster_json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(cluster, f, indent=2)
            f.write("\n")
        os.replace(tmp, rd.cluster_json)
        print("login=%s" % cluster["login"], file=out)
        print("redis=127.0.0.1:%d" % redis_port, file=out)
        print("baseapps=%s" % ",".join(cluster["baseapps"]), file=out)
        if cluster["websockets"]:
            print("websockets=%s" % ",".join("ws://" + w + "/" for w in cluster["websockets"]), file=out)
            # The play page each baseapp serves on its WebSocket port.
            print("play=http://%s/play" % cluster["websockets"][0], file=out)
        url = map_url(cluster)
        if url:
            print("map=%s" % url, file=out)
        out.flush()
        ok = True
        return cluster
    finally:
        if not ok:
            _stderr("cluster: tearing down %s" % rd.path)
            down(rd, grace=2.0, children=children, quiet=True)


# Redis 7 keeps its append-only files in this directory of its --dir.
REDIS_AOF_DIR = "appendonlydir"


def _start_redis(rd, redis_server, redis_port, deadline, timeout, host="127.0.0.1"):
    """Starts the cluster's redis-server on redis_port, durable (append-only,
    fsync before each acknowledgement), and waits for its PING. It listens
    on 127.0.0.1 and on `host` when that is another address."""
    redis_log = rd.log("redis")
    binds = ["127.0.0.1"] + ([host] if host != "127.0.0.1" else [])
    # Protected mode refuses every client not on the loopback (there is no
    # password): off when the cluster is on another address, which only
    # the addresses bound here expose.
    protected = "yes" if host == "127.0.0.1" else "no"
    # Named redis-server whatever the file is called (find_redis_server).
    child = _spawn(["redis-server", "--bind"] + binds + ["--port", str(redis_port), "--dir", rd.redis,
                    "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                    "--appenddirname", REDIS_AOF_DIR, "--protected-mode", protected, "--daemonize", "no"], redis_log,
                   executable=redis_server)
    rd.write_pid("redis", child.pid)
    while not redis_alive(redis_port):
        if child.poll() is not None:
            raise ClusterError("redis exited early (status %s)\n--- %s (last %d lines)\n%s"
                               % (child.returncode, redis_log, LOG_TAIL_LINES, log_tail(redis_log)))
        if time.monotonic() >= deadline:
            raise ClusterError("redis did not answer PING on port %d within %.0f s\n--- %s\n%s"
                               % (redis_port, timeout, redis_log, log_tail(redis_log)))
        time.sleep(POLL_S)
    return child


# The control plane: what the processes of one run write about themselves
# (the registry, layouts, the cell directory, the balancer's lease, the
# session directory and login tokens). A cold start of the whole cluster
# clears it (none of those processes is left) and keeps the rest: accounts,
# stored entities, the id counters and the balancer's fence (which must
# only grow).
CONTROL_PLANE_KEYS = ("processes", "spaces", "cell_directory", "balancer_lease", "cell_loads")
CONTROL_PLANE_PATTERNS = ("process:*", "space:*", "session:*", "login_token:*")


def _cold_start(redis_port, cluster_name, out):
    prefix = "tessera:%s:" % cluster_name
    with redis_client("127.0.0.1", redis_port, timeout=5.0) as r:
        doomed = [prefix + k for k in CONTROL_PLANE_KEYS]
        for pattern in CONTROL_PLANE_PATTERNS:
            doomed += r.keys(prefix + pattern)
        r.delete(*doomed)
        entities = len(r.keys(prefix + "entity:*"))
        accounts = len(r.keys(prefix + "account:*"))
    print("kept=%d accounts, %d stored entities" % (accounts, entities), file=out)


def restart_redis(dir_path, pause_s=0.5, timeout=30.0, hard=True):
    """Stops the cluster's redis-server (SIGKILL when `hard`: no chance to
    flush anything it has not already), waits `pause_s`, and starts it again
    on the same port and directory: it comes back with what it had
    acknowledged. The other processes reconnect by themselves."""
    rd = RunDir(dir_path)
    cluster = rd.load_cluster()
    pid = rd.read_pids().get("redis")
    if pid and pid_alive(pid) and pid_is(pid, "redis-server"):
        os.kill(pid, signal.SIGKILL if hard else signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(POLL_S)
    time.sleep(pause_s)
    redis_server = find_redis_server()
    child = _start_redis(rd, redis_server, cluster["redis_port"], time.monotonic() + timeout, timeout,
                         cluster.get("host", "127.0.0.1"))
    _ADDED_CHILDREN.append(child)
    for p in cluster["processes"]:
        if p["role"] == "redis":
            p["pid"] = child.pid
    tmp = rd.cluster_json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cluster, f, indent=2)
        f.write("\n")
    os.replace(tmp, rd.cluster_json)
    return child.pid


# Cellapps started by add_cellapp in this Python process: kept so that
# their Popen objects are not collected while they run (they outlive it).
_ADDED_CHILDREN = []


def add_cellapp(dir_path, overrides=None, timeout=30.0, out=sys.stdout):
    """Starts one more cellapp in a running cluster (cellapp-N+1, configured
    like cellapp-1 but for its port and state file, plus `overrides`) and
    waits until it is registered and connected to every other live cellapp.
    It holds no cell at first: the balancer gives it one when the load asks
    for it. Returns its cluster.json entry."""
    rd = RunDir(dir_path)
    cluster = rd.load_cluster()
    cellapps = [p for p in cluster["processes"] if p["role"] == "cellapp"]
    if not cellapps:
        raise ClusterError("no cellapp in %s to copy the configuration of" % rd.path)
    index = max(int(p["name"].split("-")[1]) for p in cellapps) + 1
    name = "cellapp-%d" % index
    with open(cellapps[0]["config"]) as f:
        conf = json.load(f)
    host = cluster.get("host", "127.0.0.1")
    (port,) = free_ports(1, host)
    # On the cluster's address, wherever cellapp-1 itself runs (--process-host).
    conf["internal_host"] = host
    conf["internal_port"] = port
    conf["state_dump_path"] = rd.state_dump(name)
    # Its own admin port; the others' origins stay in its list (copied).
    if int(conf.get("admin_port", 0)) > 0:
        (conf["admin_port"],) = free_ports(1, "127.0.0.1")
    apply_overrides(conf, overrides_for("cellapp", dict(overrides or {})))
    with open(rd.config(name), "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")
    binary = cellapps[0]["binary"]
    child = _spawn([binary, "--config", rd.config(name)], rd.log(name))
    _ADDED_CHILDREN.append(child)
    rd.write_pid(name, child.pid)
    proc = {"name": name, "role": "cellapp", "binary": binary, "config": rd.config(name), "log": rd.log(name),
            "host": host, "internal_port": port, "pid": child.pid}
    live = [p for p in cellapps if pid_alive(p["pid"]) and pid_is(p["pid"], program_of(p["name"]))]
    deadline = time.monotonic() + timeout
    with redis_client("127.0.0.1", cluster["redis_port"], timeout=2.0) as r:
        while True:
            if child.poll() is not None:
                rd.remove_pid(name)
                raise ClusterError("%s exited early (%s)\n--- %s\n%s"
                                   % (name, _describe_status(child.returncode), rd.log(name), log_tail(rd.log(name))))
            entry = match_entry(registry_entries(r, cluster.get("cluster_name", DEFAULT_CLUSTER_NAME)), proc)
            if entry is not None and stat_int(entry, "cellapps", 0) >= len(live):
                proc["registry_id"] = entry["id"]
                break
            if time.monotonic() >= deadline:
                _signal(name, child.pid, signal.SIGKILL)
                rd.remove_pid(name)
                raise ClusterError("%s did not register and connect to %d cellapps within %.0f s\n--- %s\n%s"
                                   % (name, len(live), timeout, rd.log(name), log_tail(rd.log(name))))
            time.sleep(POLL_S)
    cluster["processes"].append(proc)
    tmp = rd.cluster_json + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cluster, f, indent=2)
        f.write("\n")
    os.replace(tmp, rd.cluster_json)
    print("added=%s id=%s" % (name, proc["registry_id"]), file=out)
    return proc


def _wait_ready(rd, procs, children, redis_port, cluster_name, baseapps, cellapps, deadline, timeout):
    """Polls until the registry shows every process with its peers (see
    module doc); raises ClusterError naming the culprit otherwise."""
    last_state = "no registry data yet"
    with redis_client("127.0.0.1", redis_port, timeout=2.0) as r:
        while True:
            if children["redis"].poll() is not None:
                raise ClusterError("redis exited (status %s)\n--- %s\n%s"
                                   % (children["redis"].returncode, rd.log("redis"), log_tail(rd.log("redis"))))
            for p in procs:
                rc = children[p["name"]].poll()
                if rc is not None:
                    raise ClusterError("%s exited early (%s)\n--- %s (last %d lines)\n%s"
                                       % (p["name"], _describe_status(rc), p["log"], LOG_TAIL_LINES,
                                          log_tail(p["log"])))
            try:
                entries = registry_entries(r, cluster_name)
            except (OSError, RedisError, ValueError) as e:
                entries = None
                last_state = "registry unreadable: %s" % redis_error_text(e)
            if entries is not None:
                ready, last_state, pending = _readiness(entries, procs, baseapps, cellapps)
                if ready:
                    for p in procs:
                        e = match_entry(entries, p)
                        p["registry_id"] = e["id"] if e else None
                    return
            if time.monotonic() >= deadline:
                pending_procs = [p for p in procs if p["name"] in pending] or procs
                msg = ["cluster not ready within %.0f s: %s" % (timeout, last_state)]
                for p in pending_procs:
                    msg.append("--- %s (pid %d) %s (last %d lines)\n%s"
                               % (p["name"], p["pid"], p["log"], LOG_TAIL_LINES, log_tail(p["log"])))
                raise ClusterError("\n".join(msg))
            time.sleep(POLL_S)


def _describe_status(rc):
    if rc < 0:
        try:
            return "killed by %s" % signal.Signals(-rc).name
        except ValueError:
            return "killed by signal %d" % -rc
    return "exit status %d" % rc


def _readiness(entries, procs, baseapps, cellapps):
    """(ready, what is missing as text, names of our processes not ready)."""
    problems = []
    pending = set()
    by_role = {"baseapp": [], "cellapp": []}
    for e in entries:
        by_role.setdefault(e.get("role", "?"), []).append(e)
    want = {"baseapp": (baseapps, cellapps), "cellapp": (cellapps, cellapps - 1)}
    for role, (count, peers) in want.items():
        have = by_role.get(role, [])
        if len(have) != count:
            problems.append("%d of %d %ss registered" % (len(have), count, role))
        for e in have:
            if stat_int(e, "cellapps") != peers:
                problems.append("%s id %s (pid %s) sees cellapps=%s, want %d"
                                % (role, e["id"], e.get("pid", "?"), e.get("cellapps", "(none)"), peers))
    for p in procs:
        e = match_entry(entries, p)
        want_peers = cellapps if p["role"] == "baseapp" else cellapps - 1
        if e is None or stat_int(e, "cellapps") != want_peers:
            pending.add(p["name"])
    if len(entries) != baseapps + cellapps and not problems:
        problems.append("%d processes registered, want %d" % (len(entries), baseapps + cellapps))
    return (not problems), ("; ".join(problems) or "ready"), pending


def find_redis_server():
    """The Redis server program to start (as redis-server): `redis-server`
    on PATH (a system Redis's, or one built by hand), else redis-tools'
    redis-check-rdb. That is the same binary -- Debian's
    /usr/bin/redis-server is a symlink to it -- and it runs as the server
    when its argv[0] does not name it redis-check-rdb. scripts/deps installs
    redis-tools only, so that no system Redis is enabled and started on
    6379. Raises ClusterError when there is neither."""
    path = _which("redis-server") or _which("redis-check-rdb")
    if path is None:
        raise ClusterError("no redis-server on PATH, nor redis-tools' redis-check-rdb to start as one; "
                           "run scripts/deps")
    return path


def _which(program):
    for d in os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(os.pathsep) + ["/usr/sbin", "/usr/bin"]:
        path = os.path.join(d, program)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


# ---- status -------------------------------------------------------------------

STATUS_FIELDS = ["load", "load_permille", "clients", "cells", "reals", "ghosts", "interior_reals", "offloads_out",
                 "offloads_in", "line_moves", "cellapps", "baseapps", "frames_in", "frames_out", "bytes_in",
                 "bytes_out", "tick_us"]


def status(dir_path):
    """The cluster's state as a dict: {"dir", "redis": {...}, "processes":
    [{name, role, pid, alive, registered, registry: {...}}], "unmatched":
    [registry entries that are none of ours]}."""
    rd = RunDir(dir_path)
    cluster = rd.load_cluster()
    cluster_name = cluster.get("cluster_name", DEFAULT_CLUSTER_NAME)
    entries, redis_error = [], None
    try:
        with redis_client("127.0.0.1", cluster["redis_port"], timeout=2.0) as r:
            entries = registry_entries(r, cluster_name)
    except (OSError, RedisError, ValueError) as e:
        redis_error = redis_error_text(e)
    rows = []
    matched = set()
    for p in sorted(cluster["processes"], key=lambda p: name_order(p["name"])):
        row = {k: p.get(k) for k in ("name", "role", "pid", "host", "internal_port", "client_port", "port", "log")}
        row = {k: v for k, v in row.items() if v is not None}
        row["alive"] = pid_alive(p["pid"]) and pid_is(p["pid"], program_of(p["name"]))
        row["state"] = pid_state(p["pid"]) if row["alive"] else "dead"
        if p["role"] == "redis":
            row["registered"] = None
            row["answers"] = redis_error is None
        else:
            e = match_entry(entries, p)
            row["registered"] = e is not None
            if e is not None:
                matched.add(e["id"])
                row["registry"] = e
        rows.append(row)
    return {
        "dir": rd.path,
        "cluster_name": cluster_name,
        "login": cluster.get("login"),
        "redis_port": cluster["redis_port"],
        "redis_error": redis_error,
        "processes": rows,
        "unmatched": [e for e in entries if e["id"] not in matched],
    }


def map_url(cluster):
    """The live map's address: the admin listener of the first baseapp (any
    process serves it), with the admin token in its query, or None when
    none publishes one."""
    try:
        with redis_client("127.0.0.1", cluster["redis_port"], timeout=2.0) as r:
            entries = registry_entries(r, cluster.get("cluster_name", DEFAULT_CLUSTER_NAME))
    except (OSError, RedisError, ValueError):
        return None
    for role in ("baseapp", "cellapp"):
        for e in entries:
            if e.get("role") == role and stat_int(e, "admin_port", 0) > 0:
                url = "http://%s:%d/map" % (e.get("host", "127.0.0.1"), stat_int(e, "admin_port"))
                token = admin_token(cluster)
                return url + ("?token=" + token if token else "")
    return None


def balance_view(cluster):
    """What the balancer sees and decides, read from the cluster's Redis:
    {"leader": (cellapp id, fence) or None, "spaces": {name: layout},
    "loads": {cellapp id: its load report}} (layouts and reports as the
    JSON the processes write: common/space_layout.c, cellapp/balancer.c)."""
    prefix = "tessera:%s:" % cluster.get("cluster_name", DEFAULT_CLUSTER_NAME)
    view = {"leader": None, "spaces": {}, "loads": {}}
    with redis_client("127.0.0.1", cluster["redis_port"], timeout=2.0) as r:
        lease = r.get(prefix + "balancer_lease")
        if lease and ":" in lease:
            holder, fence = lease.split(":", 1)
            view["leader"] = (holder, fence)
        for name in r.hgetall(prefix + "spaces"):
            text = r.get(prefix + "space:" + name)
            try:
                view["spaces"][name] = json.loads(text) if text else None
            except ValueError:
                view["spaces"][name] = None
        for cellapp_id, text in r.hgetall(prefix + "cell_loads").items():
            try:
                view["loads"][cellapp_id] = json.loads(text)
            except ValueError:
                pass
    return view


def _cell_reports(view):
    """{(space, cell id): (cellapp id, its cell entry)} from the reports."""
    cells = {}
    for cellapp_id, report in view["loads"].items():
        for entry in report.get("cells", []):
            cells[(entry.get("space"), entry.get("cell"))] = (cellapp_id, entry)
    return cells


def format_layouts(view, names=None):
    """The layout tree of every space with each cell's load, and the leader."""
    names = names or {}
    cells = _cell_reports(view)
    lines = []
    if view["leader"]:
        holder, fence = view["leader"]
        lines.append("balancer: led by cellapp %s (%s), lease fence %s"
                     % (holder, names.get(holder, "not one of ours"), fence))
    else:
        lines.append("balancer: no leader (balancing off, or the lease is between holders)")
    for cellapp_id, report in sorted(view["loads"].items(), key=lambda kv: kv[0]):
        lines.append("  cellapp %s (%s): load %.3f, transient %.3f%s, %d offloads in flight"
                     % (cellapp_id, names.get(cellapp_id, "?"), report.get("load", 0), report.get("transient", 0),
                        ", draining" if report.get("draining") else "", report.get("pending_offloads", 0)))

    def walk(space, node, depth, out):
        pad = "  " * depth
        if node is None:
            return
        if "cell" in node:
            owner = str(node.get("cellapp"))
            reported = cells.get((space, node["cell"]))
            figures = "not reported"
            if reported:
                figures = "load %.3f, %d reals" % (reported[1].get("load", 0), reported[1].get("reals", 0))
            out.append("%scell %s on cellapp %s (%s)%s: %s" % (pad, node["cell"], owner, names.get(owner, "?"),
                                                             ", retiring" if node.get("retiring") else "", figures))
            return
        extra = ""
        if node.get("aggression") is not None:
            extra += ", aggression %.3g" % node["aggression"]
        out.append("%s%s < %g%s:" % (pad, node.get("split"), node.get("at"), extra))
        walk(space, node.get("low"), depth + 1, out)
        out.append("%s%s >= %g:" % (pad, node.get("split"), node.get("at")))
        walk(space, node.get("high"), depth + 1, out)

    for name, layout in sorted(view["spaces"].items()):
        if not layout:
            lines.append("space %s: unreadable layout" % name)
            continue
        lines.append("space %s, epoch %s%s:" % (name, layout.get("epoch"),
                                               ", written by lease %s" % layout["fence"] if layout.get("fence") else ""))
        walk(name, layout.get("tree"), 1, lines)
    return "\n".join(lines)


def line_positions(layout):
    """The split lines of a layout, top-down, as "x 12.5" strings."""
    out = []

    def walk(node):
        if not node or "cell" in node:
            return
        out.append("%s %.1f" % (node.get("split"), node.get("at")))
        walk(node.get("low"))
        walk(node.get("high"))

    walk((layout or {}).get("tree"))
    return out


def format_status(st):
    cols = ["name", "pid", "alive", "id", "role"] + STATUS_FIELDS
    rows = []
    for p in st["processes"]:
        reg = p.get("registry") or {}
        alive = {"running": "yes", "stopped": "stopped"}.get(p["state"], "NO")
        if p["role"] == "redis":
            rid = "-"
            alive += "" if p.get("answers") else " (no PING)"
        else:
            rid = reg.get("id", "unreg")
        rows.append([p["name"], str(p["pid"]), alive, rid, p["role"]] +
                    [reg.get(f, "") for f in STATUS_FIELDS])
    for e in st["unmatched"]:
        rows.append(["?", e.get("pid", "?"), "?", e["id"], e.get("role", "?")] + [e.get(f, "") for f in STATUS_FIELDS])
    # Hide stat columns nobody publishes.
    keep = [i for i, c in enumerate(cols) if i < 5 or any(r[i] != "" for r in rows)]
    table = [[cols[i] for i in keep]] + [[r[i] for i in keep] for r in rows]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(keep))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]
    head = "cluster %s in %s, login %s" % (st["cluster_name"], st["dir"], st.get("login"))
    if st["redis_error"]:
        head += "\nredis 127.0.0.1:%d unreachable: %s" % (st["redis_port"], st["redis_error"])
    return head + "\n" + "\n".join(lines)


def status_line(dir_path, since=None):
    """One line of demo telemetry, e.g.
    `[t=12s] processes 3/3 up | clients 20 | entities 20 | msgs/s in 1234 out 5678`.
    Message rates come from the change of frames_in/frames_out (summed over
    all processes) since the previous call, kept in DIR/.status-sample.json."""
    rd = RunDir(dir_path)
    st = status(dir_path)
    now = time.time()
    cluster_procs = [p for p in st["processes"] if p["role"] != "redis"]
    up_count = sum(1 for p in cluster_procs if p["alive"] and p.get("registered"))
    regs = [p["registry"] for p in cluster_procs if p.get("registry")] + st["unmatched"]
    clients = sum(stat_int(e, "clients", 0) for e in regs if e.get("role") == "baseapp")
    # Each entity is real on exactly one cellapp (the others hold ghosts of it).
    entities = sum(stat_int(e, "reals", 0) for e in regs if e.get("role") == "cellapp")
    frames_in = sum(stat_int(e, "frames_in", 0) for e in regs)
    frames_out = sum(stat_int(e, "frames_out", 0) for e in regs)
    rate_in = rate_out = 0
    try:
        with open(rd.sample_json) as f:
            prev = json.load(f)
        dt = now - prev["time"]
        if dt > 0:
            rate_in = max(0, frames_in - prev["frames_in"]) / dt
            rate_out = max(0, frames_out - prev["frames_out"]) / dt
    except (OSError, ValueError, KeyError, TypeError):
        pass
    tmp = rd.sample_json + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"time": now, "frames_in": frames_in, "frames_out": frames_out}, f)
    os.replace(tmp, rd.sample_json)
    if since is None:
        try:
            since = rd.load_cluster().get("started_at", now)
        except ClusterError:
            since = now
    line = "[t=%ds] processes %d/%d up | clients %d | entities %d | msgs/s in %d out %d" % (
        int(now - since), up_count, len(cluster_procs), clients, entities, round(rate_in), round(rate_out))
    # Reals and ghosts of each cellapp's cells, in cellapp order.
    cells = ["%s %s/%s" % (p["name"], p["registry"].get("reals", "?"), p["registry"].get("ghosts", "?"))
             for p in sorted(cluster_procs, key=lambda p: name_order(p["name"]))
             if p["role"] == "cellapp" and p.get("registry")]
    if cells:
        line += " | reals/ghosts " + ", ".join(cells)
    loads = ["%s %.3f" % (p["name"], stat_int(p["registry"], "load_permille", 0) / 1000.0)
             for p in sorted(cluster_procs, key=lambda p: name_order(p["name"]))
             if p["role"] == "cellapp" and p.get("registry") and "load_permille" in p["registry"]]
    if loads:
        line += " | load " + ", ".join(loads)
    if not st["redis_error"]:
        try:
            layout = balance_view(rd.load_cluster())["spaces"].get(DEFAULT_SPACE)
            if layout:
                line += " | lines " + ", ".join(line_positions(layout)) + " (epoch %s)" % layout.get("epoch")
        except (OSError, RedisError, ValueError, ClusterError):
            pass
    if st["redis_error"]:
        line += " | redis unreachable"
    return line


# ---- kill -----------------------------------------------------------------------

SIGNALS = {"KILL": signal.SIGKILL, "STOP": signal.SIGSTOP, "CONT": signal.SIGCONT, "TERM": signal.SIGTERM,
           "INT": signal.SIGINT, "HUP": signal.SIGHUP, "USR1": signal.SIGUSR1, "USR2": signal.SIGUSR2}


def kill(dir_path, name, sig="KILL"):
    """Signals one process of the cluster by name (e.g. "cellapp-2"); sig is
    a name from SIGNALS (with or without "SIG") or a number. Returns its pid."""
    rd = RunDir(dir_path)
    if isinstance(sig, str):
        key = sig.upper()
        key = key[3:] if key.startswith("SIG") else key
        if key not in SIGNALS:
            raise ClusterError("unknown signal %r (one of %s)" % (sig, ", ".join(SIGNALS)))
        signum = SIGNALS[key]
    else:
        signum = int(sig)
    pid = rd.read_pids().get(name)
    if pid is None:
        try:
            for p in rd.load_cluster()["processes"]:
                if p["name"] == name:
                    pid = p["pid"]
        except ClusterError:
            pass
    if pid is None:
        raise ClusterError("no process named %s in %s" % (name, rd.path))
    if not pid_alive(pid) or not pid_is(pid, program_of(name)):
        raise ClusterError("%s (pid %d) is not running" % (name, pid))
    os.kill(pid, signum)
    return pid


# ---- command line ----------------------------------------------------------------


def _name_values(flag, items):
    """["NAME=VALUE", ...] -> [(NAME, VALUE)]; raises ClusterError naming `flag`."""
    out = []
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.strip() or not value.strip():
            raise ClusterError("%s %r: expected NAME=VALUE" % (flag, item))
        out.append((name.strip(), value.strip()))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="scripts/cluster", description="Run a local Tessera cluster.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("up", help="start redis, cellapps and baseapps and wait until they are ready")
    p.add_argument("--dir", required=True, help="run directory (logs, pids, configs)")
    p.add_argument("--baseapps", type=int, default=1)
    p.add_argument("--cellapps", type=int, default=2)
    p.add_argument("--build", default="build", help="build directory, relative to the repository root")
    p.add_argument("--auto-create-accounts", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override for every process, for one role as cellapp.KEY or baseapp.KEY, or "
                        "for one process as baseapp-2.KEY (VALUE is JSON if it parses, else a string)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for readiness")
    p.add_argument("--grid", default=None, metavar="COLUMNSxROWS",
                   help="how the default space is split, one cell per cellapp (default: as square as the count "
                        "allows: 4 cellapps -> 2x2)")
    p.add_argument("--bounds", default=None, metavar="MINX,MINZ,MAXX,MAXZ",
                   help="the default space's bounds (default -500,-500,500,500)")
    p.add_argument("--spawn-radius", type=float, default=None,
                   help="radius of the default space's spawn disc at its centre (default 50)")
    p.add_argument("--host", default="127.0.0.1",
                   help="local address the processes and Redis listen on (default 127.0.0.1; Redis keeps "
                        "127.0.0.1 too)")
    p.add_argument("--process-host", action="append", default=[], metavar="NAME=ADDR",
                   help="one process's listeners on ADDR instead, e.g. cellapp-3=10.0.0.2")
    p.add_argument("--process-prefix", action="append", default=[], metavar="NAME=COMMAND",
                   help="start one process under COMMAND, which execs it, e.g. "
                        "'cellapp-3=ip netns exec NS'")
    p.add_argument("--game", default=None, metavar="DIR",
                   help="run the game DIR/game.json describes instead of the demo: {\"entity_definitions\": "
                        "\"entities\", \"game_module\": \"libmygame.so\" (optional), \"player_entity_type\": "
                        "\"Runner\", \"game\": {its settings}}, paths relative to DIR")
    p.add_argument("--lua", action="store_true",
                   help="the demo with its rules in Lua (demo/lua, no module): shorthand for --game demo/lua")
    p.add_argument("--keep-cellapps", action="store_true",
                   help="the balancer retires no cellapp for carrying almost nothing (by default one whose cells' "
                        "load stays under balance_retire_below, 0.02, is drained after a while: an idle world "
                        "soon runs on fewer cellapps than it started with)")

    p = sub.add_parser("admin", help="run tessera-admin against the cluster (spaces, cells, split lines)")
    p.add_argument("--dir", required=True)
    p.add_argument("args", nargs=argparse.REMAINDER, help="tessera-admin's command and arguments")

    p = sub.add_parser("status", help="process liveness and registry stats")
    p.add_argument("--dir", required=True)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("status-line", help="one-line summary with message rates (for the demo)")
    p.add_argument("--dir", required=True)
    p.add_argument("--since", type=float, default=None, help="epoch seconds that t counts from")

    p = sub.add_parser("down", help="stop everything (idempotent)")
    p.add_argument("--dir", required=True)
    p.add_argument("--grace", type=float, default=DOWN_GRACE_S, help="seconds between SIGTERM and SIGKILL")

    p = sub.add_parser("add-cellapp", help="start one more cellapp in the running cluster (the balancer gives it "
                                           "cells); stop one with `kill NAME --signal TERM` (it drains first)")
    p.add_argument("--dir", required=True)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override, as for up")
    p.add_argument("--timeout", type=float, default=30.0)

    p = sub.add_parser("kill", help="signal one process by name, e.g. cellapp-2")
    p.add_argument("--dir", required=True)
    p.add_argument("name")
    p.add_argument("--signal", default="KILL", help="KILL, STOP, CONT or TERM (default KILL)")

    args = ap.parse_args(argv)

    def on_term(signum, frame):
        # SystemExit unwinds through `up`'s teardown; the default action
        # would leave half a cluster running.
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        if args.command == "up":
            bounds = DEFAULT_BOUNDS
            if args.bounds:
                try:
                    bounds = tuple(float(v) for v in args.bounds.split(","))
                    assert len(bounds) == 4
                except (ValueError, AssertionError):
                    raise ClusterError("--bounds %r: expected MINX,MINZ,MAXX,MAXZ" % args.bounds)
            process_hosts = {name: value for name, value in _name_values("--process-host", args.process_host)}
            process_prefixes = {name: shlex.split(value)
                                for name, value in _name_values("--process-prefix", args.process_prefix)}
            if args.lua and args.game:
                raise ClusterError("--lua is the demo in Lua (--game %s): give one of --lua and --game" % DEMO_LUA)
            up(args.dir, baseapps=args.baseapps, cellapps=args.cellapps, build=args.build,
               auto_create_accounts=args.auto_create_accounts, overrides=parse_set(args.set),
               timeout=args.timeout, grid=args.grid, bounds=bounds, spawn_radius=args.spawn_radius,
               host=args.host, process_hosts=process_hosts, process_prefixes=process_prefixes,
               game=DEMO_LUA if args.lua else args.game, keep_cellapps=args.keep_cellapps)
        elif args.command == "admin":
            extra = args.args[1:] if args.args[:1] == ["--"] else args.args
            sys.stdout.write(admin(RunDir(args.dir).load_cluster(), extra))
        elif args.command == "status":
            st = status(args.dir)
            if args.json:
                json.dump(st, sys.stdout, indent=2)
                sys.stdout.write("\n")
            else:
                print(format_status(st))
                names = {str((p.get("registry") or {}).get("id")): p["name"] for p in st["processes"]}
                try:
                    print(format_layouts(balance_view(RunDir(args.dir).load_cluster()), names))
                except (OSError, RedisError, ValueError) as e:
                    print("layouts: Redis unreadable: %s" % redis_error_text(e))
            return 0 if all(p["alive"] for p in st["processes"]) else 1
        elif args.command == "add-cellapp":
            add_cellapp(args.dir, overrides=parse_set(args.set), timeout=args.timeout)
        elif args.command == "status-line":
            print(status_line(args.dir, since=args.since), flush=True)
        elif args.command == "down":
            down(args.dir, grace=args.grace)
        elif args.command == "kill":
            kill(args.dir, args.name, args.signal)
    except ClusterError as e:
        _stderr("cluster %s: %s" % (args.command, e))
        return 1
    except RedisError as e:
        # redis-py's own words name the address ("Error 111 connecting to
        # 127.0.0.1:6379. Connection refused.").
        _stderr("cluster %s: Redis: %s" % (args.command, str(e) or e.__class__.__name__))
        return 1
    except KeyboardInterrupt:
        _stderr("cluster %s: interrupted" % args.command)
        return 130
    except BrokenPipeError:
        # stdout went away (`status --json | head`): not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
