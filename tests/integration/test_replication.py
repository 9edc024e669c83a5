#!/usr/bin/env python3
"""test_replication -- every property value a client holds is the server's.

40 bots play the demo game on 1 baseapp + 2 cellapps (each cellapp spawns 8
NPC guards in the same area): they walk, chat (a base method that earns
gold, BASE_AND_CLIENT) and cast spells (a cell method that changes the
caster's mana, buffs and secret note, and the target's health through its
takeDamage, across cellapps when the target's real lives on the other one,
with onDamage going to every client that sees the target). Walking raises
an avatar's level and its near-only equipment; avatars stepping into an
NPC's trap change its mood (other clients, medium detail), level and scale,
and are greeted: the NPC's cell calls the avatar's base (poked), which
tells the avatar's client (onPoked).

Then the bots stand still and stop calling: nothing in the demo game changes
on a timer, so the world's state freezes. After three seconds (the budget
sends everything pending within one), the bots write what each holds, and
every process dumps what it holds (SIGUSR1). Every value a bot holds for an
entity in its view must equal the server's, for exactly the properties its
audience gets: the own client's for its own entity (base and cell), the
other clients' at the detail level its distance allows for the others
(pairs within half a metre of a detail boundary are skipped). And the bots
must not hold what they may not: cell-private values and other players'
own-client values stay at their defaults."""
import json
import os
import signal
import time
import unittest

import harness

BOTS = 40
SECONDS = 16
SETTLE = 5
SNAPSHOT_AT = 14
AREA = 30          # the bots walk in [-30, 30]^2: everyone sees everyone
NPCS_PER_CELLAPP = 8

# client.proto's detail distances: the cellapp defaults.
DETAIL_NEAR = 15.0
DETAIL_MEDIUM = 30.0
BOUNDARY_SLACK = 0.5

# The audience table of entity_def (KBEngine's flags): which parts hold a
# property and who receives it.
AUDIENCE = {
    "BASE": dict(base=True, cell=False, own=False, others=False),
    "BASE_AND_CLIENT": dict(base=True, cell=False, own=True, others=False),
    "CELL_PRIVATE": dict(base=False, cell=True, own=False, others=False),
    "CELL_PUBLIC": dict(base=False, cell=True, own=False, others=False),
    "CELL_PUBLIC_AND_OWN": dict(base=False, cell=True, own=True, others=False),
    "ALL_CLIENTS": dict(base=False, cell=True, own=True, others=True),
    "OWN_CLIENT": dict(base=False, cell=True, own=True, others=False),
    "OTHER_CLIENTS": dict(base=False, cell=True, own=False, others=True),
}
DETAIL_RANK = {"near": 0, "medium": 1, "far": 2}


INTEGER_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "entity"}


def default_of(p):
    """A property's default as the dumps print it, for the simple types the
    demo's unsent properties have; None when this test does not work it
    out (structs)."""
    if "default" in p:
        return p["default"]
    kind = p["type"]
    if kind in INTEGER_TYPES:
        return 0
    if kind in ("float", "double"):
        return p["quantize"]["min"] if "quantize" in p and p["quantize"]["min"] > 0 else 0
    if kind in ("string", "bytes"):
        return ""
    if kind == "bool":
        return False
    if kind == "array" and p.get("element") in INTEGER_TYPES:
        return [0] * p["count"]
    return None


def load_classes():
    """{class: {property: {"flags", "detail", "quantum"}}} from demo/entities."""
    directory = os.path.join(harness.SOURCE_DIR, "demo", "entities")
    classes = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(directory, name)) as f:
            document = json.load(f)
        for entity in document.get("entities", []):
            props = {}
            for p in entity.get("properties", []):
                quantize = p.get("quantize")
                props[p["name"]] = {
                    "flags": p["flags"],
                    "detail": p.get("detail", "far"),
                    "quantum": quantize["precision"] if quantize else 0.0,
                    "default": default_of(p),
                }
            classes[entity["name"]] = props
    return classes


def same_value(a, b, quantum):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= quantum / 2 + 1e-9 if quantum else a == b
    return a == b


