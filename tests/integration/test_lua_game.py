#!/usr/bin/env python3
"""test_lua_game -- a game whose rules are Lua scripts (docs/lua.md), run
from its folder: tests/game/lua_probe (Walker, the player, and Probe, an
NPC, in Lua; Beacon in C, tests/game/lua_mixed.c), on two cellapps holding
half of the space each and one baseapp, with bots walking and calling.

  - a Lua class and a C class in one game: a Probe calls the C Beacon, whose
    body calls the Probe's Lua method back;
  - every hook from Lua: the cell hooks of a real (created, destroyed,
    leaving, arrived, teleported, moved, the view and witness hooks, the
    traps, timers, thinks, inputs, controllers, property_changed, method
    bodies), game.lua's tick, systems and listeners, and the base side's
    (created, client_enabled, timers, methods, a call that failed, a
    giveClientTo refused, written, destroyed);
  - state by name: a value outside int8's range, of the wrong type, and a
    name the class does not declare are refused with the rule broken;
  - the sandbox: io, os.execute, os.exit, require outside the game's folder
    and of a library, load, dofile, debug and string.dump are each refused,
    and an entity's metatable is out of a script's reach;
    a runaway loop is stopped by the instruction budget with its traceback
    (Probe.lua:line), and the cellapp's tick and the Probe's timers go on;
  - hot reload under load: while bots play, a Probe.lua with a syntax error
    and then a game.lua whose init throws are refused (the log names
    file:line) and the old code keeps running; the good version takes over
    at a tick, on both cellapps and the baseapp (game.lua's base part), the
    bots see the new behaviour (ping_v2 events) and none is dropped;
  - then the cellapp holding more Probes is killed: they come back on the
    other through their restored hook, with their Lua fields.
Every process started here is stopped at the end, whatever happens."""
import json
import os
import re
import shutil
import signal
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import harness

GAME = os.path.join(harness.SOURCE_DIR, "tests", "game", "lua_probe")
MODULE = os.path.join(harness.BUILD_DIR, "tests", "libtest_game_lua_mixed.so")
BOT_ARGS = ["--call", "cell:hello", "--calls-per-second", "2", "--area", "20"]

CELL_HOOKS = ["created", "destroyed", "leaving", "arrived", "teleported", "moved", "entered_view", "left_view",
              "got_witness", "lost_witness", "entered_trap", "left_trap", "timer", "think", "input", "controller_moved",
              "controller_arrived", "controller_failed", "property_changed", "method", "method_from_c",
              "walker_created", "game_tick", "before_thinks", "after_thinks", "event_heard", "runaway"]
BASE_HOOKS = ["base_created", "client_enabled", "base_timer", "base_method", "base_game_tick", "base_call_failed",
              "base_written", "base_destroyed", "base_handover_refused"]
SANDBOX = ["io", "os.execute", "os.exit", "require outside", "require os", "load", "dofile", "debug", "string.dump"]


def write_game(folder):
    """The probe game in a scratch folder (its scripts change during the
    test), with game.json naming the C module built with the tests."""
    shutil.copytree(GAME, folder)
    with open(os.path.join(folder, "game.json"), "w") as f:
        f.write('{"entity_definitions": "entities", "game_scripts": "scripts", "game_module": "%s", '
                '"player_entity_type": "Walker", "game": {"runaway": 1}}' % MODULE)


def replace_in(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new))


