#!/usr/bin/env python3
"""test_node_clients -- players on the TypeScript SDK (node, over WebSocket)
and players on the C SDK (tessera-bots, over TCP) in one world of two
cellapps, seeing each other.

10 node clients (node_clients.mjs) and 10 bots walk the same 120 x 120 m
around the centre, where the cells meet, for 12 s (wider than a view: some
pairs are in each other's, some not):
  - the bots check their views (--verify-aoi) and must all stay in, with no
    error and no mismatch;
  - the node clients stand still for their last 2 s and then check theirs
    the same way against where the others truly are (in range: present;
    beyond range and hysteresis: gone), with no error and no mismatch;
  - each side saw the other: some bot among the entities the node clients
    saw, and some node client among what the bots see at the end
    (--snapshot-file).
Every process started here is stopped at the end, whatever happens."""
import json
import os
import subprocess
import unittest

import harness

CLIENTS = 10
SECONDS = 12
AREA = 60


class NodeClients(unittest.TestCase):
    def test_node_clients_beside_bots(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        module = os.path.join(harness.BUILD_DIR, "client", "js", "tessera.mjs")
        self.assertTrue(os.path.exists(module), "no %s: the build bundles the SDK (client/js/meson.build)" % module)
        with harness.Cluster(baseapps=1, cellapps=2, spawn_radius=AREA) as cluster:
            port = int(cluster.registry_hash("baseapp-1")["websocket_port"])
            snapshot = os.path.join(cluster.dir, "snapshot.json")
            bots = harness.start_bots(cluster, CLIENTS, SECONDS + 2, [
                "--verify-aoi", "--area", AREA, "--account-prefix", "cbot", "--snapshot-file", snapshot,
                "--snapshot-at-seconds", SECONDS])
            env = dict(os.environ, TESSERA_JS_MODULE=module,
                       TESSERA_JS_DIR=os.path.join(harness.SOURCE_DIR, "client", "js"))
            script = os.path.join(harness.SOURCE_DIR, "tests", "integration", "node_clients.mjs")
            node = subprocess.Popen(["node", script, "ws://127.0.0.1:%d/" % port, str(CLIENTS), str(SECONDS),
                                     str(AREA), "nodeplayer"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env=env, start_new_session=True)
            try:
                out, err = node.communicate(timeout=SECONDS + 60)
            finally:
                if node.poll() is None:
                    node.kill()
                    node.wait()
                bots_report = harness.finish_bots(bots)
            self.assertEqual(node.returncode, 0, err.decode(errors="replace")[-3000:])
            report = json.loads(out.decode().strip().splitlines()[-1])
            harness.log("node clients: %s" % json.dumps({k: v for k, v in report.items() if k != "seen_ids"}))

            harness.assert_bots_verified(self, bots_report, CLIENTS)
            self.assertEqual(report["logged_in"], CLIENTS, report)
            self.assertEqual(report["in_world_at_end"], CLIENTS, report)
            self.assertEqual(report["errors"], 0, report)
            self.assertGreater(report["aoi_checked"], 0, report)
            self.assertEqual(report["aoi_mismatches"], 0, report)

            with open(snapshot) as f:
                views = json.load(f)["bots"]
            bot_ids = {str(b["entity_id"]) for b in views}
            seen_by_bots = {str(e["id"]) for b in views for e in b["entities"]}
            self.assertTrue(bot_ids & set(report["seen_ids"]), "the node clients saw no bot")
            self.assertTrue(set(report["own_ids"]) & seen_by_bots, "the bots saw no node client")


if __name__ == "__main__":
    unittest.main(verbosity=2)
