#!/usr/bin/env python3
"""test_entity_io -- a map's entities and entity I/O on a real cluster.

The demo map (demo/maps/arena.json) wires a pressure plate (Trigger, 4 m
around (0, 12)) to the gate (Door) with a one-second delay, and the gate's
LogicTimer closes it every ten seconds; a shutter (another Door) toggles on
a timer of its own every six. A client walks onto the plate:
  - the map's five entities spawn once, with nothing skipped;
  - the plate fires OnTrigger, and the gate opens no earlier than the
    connection's delay after it (an event never runs early), which every
    process can see in the state dumps (Door.open, Trigger.entered);
  - the timer's OnTimer closes the gate again, and the shutter toggles.

The same across cellapps (tests/maps/split.json, grid 2x1): a plate west
of the line opens a gate east of it, through the name directory and the
mailbox, no earlier than its delay; "!activator" is served where it is.

A map with mistakes (tests/maps/parents.json, under tests/game/lifecycle.c,
whose Npc logs its created hook with the entity's name and its per-entity
data): an unknown class, a keyvalue that does not convert, a key that names
neither a property nor a field of the game's data, a field value that is
not whole, and one too long are each reported, naming the map, the entity
and the key, and skipped; the other three spawn, with their fields set from
their keyvalues, and the parent ("root", listed after it) spawns before its
child ("child", listed first)."""
import datetime
import os
import re
import shutil
import tempfile
import time
import unittest

import harness

ARENA = os.path.join(harness.SOURCE_DIR, "demo", "maps", "arena.json")
PARENTS = os.path.join(harness.SOURCE_DIR, "tests", "maps", "parents.json")
SPLIT = os.path.join(harness.SOURCE_DIR, "tests", "maps", "split.json")
LIFECYCLE = os.path.join(harness.BUILD_DIR, "tests", "libtest_game_lifecycle.so")


def stamp(line):
    """The log line's time, in seconds."""
    text = line.split(" ", 1)[0].rstrip("Z")
    return datetime.datetime.fromisoformat(text).timestamp()


