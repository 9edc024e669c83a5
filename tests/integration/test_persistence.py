#!/usr/bin/env python3
"""test_persistence -- players' entities in Redis (writeToDB), on a real
cluster with a real, durable redis-server.

  - a round trip: gold earned on the base (chat), the distance walked on
    the cell (a persistent cell property) and the position are written when
    the player leaves, and a later login restores all three; so does a
    restart of the whole cluster in the same directory (the baseapp's drain
    writes its entities; the new cluster keeps the data);
  - the stored form survives changes to the definitions: a property the
    definitions no longer have, and a value that no longer converts, are
    dropped with a log line naming them; a property the record lacks takes
    its default; a record that does not read at all refuses the login and
    is left as it was;
  - autosave writes a live player's entity every autosave_interval_ms;
  - Redis killed (SIGKILL) and restarted keeps every acknowledged write,
    and writes that failed while it was down are retried until they land;
  - the display name (the demo's Avatar `name`, demo/game/demo_names.c) is
    drawn at the first login, never the account name, and stored: the same
    at the next login and after the restart; a record written when Avatars
    were named after their accounts gets a display name instead."""
import json
import os
import re
import shutil
import struct
import tempfile
import time
import unittest

import harness
from harness import ERROR_CODES, PART_BASE, frame, msg_call, msg_move

CHAT = 0            # Avatar's base method chat(string text): earns a gold coin
DISPLAY_NAME = re.compile(r"^[A-Z][a-z]+[A-Z][a-z]+#[0-9]{4}$")  # demo/game/demo_names.c


def chat(sock, entity_id, text=b"hi"):
    sock.sendall(frame(msg_call(entity_id, PART_BASE, CHAT, bytes([len(text)]) + text)))


