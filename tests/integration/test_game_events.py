#!/usr/bin/env python3
"""test_game_events -- game events and user messages (include/tessera/game.h,
"game events") through a real cluster: two cellapps each holding half of
the space (grid 2x1, split at x = 0) running tests/game/events.c, and a
baseapp running its base side: the demo's (whose Avatar fires
player_joined to everyone when it is made) with a listener of its own.

  - the refusals: an unknown event (firing it, making its fields, listening
    to it), a field set with the wrong type or out of its range, fields made
    for another event, a scope that needs a source fired without one, an
    unknown scope; a listener that fires its own event again is stopped 8
    deep;
  - each player's avatar fires spell_hit 1 to its VIEWERS, 2 to its SPACE,
    3 to EVERYONE, 5 to the SERVER, 6 to the SERVERS, and sends 4 as a user
    message to itself and to an entity that does not exist; the baseapp's
    listener answers each 6 with a 7 to the SERVERS. Players go to x = -4
    or +4 by the parity of their id, so some see others through ghosts on
    the other cellapp. Every client gets 1, 2 and 3 from every player (1
    through the ghosts too), 4 from itself only, 5, 6 and 7 never; the
    fields arrive intact;
  - listeners: 5 and 1 are heard by the firing cellapp only, 2 and 3 by
    both (both hold a cell of the space), 6 and 7 by both and by the
    baseapp, which hears 3 too and not 1, 2, 4 or 5; player_joined (fired on the
    baseapp) by both cellapps and by the clients already in the world,
    naming each player by its display name (demo/game/demo_names.c): no
    account name is in any event a client or a listener gets;
  - the bots (the SDK) count player_joined, spell_hit and welcome (a user
    message from each player's base) by name with the demo module on every
    process and two baseapps; then the same bots, with the same seed, play
    the demo in Lua (demo/lua, no module) and cannot tell it apart: the
    same events, client calls and definitions, the same rules in what they
    see (display names, "Guard-<id>", a guard's mood, level and scale from
    its visitors), and no script error in any process's log.
"""
import json
import math
import os
import re
import struct
import time
import unittest

import harness

MODULE = os.path.join(harness.BUILD_DIR, "tests", "libtest_game_events.so")
PLAYER_JOINED, DOOR_CHANGED, SPELL_HIT = 0, 1, 2  # demo/entities/events.json, in order
DISPLAY_NAME = r"[A-Z][a-z]+[A-Z][a-z]+#[0-9]{4}"  # demo/game/demo_names.c
LISTEN_S = 6.0
LUA_DEMO = os.path.join(harness.SOURCE_DIR, "demo", "lua")  # demo/game's rules in Lua
BOT_SEED = "24"
MEDIUM_DETAIL_M = 29.0  # the cellapp's detail_medium_distance, 30 m, less a metre of slack


def decode_spell(args):
    """spell_hit(caster entity, target entity, spell_id uint16, amount int16):
    byte-aligned fields, little-endian (common/bit_stream.c); an integer is
    sent as its distance from its type's minimum (common/property_codec.c)."""
    caster, target, spell, amount = struct.unpack("<QQHH", args[:20])
    return caster, target, spell, amount - 32768


class Player:
    def __init__(self, sock, reply):
        self.sock = sock
        self.id = reply["entity_id"]
        self.events = []   # (event_id, source_id, args, "view"|"alone")

    def pump(self, seconds):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                message = harness.read_message(self.sock, timeout=0.2)
            except TimeoutError:
                continue
            if message is None:
                continue
            if message["kind"] == "view":
                self.events += [e + ("view",) for e in message["events"]]
            elif message["kind"] == "event":
                self.events.append(message["event"] + ("alone",))

    def spells(self, spell_id):
        out = []
        for event_id, source, args, where in self.events:
            if event_id != SPELL_HIT:
                continue
            caster, target, spell, amount = decode_spell(args)
            if spell == spell_id:
                out.append((source, caster, target, amount, where))
        return out


