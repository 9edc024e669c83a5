#!/usr/bin/env python3
"""test_base_services -- the base side's services (game.h, ABI 4) through two
real baseapps running tests/game/base_services.c (base rules only, over the
demo's definitions; the cellapp runs the demo), which reports what it sees
in its log:
  - the cluster singleton "services" (a Census) is made exactly once, on one
    baseapp, and both baseapps are told its handle; the wrong joins (an
    unknown class, an empty name, a name joined with another class) are
    refused; the name and the base directory in Redis agree;
  - on the baseapp that made it: its repeating timer fires three times and
    is cancelled (0, then -1 again), a one-shot fires once, a base cannot
    cancel another's timer, the doomed Account whose timer hook destroys it
    has exactly one of its two timers fire, and the keeper Account's timer
    fires once; find_by_class lists the Census (itself) and one Account,
    and nothing for an unknown class; the clocks and random numbers are
    sane;
  - kill -9 of that baseapp (backups are off, base_backup_period_ms=0: there
    is nothing to restore it from): the survivor makes the singleton again
    under a new handle, is told it, and its timers and look-ups work there;
  - the survivor's module destroys that one: the name is given up, and the
    survivor makes a third, under a third handle.
(A singleton restored from its backup keeps its handle and its name: the
demo's Census in test_base_recovery.)
"""
import os
import re
import unittest

import harness

MODULE = os.path.join(harness.BUILD_DIR, "tests", "libtest_game_base_services.so")
SUMMARY = ("summary ticks 3 once 1 doomed 1 cancels 0 -1 -1 census 1 self 1 accounts 1 unknown 0 "
           "random 1 clocks 1")


def lines(cluster, name):
    return [l.split("base_services: ", 1)[1] for l in cluster.log(name).splitlines() if "base_services: " in l]


def made(cluster, name):
    return [int(m.group(1)) for l in lines(cluster, name) for m in [re.match(r"made (\d+)$", l)] if m]


def readies(cluster, name):
    return [(int(m.group(1)), m.group(2)) for l in lines(cluster, name)
            for m in [re.match(r"ready (\d+) (here|elsewhere) \(ok 1\)$", l)] if m]


class BaseServices(unittest.TestCase):
    def test_timers_look_ups_and_a_singleton(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, MODULE)
        settings = ["baseapp.game_module=" + MODULE, "baseapp.base_backup_period_ms=0"]
        with harness.Cluster(baseapps=2, cellapps=1, extra_set=settings) as cluster:
            names = cluster.names("baseapp")
            cluster_name = cluster.info.get("cluster_name", "tessera")

            def home():
                entity = cluster.redis.hget("tessera:%s:globals" % cluster_name, "services")
                where = cluster.redis.hget("tessera:%s:base_directory" % cluster_name, entity) if entity else None
                return (int(entity), str(where)) if entity and where else None

            harness.wait_for(lambda: all(readies(cluster, n) for n in names), 20, "both baseapps told the singleton")
            for name in names:
                self.assertIn("joins refused -1 -1 -1", lines(cluster, name))
            makers = [n for n in names if made(cluster, n)]
            self.assertEqual(len(makers), 1, [lines(cluster, n) for n in names])
            holder, survivor = makers[0], [n for n in names if n != makers[0]][0]
            (first,) = made(cluster, holder)
            self.assertEqual(readies(cluster, holder), [(first, "here")])
            self.assertEqual(readies(cluster, survivor), [(first, "elsewhere")])
            self.assertEqual(home(), (first, cluster.registry_id(holder)))
            # Timers, look-ups, clocks and random numbers on the holder.
            harness.wait_for(lambda: "keeper fired 1" in lines(cluster, holder), 10, "the holder's timers")
            self.assertIn(SUMMARY, lines(cluster, holder), lines(cluster, holder))
            # Its baseapp dies with no backup of it: the survivor makes it again.
            survivor_id = cluster.registry_id(survivor)
            cluster.kill(holder, "KILL")
            harness.wait_for(lambda: made(cluster, survivor), 20, "the singleton made again on %s" % survivor)
            (second,) = made(cluster, survivor)
            self.assertNotEqual(second, first)
            harness.wait_for(lambda: (second, "here") in readies(cluster, survivor), 5, "the survivor told")
            self.assertEqual(readies(cluster, survivor), [(first, "elsewhere"), (second, "here")])
            self.assertEqual(home(), (second, survivor_id))
            self.assertIn("singleton 'services': entity %d was lost; entity %d made here takes its place"
                          % (first, second), cluster.log(survivor))
            harness.wait_for(lambda: "keeper fired 1" in lines(cluster, survivor), 10, "the survivor's timers")
            self.assertIn(SUMMARY, lines(cluster, survivor), lines(cluster, survivor))
            # Destroyed by its game: made again (the name was given up).
            harness.wait_for(lambda: len(made(cluster, survivor)) == 2, 10, "the singleton made a third time")
            third = made(cluster, survivor)[1]
            self.assertNotIn(third, (first, second))
            harness.wait_for(lambda: (third, "here") in readies(cluster, survivor), 5, "the survivor told again")
            self.assertEqual(home(), (third, survivor_id))
            self.assertIn("singleton 'services': entity %d made here" % third, cluster.log(survivor))
            self.assertTrue(cluster.alive(survivor))


if __name__ == "__main__":
    unittest.main(verbosity=2)
