#!/usr/bin/env python3
"""test_game_module -- the game as a loadable module (include/tessera/game.h).

  - A module the cellapp or the baseapp must refuse stops it at start-up
    with an error
    that names the module and the reason, and it exits nonzero (and clean
    under ASan): a file that does not load, a shared object without the
    tessera_game symbol, one built for another game ABI version (both
    versions named), and one whose cell_init fails (it registers a class
    the definitions do not declare: the class is named).
  - The engine code holds no demo names: no string literal in baseapp/,
    cellapp/, common/, the bots or the client SDK is the name of a class,
    method or property of demo/entities.
  - The demo's exposed castSpell(spell, target) checks its reach through
    the API: a target in the caster's view takes the damage; once the
    target has walked out of view, the same call is refused (logged), and
    its health does not change.
"""
import glob
import json
import os
import re
import shutil
import struct
import tempfile
import time
import unittest

import harness

DEMO_ENTITIES = os.path.join(harness.SOURCE_DIR, "demo", "entities")
TEST_MODULES = os.path.join(harness.BUILD_DIR, "tests")
QUICK_S = 20
PART_CELL = 1
CAST_SPELL = 0  # Avatar's cell method 0: castSpell(uint16 spell_id, entity target)


def engine_abi():
    """TESSERA_GAME_ABI_VERSION, as include/tessera/game.h defines it."""
    with open(os.path.join(harness.SOURCE_DIR, "include", "tessera", "game.h")) as f:
        match = re.search(r"#define TESSERA_GAME_ABI_VERSION (\d+)u", f.read())
    return int(match.group(1))


ENGINE_ABI = engine_abi()