class Persistence(unittest.TestCase):
    def setUp(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)

    # -- helpers

    def stored(self, cluster, account):
        """The stored form of `account`'s Avatar (a dict), or None."""
        key = "tessera:%s:entity:Avatar:%s" % (cluster.info.get("cluster_name", "tessera"), account)
        text = cluster.redis.get(key)
        return json.loads(text) if text else None

    def wait_stored(self, cluster, account, predicate, what, timeout=15.0):
        found = {}

        def check():
            record = self.stored(cluster, account)
            found["last"] = record
            return record is not None and predicate(record)

        harness.wait_for(check, timeout, "%s (last stored: %r)" % (what, found.get("last")))
        return found["last"]

    def entity(self, cluster, entity_id):
        """tessera-admin entity ID --json: {"base": {...}, "cell": {...}}."""
        proc = cluster.admin_result("--json", "entity", str(entity_id))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout)

    def earn_gold(self, sock, entity_id, coins):
        for _ in range(coins):
            chat(sock, entity_id)
            self.assertIsNotNone(harness.read_until(sock, "base_properties", timeout=5.0))

    def walk(self, sock, start, dx, dz, steps=10):
        """Walks from `start` by (dx, dz) in small steps the cell accepts."""
        x, y, z = start
        for i in range(1, steps + 1):
            sock.sendall(frame(msg_move(x + dx * i / steps, y, z + dz * i / steps, 0.0, i)))
            time.sleep(0.12)
        return (x + dx, y, z + dz)

    # -- tests

    def test_round_trip_and_cluster_restart(self):
        run_dir = tempfile.mkdtemp(prefix="tessera-it-persist-")
        self.addCleanup(shutil.rmtree, run_dir, True)
        settings = ["baseapp.client_detached_grace_ms=0"]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings, run_dir=run_dir) as cluster:
            sock, reply = harness.login(cluster.login, "alice", "pw-alice")
            me = reply["entity_id"]
            self.earn_gold(sock, me, 3)
            target = self.walk(sock, reply["position"], 3.0, 2.0)
            time.sleep(0.5)
            sock.close()
            record = self.wait_stored(cluster, "alice", lambda r: r["properties"].get("gold") == 3,
                                      "alice's gold written when she left")
            self.assertEqual(record["class"], "Avatar")
            self.assertAlmostEqual(record["position"][0], target[0], delta=0.2)
            self.assertAlmostEqual(record["position"][2], target[2], delta=0.2)
            self.assertGreater(float(record["properties"]["walked"]), 3.0, record)
            display_name = record["properties"].get("name", "")
            self.assertRegex(display_name, DISPLAY_NAME)
            self.assertNotIn("alice", display_name.lower())

            sock, again = harness.login(cluster.login, "alice", "pw-alice")
            self.assertAlmostEqual(again["position"][0], target[0], delta=0.2)
            self.assertAlmostEqual(again["position"][2], target[2], delta=0.2)
            view = self.entity(cluster, again["entity_id"])
            self.assertEqual(int(view["base"]["properties"]["gold"]), 3, view)
            self.assertGreater(float(view["cell"]["properties"]["walked"]), 3.0, view)
            self.assertEqual(view["cell"]["properties"]["name"], display_name, view)
            self.earn_gold(sock, again["entity_id"], 1)
            # The cluster stops with alice online: the drain writes her.
            cluster.stop()
            sock.close()

        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings, run_dir=run_dir) as cluster:
            self.assertEqual(self.stored(cluster, "alice")["properties"]["gold"], 4)
            self.assertEqual(self.stored(cluster, "alice")["properties"]["name"], display_name)
            sock, reply = harness.login(cluster.login, "alice", "pw-alice")
            self.assertAlmostEqual(reply["position"][0], target[0], delta=0.2)
            view = self.entity(cluster, reply["entity_id"])
            self.assertEqual(int(view["base"]["properties"]["gold"]), 4, view)
            self.assertEqual(view["cell"]["properties"]["name"], display_name, view)
            sock.close()
            self.assertTrue(cluster.all_alive())

    def test_definition_changes_and_damaged_records(self):
        with harness.Cluster(baseapps=1, cellapps=1) as cluster:
            prefix = "tessera:%s:entity:Avatar:" % cluster.info.get("cluster_name", "tessera")
            # Written by an older game: a property since removed, a level
            # that is not a number any more; no "mana" (it takes its default).
            cluster.redis.set(prefix + "bob", json.dumps({
                "format": 1, "class": "Avatar", "space": "", "position": [1.5, 0, -2.5], "yaw": 0,
                "properties": {"name": "bob", "gold": 7, "guild_rank": 3, "level": "captain"}}))
            sock, reply = harness.login(cluster.login, "bob", "pw-bob")
            self.assertAlmostEqual(reply["position"][0], 1.5, delta=0.1)
            view = self.entity(cluster, reply["entity_id"])
            self.assertEqual(int(view["base"]["properties"]["gold"]), 7, view)
            self.assertEqual(int(view["cell"]["properties"]["level"]), 1, view)
            # Stored when Avatars were named after their accounts: renamed.
            self.assertRegex(view["cell"]["properties"]["name"], DISPLAY_NAME)
            log = cluster.log("baseapp-1")
            self.assertIn("stored property 'guild_rank' is not a property of the class", log)
            self.assertIn("stored property 'level' is not an unsigned integer", log)
            sock.close()

            damaged = "{ this is not JSON"
            cluster.redis.set(prefix + "carol", damaged)
            s = harness.connect(cluster.login)
            s.sendall(frame(harness.msg_hello()))
            harness.read_until(s, "hello")
            s.sendall(frame(harness.msg_login("carol", "pw-carol")))
            refused = harness.read_until(s, {"login_reply", "error"}, timeout=10.0)
            self.assertEqual(refused and refused.get("code"), ERROR_CODES["UNAVAILABLE"], refused)
            s.close()
            self.assertEqual(cluster.redis.get(prefix + "carol"), damaged)
            self.assertTrue(cluster.all_alive())

    def test_written_from_the_cell_backup_when_the_cell_is_gone(self):
        # The only cellapp is killed: nobody can restore alice's cell part
        # or answer the backup her logout asks for. Her record is written
        # from the last backup her cell part sent her base (at most
        # cell_backup_period_ms old): where she walked to, and how far.
        settings = ["baseapp.client_detached_grace_ms=0", "baseapp.backup_timeout_ms=1000"]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings) as cluster:
            sock, reply = harness.login(cluster.login, "alice", "pw-alice")
            target = self.walk(sock, reply["position"], 3.0, 2.0)
            time.sleep(2.0)  # a backup since the last step
            cluster.kill("cellapp-1", "KILL")
            sock.close()
            record = self.wait_stored(cluster, "alice", lambda r: r.get("position") is not None,
                                      "alice written when she left")
            self.assertAlmostEqual(record["position"][0], target[0], delta=0.2)
            self.assertAlmostEqual(record["position"][2], target[2], delta=0.2)
            self.assertGreater(float(record["properties"]["walked"]), 3.0, record)
            harness.wait_for(lambda: "written from its latest cell backup" in cluster.log("baseapp-1"), 10,
                             "the baseapp to say so")

    def test_autosave_and_redis_restart(self):
        settings = ["baseapp.autosave_interval_ms=1000", "baseapp.write_retry_ms=300"]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings) as cluster:
            sock, reply = harness.login(cluster.login, "dave", "pw-dave")
            me = reply["entity_id"]
            self.earn_gold(sock, me, 2)
            # Autosave: written while dave plays on.
            self.wait_stored(cluster, "dave", lambda r: r["properties"].get("gold") == 2, "dave's autosave")

            # SIGKILL: what Redis acknowledged is still there.
            cluster.restart_redis(pause_s=0.2, hard=True)
            self.assertEqual(self.stored(cluster, "dave")["properties"]["gold"], 2)

            # Down for a while: the game goes on, the writes fail and wait.
            cluster.kill("redis")
            self.earn_gold(sock, me, 3)
            time.sleep(2.0)
            cluster.restart_redis(pause_s=0.0, hard=True)
            self.wait_stored(cluster, "dave", lambda r: r["properties"].get("gold") == 5,
                             "dave's gold earned while Redis was down, written once it was back")
            harness.wait_for(lambda: (cluster.stat("baseapp-1", "write_failures") or 0) > 0, 10.0,
                             "the baseapp to report the failed writes")
            # Still serving: dave plays on, a new player logs in.
            self.earn_gold(sock, me, 1)
            other, _ = harness.login(cluster.login, "erin", "pw-erin")
            other.close()
            sock.close()
            self.assertTrue(cluster.all_alive())


if __name__ == "__main__":
    unittest.main()