class Replication(unittest.TestCase):
    def test_clients_hold_the_servers_values(self):
        classes = load_classes()
        settings = ["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]
        with harness.Cluster(baseapps=1, cellapps=2, extra_set=settings, spawn_radius=AREA) as cluster:
            snapshot_path = os.path.join(cluster.dir, "bots-snapshot.json")
            bots = harness.start_bots(cluster, BOTS, SECONDS, [
                "--area", AREA, "--calls-per-second", 2, "--settle-seconds", SETTLE,
                "--snapshot-file", snapshot_path, "--snapshot-at-seconds", SNAPSHOT_AT, "--seed", 7])
            try:
                harness.wait_for(lambda: os.path.exists(snapshot_path), SECONDS + 20,
                                 "the bots' snapshot")
                dumps = self.dump_servers(cluster)
            finally:
                report = harness.finish_bots(bots)
            with open(snapshot_path) as f:
                snapshot = json.load(f)
        text = json.dumps(report, indent=2, sort_keys=True)
        self.assertEqual(report.get("logged_in"), BOTS, text)
        self.assertEqual(report.get("errors"), 0, text)
        self.assertGreater(report.get("property_updates", 0), 0, text)
        self.assertGreater(report.get("client_calls_in", 0), 0, "no onDamage reached a client:\n" + text)
        # An NPC greets each avatar stepping into its trap from its cell, by
        # calling the avatar's base (Avatar.poked), which tells the client.
        self.assertGreater(report.get("client_calls_by_method", {}).get("onPoked", 0), 0,
                           "no NPC greeting came through a base:\n" + text)
        self.compare(classes, snapshot, dumps)

    def dump_servers(self, cluster):
        """SIGUSR1 to every process; returns {"cell": {id: entity}, "base": {id: entity}}."""
        state_dir = os.path.join(cluster.dir, "state")
        names = cluster.names("baseapp") + cluster.names("cellapp")
        for name in names:
            path = os.path.join(state_dir, name + ".json")
            if os.path.exists(path):
                os.remove(path)
            os.kill(cluster.pid(name), signal.SIGUSR1)
        paths = [os.path.join(state_dir, name + ".json") for name in names]
        harness.wait_for(lambda: all(os.path.exists(p) for p in paths), 10, "every process's state dump")
        out = {"cell": {}, "base": {}}
        for name, path in zip(names, paths):
            with open(path) as f:
                document = json.load(f)
            part = "base" if name.startswith("baseapp") else "cell"
            for entity in document["entities"]:
                out[part][entity["id"]] = entity
        return out

    def compare(self, classes, snapshot, dumps):
        cell, base = dumps["cell"], dumps["base"]
        compared = mismatched = withheld = 0
        kinds = set()
        problems = []
        for bot in snapshot["bots"]:
            me = cell.get(bot["entity_id"])
            if me is None:
                continue
            for seen in bot["entities"]:
                server = cell.get(seen["id"])
                if server is None:
                    continue  # left the world between the two snapshots
                props = classes[seen["class"]]
                owner = seen["owner"]
                distance = max(abs(server["x"] - me["x"]), abs(server["z"] - me["z"]))
                if not owner and min(abs(distance - DETAIL_NEAR), abs(distance - DETAIL_MEDIUM)) < BOUNDARY_SLACK:
                    continue
                level = 0 if distance <= DETAIL_NEAR else 1 if distance <= DETAIL_MEDIUM else 2
                for name, meta in props.items():
                    audience = AUDIENCE[meta["flags"]]
                    held = seen["properties"].get(name)
                    if owner:
                        receives = audience["own"]
                    else:
                        receives = audience["others"] and DETAIL_RANK[meta["detail"]] >= level
                    if receives:
                        source = base.get(seen["id"]) if audience["base"] else server
                        if source is None or name not in source["properties"]:
                            continue
                        truth = source["properties"][name]
                        compared += 1
                        kinds.add((seen["class"], name, "own" if owner else "other"))
                        if not same_value(held, truth, meta["quantum"]):
                            mismatched += 1
                            if len(problems) < 20:
                                problems.append("bot %s sees %s %d .%s = %r, server %r (owner %s, %.1f m)" % (
                                    bot["account"], seen["class"], seen["id"], name, held, truth, owner, distance))
                    elif not audience["others"] and not (owner and audience["own"]):
                        # Never sent to this client: it must still hold the
                        # default, whatever the server's value is.
                        if meta["default"] is not None and held != meta["default"]:
                            withheld += 1
                            if len(problems) < 20:
                                problems.append("bot %s holds %s %d .%s = %r, which it may not receive" % (
                                    bot["account"], seen["class"], seen["id"], name, held))
        harness.log("replication: %d values compared over %d (class, property, audience) kinds, "
                    "%d mismatched, %d leaked" % (compared, len(kinds), mismatched, withheld))
        self.assertEqual(problems, [], "\n".join(problems))
        self.assertGreater(compared, 1000, "too few values compared to mean anything")
        # The rules the demo exercises all took part.
        for kind in [("Avatar", "gold", "own"), ("Avatar", "mana", "own"), ("Avatar", "buffs", "own"),
                     ("Avatar", "health", "own"), ("Avatar", "equipment", "other"), ("Avatar", "level", "other"),
                     ("Npc", "mood", "other"), ("Npc", "scale", "other"), ("Npc", "health", "other")]:
            self.assertIn(kind, kinds, "no %s.%s was compared for the %s client" % kind)


if __name__ == "__main__":
    unittest.main(verbosity=2)
