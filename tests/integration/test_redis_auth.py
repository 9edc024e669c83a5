#!/usr/bin/env python3
"""test_redis_auth -- redis_password: every Redis connection sends AUTH.

A redis-server with a password (requirepass) on a free 127.0.0.1 port:
  - a cellapp with the right redis_password registers and publishes its
    entry (read back with the password);
  - a cellapp with a wrong one never counts as connected, logs Redis's
    refusal (and not the password) and gives up after
    redis_connect_attempts;
  - tessera-admin with $TESSERA_REDIS_PASSWORD lists the cellapp, and
    without it is refused;
  - redis_password_file (the password kept off the command line): a
    cellapp reading it registers, and tessera-admin reads it through
    $TESSERA_REDIS_PASSWORD_FILE; a file every user may read, an empty
    one, or one beside redis_password is refused by --check, naming the
    problem and never the password.
Every process started here is killed at the end, whatever happens.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import harness
import tessera_cluster

PASSWORD = "correct-horse-battery-staple-7f3a"
WRONG = "wrong-password-0000000000000000"
READY_S = 20


class RedisAuth(unittest.TestCase):
    def setUp(self):
        harness.require_binaries(harness.CELLAPP_BIN)
        self.tmp = tempfile.mkdtemp(prefix="tessera-redis-auth-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.procs = []
        self.addCleanup(self.stop_all)
        harness.add_emergency_cleanup(self.stop_all)
        self.addCleanup(harness.remove_emergency_cleanup, self.stop_all)
        (self.redis_port,) = harness.free_ports(1)
        redis_log = open(os.path.join(self.tmp, "redis.log"), "wb")
        self.addCleanup(redis_log.close)
        self.redis = self.spawn(["redis-server", "--bind", "127.0.0.1", "--port", str(self.redis_port),
                                 "--dir", self.tmp, "--save", "", "--appendonly", "no",
                                 "--requirepass", PASSWORD, "--daemonize", "no"],
                                redis_log, executable=tessera_cluster.find_redis_server())
        self.r = tessera_cluster._Redis(host="127.0.0.1", port=self.redis_port, password=PASSWORD,
                                        socket_timeout=2, socket_connect_timeout=2, decode_responses=True)
        self.addCleanup(self.r.close)

        def pong():
            try:
                return self.r.ping()
            except tessera_cluster.RedisError:
                return False
        harness.wait_for(pong, READY_S, "the password-protected redis-server to answer")

    def spawn(self, argv, log, executable=None):
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                executable=executable, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def config(self, name, password, **extra):
        (internal_port,) = harness.free_ports(1)
        conf = {"redis_host": "127.0.0.1", "redis_port": self.redis_port, "redis_password": password,
                "redis_connect_attempts": 3, "redis_retry_ms": 100, "internal_host": "127.0.0.1",
                "internal_port": internal_port, "admin_port": -1, "heartbeat_ms": 200, "registry_ttl_ms": 2000,
                "entity_definitions": os.path.join(harness.SOURCE_DIR, "demo", "entities")}
        conf.update(extra)
        path = os.path.join(self.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(conf, f)
        return path

    def test_right_password_registers(self):
        path = self.config("good", PASSWORD)
        log_path = os.path.join(self.tmp, "good.log")
        with open(log_path, "wb") as log:
            proc = self.spawn([harness.CELLAPP_BIN, "--config", path], log)
        entries = harness.wait_for(
            lambda: [e for e in tessera_cluster.registry_entries(self.r) if e.get("pid") == str(proc.pid)],
            READY_S, "the cellapp's registry entry")
        self.assertEqual(entries[0].get("role"), "cellapp")
        with open(log_path) as f:
            text = f.read()
        self.assertNotIn(PASSWORD, text, "the password was logged")
        admin = os.path.join(harness.BUILD_DIR, "client", "tessera-admin")
        argv = [admin, "--redis", "127.0.0.1:%d" % self.redis_port, "cellapps"]
        env = dict(os.environ, TESSERA_REDIS_PASSWORD=PASSWORD)
        rc, out, err, _ = harness.run_with_timeout(argv, 20, env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.split(), [entries[0]["id"]])
        env.pop("TESSERA_REDIS_PASSWORD")
        rc, out, err, _ = harness.run_with_timeout(argv, 20, env=env)
        self.assertNotEqual(rc, 0, "tessera-admin read a password-protected Redis without the password")
        env["TESSERA_REDIS_PASSWORD"] = WRONG
        rc, out, err, _ = harness.run_with_timeout(argv, 20, env=env)
        self.assertNotEqual(rc, 0)
        self.assertIn("refused AUTH", err)

    def test_wrong_password_gives_up(self):
        path = self.config("bad", WRONG)
        rc, out, err, _ = harness.run_with_timeout([harness.CELLAPP_BIN, "--config", path], READY_S)
        self.assertIsNotNone(rc, "a cellapp with a wrong redis_password kept running")
        self.assertNotEqual(rc, 0)
        self.assertIn("AUTH refused", out + err)
        self.assertNotIn(WRONG, out + err, "the password was logged")
        self.assertEqual(tessera_cluster.registry_entries(self.r), [])

    def password_file(self, name, text, mode):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def test_password_file(self):
        secret = self.password_file("redis-password", PASSWORD + "\n", 0o600)
        path = self.config("from-file", "", redis_password_file=secret)
        rc, out, err, _ = harness.run_with_timeout([harness.CELLAPP_BIN, "--config", path, "--check"], 20)
        self.assertEqual(rc, 0, out + err)
        log_path = os.path.join(self.tmp, "from-file.log")
        with open(log_path, "wb") as log:
            proc = self.spawn([harness.CELLAPP_BIN, "--config", path], log)
        harness.wait_for(
            lambda: [e for e in tessera_cluster.registry_entries(self.r) if e.get("pid") == str(proc.pid)],
            READY_S, "the registry entry of the cellapp that read its password from a file")
        self.assertNotIn(PASSWORD, " ".join(open("/proc/%d/cmdline" % proc.pid).read().split("\0")))
        admin = os.path.join(harness.BUILD_DIR, "client", "tessera-admin")
        argv = [admin, "--redis", "127.0.0.1:%d" % self.redis_port, "cellapps"]
        env = dict(os.environ, TESSERA_REDIS_PASSWORD_FILE=secret)
        env.pop("TESSERA_REDIS_PASSWORD", None)
        rc, out, err, _ = harness.run_with_timeout(argv, 20, env=env)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out.split()), 1, out)

        refused = [
            ("every user may read it", self.config("open", "", redis_password_file=self.password_file(
                "open-password", PASSWORD, 0o644)), "readable by every user"),
            ("it is empty", self.config("empty", "", redis_password_file=self.password_file(
                "empty-password", "\n", 0o600)), "is empty"),
            ("it is missing", self.config("missing", "", redis_password_file=os.path.join(self.tmp, "nowhere")),
             "No such file"),
            ("redis_password is set too", self.config("both", PASSWORD, redis_password_file=secret),
             "both set"),
        ]
        for why, config_path, says in refused:
            rc, out, err, _ = harness.run_with_timeout([harness.CELLAPP_BIN, "--config", config_path, "--check"], 20)
            self.assertEqual(rc, 1, "--check passed a redis_password_file although %s" % why)
            self.assertIn("redis_password_file", err)
            self.assertIn(says, err)
            self.assertNotIn(PASSWORD, out + err, "the password was printed")
        env["TESSERA_REDIS_PASSWORD_FILE"] = os.path.join(self.tmp, "open-password")
        rc, out, err, _ = harness.run_with_timeout(argv, 20, env=env)
        self.assertNotEqual(rc, 0, "tessera-admin used a password file every user may read")
        self.assertIn("readable by every user", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
