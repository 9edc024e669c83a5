#!/usr/bin/env python3
"""test_balance_gather -- the lines follow the players.

4 cellapps hold the default space (-200 .. 200 on X and Z) split 2 x 2 at
x = 0 and z = 0, with the balancer on. The bots log in around the centre,
where the four cells meet, and then all walk to one corner, a 50 m square
around (100, 100): every one of them ends up in the cell x >= 0, z >= 0,
and its cellapp carries the whole crowd while the other three idle.

The balancer (whichever cellapp holds the lease) moves the lines into the
crowd until the four cellapps' loads agree. The test samples every
cellapp's load (its smoothed busy share, published as load_permille) and
reals once a second and prints them: the spread (busiest over the mean)
when the crowd has gathered and the balancer has not caught up, and at the
end. It checks that
  - the lines moved into the crowd: the root line and the line splitting
    its high side both went past 60 (from 0);
  - the crowd is shared: every cellapp holds at least a tenth of the reals
    at the end, where at the peak one held at least half of them;
  - the loads converged: at the end the busiest cellapp is within 1.75 x
    the mean, and below the spread at the peak. The figures printed are
    far closer (1.1-1.2 x, against 2.5-4 x at the peak); the bound leaves
    room for a shared machine, where the other tests running beside this
    one make single cellapps look busy for seconds at a time (1.55 x was
    seen once under ASan);
  - nothing was lost on the way: every bot logged in and stayed, no
    errors, and --verify-aoi found 0 mismatches across all the offloads
    the moving lines caused."""
import time
import unittest

import harness

BOTS = 150 if harness.SANITIZED else 400
SECONDS = 55 if harness.SANITIZED else 60
SETTLE = 4
CORNER = (100, 100)
CORNER_HALF = 25
# A new crowd in one cell: the line aims at most one bound level (0.02 of a
# core) per pass and halves its aggression on reversals, so this takes a
# few dozen passes from the first arrival.


class BalanceGather(unittest.TestCase):
    # Under the sanitizers the suite's time is kept in bounds.
    @unittest.skipIf(harness.SANITIZED, "the normal build runs it; the balancer's moves run under the sanitizers in test_multicell and test_recovery")
    def test_lines_follow_a_crowd(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        settings = ["cellapp.game.npc_count=0", "cellapp.balance_retire_below=0",
                    # The corner is far from the centre: let the bots walk
                    # there at the most the cell allows.
                    "cellapp.max_speed=12"]
        with harness.Cluster(baseapps=1, cellapps=4, extra_set=settings, spawn_radius=40, timeout=60,
                             bounds=(-200, -200, 200, 200), balance=True) as cluster:
            names = cluster.names("cellapp")
            start_lines = harness.layout_lines(cluster.balance_view()["spaces"]["default"])
            harness.log("lines at the start: %s" % start_lines)
            bots = harness.start_bots(cluster, BOTS, SECONDS,
                                      ["--verify-aoi", "--speed", 10, "--area", 40,
                                       "--gather", "%g,%g,%g" % (CORNER[0], CORNER[1], CORNER_HALF),
                                       "--gather-period", 0, "--calls-per-second", 0.2,
                                       "--settle-seconds", SETTLE, "--login-spread-ms", 3000])
            samples = []
            try:
                started = time.monotonic()
                while time.monotonic() - started < SECONDS - SETTLE - 1:
                    loads = [cluster.stat(n, "load_permille") or 0 for n in names]
                    reals = [cluster.stat(n, "reals") or 0 for n in names]
                    samples.append((time.monotonic() - started, loads, reals))
                    time.sleep(1.0)
                view = cluster.balance_view()
            finally:
                report = harness.finish_bots(bots)
            harness.assert_bots_verified(self, report, BOTS)

            def spread(values):
                mean = sum(values) / float(len(values))
                return max(values) / mean if mean > 0 else float("inf")
            for at, loads, reals in samples:
                harness.log("t=%4.1fs loads %s reals %s" % (at, " ".join("%.3f" % (v / 1000.0) for v in loads),
                                                            reals))
            # Before: the sample where the crowd sat most in one cellapp.
            peak = max(samples, key=lambda s: max(s[2]) / float(max(1, sum(s[2]))))
            last = samples[-5:]
            end_loads = [sum(s[1][i] for s in last) / float(len(last)) for i in range(len(names))]
            end_reals = last[-1][2]
            lines = harness.layout_lines(view["spaces"]["default"])
            leader = view["leader"]
            offloads = sum(cluster.stat(n, "offloads_out") or 0 for n in names)
            moves = sum(cluster.stat(n, "line_moves") or 0 for n in names)
            harness.log("before (t=%.0fs): loads %s (busiest %.2f x the mean), reals %s"
                        % (peak[0], " ".join("%.3f" % (v / 1000.0) for v in peak[1]), spread(peak[1]), peak[2]))
            harness.log("after (last 5 s): loads %s (busiest %.2f x the mean), reals %s"
                        % (" ".join("%.3f" % (v / 1000.0) for v in end_loads), spread(end_loads), end_reals))
            harness.log("lines %s -> %s; %d line moves, %d offloads; leader %s"
                        % (start_lines, lines, moves, offloads, leader))
            # The scenario itself: at its peak one cell held at least half the
            # crowd, twice its fair quarter (the balancer starts moving lines
            # while the bots walk in, sooner on a slower build: under ASan the
            # peak is 60-70 %, in the normal build over 90 %).
            self.assertGreaterEqual(max(peak[2]), 0.5 * BOTS, "the crowd never gathered in one cell: %r" % (peak,))
            self.assertGreater(lines[0][1], 60, lines)
            # Pre-order: the root, its low side's line, its high side's line.
            self.assertGreater(lines[2][1], 60, lines)
            for name, count in zip(names, end_reals):
                self.assertGreaterEqual(count, BOTS // 10, "%s holds %d of %d reals at the end: %s"
                                        % (name, count, BOTS, end_reals))
            self.assertLess(spread(end_loads), 1.75, end_loads)
            self.assertLess(spread(end_loads), spread(peak[1]), (end_loads, peak[1]))
            self.assertIsNotNone(leader)


if __name__ == "__main__":
    unittest.main(verbosity=2)
