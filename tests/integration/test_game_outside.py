#!/usr/bin/env python3
"""test_game_outside -- a game built outside the tree and run from its
folder, as a studio would.

  - `meson install` (into a scratch DESTDIR) puts tessera/game.h and
    tessera-game.pc in place; pkg-config finds them (PKG_CONFIG_SYSROOT_DIR
    maps the DESTDIR);
  - examples/laps, copied out of the tree, builds against the installed
    header with one `cc` line, and as a meson project of its own
    (dependency('tessera-game'));
  - both programs' --check load its definitions and its module;
  - `scripts/cluster up --game DIR --keep-cellapps` runs it from its
    folder (game.json: relative paths): a login gets a Runner, whose laps
    its cell counts, seen growing through tessera-admin.
Every process started here is stopped at the end, whatever happens."""
import glob
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

import harness

EXAMPLE = os.path.join(harness.SOURCE_DIR, "examples", "laps")


def run(argv, env=None, cwd=None, timeout=180):
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise AssertionError("%s failed (exit %d):\n%s" % (" ".join(argv), done.returncode, done.stdout[-3000:]))
    return done.stdout


class GameOutside(unittest.TestCase):
    def test_laps_built_outside_and_run_from_its_folder(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        scratch = tempfile.mkdtemp(prefix="tessera-game-outside-")
        self.addCleanup(shutil.rmtree, scratch, True)
        destdir = os.path.join(scratch, "root")
        run(["meson", "install", "-C", harness.BUILD_DIR, "--destdir", destdir, "--no-rebuild", "--quiet"])
        pcs = glob.glob(os.path.join(destdir, "**", "tessera-game.pc"), recursive=True)
        self.assertEqual(len(pcs), 1, "tessera-game.pc installed %d times" % len(pcs))
        headers = glob.glob(os.path.join(destdir, "**", "tessera", "game.h"), recursive=True)
        self.assertEqual(len(headers), 1, headers)
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pcs[0]), PKG_CONFIG_SYSROOT_DIR=destdir)
        cflags = run(["pkg-config", "--cflags", "tessera-game"], env=env).split()
        self.assertIn("-I" + os.path.dirname(os.path.dirname(headers[0])), cflags)
        abi = run(["pkg-config", "--variable=game_abi_version", "tessera-game"], env=env).strip()
        self.assertTrue(abi.isdigit(), abi)

        game = os.path.join(scratch, "laps")
        shutil.copytree(EXAMPLE, game, ignore=shutil.ignore_patterns("build", "build-*"))
        os.makedirs(os.path.join(game, "build"))
        # One cc line, as the README shows.
        run(["cc", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC"] + cflags +
            ["-o", os.path.join(game, "build", "liblaps.so"), os.path.join(game, "laps.c")], env=env)
        # And as a meson project of its own.
        run(["meson", "setup", os.path.join(game, "build-meson")], env=env, cwd=game)
        run(["ninja", "-C", os.path.join(game, "build-meson")], env=env)
        self.assertTrue(os.path.exists(os.path.join(game, "build-meson", "liblaps.so")))

        # --check loads its definitions and module.
        with open(os.path.join(game, "game.json")) as f:
            manifest = json.load(f)
        for program, extra in ((harness.CELLAPP_BIN, {}), (harness.BASEAPP_BIN, {"player_entity_type": "Runner"})):
            conf = dict({"entity_definitions": os.path.join(game, manifest["entity_definitions"]),
                         "game_module": os.path.join(game, manifest["game_module"])}, **extra)
            path = os.path.join(scratch, "check.json")
            with open(path, "w") as f:
                json.dump(conf, f)
            rc, out, err, _ = harness.run_with_timeout([program, "--config", path, "--check"], 20)
            self.assertEqual(rc, 0, "%s --check of the laps game: %s" % (program, err))

        with harness.Cluster(baseapps=1, cellapps=2, game=game, keep_cellapps=True) as cluster:
            sock, reply = harness.login(cluster.login, "runner", "pw")
            self.addCleanup(sock.close)
            self.assertEqual(reply["entity_type"], "Runner", reply)

            def laps():
                entity = json.loads(cluster.admin("entity", str(reply["entity_id"])))
                return entity["cell"]["properties"]["laps"]
            first = harness.wait_for(lambda: laps() or None, 10, "the first lap")
            time.sleep(1.0)
            self.assertGreater(laps(), first, "the laps stopped")
            self.assertIn("game module 'laps' loaded", cluster.log("cellapp-1"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
