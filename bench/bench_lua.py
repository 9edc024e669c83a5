#!/usr/bin/env python3
"""bench_lua -- what game rules in Lua cost against the same rules in C, on a
real cellapp (scripts/cluster up --game bench/crowd, 1 cellapp, 1 baseapp,
no clients).

The crowd (bench/crowd/): N NPCs spread over a square, each with a timer
that fires every tick and spends "energy" (a property read and written
through the typed accessors), a think every two seconds that walks it a few
metres (a move controller), and a round trap (radius 3) that counts
visitors. The same rules twice: bench/crowd/crowd.c (a C module) and
bench/crowd/scripts/*.lua. A third run spawns the same crowd with no rules
at all (crowd.c with hooks=0): the engine's own cost, which the other two
are measured above.

1. Hooks. After the crowd is in, the cellapp's CPU time (/proc/PID/stat)
   over --seconds, per tick, for the three; the hooks' own cost is each run
   less the bare one, and the ratio Lua / C of that cost is printed (and of
   the whole tick). With the Lua run's call count (lua_calls), the cost of
   one Lua hook call in microseconds.
2. Hot reload. In the Lua run, SIGHUP five times, a second apart: the time
   each reload took (lua_reload_us: loading every script, swapping the
   generation in and collecting the old one), against an ordinary tick
   (the median of the cellapp's tick_us over the run).
3. The heap and the collector with --big scripted NPCs: the Lua state's
   bytes, and the pauses of the collector's steps between ticks (p50, p99,
   max: lua_gc_*), with the tick's CPU per tick beside them.

    bench/bench_lua.py [--build /tmp/build-bench] [--npcs 1000] [--big 5000] [--seconds 15] [--json]
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
import tessera_cluster  # noqa: E402  (after the path is set)

CLK_TCK = os.sysconf("SC_CLK_TCK")
CROWD = os.path.join(REPO_ROOT, "bench", "crowd")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid, "rb") as f:
        stat = f.read()
    fields = stat[stat.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def registry_of(run_dir, name):
    for row in tessera_cluster.status(run_dir)["processes"]:
        if row["name"] == name:
            return row.get("registry") or {}
    return {}


def figure(run_dir, name, field):
    return tessera_cluster.stat_int(registry_of(run_dir, name), field, 0)


def game_folder(scratch, variant, npcs, build):
    """A copy of bench/crowd whose game.json runs `variant`: "c", "bare"
    (crowd.c, no rules) or "lua"."""
    folder = os.path.join(scratch, variant)
    shutil.copytree(CROWD, folder)
    manifest = {"entity_definitions": "entities", "player_entity_type": "Watcher",
                "game": {"npc_count": npcs, "area_half_width": 150, "hooks": 0 if variant == "bare" else 1}}
    if variant == "lua":
        manifest["game_scripts"] = "scripts"
    else:
        manifest["game_module"] = os.path.join(build, "bench", "libbench_crowd.so")
    with open(os.path.join(folder, "game.json"), "w") as f:
        json.dump(manifest, f)
    return folder


def run_variant(build, scratch, variant, npcs, seconds, reloads=0):
    run_dir = tempfile.mkdtemp(prefix="tessera-bench-lua-")
    folder = game_folder(scratch, variant, npcs, build)
    try:
        cluster = tessera_cluster.up(run_dir, baseapps=1, cellapps=1, build=build, timeout=60, game=folder,
                                     keep_cellapps=True, out=open(os.devnull, "w"))
        pid = next(p["pid"] for p in cluster["processes"] if p["name"] == "cellapp-1")
        deadline = time.monotonic() + 60
        while figure(run_dir, "cellapp-1", "reals") < npcs:
            if time.monotonic() > deadline:
                raise RuntimeError("%s: the crowd did not spawn (%d of %d)"
                                   % (variant, figure(run_dir, "cellapp-1", "reals"), npcs))
            time.sleep(0.2)
        time.sleep(2.0)  # the first thinks and moves settle
        calls0 = figure(run_dir, "cellapp-1", "lua_calls")
        cpu0, wall0 = cpu_seconds(pid), time.monotonic()
        ticks = []
        while time.monotonic() - wall0 < seconds:
            ticks.append(figure(run_dir, "cellapp-1", "tick_us"))
            time.sleep(0.1)
        cpu1, wall1 = cpu_seconds(pid), time.monotonic()
        calls1 = figure(run_dir, "cellapp-1", "lua_calls")
        tick_count = (wall1 - wall0) * 10  # tick_hz 10
        result = {"variant": variant, "npcs": npcs, "cpu_ms_per_tick": (cpu1 - cpu0) * 1000 / tick_count,
                  "tick_us_median": statistics.median(ticks) if ticks else 0,
                  "lua_calls_per_tick": (calls1 - calls0) / tick_count}
        if variant == "lua":
            result["lua_bytes"] = figure(run_dir, "cellapp-1", "lua_bytes")
            result["gc_p50_us"] = figure(run_dir, "cellapp-1", "lua_gc_p50_us")
            result["gc_p99_us"] = figure(run_dir, "cellapp-1", "lua_gc_p99_us")
            result["gc_max_us"] = figure(run_dir, "cellapp-1", "lua_gc_max_us")
            reload_us = []
            for i in range(reloads):
                before = figure(run_dir, "cellapp-1", "lua_reloads")
                os.kill(pid, signal.SIGHUP)
                deadline = time.monotonic() + 10
                while figure(run_dir, "cellapp-1", "lua_reloads") <= before:
                    if time.monotonic() > deadline:
                        raise RuntimeError("reload %d not seen" % (i + 1))
                    time.sleep(0.05)
                time.sleep(0.3)  # the figures of that tick are published
                reload_us.append(figure(run_dir, "cellapp-1", "lua_reload_us"))
                time.sleep(0.7)
            result["reload_us"] = reload_us
        return result
    finally:
        tessera_cluster.down(run_dir, grace=10.0, quiet=True)
        shutil.rmtree(run_dir, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="/tmp/build-bench")
    parser.add_argument("--npcs", type=int, default=1000)
    parser.add_argument("--big", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    scratch = tempfile.mkdtemp(prefix="tessera-bench-crowd-")
    try:
        bare = run_variant(build, scratch, "bare", args.npcs, args.seconds)
        c = run_variant(build, scratch, "c", args.npcs, args.seconds)
        lua = run_variant(build, scratch, "lua", args.npcs, args.seconds, reloads=5)
        big = run_variant(build, scratch + "-big", "lua", args.big, args.seconds) if args.big else None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(scratch + "-big", ignore_errors=True)
    c_hooks = c["cpu_ms_per_tick"] - bare["cpu_ms_per_tick"]
    lua_hooks = lua["cpu_ms_per_tick"] - bare["cpu_ms_per_tick"]
    report = {"bare": bare, "c": c, "lua": lua, "big": big,
              "hooks_ratio": lua_hooks / c_hooks if c_hooks > 0 else None,
              "tick_ratio": lua["cpu_ms_per_tick"] / c["cpu_ms_per_tick"],
              "lua_us_per_call": lua_hooks * 1000 / lua["lua_calls_per_tick"] if lua["lua_calls_per_tick"] else None,
              "c_us_per_call": c_hooks * 1000 / lua["lua_calls_per_tick"] if lua["lua_calls_per_tick"] else None}
    reload_ms = statistics.median(lua["reload_us"]) / 1000 if lua["reload_us"] else 0
    report["reload_ms_median"] = reload_ms
    report["reload_tick_ratio"] = ((lua["tick_us_median"] / 1000 + reload_ms) / (lua["tick_us_median"] / 1000)
                                   if lua["tick_us_median"] else None)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print("1. hooks, %d NPCs (a timer every tick, a think every 2 s, a round trap), cellapp CPU per tick:"
          % args.npcs)
    print("   no rules (the engine alone)   %7.3f ms" % bare["cpu_ms_per_tick"])
    print("   C module                      %7.3f ms   hooks %6.3f ms" % (c["cpu_ms_per_tick"], c_hooks))
    print("   Lua scripts                   %7.3f ms   hooks %6.3f ms   (%.0f calls a tick)"
          % (lua["cpu_ms_per_tick"], lua_hooks, lua["lua_calls_per_tick"]))
    print("   Lua / C: hooks %.2fx, whole tick %.2fx; one call %.2f us in Lua, %.2f us in C"
          % (report["hooks_ratio"] or 0, report["tick_ratio"], report["lua_us_per_call"] or 0,
             report["c_us_per_call"] or 0))
    print("2. hot reload (SIGHUP x %d): %s ms; an ordinary tick %.2f ms (median tick_us): a reloading tick "
          "%.1fx an ordinary one" % (len(lua["reload_us"]), ", ".join("%.1f" % (u / 1000) for u in lua["reload_us"]),
                                     lua["tick_us_median"] / 1000, report["reload_tick_ratio"] or 0))
    if big:
        print("3. %d scripted NPCs: Lua heap %.1f MB (%.0f bytes an NPC); collector step between ticks p50 %d us, "
              "p99 %d us, max %d us; cellapp CPU %.2f ms a tick"
              % (big["npcs"], big["lua_bytes"] / 1e6, big["lua_bytes"] / big["npcs"], big["gc_p50_us"],
                 big["gc_p99_us"], big["gc_max_us"], big["cpu_ms_per_tick"]))


if __name__ == "__main__":
    main()