class EntityIo(unittest.TestCase):
    def entity(self, cluster, cls, name=None):
        for dump in cluster.dump_states(cluster.names("cellapp")).values():
            for entity in dump["entities"]:
                if entity["class"] == cls and (name is None or entity.get("name") == name):
                    return entity
        return None

    def test_a_plate_opens_the_gate(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        settings = ["cellapp.game.npc_count=0", "cellapp.maps.default=" + ARENA, "cellapp.navmesh_cell_size=1"]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings, spawn_radius=0) as cluster:
            harness.wait_for(lambda: "5 entities spawned in space 'default', 0 skipped" in cluster.log("cellapp-1"), 20,
                             "the map's entities")
            self.assertEqual(self.entity(cluster, "Door", "gate")["properties"]["open"], False)
            sock, reply = harness.login(cluster.login, "walker", "pw")
            self.addCleanup(sock.close)
            time.sleep(1.0)  # its cell part made (the moves before that are its base's to drop)
            for step in range(1, 13):  # onto the plate, a metre a tenth of a second
                sock.sendall(harness.frame(harness.msg_move(0, 0, float(step), 0, step)))
                time.sleep(0.1)
            harness.wait_for(lambda: "the door 'gate' opens" in cluster.log("cellapp-1"), 10, "the gate to open")
            log = cluster.log("cellapp-1").splitlines()
            fired = [l for l in log if "fires OnTrigger" in l]
            opened = [l for l in log if "the door 'gate' opens" in l]
            self.assertTrue(fired and opened, log[-20:])
            self.assertGreaterEqual(stamp(opened[0]) - stamp(fired[0]), 0.95, (fired[0], opened[0]))
            door, plate = self.entity(cluster, "Door", "gate"), self.entity(cluster, "Trigger")
            self.assertEqual(door["properties"]["open"], True)
            self.assertGreaterEqual(door["properties"]["opened_count"], 1)
            self.assertGreaterEqual(plate["properties"]["entered"], 1)
            harness.wait_for(lambda: "the door 'gate' closes" in cluster.log("cellapp-1"), 15, "the timer to close the gate")
            # The shutter toggles on its own timer, every six seconds.
            harness.wait_for(lambda: "the door 'shutter' opens" in cluster.log("cellapp-1") and
                             "the door 'shutter' closes" in cluster.log("cellapp-1"), 15, "the shutter to toggle")
            self.assertTrue(cluster.all_alive())

    def test_a_plate_opens_a_gate_on_another_cellapp(self):
        # tests/maps/split.json: the plate at x = -20 and the gate it opens
        # at x = +20, on either side of the line at x = 0 (grid 2x1): the
        # event reaches the gate through the name directory and the mailbox.
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        settings = ["cellapp.game.npc_count=0", "cellapp.maps.default=" + SPLIT, "cellapp.navmesh_cell_size=1"]
        with harness.Cluster(baseapps=1, cellapps=2, grid="2x1", extra_set=settings, spawn_radius=0) as cluster:
            logs = lambda: cluster.log("cellapp-1") + cluster.log("cellapp-2")
            harness.wait_for(lambda: "2 entities spawned in space 'default', 0 skipped" in logs(), 20,
                             "the map's entities")
            def holders():
                found = {}
                for name, dump in cluster.dump_states(cluster.names("cellapp")).items():
                    for entity in dump["entities"]:
                        if entity["class"] in ("Door", "Trigger") and entity.get("kind", "real") == "real":
                            found[entity["class"]] = name
                return found
            harness.wait_for(lambda: len(set(holders().values())) == 2, 20, "plate and gate on different cellapps")
            gate_holder = holders()["Door"]
            sock, reply = harness.login(cluster.login, "walker", "pw")
            self.addCleanup(sock.close)
            time.sleep(1.0)  # its cell part made
            for step in range(1, 21):  # west onto the plate, a metre a tenth of a second
                sock.sendall(harness.frame(harness.msg_move(-float(step), 0, 0, 0, step)))
                time.sleep(0.1)
            harness.wait_for(lambda: "the door 'east_gate' opens" in cluster.log(gate_holder), 10, "the far gate to open")
            fired = [l for l in logs().splitlines() if "fires OnTrigger" in l]
            opened = [l for l in cluster.log(gate_holder).splitlines() if "the door 'east_gate' opens" in l]
            self.assertTrue(fired and opened)
            self.assertGreaterEqual(stamp(opened[0]) - stamp(fired[0]), 0.45, (fired[0], opened[0]))
            # "!activator" (the walker, a real on the plate's cellapp) was
            # served too: it has no input "Nothing", which is said.
            harness.wait_for(lambda: "has no input 'Nothing'" in logs(), 5, "the activator's input")
            door = [e for d in cluster.dump_states([gate_holder]).values() for e in d["entities"]
                    if e["class"] == "Door"][0]
            self.assertEqual(door["properties"]["open"], True)
            self.assertTrue(cluster.all_alive())

    def test_a_restarted_cluster_spawns_its_map_again(self):
        # The claim on a space's map lapses once the last cellapp of the
        # space has stopped: the same Redis, a new cluster, the map's
        # entities once more (and once only).
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        run_dir = tempfile.mkdtemp(prefix="tessera-it-maps-")
        self.addCleanup(shutil.rmtree, run_dir, True)
        settings = ["cellapp.game.npc_count=0", "cellapp.maps.default=" + ARENA, "cellapp.navmesh_cell_size=1"]
        spawned = "5 entities spawned in space 'default', 0 skipped"
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings, run_dir=run_dir) as cluster:
            harness.wait_for(lambda: spawned in cluster.log("cellapp-1"), 20, "the map's entities")
            # The cellapp dies; its claim is left without a lease, as an
            # older Tessera wrote claims: the next cluster must still spawn.
            cluster.kill("cellapp-1")
            key = "tessera:tessera:space_map:default"
            harness.wait_for(lambda: cluster.redis.pttl(key) != -2, 5, "the claim")
            self.assertTrue(cluster.redis.persist(key), "PERSIST found no TTL on the claim")
            cluster.stop()
        # Each cluster writes its logs afresh.
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings, run_dir=run_dir) as cluster:
            harness.wait_for(lambda: spawned in cluster.log("cellapp-1"), 30, "the map's entities again")
            time.sleep(2.0)  # a second spawn would come within a renewal or two
            doors = [e for d in cluster.dump_states(cluster.names("cellapp")).values() for e in d["entities"]
                     if e["class"] == "Door"]
            self.assertEqual(sorted(d.get("name") for d in doors), ["gate", "shutter"], doors)
            self.assertTrue(cluster.all_alive())

    def test_a_broken_map_spawns_the_rest_parents_first(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, LIFECYCLE)
        settings = ["cellapp.game_module=" + LIFECYCLE, "cellapp.maps.default=" + PARENTS,
                    "cellapp.navmesh_cell_size=1"]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings) as cluster:
            harness.wait_for(lambda: "3 entities spawned in space 'default', 5 skipped" in cluster.log("cellapp-1"),
                             20, "the map's summary")
            log = cluster.log("cellapp-1")
            self.assertRegex(log, r"parents\.json: entity 1 \('smaug'\): class 'Dragon' is not in the entity "
                                  r"definitions: skipped")
            self.assertRegex(log, r"parents\.json: entity 2 \('moody'\): key 'mood': .*: skipped")
            self.assertRegex(log, r"parents\.json: entity 3 \('nosy'\): key 'nose': .*: skipped")
            self.assertRegex(log, r"parents\.json: entity 6 \('coward'\): key 'courage': 1\.5 does not convert to "
                                  r"field 'courage': skipped")
            self.assertRegex(log, r"parents\.json: entity 7 \('boaster'\): key 'motto': longer than the 15 bytes of "
                                  r"field 'motto': skipped")
            created = re.findall(r"lifecycle: created at \d+ ms, named '(\w+)'", log)
            self.assertEqual(created, ["root", "brave", "child"], log[-3000:])
            # Keyvalues that name no property fill the game's data (its field table).
            self.assertIn("named 'root', courage 5, motto 'hold the line', home 1.0 2.0 3.0", log)
            self.assertIn("named 'brave', courage 12, motto '', home 0.0 0.0 0.0", log)
            self.assertIn("named 'child', courage 0,", log)
            self.assertNotIn("form a cycle", log)
            self.assertTrue(cluster.all_alive())


if __name__ == "__main__":
    unittest.main(verbosity=2)
