#!/usr/bin/env python3
"""test_game_lifecycle -- named thinks and deferred deletion, through a real
cellapp running tests/game/lifecycle.c (a game module over the demo's
definitions that reports what it sees in its log).

Two Npcs are spawned; each schedules think "a" (100 ms), think "b"
(300 ms), then think "a" again (200 ms), and an unknown think "c":
  - the unknown name is refused (-1), the others accepted;
  - "a" runs exactly once (the second replaced the first: one pending think
    per name), "b" exactly once, and "a" before "b" (by due time, whatever
    the ticks' timing);
  - "b" destroys its entity twice (both accepted), after which the entity
    still resolves and takes a property write for the rest of the tick;
  - the destroyed hook runs exactly once per entity, and a tick later the
    handle resolves to nothing;
  - the property_changed hook: think "a" writes health (whose hook writes
    health again and mood, whose hook writes health a third time), health
    to the value it holds, level out of range, the `name` property twice
    to one text and scale; think "b" writes visitors. The hook hears
    health, mood, name, scale and visitors, once each, in that order:
    nothing for the writes inside a hook to a property whose hook is
    running, for a value that did not change or for a refused one; the
    `name` property is not the look-up name (api->name);
  - two players logged in side by side each see the other enter their
    view (the entered_view hook), and when one logs out the other's
    left_view names it, once;
  - its three game systems start in order, run their per-tick hooks in
    order (before the thinks, then after them), and stop in the reverse
    order when the cellapp stops;
  - a system whose start fails stops the cellapp from starting, naming
    the system, after stopping the ones already started;
  - the cellapp stays up.
"""
import json
import os
import re
import shutil
import tempfile
import unittest

import harness

MODULE = os.path.join(harness.BUILD_DIR, "tests", "libtest_game_lifecycle.so")


class GameLifecycle(unittest.TestCase):
    def test_thinks_and_deferred_deletion(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, MODULE)
        # Side by side: the two players must spawn in each other's view.
        settings = ["cellapp.game_module=" + MODULE, "baseapp.client_detached_grace_ms=0"]
        with harness.Cluster(baseapps=1, cellapps=1, spawn_radius=5, extra_set=settings) as cluster:
            def lines():
                return [l for l in cluster.log("cellapp-1").splitlines() if "lifecycle:" in l]

            def done():
                return len([l for l in lines() if "a tick later" in l]) >= 2
            harness.wait_for(done, 20, "both Npcs' thinks, destruction and the tick after")
            text = lines()
            entities = sorted(set(int(m.group(1)) for l in text for m in [re.search(r"entity (\d+) \(Npc\)", l)] if m))
            self.assertEqual(len(entities), 2, "\n".join(text))
            for entity in entities:
                mine = [l for l in text if "entity %d (Npc)" % entity in l]
                kinds = [l.split("lifecycle: ", 1)[1] for l in mine]
                self.assertIn("thinks set 0, unknown -1", kinds, mine)
                a = [i for i, k in enumerate(kinds) if k.startswith("think a")]
                b = [i for i, k in enumerate(kinds) if k.startswith("think b")]
                self.assertEqual(len(a), 1, mine)
                self.assertEqual(len(b), 1, mine)
                self.assertLess(a[0], b[0], mine)
                self.assertIn("destroyed 0 0, still resolves yes, write 0", kinds, mine)
                self.assertIn("writes 0, refused -1, health 10, name property 'Bo', look-up name ''", kinds, mine)
                changes = [k for k in kinds if k.startswith("changed ")]
                self.assertEqual(changes, ["changed health 0", "changed mood 0", "changed name 0", "changed scale 0",
                                           "changed visitors 0"], mine)
                self.assertEqual(kinds.count("destroyed hook"), 1, mine)
                later = [l for l in text if "entity %d a tick later" % entity in l]
                self.assertEqual(len(later), 1, text)
                self.assertTrue(later[0].endswith("resolves no"), later)
            # Views.
            a_sock, a = harness.login(cluster.login, "viewer-a", "pw")
            b_sock, b = harness.login(cluster.login, "viewer-b", "pw")
            self.addCleanup(a_sock.close)
            alice, bob = a["entity_id"], b["entity_id"]
            harness.wait_for(lambda: "entity %d (Avatar): lifecycle: sees %d (Avatar)" % (alice, bob) in
                             cluster.log("cellapp-1") and "entity %d (Avatar): lifecycle: sees %d (Avatar)" % (bob, alice)
                             in cluster.log("cellapp-1"), 10, "each to see the other")
            b_sock.close()
            gone = "entity %d (Avatar): lifecycle: no longer sees %d" % (alice, bob)
            harness.wait_for(lambda: gone in cluster.log("cellapp-1"), 40, "alice's view to lose bob")
            self.assertEqual(cluster.log("cellapp-1").count(gone), 1)
            self.assertTrue(cluster.all_alive())
            cluster.stop()
            systems = [l.split("lifecycle: system ", 1)[1] for l in cluster.log("cellapp-1").splitlines()
                       if "lifecycle: system " in l]
            self.assertEqual(systems[:3], ["first init", "second init", "third init"], systems)
            self.assertEqual(systems[3:9], ["first before thinks", "second before thinks", "third before thinks",
                                            "first after thinks", "second after thinks", "third after thinks"],
                             systems)
            self.assertEqual(systems[-3:], ["third shutdown", "second shutdown", "first shutdown"], systems)

    def test_a_system_that_fails_to_start(self):
        harness.require_binaries(harness.CELLAPP_BIN, MODULE)
        tmp = tempfile.mkdtemp(prefix="tessera-systems-")
        self.addCleanup(shutil.rmtree, tmp, True)
        closed_port, internal_port = harness.free_ports(2)
        path = os.path.join(tmp, "cellapp.json")
        with open(path, "w") as f:
            json.dump({"redis_host": "127.0.0.1", "redis_port": closed_port, "internal_host": "127.0.0.1",
                       "internal_port": internal_port,
                       "entity_definitions": os.path.join(harness.SOURCE_DIR, "demo", "entities"),
                       "game_module": MODULE, "game": {"fail_system": 2}}, f)
        rc, out, err, took = harness.run_with_timeout([harness.CELLAPP_BIN, "--config", path], 20)
        self.assertIsNotNone(rc, err)
        self.assertNotEqual(rc, 0, err)
        self.assertIn("game system 'second' failed to start", err)
        self.assertEqual(harness.sanitizer_report(err), "", err)
        started = [l.split("lifecycle: system ", 1)[1] for l in (out + err).splitlines() if "lifecycle: system " in l]
        self.assertEqual(started, ["first init", "second init", "first shutdown"], out + err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
