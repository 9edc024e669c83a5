#!/usr/bin/env python3
"""test_config_errors -- a process with a bad configuration refuses to start,
says why (naming the file or the key) and exits non-zero; it never hangs.
Covers both tessera-baseapp and tessera-cellapp: missing file, invalid JSON,
unknown key, wrong type, out-of-range value, an admin token file that is
unsafe or empty, a game whose definitions, player class or module are
wrong (found by --check too), unreachable Redis, and a port that another
process already listens on."""
import json
import os
import shutil
import tempfile
import unittest

import harness

DEMO_ENTITIES = os.path.join(harness.SOURCE_DIR, "demo", "entities")

# A config error is found before anything is started: seconds are plenty.
QUICK_S = 10
# Two Redis connect attempts 100 ms apart, plus start-up (ASan is slower).
REDIS_GIVE_UP_S = 15

PROGRAMS = {"baseapp": harness.BASEAPP_BIN, "cellapp": harness.CELLAPP_BIN}


class ConfigErrors(unittest.TestCase):
    def setUp(self):
        harness.require_binaries(*PROGRAMS.values())
        self.tmp = tempfile.mkdtemp(prefix="tessera-config-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_program(self, role, config_path, timeout=QUICK_S):
        rc, out, err, took = harness.run_with_timeout([PROGRAMS[role], "--config", config_path], timeout)
        context = "tessera-%s --config %s: exit %s after %.1f s\nstdout:\n%s\nstderr:\n%s" % (
            role, config_path, rc, took, out[-3000:], err[-3000:])
        self.assertIsNotNone(rc, "did not exit within %d s: %s" % (timeout, context))
        self.assertNotEqual(rc, 0, "exited 0: " + context)
        # Refusing to start must not leak or misbehave either (ASan build).
        report = harness.sanitizer_report(err)
        self.assertEqual(report, "", "sanitizer report: " + context)
        return err, context

    def assert_mentions(self, text, words, context):
        low = text.lower()
        if not any(w.lower() in low for w in words):
            self.fail("stderr mentions none of %r\n%s" % (words, context))

    def test_missing_file(self):
        for role in PROGRAMS:
            with self.subTest(program=role):
                path = os.path.join(self.tmp, "no-such-%s.json" % role)
                err, ctx = self.run_program(role, path)
                self.assert_mentions(err, [path], ctx)

    def test_invalid_json(self):
        for role in PROGRAMS:
            with self.subTest(program=role):
                path = self.write("broken-%s.json" % role, '{"redis_port": 6379,,\n')
                err, ctx = self.run_program(role, path)
                self.assert_mentions(err, [path], ctx)

    def test_unknown_key(self):
        for role in PROGRAMS:
            with self.subTest(program=role):
                path = self.write("unknown-%s.json" % role, json.dumps({"no_such_key": 1}))
                err, ctx = self.run_program(role, path)
                self.assert_mentions(err, ["no_such_key"], ctx)

    def test_wrong_type(self):
        for role in PROGRAMS:
            with self.subTest(program=role):
                path = self.write("type-%s.json" % role, json.dumps({"redis_port": "abc"}))
                err, ctx = self.run_program(role, path)
                self.assert_mentions(err, ["redis_port"], ctx)

    def test_out_of_range(self):
        for role in PROGRAMS:
            with self.subTest(program=role):
                path = self.write("range-%s.json" % role, json.dumps({"redis_port": 70000}))
                err, ctx = self.run_program(role, path)
                self.assert_mentions(err, ["redis_port"], ctx)

    def test_ghost_distance_below_the_view(self):
        # A view reaching across a line must find ghosts of what is there:
        # ghost_distance under view_radius + view_hysteresis is refused,
        # naming both.
        path = self.write("ghosts.json", json.dumps({"view_radius": 50, "view_hysteresis": 5, "ghost_distance": 40,
                                                     "entity_definitions": DEMO_ENTITIES}))
        err, ctx = self.run_program("cellapp", path)
        for key in ("ghost_distance", "view_radius", "view_hysteresis"):
            self.assert_mentions(err, [key], ctx)

    def test_unknown_aoi_mode(self):
        # The AOI's mode is one of three names; another is refused, naming
        # the setting and the value.
        path = self.write("aoi.json", json.dumps({"aoi_mode": "grid", "entity_definitions": DEMO_ENTITIES}))
        err, ctx = self.run_program("cellapp", path)
        self.assert_mentions(err, ["aoi_mode", "grid"], ctx)

    def test_production_configs_load(self):
        # deploy/config holds every setting with its production default:
        # each must be a key the program knows, in range (--check loads and
        # checks the settings, then exits without starting).
        for role in PROGRAMS:
            with self.subTest(program=role):
                path = os.path.join(harness.SOURCE_DIR, "deploy", "config", role + ".json")
                # The baseapp's TLS files and the game are loaded by --check:
                # stand-ins here.
                tls = harness.tls_stand_in_sets() if role == "baseapp" else []
                rc, out, err, took = harness.run_with_timeout(
                    [PROGRAMS[role], "--config", path, "--check"] + tls + harness.game_stand_in_sets(), QUICK_S)
                self.assertEqual(rc, 0, "%s --config %s --check: exit %s\n%s" % (role, path, rc, err))

    def test_bad_admin_token_file(self):
        # The admin token file is read at start-up and by --check: one every
        # user may read, an empty one and a missing one are refused, named,
        # before anything starts; the token itself is never printed.
        token = "0123456789abcdef0123456789abcdef"
        cases = (("open", token, 0o644, "readable by every user"), ("empty", "\n", 0o600, "is empty"),
                 ("short", "abc", 0o600, "shorter than 16"))
        for name, text, mode, says in cases:
            token_path = self.write("token-" + name, text)
            os.chmod(token_path, mode)
            for role in PROGRAMS:
                with self.subTest(token=name, program=role):
                    path = self.write("admin-%s-%s.json" % (name, role), json.dumps(
                        {"admin_port": 0, "admin_token_file": token_path, "entity_definitions": DEMO_ENTITIES}))
                    for extra in ([], ["--check"]):
                        rc, out, err, _ = harness.run_with_timeout(
                            [PROGRAMS[role], "--config", path] + extra, QUICK_S)
                        context = "%s %s: exit %s\n%s" % (role, " ".join(extra), rc, err)
                        self.assertEqual(rc, 1, context)
                        self.assertIn("admin_token_file", err, context)
                        self.assertIn(says, err, context)
                        self.assertNotIn(token, out + err, "the token was printed: " + context)
        good = self.write("token-good", token)
        os.chmod(good, 0o600)
        for role in PROGRAMS:
            with self.subTest(token="good", program=role):
                conf = {"admin_port": 0, "admin_token_file": good, "entity_definitions": DEMO_ENTITIES}
                if role == "baseapp":
                    conf["player_entity_type"] = "Avatar"
                path = self.write("admin-good-%s.json" % role, json.dumps(conf))
                tls = harness.tls_stand_in_sets() if role == "baseapp" else []
                rc, out, err, _ = harness.run_with_timeout([PROGRAMS[role], "--config", path, "--check"] + tls,
                                                           QUICK_S)
                self.assertEqual(rc, 0, err)

    def test_check_loads_the_game(self):
        # --check loads the game before anything starts: the definitions
        # (a typo in one is named with its file), the player's class, the
        # module (one built for another ABI, or no module at all, is named)
        # and the Lua scripts (file:line), so none of them waits for a start
        # to fail.
        broken_dir = os.path.join(self.tmp, "typo-entities")
        shutil.copytree(DEMO_ENTITIES, broken_dir)
        with open(os.path.join(broken_dir, "Npc.json")) as f:
            text = f.read()
        with open(os.path.join(broken_dir, "Npc.json"), "w") as f:
            f.write(text.replace('"type": "uint8"', '"type": "unit8"', 1))
        # tests/game/wrong_abi.c: a module built for the next ABI version.
        wrong_abi = os.path.join(harness.BUILD_DIR, "tests", "libtest_game_wrong_abi.so")
        not_a_module = self.write("not_a_module.so", "just text\n")
        # A Lua script with a syntax error, and one whose top level throws.
        broken_scripts = os.path.join(self.tmp, "broken-scripts")
        os.makedirs(broken_scripts)
        with open(os.path.join(broken_scripts, "Npc.lua"), "w") as f:
            f.write("local Npc = { cell = {} }\nfunction Npc.cell:created(\n  self.level = 2\nend\nreturn Npc\n")
        throwing_scripts = os.path.join(self.tmp, "throwing-scripts")
        os.makedirs(throwing_scripts)
        with open(os.path.join(throwing_scripts, "game.lua"), "w") as f:
            f.write("local rate = 3\nerror('rate is ' .. rate)\n")
        cases = [
            ("a typo in a definition", {"entity_definitions": broken_dir}, ["Npc.json", "unit8"]),
            ("a module of another ABI", {"game_module": wrong_abi}, ["wrong-abi", "ABI version"]),
            ("no module at all", {"game_module": not_a_module}, ["not_a_module.so", "does not load"]),
            ("a script that does not parse", {"game_scripts": broken_scripts}, ["game_scripts", "Npc.lua:3:"]),
            ("a script that throws", {"game_scripts": throwing_scripts}, ["game_scripts", "game.lua:2: rate is 3"]),
        ]
        for why, settings, words in cases:
            for role in PROGRAMS:
                with self.subTest(case=why, program=role):
                    conf = {"entity_definitions": DEMO_ENTITIES, "player_entity_type": "Avatar"}
                    if role == "cellapp":
                        del conf["player_entity_type"]
                    conf.update(settings)
                    path = self.write("game-%s.json" % role, json.dumps(conf))
                    tls = harness.tls_stand_in_sets() if role == "baseapp" else []
                    rc, out, err, _ = harness.run_with_timeout([PROGRAMS[role], "--config", path, "--check"] + tls,
                                                               QUICK_S)
                    context = "%s --check with %s: exit %s\n%s" % (role, why, rc, err)
                    self.assertEqual(rc, 1, context)
                    self.assert_mentions(err, words[:1], context)
                    self.assert_mentions(err, words[1:], context)
        path = self.write("no-such-class.json", json.dumps({"entity_definitions": DEMO_ENTITIES,
                                                            "player_entity_type": "Avatr"}))
        rc, out, err, _ = harness.run_with_timeout([PROGRAMS["baseapp"], "--config", path, "--check"], QUICK_S)
        self.assertEqual(rc, 1, err)
        self.assert_mentions(err, ["player_entity_type 'Avatr' is not defined"], err)
        # And the demo's own game checks out.
        for role in PROGRAMS:
            conf = {"entity_definitions": DEMO_ENTITIES,
                    "game_module": os.path.join(harness.BUILD_DIR, "demo", "libtessera_demo.so")}
            if role == "baseapp":
                conf["player_entity_type"] = "Avatar"
            path = self.write("demo-game-%s.json" % role, json.dumps(conf))
            rc, out, err, _ = harness.run_with_timeout([PROGRAMS[role], "--config", path, "--check"], QUICK_S)
            self.assertEqual(rc, 0, "%s --check of the demo game: %s" % (role, err))

    def test_unreachable_redis(self):
        for role in PROGRAMS:
            with self.subTest(program=role):
                # Chosen free and left closed: nothing listens there.
                closed_port, internal_port, client_port = harness.free_ports(3)
                conf = {
                    "cluster_name": "tessera",
                    "redis_host": "127.0.0.1",
                    "redis_port": closed_port,
                    "redis_connect_attempts": 2,
                    "redis_retry_ms": 100,
                    "internal_host": "127.0.0.1",
                    "internal_port": internal_port,
                    "entity_definitions": DEMO_ENTITIES,
                }
                if role == "baseapp":
                    conf.update({"client_host": "127.0.0.1", "client_port": client_port,
                                 "player_entity_type": "Avatar"})
                path = self.write("noredis-%s.json" % role, json.dumps(conf))
                err, ctx = self.run_program(role, path, timeout=REDIS_GIVE_UP_S)
                self.assert_mentions(err, ["redis"], ctx)

    def test_broken_entity_definitions(self):
        # A definitions directory that is missing, and one whose file does
        # not parse: each program names the path and the problem, and exits.
        broken_dir = os.path.join(self.tmp, "broken-entities")
        os.makedirs(broken_dir, exist_ok=True)
        with open(os.path.join(broken_dir, "Avatar.json"), "w") as f:
            f.write('{"format": 1, "entities": [{"name": "Avatar", "colour": "red"}]}')
        for directory, words in ((os.path.join(self.tmp, "no-such-dir"), ["no-such-dir"]),
                                 (broken_dir, ["Avatar.json", "colour"])):
            for role in PROGRAMS:
                with self.subTest(directory=directory, program=role):
                    path = self.write("defs.json", json.dumps({"entity_definitions": directory}))
                    err, ctx = self.run_program(role, path)
                    self.assert_mentions(err, words, ctx)

    def test_port_in_use(self):
        with harness.Cluster(baseapps=1, cellapps=1) as cluster:
            cases = [
                # A second baseapp on the first one's client port.
                ("baseapp", "baseapp-1", "client_port", {"internal_port": harness.free_ports(1)[0]}),
                # A second cellapp on the first one's internal port.
                ("cellapp", "cellapp-1", "internal_port", {}),
            ]
            for role, first, port_key, changes in cases:
                with self.subTest(program=role):
                    with open(cluster.process(first)["config"]) as f:
                        conf = json.load(f)
                    conf.update(changes)
                    port = conf[port_key]
                    path = self.write("dup-%s.json" % role, json.dumps(conf))
                    err, ctx = self.run_program(role, path, timeout=REDIS_GIVE_UP_S)
                    self.assert_mentions(err, ["in use", str(port)], ctx)
                    self.assertTrue(cluster.alive(first), "%s died when a second one tried its port" % first)


if __name__ == "__main__":
    unittest.main(verbosity=2)
