#!/usr/bin/env python3
"""test_login_view -- 50 bots log in to a 1 baseapp + 2 cellapp cluster,
walk a dense area for 8 seconds, and the bots' AOI checker agrees with what
the server showed them: everyone saw themselves and others, nothing wrong;
and every bot received the same entity definitions at login."""
import json
import unittest

import harness

BOTS = 50
SECONDS = 8
# 60 m square: dense enough that every bot has others in view.
AREA = 60


class LoginView(unittest.TestCase):
    def test_bots_see_each_other(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        with harness.Cluster(baseapps=1, cellapps=2) as cluster:
            report = harness.run_bots(cluster, BOTS, SECONDS, ["--verify-aoi", "--area", AREA])
            text = json.dumps(report, indent=2, sort_keys=True)
            self.assertEqual(report.get("logged_in"), BOTS, text)
            self.assertEqual(report.get("errors"), 0, text)
            self.assertEqual(report.get("self_seen"), BOTS, text)
            self.assertEqual(report.get("aoi_mismatches"), 0, text)
            self.assertGreater(report.get("aoi_checked", 0), 0, text)
            self.assertGreater(report.get("enter", 0), BOTS, "bots saw nobody else:\n" + text)
            # Every bot received the game's entity definitions at login, the
            # same ones, checked against their digest by the SDK.
            self.assertRegex(report.get("definitions_digest", ""), r"^[0-9a-f]{64}$", text)
            # Account, Avatar, Census, Door, LogicTimer, Npc, Trigger
            self.assertEqual(report.get("definition_classes"), 7, text)
            self.assertEqual(report.get("definitions_differ"), 0, text)
            self.assertTrue(cluster.all_alive(), "a process died:\n" + json.dumps(cluster.status(), indent=2))


if __name__ == "__main__":
    unittest.main(verbosity=2)