class LuaGame(unittest.TestCase):
    def test_lua_and_c_classes_hooks_sandbox_and_reload(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        scratch = tempfile.mkdtemp(prefix="tessera-lua-")
        try:
            game = os.path.join(scratch, "probe")
            write_game(game)
            # A player's base goes with its client (its destroyed and written
            # hooks run as the bots leave).
            with harness.Cluster(baseapps=1, cellapps=2, grid="2x1", game=game, keep_cellapps=True,
                                 extra_set=["baseapp.client_detached_grace_ms=0"]) as cluster:
                self.run_game(cluster, game)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def cell_logs(self, cluster):
        return "".join(cluster.log(name) for name in cluster.names("cellapp"))

    def wait_log(self, cluster, names, pattern, timeout=15.0, count=1):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = "".join(cluster.log(name) for name in names)
            if len(re.findall(pattern, text)) >= count:
                return text
            time.sleep(0.2)
        self.fail("no %d lines matching %r in %s within %.0f s" % (count, pattern, ", ".join(names), timeout))

    def run_game(self, cluster, game):
        cellapps = cluster.names("cellapp")
        baseapps = cluster.names("baseapp")
        everyone = cellapps + baseapps
        bots = harness.start_bots(cluster, 12, 16, BOT_ARGS, demo=False)
        try:
            # The first generation runs: pings of version 1.
            self.wait_log(cluster, cellapps, r"probe-hook event_heard\b")
            # An operator's giveClientTo to a base no one has: refused, and
            # the player's Lua handover_refused hears the rule.
            port = int(cluster.registry_hash("baseapp-1")["admin_port"])
            sock, reply = harness.login(cluster.login, "operator-probe", "pw")
            try:
                status, body, _ = cluster.admin_http(
                    port, "/admin/give-client?from=%d&to=987654321" % reply["entity_id"], method="POST")
                self.assertEqual(status, 202, body)
                self.wait_log(cluster, baseapps, r"probe-hook base_handover_refused\n")
            finally:
                sock.close()
            # A syntax error: refused, naming the file and the line.
            scripts = os.path.join(game, "scripts")
            probe = os.path.join(scripts, "Probe.lua")
            with open(probe) as f:
                good = f.read()
            replace_in(probe, "local VERSION = 1", "local VERSION = = 2")
            for name in cellapps:
                os.kill(cluster.pid(name), signal.SIGHUP)
            self.wait_log(cluster, cellapps, r"reload refused.*Probe\.lua:\d+:", count=2)
            # A game.lua whose init throws: refused, the old code kept.
            with open(probe, "w") as f:
                f.write(good.replace("local VERSION = 1", "local VERSION = 2"))
            game_lua = os.path.join(scripts, "game.lua")
            replace_in(game_lua, "            sandbox_checks()\n",
                       "            sandbox_checks()\n            error('not today')\n")
            replace_in(game_lua, 'tessera.log("probe base init")', 'error("not today either")')
            for name in everyone:
                os.kill(cluster.pid(name), signal.SIGHUP)
            self.wait_log(cluster, cellapps, r"reload refused.*game\.lua:\d+: not today", count=2)
            self.wait_log(cluster, baseapps, r"reload refused.*game\.lua:\d+: not today either")
            time.sleep(1.0)
            text = self.cell_logs(cluster)
            self.assertNotIn("probe-hook event_heard_v2", text, "a refused reload ran its code")
            # The good version: it takes over at a tick, everywhere; changed
            # files are noticed without a signal.
            replace_in(game_lua, "            sandbox_checks()\n            error('not today')\n",
                       "            sandbox_checks()\n")
            replace_in(game_lua, 'error("not today either")', 'tessera.log("probe base init")')
            self.wait_log(cluster, cellapps, r"cell scripts of .* reloaded \(generation 2\)", count=2)
            self.wait_log(cluster, baseapps, r"base scripts of .* reloaded \(generation 2\)")
            self.wait_log(cluster, cellapps, r"probe-hook event_heard_v2")
        finally:
            report = harness.finish_bots(bots)
        events = report.get("game_events_by_name", {})
        self.assertGreater(events.get("ping_v1", 0), 0, report)
        self.assertGreater(events.get("ping_v2", 0), 0, "the bots never saw the reloaded code: %s" % report)
        self.assertEqual(report.get("disconnects", 0), 0, report)
        self.assertEqual(report.get("logins_failed", 0), 0, report)

        # The bots' leaving runs the last hooks: a base destroyed (and
        # written) at once, and lost_witness once the cell hears of it.
        self.wait_log(cluster, baseapps, r"probe-hook base_destroyed\n")
        base_text = self.wait_log(cluster, baseapps, r"probe-hook base_written\n")
        text = self.wait_log(cluster, cellapps, r"probe-hook lost_witness\n")
        missing = [hook for hook in CELL_HOOKS if "probe-hook %s\n" % hook not in text]
        self.assertEqual(missing, [], "cell hooks never run from Lua")
        missing = [hook for hook in BASE_HOOKS if "probe-hook %s\n" % hook not in base_text]
        self.assertEqual(missing, [], "base hooks never run from Lua")
        self.assertIn("beacon answered 12", text)
        # State by name, checked.
        self.assertRegex(text, r"probe-range false .*Probe\.level: 300 is outside int8's range \[-128, 127\]")
        self.assertRegex(text, r"probe-type false .*Probe\.level: .*not an integer")
        self.assertRegex(text, r"probe-unknown false .*Probe has no property or field 'nonsense'")
        # The sandbox.
        for what in SANDBOX:
            self.assertRegex(text, r"sandbox %s: refused: " % re.escape(what))
        self.assertNotIn("ALLOWED", text)
        self.assertIn("sandbox os.time: number", text)
        self.assertIn("probe-metatable locked", text, "a script reached an entity's metatable")
        # The runaway loop: stopped with its traceback; the Probe's timers
        # and the tick went on after it.
        # (The log writes a message's line breaks as \n.)
        match = re.search(r"lua: Probe\.runaway \(entity \d+\) failed after [\d.]+ ms: stopped: the instruction "
                          r"budget of 1000000 instructions per call is spent\\nstack traceback:\\n.*Probe\.lua:\d+",
                          text)
        self.assertIsNotNone(match, "no budget stop with a traceback naming Probe.lua")
        after = text[match.end():]
        self.assertIn("probe-hook event_heard_v2", after, "nothing ran after the runaway loop")

        # A cellapp killed: the Probes it held come back on the other one,
        # through the restored hook, with their Lua fields. The victim is the
        # cellapp holding the most Probe reals, asked of each one's admin
        # listener (the registry's count of reals lags a heartbeat behind the
        # bots' leaving, and counts the Beacons too).
        probes = {name: self.probe_reals(cluster, name) for name in cellapps}
        victim, survivor = sorted(cellapps, key=lambda name: probes[name], reverse=True)
        self.assertGreater(probes[victim], 0, "no Probe left to restore: %s" % probes)
        harness.log("%s holds %d Probe reals; killing it" % (victim, probes[victim]))
        cluster.kill(victim, "KILL")
        text = self.wait_log(cluster, [survivor], r"probe-hook restored\n", timeout=20)
        self.assertRegex(text, r"probe-restored hits [1-9]\d* note hi", "a restored Probe lost its fields")
        self.assertNotIn("ALLOWED", text)


    def probe_reals(self, cluster, name):
        """How many Probes are real on cellapp `name` (its admin API)."""
        port = int(cluster.registry_hash(name)["admin_port"])

        def get(path):
            request = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path))
            request.add_header("Authorization", "Bearer " + cluster.admin_token)
            with urllib.request.urlopen(request, timeout=5) as response:
                return json.loads(response.read().decode())

        snapshot = get("/api/entities")
        reals = [e[0] for c in snapshot["cells"] for e in c["entities"] if e[3] == 0]
        count = 0
        for entity_id in reals:
            try:
                if get("/api/entity?id=%d" % entity_id).get("class") == "Probe":
                    count += 1
            except urllib.error.HTTPError:
                pass  # gone since the snapshot
        return count


if __name__ == "__main__":
    unittest.main()