class GameEvents(unittest.TestCase):
    def test_scopes_listeners_and_refusals(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, MODULE)
        settings = ["cellapp.game_module=" + MODULE, "baseapp.game_module=" + MODULE,
                    "baseapp.client_detached_grace_ms=0"]
        with harness.Cluster(baseapps=1, cellapps=2, grid="2x1", spawn_radius=3, extra_set=settings) as cluster:
            checks = "events: checks unknown -1 args null wrong-type -1 range -1 entity-as-bool -1 good 0 " \
                     "mismatched -1 no-source -1 -1 bad-scope -1 server 0 deepest 8 refused-at 9"
            for name in ("cellapp-1", "cellapp-2"):
                harness.wait_for(lambda: checks in cluster.log(name), 20, "the refusal checks on " + name)
                self.assertIn("events: listening, unknown -1", cluster.log(name))
            players = []
            # Players of both parities, so that some see others through ghosts.
            for n in range(8):
                sock, reply = harness.login(cluster.login, "eventer-%d" % n, "pw")
                self.addCleanup(sock.close)
                players.append(Player(sock, reply))
                if n >= 3 and len(set(p.id % 2 for p in players)) == 2:
                    break
                players[-1].pump(0.1)
            self.assertEqual(len(set(p.id % 2 for p in players)), 2, [p.id for p in players])
            ids = sorted(p.id for p in players)
            # Each player fires 2 s after it got its client; read everything.
            for _ in range(int(LISTEN_S / 0.5)):
                for p in players:
                    p.pump(0.5 / len(players))
            fired = [l for name in ("cellapp-1", "cellapp-2") for l in cluster.log(name).splitlines()
                     if "events: fired" in l]
            self.assertEqual(len(fired), len(players), fired)
            for line in fired:
                self.assertIn("events: fired 0 0 0 0 0, user message sent on 2", line)
            for p in players:
                for spell_id in (1, 2, 3):
                    got = p.spells(spell_id)
                    self.assertEqual(sorted(s[0] for s in got), ids,
                                     "player %d, spell %d: %r" % (p.id, spell_id, got))
                    for source, caster, target, amount, where in got:
                        self.assertEqual((caster, target, amount), (source, source, -7))
                    self.assertTrue(all(w == ("alone" if spell_id == 3 else "view") for *_, w in got), got)
                self.assertEqual([s[0] for s in p.spells(4)], [p.id], p.spells(4))
                for spell_id in (5, 6, 7):
                    self.assertEqual(p.spells(spell_id), [], spell_id)
            # The first player was in the world when the others joined.
            joined = [source for event_id, source, _, _ in players[0].events if event_id == PLAYER_JOINED]
            self.assertTrue(set(ids[1:]) <= set(joined) or set(p.id for p in players[1:]) <= set(joined), joined)
            # Listeners.
            logs = {name: cluster.log(name) for name in ("cellapp-1", "cellapp-2")}
            where = {}
            for p in players:
                firing = [name for name in logs if "entity %d (Avatar): events: fired" % p.id in logs[name]]
                self.assertEqual(len(firing), 1, p.id)
                where[p.id] = firing[0]
                for name, text in logs.items():
                    here = name == firing[0]
                    for spell_id, everywhere in ((1, False), (2, True), (3, True), (5, False), (6, True), (7, True)):
                        line = "events: heard spell_hit %d from %d" % (spell_id, p.id)
                        self.assertEqual(text.count(line), 1 if (here or everywhere) else 0,
                                         "%s: %s" % (name, line))
                    self.assertNotIn("events: heard spell_hit 4 from %d" % p.id, text)
            # The baseapp's listener: cluster and servers-only events, nothing of a space or a cell.
            base = cluster.log("baseapp-1")
            for p in players:
                for spell_id in (1, 2, 3, 4, 5, 6, 7):
                    line = "events: base heard spell_hit %d from %d\n" % (spell_id, p.id)
                    self.assertEqual(base.count(line), 1 if spell_id in (3, 6, 7) else 0, line)
                self.assertEqual(base.count("events: base fired 7 for %d: 0" % p.id), 1, p.id)
            # Both halves of the space fired: viewers' events crossed through ghosts.
            self.assertEqual(set(where.values()), {"cellapp-1", "cellapp-2"}, where)
            for name, text in logs.items():
                self.assertNotIn("eventer-", text, name)
                for p in players:
                    heard = re.findall(r"events: heard player_joined (\S*) from %d\b" % p.id, text)
                    self.assertEqual(len(heard), 1, (name, p.id, heard))
                    self.assertRegex(heard[0], "^" + DISPLAY_NAME + "$")
            for p in players:
                for event_id, source, args, where in p.events:
                    self.assertNotIn(b"eventer-", args, (p.id, event_id, source))
            self.assertTrue(cluster.all_alive())

    def test_bots_count_the_demo_events(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        played = {}
        for demo, game in (("C", None), ("Lua", LUA_DEMO)):
            with harness.Cluster(baseapps=2, cellapps=1, spawn_radius=10, game=game) as cluster:
                snapshot = os.path.join(cluster.dir, "bots-snapshot.json")
                # Two calls a second per bot, half of them castSpell on an entity
                # it sees: enough that some hit an Avatar or a guard (at the
                # default 0.2 a second, 8 s of 6 bots sometimes cast none). They
                # stay near the guards, and stand still for the last 1.5 s, so
                # that what they see at the end is what the cells hold.
                report = harness.run_bots(cluster, 6, 8, ["--calls-per-second", "2", "--seed", BOT_SEED,
                                                          "--area", "20", "--settle-seconds", "1.5",
                                                          "--snapshot-file", snapshot])
                events = report.get("game_events_by_name", {})
                self.assertGreater(events.get("player_joined", 0), 0, (demo, report))
                self.assertGreater(events.get("spell_hit", 0), 0, (demo, report))
                # The base's user message to its own client, once per Avatar that got one.
                self.assertGreaterEqual(events.get("welcome", 0), 6, (demo, report))
                self.assertEqual(report.get("errors", 1), 0, (demo, report))
                with open(snapshot) as f:
                    self.check_seen_by_the_rules(demo, json.load(f))
                for name in cluster.names():  # a script error: "lua: Avatar.created (entity 1) failed after ..."
                    self.assertNotRegex(cluster.log(name), r"lua: \S+ .*failed after", (demo, name))
                self.assertTrue(cluster.all_alive())
                played[demo] = report
        # The bots cannot tell the two apart.
        c, lua = played["C"], played["Lua"]
        for key in ("logged_in", "in_world_at_end", "self_seen", "definitions_digest", "definition_classes"):
            self.assertEqual(c.get(key), lua.get(key), key)
        self.assertEqual(sorted(c["game_events_by_name"]), sorted(lua["game_events_by_name"]))
        self.assertEqual(c["game_events_by_name"]["welcome"], lua["game_events_by_name"]["welcome"])
        self.assertEqual(sorted(c["client_calls_by_method"]), sorted(lua["client_calls_by_method"]))
        for report in (c, lua):
            self.assertEqual(report["call_failures"], 0, report)
            self.assertGreater(report["calls_out"], 0, report)
            self.assertGreater(report["property_updates"], 0, report)
            self.assertGreater(report["base_property_updates"], 0, report)

    def check_seen_by_the_rules(self, demo, snapshot):
        """What the bots saw at the end follows the demo's rules: Avatars by
        their display names, guards named after their ids, each guard's mood,
        level and scale made from its count of visitors (mood = visitors %
        256, level = 1 + visitors / 5, scale = 0.5 + (visitors % 151) / 100),
        and some guard visited."""
        avatars, guards = set(), []
        for bot in snapshot["bots"]:
            for e in bot["entities"]:
                if e["class"] == "Avatar":
                    self.assertRegex(e["properties"]["name"], "^" + DISPLAY_NAME + "$", demo)
                    avatars.add(e["id"])
                # A guard's mood reaches the clients within medium detail
                # (30 m, the cellapp's default) of it.
                elif e["class"] == "Npc" and math.hypot(e["x"] - bot["x"], e["z"] - bot["z"]) < MEDIUM_DETAIL_M:
                    guards.append(e)
        self.assertEqual(len(avatars), 6, demo)
        self.assertTrue(guards, demo)
        for guard in guards:
            p = guard["properties"]
            self.assertEqual(p["name"], "Guard-%d" % guard["id"], demo)
            visitors = p["mood"]  # fewer than 151 in this short run
            self.assertEqual(p["level"], 1 + visitors // 5, (demo, guard))
            self.assertAlmostEqual(p["scale"], 1.0 if visitors == 0 else 0.5 + visitors * 0.01, delta=0.006,
                                   msg=(demo, guard))
        self.assertTrue(any(g["properties"]["mood"] > 0 for g in guards), demo)


if __name__ == "__main__":
    unittest.main(verbosity=2)
