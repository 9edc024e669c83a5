#!/usr/bin/env python3
"""test_registry -- a process that stops heartbeating and talking is
declared dead, and one that comes back after that joins again.

SIGSTOP keeps a cellapp's sockets open, so only its lapsed registry lease
and its silence reveal it: the balancer's lease holder declares it dead.
On SIGCONT it learns so and rejoins as a new process. SIGKILL is the plain
crash. Logins still work while a cellapp is left."""
import json
import unittest

import harness

# registry_ttl_ms is 2 s and heartbeat_ms 0.5 s in the test cluster; 15 s is
# several times that, with room for a slow (ASan) build.
NOTICE_S = 15


class Registry(unittest.TestCase):
    def baseapp_cellapps(self, cluster):
        return cluster.stat("baseapp-1", "cellapps")

    def wait_cellapps(self, cluster, want, what):
        harness.wait_for(lambda: self.baseapp_cellapps(cluster) == want, NOTICE_S,
                         "%s (baseapp-1 hash: %s)" % (what, cluster.registry_hash("baseapp-1")))

    def test_gone_and_back(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=2) as cluster:
            self.wait_cellapps(cluster, 2, "baseapp-1 sees 2 cellapps")

            cluster.kill("cellapp-2", "STOP")

            def noticed():
                if self.baseapp_cellapps(cluster) != 1:
                    return False
                return any("cellapp" in line and "dead" in line
                           for line in cluster.log("baseapp-1").lower().splitlines())

            try:
                harness.wait_for(noticed, NOTICE_S,
                                 "baseapp-1 sees cellapps == 1 and logs a line with 'cellapp' and 'dead'")
            except AssertionError as e:
                raise AssertionError("%s\nbaseapp-1 hash: %s\nbaseapp-1 log tail:\n%s"
                                     % (e, cluster.registry_hash("baseapp-1"),
                                        "\n".join(cluster.log("baseapp-1").splitlines()[-30:])))
            self.assertIsNone(cluster.registry_hash("cellapp-2"), "a stopped cellapp is still registered")

            cluster.kill("cellapp-2", "CONT")
            self.wait_cellapps(cluster, 2, "cellapp-2 rejoins after SIGCONT")

            cluster.kill("cellapp-1", "KILL")
            self.wait_cellapps(cluster, 1, "baseapp-1 notices cellapp-1 was killed")
            harness.wait_for(lambda: cluster.registry_hash("cellapp-1") is None, NOTICE_S,
                             "cellapp-1's registry entry expires")

            report = harness.run_bots(cluster, 10, 4)
            text = json.dumps(report, indent=2, sort_keys=True)
            self.assertEqual(report.get("logged_in"), 10, text)
            for name in ("redis", "baseapp-1", "cellapp-2"):
                self.assertTrue(cluster.alive(name), "%s died" % name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
