#!/usr/bin/env python3
"""test_play_page -- the play page (web/play.html and the TypeScript SDK,
served by the baseapp's WebSocket port at /play and /tessera.js) in a real
headless Chromium, against a cluster of 1 baseapp, 2 cellapps and 20 bots.

  - a plain GET of /play and of /tessera.js gets the files (200, their
    types, the SDK defining the global Tessera); another path gets 426;
  - Chromium opens /play?auto=10&account=...: the page logs in over
    WebSocket to the port it came from (to an Account, as in the demo, which
    it asks to enterWorld()), walks, calls methods, and after 10
    s writes its report into <pre id="report">; the report must show it
    logged in, saw the bots (at least 20 entities), got updates, sent moves
    and calls, with no error; nothing in the console or the DevTools log;
  - the baseapp counted the browser as a client, and the bots (half over
    TCP, half over WebSocket) played on undisturbed (every one in, no
    errors).
A screenshot of the page is kept as an artifact: play.png in the build
directory's test-artifacts/ (and in the run directory when the test fails).
Chromium is driven over its DevTools pipe, as in test_live_map."""
import base64
import json
import os
import signal
import time
import unittest
import urllib.request

import harness
from test_live_map import CHROMIUM, Chromium

BOTS = 20
AUTO_SECONDS = 10
PAGE_TIMEOUT_S = AUTO_SECONDS + 30.0


def fetch(url):
    """(status, content type, body) of one GET."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


class PlayPage(unittest.TestCase):
    def test_browser_plays_among_bots(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        if not os.access(CHROMIUM, os.X_OK):
            raise AssertionError("no Chromium at %s (apt-get install chromium, or set TESSERA_CHROMIUM)" % CHROMIUM)
        # As in the demo: a login gets an Account, whose enterWorld() hands the
        # client to its Avatar (the page calls it, as the bots' --enter does).
        with harness.Cluster(baseapps=1, cellapps=2, extra_set=["baseapp.player_entity_type=Account"]) as cluster:
            port = int(cluster.registry_hash("baseapp-1")["websocket_port"])
            base = "http://127.0.0.1:%d" % port
            status, kind, page = fetch(base + "/play")
            self.assertEqual(status, 200)
            self.assertTrue(kind.startswith("text/html"), kind)
            self.assertIn(b'<pre id="report">', page)
            status, kind, script = fetch(base + "/tessera.js")
            self.assertEqual(status, 200)
            self.assertTrue(kind.startswith("text/javascript"), kind)
            self.assertIn(b"Tessera", script)
            self.assertEqual(fetch(base + "/elsewhere")[0], 426)

            # Half the bots over TCP, half over WebSocket (the C SDK's plain
            # WebSocket client), all in the browser's view.
            bots = harness.start_bots(cluster, BOTS // 2, AUTO_SECONDS + 25,
                                      ["--area", "30", "--enter", "enterWorld", "--account-prefix", "tcp"])
            web_bots = harness.start_bots(cluster, BOTS // 2, AUTO_SECONDS + 25,
                                          ["--area", "30", "--enter", "enterWorld", "--account-prefix", "web",
                                           "--websocket", "--connect", "127.0.0.1:%d" % port])
            stderr_path = os.path.join(cluster.dir, "chromium.log")
            chromium = Chromium(stderr_path)
            report = None
            try:
                harness.wait_for(lambda: cluster.stat("baseapp-1", "clients") == BOTS, 30, "the bots in the world")
                chromium.open("%s/play?auto=%d&account=browser-player" % (base, AUTO_SECONDS))
                harness.wait_for(lambda: cluster.stat("baseapp-1", "clients") == BOTS + 1, 20,
                                 "the browser in the world")

                def done():
                    text = chromium.evaluate(
                        "(() => { const r = document.getElementById('report');"
                        " return r && r.dataset.done ? r.textContent : null; })()")
                    return json.loads(text) if text else None
                # Mid-game, the screenshot: the view with the bots in it.
                time.sleep(AUTO_SECONDS / 2)
                shot = chromium.call("Page.captureScreenshot", {"format": "png"})
                artifacts = os.path.join(harness.BUILD_DIR, "test-artifacts")
                os.makedirs(artifacts, exist_ok=True)
                for directory in (artifacts, cluster.dir):
                    with open(os.path.join(directory, "play.png"), "wb") as f:
                        f.write(base64.b64decode(shot["data"]))
                report = harness.wait_for(done, PAGE_TIMEOUT_S, "the page's report")
                harness.log("play page report: %s" % json.dumps(report, sort_keys=True))
                problems = chromium.problems()
            finally:
                chromium.close()
                # The bots have served: Ctrl-C ends their run early, with
                # their report.
                reports = []
                for group in (bots, web_bots):
                    if group.poll() is None:
                        group.send_signal(signal.SIGINT)
                    reports.append(harness.finish_bots(group))

            self.assertEqual(problems, [], "the page reported problems:\n" + "\n".join(problems))
            self.assertTrue(report["logged_in"], report)
            self.assertEqual(report["errors"], 0, report)
            self.assertGreaterEqual(report["entities_seen"], BOTS, report)
            self.assertGreater(report["updates"], 0, report)
            self.assertGreater(report["moves_sent"], 0, report)
            self.assertGreater(report["calls"], 0, report)
            self.assertIsNotNone(report["latency_p50_ms"], report)
            for bots_report in reports:
                self.assertEqual(bots_report.get("logged_in"), BOTS // 2, bots_report)
                self.assertEqual(bots_report.get("errors"), 0, bots_report)


if __name__ == "__main__":
    unittest.main(verbosity=2)