class ModuleRefused(unittest.TestCase):
    PROGRAMS = {"cellapp": harness.CELLAPP_BIN, "baseapp": harness.BASEAPP_BIN}

    def setUp(self):
        harness.require_binaries(*self.PROGRAMS.values())
        self.tmp = tempfile.mkdtemp(prefix="tessera-game-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def start_with(self, role, module):
        closed_port, internal_port, client_port = harness.free_ports(3)
        conf = {"redis_host": "127.0.0.1", "redis_port": closed_port, "internal_host": "127.0.0.1",
                "internal_port": internal_port, "entity_definitions": DEMO_ENTITIES, "game_module": module}
        if role == "baseapp":
            conf.update({"client_host": "127.0.0.1", "client_port": client_port, "player_entity_type": "Avatar"})
        path = os.path.join(self.tmp, role + ".json")
        with open(path, "w") as f:
            json.dump(conf, f)
        rc, out, err, took = harness.run_with_timeout([self.PROGRAMS[role], "--config", path], QUICK_S)
        context = "tessera-%s: exit %s after %.1f s\nstderr:\n%s" % (role, rc, took, err[-3000:])
        self.assertIsNotNone(rc, "did not exit: " + context)
        self.assertNotEqual(rc, 0, context)
        self.assertEqual(harness.sanitizer_report(err), "", context)
        return err, context

    def test_refusals(self):
        cases = [
            ("both", os.path.join(self.tmp, "no-such-game.so"), ["no-such-game.so", "does not load"]),
            ("both", os.path.join(TEST_MODULES, "libtest_game_no_symbol.so"), ["no 'tessera_game' symbol"]),
            ("both", os.path.join(TEST_MODULES, "libtest_game_wrong_abi.so"),
             ["wrong-abi", "built for game ABI version %d" % (ENGINE_ABI + 1), "speaks version %d" % ENGINE_ABI]),
            # Its cell rules register a class the definitions lack (it has
            # no base rules: the baseapp would run it).
            ("cellapp", os.path.join(TEST_MODULES, "libtest_game_failing_init.so"),
             ["failing-init", "cell_init failed", "no class 'Dragon'"]),
        ]
        for roles, module, needles in cases:
            for role in (("cellapp", "baseapp") if roles == "both" else (roles,)):
                with self.subTest(program=role, module=os.path.basename(module)):
                    err, context = self.start_with(role, module)
                    for needle in needles:
                        self.assertIn(needle, err, context)


def string_literals(path):
    """The string literals of a C file, comments removed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r'"\s*"', "", text)  # "one " "literal" split over lines
    # A command-line option's own name ({"teleport", required_argument, ...}).
    text = re.sub(r'"[^"\n]*"\s*,\s*(required|no|optional)_argument', " ", text)
    # A Lua binding's own call ({"teleport", lua_cell_m_teleport}): the
    # engine's API, named like game.h's, not a game's method.
    text = re.sub(r'\{\s*"[^"\n]*"\s*,\s*lua_\w+\s*\}', " ", text)
    return re.findall(r'"((?:[^"\\\n]|\\.)*)"', text)


class NoDemoInTheEngine(unittest.TestCase):
    def test_engine_holds_no_demo_names(self):
        names, format_keys = set(), set()

        def keys_of(value):
            if isinstance(value, dict):
                format_keys.update(value)
                for item in value.values():
                    keys_of(item)
            elif isinstance(value, list):
                for item in value:
                    keys_of(item)
        for path in glob.glob(os.path.join(DEMO_ENTITIES, "*.json")):
            with open(path) as f:
                doc = json.load(f)
            keys_of(doc)
            for cls in doc.get("entities", []):
                names.add(cls["name"])
                for part in ("base_methods", "cell_methods", "client_methods"):
                    names.update(m["name"] for m in cls.get(part, []))
                names.update(p["name"] for p in cls.get("properties", []))
        # Engine code that knows a game looks it up by name: a literal that
        # is exactly a class, method or property name ("Avatar", "chat").
        # A "name" property is the engine's too (the login fills it with
        # the account), and the definitions' format has keys of its own
        # ("count": an array's size) that the engine's loader reads.
        demo_names = names - {"name"} - format_keys
        found = []
        # The engine, and the bots and the client SDK: they learn a game
        # from its definitions (the bots' calls are named on their command
        # line). The admin tool's "health" is a process's, not the demo's.
        paths = [p for d in ("baseapp", "cellapp", "common", "client")
                 for p in glob.glob(os.path.join(harness.SOURCE_DIR, d, "*.[ch]"))
                 if not os.path.basename(p).startswith("admin")]
        for path in sorted(paths):
            if True:
                for literal in string_literals(path):
                    if literal in demo_names:
                        found.append("%s: \"%s\" names the demo's %s" % (os.path.relpath(path, harness.SOURCE_DIR),
                                                                       literal, literal))
        self.assertEqual(found, [], "\n".join(found))


class Reach(unittest.TestCase):
    def health_of(self, cluster, entity_id):
        for dump in cluster.dump_states(cluster.names("cellapp")).values():
            for entity in dump["entities"]:
                if entity["id"] == entity_id:
                    return entity["properties"]["health"]
        return None

    def test_cast_spell_reaches_only_what_the_caster_sees(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        # One cellapp, no NPCs, everyone spawning on the same spot; moves
        # fast enough to leave a 50 m view in a few steps.
        settings = ["cellapp.game.npc_count=0", "cellapp.max_speed=200"]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings, spawn_radius=0) as cluster:
            a_sock, a = harness.login(cluster.login, "alice", "pw-alice")
            b_sock, b = harness.login(cluster.login, "bob", "pw-bob")
            self.addCleanup(a_sock.close)
            self.addCleanup(b_sock.close)
            alice, bob = a["entity_id"], b["entity_id"]
            harness.wait_for(lambda: self.health_of(cluster, bob) is not None, 10, "bob's cell part")
            before = self.health_of(cluster, bob)

            def cast(spell):
                a_sock.sendall(harness.frame(harness.msg_call(alice, PART_CELL, CAST_SPELL,
                                                              struct.pack("<HQ", spell, bob))))

            # In view: spell 4 does 5 damage. (Cast until it lands: bob
            # enters alice's view at the tick after his cell part is made.)
            def hit():
                cast(4)
                time.sleep(0.3)
                return self.health_of(cluster, bob) < before
            harness.wait_for(hit, 10, "bob hit from alice's view")
            after_hits = self.health_of(cluster, bob)
            self.assertEqual((before - after_hits) % 5, 0)
            # Bob walks 300 m east, out of alice's view (50 m and 5 of
            # hysteresis), in steps the speed check allows.
            for step in range(1, 31):
                b_sock.sendall(harness.frame(harness.msg_move(10.0 * step, 0, 0, 0, step)))
                time.sleep(0.06)
            refusal = "castSpell on entity %d refused: not in its view" % bob
            earlier = cluster.log("cellapp-1").count(refusal)  # casts that raced bob's enter
            harness.wait_for(lambda: self.cast_and_log(cluster, cast).count(refusal) > earlier, 10,
                             "the out-of-view castSpell refused")
            self.assertEqual(self.health_of(cluster, bob), after_hits, "an out-of-view target took damage")
            self.assertTrue(cluster.all_alive())
            self.assertTrue(harness.still_open(a_sock, 0.5), "the caster was dropped for a refused spell")

    def cast_and_log(self, cluster, cast):
        cast(4)
        time.sleep(0.3)
        return cluster.log("cellapp-1")


if __name__ == "__main__":
    unittest.main(verbosity=2)
