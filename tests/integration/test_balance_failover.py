#!/usr/bin/env python3
"""test_balance_failover -- the balancer survives its leader.

3 cellapps with the balancer on; one of them holds the lease (P
balancer_lease = "<id>:<fence>"). It is killed with SIGKILL, so it cannot
give the lease up: the key expires after balance_lease_ms (3 s) and one of
the two others takes it with a larger fence within about a period more.
The test prints how long that took.

The new leader then sees the dead cellapp's cell: its cellapp is neither
connected nor reporting, so the cell is handed to the live cellapp that
has none of the space, or, with none free, removed into its neighbour.
Either way the layout ends up naming only live cellapps.

Fencing: a layout written with the dead leader's fence is refused in Redis
by the store's script, atomically, and the stored layout stays as it was
(tessera-admin put --fence OLD plays the part of the paused ex-leader
waking up and writing). A layout with the new fence, or an operator's (no
fence), is still accepted."""
import json
import os
import time
import unittest

import harness

LEASE_MS = 3000
PERIOD_MS = 1000


class BalanceFailover(unittest.TestCase):
    def test_leader_killed(self):
        harness.require_binaries(harness.CELLAPP_BIN, os.path.join(harness.BUILD_DIR, "client", "tessera-admin"))
        settings = ["cellapp.game.npc_count=5", "cellapp.balance_retire_below=0", "cellapp.balance_lease_ms=%d" % LEASE_MS,
                    "cellapp.balance_period_ms=%d" % PERIOD_MS]
        with harness.Cluster(baseapps=1, cellapps=3, extra_set=settings, balance=True, timeout=60) as cluster:
            ids = {cluster.registry_id(n): n for n in cluster.names("cellapp")}
            leader = harness.wait_for(lambda: cluster.balance_view()["leader"], 15, "a cellapp to take the lease")
            old_id, old_fence = leader[0], int(leader[1])
            self.assertIn(old_id, ids, "the lease names %s, not one of our cellapps %s" % (old_id, ids))
            old_name = ids[old_id]
            harness.wait_for(lambda: cluster.stat(old_name, "balance_leader") == 1, 10,
                             "%s to publish that it leads" % old_name)
            harness.log("leader %s (id %s), fence %d" % (old_name, old_id, old_fence))

            cluster.kill(old_name, "KILL")
            killed_at = time.monotonic()

            def new_leader():
                found = cluster.balance_view()["leader"]
                return found if found and found[0] != old_id else None
            holder, fence = harness.wait_for(new_leader, 30, "another cellapp to take the lease")
            took = time.monotonic() - killed_at
            fence = int(fence)
            harness.log("%s (id %s) took over %.1f s after the kill (lease %d ms + period %d ms), fence %d"
                        % (ids.get(holder), holder, took, LEASE_MS, PERIOD_MS, fence))
            self.assertIn(holder, ids)
            self.assertNotEqual(holder, old_id)
            self.assertGreater(fence, old_fence, "a new holder must have a larger fence")

            # The dead cellapp's cell goes to the living.
            def owners(layout):
                return [cellapp for cellapp, _, _ in harness.layout_cells(layout)]

            def handed_over():
                layout = cluster.balance_view()["spaces"]["default"]
                return layout if old_id not in owners(layout) else None
            layout = harness.wait_for(handed_over, 30, "the dead cellapp's cell to be handed over")
            harness.log("layout after the hand-over (epoch %s, fence %s): cells on %s"
                        % (layout["epoch"], layout.get("fence"), owners(layout)))
            self.assertEqual(layout.get("fence"), fence, "the new leader writes with its own fence")
            self.assertTrue(all(o in ids and o != old_id for o in owners(layout)), owners(layout))
            harness.wait_for(lambda: all("cell" in cluster.log(ids[o]) for o in owners(layout)), 10,
                             "the survivors to apply it")

            # The ex-leader's write, replayed: refused, nothing changed.
            saved = os.path.join(cluster.dir, "saved-layout.json")
            with open(saved, "w") as f:
                json.dump(layout, f)
            epoch_before = cluster.redis.hgetall("tessera:tessera:spaces")["default"]
            result = cluster.admin_result("put", "default", saved, "--fence", old_fence)
            harness.log("put with fence %d: exit %d, %s" % (old_fence, result.returncode, result.stderr.strip()))
            self.assertNotEqual(result.returncode, 0, result)
            self.assertIn("older than the newest lease", result.stderr, result)
            self.assertEqual(cluster.redis.hgetall("tessera:tessera:spaces")["default"], epoch_before,
                             "a fenced write changed the stored epoch")
            # The current fence (or none: an operator) is accepted.
            result = cluster.admin_result("put", "default", saved, "--fence", fence)
            self.assertEqual(result.returncode, 0, result)
            self.assertGreater(int(cluster.redis.hgetall("tessera:tessera:spaces")["default"]), int(epoch_before))
            for name in ids.values():
                if name != old_name:
                    self.assertTrue(cluster.alive(name), "%s died" % name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
