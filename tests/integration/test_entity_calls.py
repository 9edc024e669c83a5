#!/usr/bin/env python3
"""test_entity_calls -- entity calls by id across processes, on real
baseapps: a base calling another entity's base, wherever it is, and a
client method through that entity's base.

The demo's Avatar (demo/entities/Avatar.json): poke(target) calls target's
poked(from), which tells target's client onPoked(from); a poke that does
not arrive tells the poker's client onCallFailed(target). echoTo(target, n)
calls target's echo(n, from), which calls from's echoed(n), which tells
from's client onEcho(n). census() asks the global Census (registered by
name, registerGlobally), which answers onCensus(players).

  - alice (baseapp-1) pokes bob (baseapp-2): bob's client hears it;
  - a poke of an entity that was destroyed, and of one that never was,
    comes back to alice as onCallFailed, and the baseapp counts it;
  - echoes go round trip, across processes and within one;
  - the Census, on whichever baseapp registered it first, counts both
    (each baseapp's Avatars, also those made before it knew the Census);
  - a client may not call poked (not exposed): it is dropped."""
import struct
import time
import unittest

import harness
from harness import ERROR_CODES, PART_BASE, frame, msg_call

POKE, POKED, CENSUS, ECHO_TO = 2, 3, 4, 5            # Avatar's base methods
ON_POKED, ON_CALL_FAILED, ON_ECHO, ON_CENSUS = 1, 2, 3, 4  # its client methods


def small_uint(n):
    """A uint32 argument below 16 in property_codec's bits: its natural
    width is a varint of nibbles, a 4-bit count (0: one nibble), then the
    nibble, least significant bits first."""
    assert 0 <= n < 16
    return bytes([n << 4])


def read_small_uint(data):
    assert data[0] & 0x0F == 0, "not a one-nibble varint: %r" % data
    return data[0] >> 4


def first_call(sock, method_ids, timeout=10.0):
    """(method_id, args) of the next lone client call of one of `method_ids`."""
    deadline = time.monotonic() + timeout
    while True:
        msg = harness.read_until(sock, {"call", "error"}, timeout=max(0.1, deadline - time.monotonic()))
        if msg is None or msg["kind"] == "error":
            raise AssertionError("waiting for client methods %r: %r" % (sorted(method_ids), msg))
        if msg["method_id"] in method_ids:
            return msg["method_id"], msg["args"]


def calls(sock, method_id, count=1, timeout=10.0):
    """The args of the next `count` lone client calls of `method_id`."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        msg = harness.read_until(sock, {"call", "error"}, timeout=max(0.1, deadline - time.monotonic()))
        if msg is None or msg["kind"] == "error":
            raise AssertionError("waiting for client method %d: %r" % (method_id, msg))
        if msg["method_id"] == method_id:
            out.append(msg["args"])
    return out


class EntityCalls(unittest.TestCase):
    def test_calls_across_baseapps(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)
        # No NPCs: their greetings (onPoked from an NPC) would mix with the pokes.
        settings = ["baseapp.login_redirect=false", "baseapp.client_detached_grace_ms=0", "cellapp.game.npc_count=0"]
        with harness.Cluster(baseapps=2, cellapps=1, extra_set=settings) as cluster:
            globals_key = "tessera:%s:globals" % cluster.info.get("cluster_name", "tessera")
            harness.wait_for(lambda: cluster.redis.hget(globals_key, "census"), 15.0,
                             "a baseapp to register the Census")
            first, second = cluster.baseapps
            a_sock, a = harness.login(first, "alice", "pw")
            b_sock, b = harness.login(second, "bob", "pw")
            c_sock, c = harness.login(second, "carol", "pw")
            alice, bob, carol = a["entity_id"], b["entity_id"], c["entity_id"]
            c_sock.close()  # carol's entity goes with her client (no grace)
            harness.wait_for(lambda: cluster.redis.hget(
                "tessera:%s:base_directory" % cluster.info.get("cluster_name", "tessera"), str(carol)) is None,
                10.0, "carol's base to leave the directory")

            a_sock.sendall(frame(msg_call(alice, PART_BASE, POKE, struct.pack("<Q", bob))))
            (args,) = calls(b_sock, ON_POKED)
            self.assertEqual(struct.unpack("<Q", args)[0], alice)

            for gone in (carol, 987654321):
                a_sock.sendall(frame(msg_call(alice, PART_BASE, POKE, struct.pack("<Q", gone))))
                (args,) = calls(a_sock, ON_CALL_FAILED)
                self.assertEqual(struct.unpack("<Q", args)[0], gone)

            a_sock.sendall(frame(msg_call(alice, PART_BASE, ECHO_TO, struct.pack("<Q", bob) + small_uint(7))))
            a_sock.sendall(frame(msg_call(alice, PART_BASE, ECHO_TO, struct.pack("<Q", alice) + small_uint(8))))
            got = sorted(read_small_uint(x) for x in calls(a_sock, ON_ECHO, 2))
            self.assertEqual(got, [7, 8])

            # Alice and bob; carol left. A baseapp counts its Avatars in as
            # soon as it knows the Census, which may be after they were
            # made: the count gets there, asked again until it does. Every
            # question is answered: onCensus, or onCallFailed when alice's
            # baseapp did not know the Census yet or the call was lost.
            deadline = time.monotonic() + 10.0
            answers = []
            while True:
                a_sock.sendall(frame(msg_call(alice, PART_BASE, CENSUS)))
                method_id, args = first_call(a_sock, {ON_CENSUS, ON_CALL_FAILED})
                answers.append("onCensus %d" % read_small_uint(args) if method_id == ON_CENSUS
                               else "onCallFailed %d" % struct.unpack("<Q", args)[0])
                if answers[-1] == "onCensus 2" or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            self.assertEqual(answers[-1], "onCensus 2", answers)

            b_sock.sendall(frame(msg_call(bob, PART_BASE, POKED, struct.pack("<Q", alice))))
            dropped = harness.read_until(b_sock, {"error"}, timeout=5.0)
            self.assertEqual(dropped and dropped.get("code"), ERROR_CODES["NOT_EXPOSED"], dropped)
            a_sock.close()
            b_sock.close()
            harness.wait_for(lambda: (cluster.stat("baseapp-1", "entity_calls_failed") or 0) >= 2, 5.0,
                             "baseapp-1 to count the failed calls")
            self.assertTrue(cluster.all_alive())


if __name__ == "__main__":
    unittest.main()
