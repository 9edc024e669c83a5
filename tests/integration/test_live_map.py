#!/usr/bin/env python3
"""test_live_map -- the live map (web/map.html, served at /map by every
process) in a real headless Chromium against a real cluster: 2 cellapps with
10 NPCs each and 30 bots standing still, so every number it shows is known.

The page is opened from cellapp-1's admin port and runs for 6 s. Once it
shows the layout and all the reals, and 3 s after it opened, the test moves
line 0 to x = 37.5 with tessera-admin (some bots' reals go to the other
cellapp), and at the end it reads the page's DOM, as `chromium --dump-dom`
would print it, and checks the attributes of its <pre id="status">:
  - no errors: data-errors 0, no failed /api/cluster fetch or event stream
    error, and nothing in the console (Chromium's stderr with
    --enable-logging, and the DevTools events: exceptions, console.error,
    failed loads, CORS refusals);
  - data-entities equals the reals the cellapps publish in the registry (30
    bots + 20 NPCs: each real drawn once, whichever cellapp it is on);
  - the new epoch is in data-epoch-seen, drawn within 1000 ms of the move
    (the delay is printed), and data-lines starts with ["x", 37.5].
Then it clicks a bot on the canvas and waits for that bot's view square
from the cellapp that holds it (the ?witness=ID stream).

A second test reads the page's words as scripts/map-screenshot shows them
(--dump-dom after 9 s of virtual time, ?poll) on 4 cellapps with 100 bots
and the balancer on: the header names 4 cellapps, the entities and the
leader; the side panel lists every cellapp, one marked leader, and the
balancer's lease.

Why DevTools and not --dump-dom: with this Chromium (headless=new) the page
is dumped at load whatever --timeout says, and --virtual-time-budget runs
the page's clock faster than the wall clock, so neither can show a line
moved 3 s into the page's life, nor when the page drew it in time.time()'s
terms. The test drives Chromium over --remote-debugging-pipe instead (JSON
messages ending in NUL on fds 3 and 4), which needs nothing but the
standard library; it reads the DOM with one Runtime.evaluate."""
import fcntl
import html
import html.parser
import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import harness

CHROMIUM = os.environ.get("TESSERA_CHROMIUM", "/usr/bin/chromium")
BOTS = 30
NPCS_PER_CELLAPP = 10
CELLAPPS = 2
# The page lives this long before its DOM is read: a dozen /api/cluster
# polls and two dozen frames of each event stream.
PAGE_LIFE_S = 6.0
# The line moves this long after the page opened (once it shows everything):
# half its life in a steady state before, half after.
MOVE_AFTER_S = 3.0
# Line 0 (x = 0 at first) moves here: bots spawn within 50 m of the centre,
# so some of them are between 0 and 37.5 and change cellapps.
MOVED_TO = 37.5
# The page polls /api/cluster every 500 ms and redraws as soon as the layout
# changed; 1000 ms leaves a full poll for a slow fetch and the admin write.
DRAW_DEADLINE_MS = 1000
# Bounds of the waits (seconds).
READY_TIMEOUT_S = 20.0
PAGE_TIMEOUT_S = 10.0
# How often the page's status is read while waiting: a DOM read costs a few
# milliseconds of the page's time; ten a second leaves it the rest.
PAGE_POLL_S = 0.1
# A DevTools answer takes milliseconds; this long means Chromium is wedged.
CDP_TIMEOUT_S = 15.0


class Chromium:
    """A headless Chromium driven over the DevTools protocol on a pipe.

    Chromium reads commands from its fd 3 and writes answers and events to
    its fd 4, each a JSON object followed by NUL. Events that arrive while
    waiting for an answer are kept in .events. It runs in its own session
    with a temporary profile; close() stops the whole process group and
    removes the profile, and may be called more than once."""

    def __init__(self, stderr_path):
        self.profile = tempfile.mkdtemp(prefix="tessera-chromium-")
        self.stderr_path = stderr_path
        self.events = []
        self.session = None
        self._next_id = 0
        self._buffer = b""
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds():
            # Via fds above 9 first: a pipe end may itself be 3 or 4.
            high_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        argv = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
                "--remote-debugging-pipe", "--user-data-dir=" + self.profile, "--no-first-run",
                "--window-size=1200,900", "about:blank"]
        with open(stderr_path, "wb") as stderr:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                         pass_fds=(3, 4), preexec_fn=child_fds, start_new_session=True)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        # The harness kills it on SIGTERM (meson's timeout) with the bots.
        with harness._live_lock:
            harness._live_procs.append(self.proc)

    def call(self, method, params=None, session=True):
        """Sends one command (to the page's session unless session=False) and
        returns its result; raises on an error answer, on EOF or after
        CDP_TIMEOUT_S."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + CDP_TIMEOUT_S
        while True:
            end = self._buffer.find(b"\0")
            if end >= 0:
                reply = json.loads(self._buffer[:end])
                self._buffer = self._buffer[end + 1:]
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise AssertionError("DevTools %s: %s" % (method, reply["error"]))
                    return reply.get("result", {})
                if "method" in reply:
                    self.events.append(reply)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("Chromium did not answer %s within %.0f s" % (method, CDP_TIMEOUT_S))
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise AssertionError("Chromium closed its DevTools pipe (exit %s); stderr in %s"
                                         % (self.proc.poll(), self.stderr_path))
                self._buffer += chunk

    def open(self, url):
        """Opens a tab, attaches to it with the console and log reported, and
        navigates it to url."""
        target = self.call("Target.createTarget", {"url": "about:blank"}, session=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 session=False)["sessionId"]
        self.call("Runtime.enable")
        self.call("Log.enable")
        self.call("Page.navigate", {"url": url})

    def evaluate(self, expression):
        """The value of a JavaScript expression in the page (JSON-able)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise AssertionError("evaluating %r: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def dom(self):
        """The page's DOM as HTML: what --dump-dom prints ("" while the
        navigation has no document yet)."""
        return self.evaluate("document.documentElement ? document.documentElement.outerHTML : ''")

    def click(self, x, y):
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def problems(self):
        """What the DevTools events report as wrong: exceptions, console
        errors and warnings, and errors in the log (failed loads, CORS)."""
        out = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                out.append("exception: %s" % (details.get("exception", {}).get("description") or details.get("text")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                out.append("console.%s: %s" % (params["type"], text))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                out.append("log (%s): %s %s" % (entry.get("source"), entry.get("text"), entry.get("url", "")))
        return out

    def close(self):
        if self.proc.poll() is None:
            try:
                self.call("Browser.close", session=False)
                self.proc.wait(timeout=5)
            except (AssertionError, OSError, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=5)
        with harness._live_lock:
            if self.proc in harness._live_procs:
                harness._live_procs.remove(self.proc)
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self._to_chrome = self._from_chrome = -1
        shutil.rmtree(self.profile, ignore_errors=True)


class StatusParser(html.parser.HTMLParser):
    """The attributes of <pre id="status"> in an HTML document."""

    def __init__(self):
        super().__init__()
        self.attributes = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "pre" and attrs.get("id") == "status" and self.attributes is None:
            self.attributes = attrs


def status_of(page_html, required=True):
    """The attributes of the page's #status; {} if there is none (yet) and
    not `required`."""
    parser = StatusParser()
    parser.feed(page_html)
    if parser.attributes is None:
        if not required:
            return {}
        raise AssertionError("no <pre id=\"status\"> in the page:\n" + page_html[:2000])
    return parser.attributes


def console_lines(stderr_path):
    """Chromium's console messages from its stderr (--enable-logging): lines
    like `[..:INFO:CONSOLE:12] "text", source: URL (12)`. The map logs
    nothing but errors, so every one of them is a problem."""
    try:
        with open(stderr_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return []
    return [line for line in text.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


class LiveMap(unittest.TestCase):
    def test_map_follows_the_cluster(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        if not os.access(CHROMIUM, os.X_OK):
            raise AssertionError("no Chromium at %s (apt-get install chromium, or set TESSERA_CHROMIUM)" % CHROMIUM)
        expected_reals = BOTS + NPCS_PER_CELLAPP * CELLAPPS
        with harness.Cluster(baseapps=1, cellapps=CELLAPPS,
                             extra_set=["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]) as cluster:
            cellapps = cluster.names("cellapp")
            bots = harness.start_bots(cluster, BOTS, 40, ["--speed", 0])
            chromium = None
            try:
                def reals():
                    counts = [cluster.stat(name, "reals") for name in cellapps]
                    return None if None in counts else sum(counts)
                harness.wait_for(lambda: reals() == expected_reals, READY_TIMEOUT_S,
                                 "%d reals (%d bots and %d NPCs) in the registry" % (expected_reals, BOTS,
                                                                                   NPCS_PER_CELLAPP * CELLAPPS))
                port = harness.wait_for(lambda: (cluster.registry_hash("cellapp-1") or {}).get("admin_port"),
                                        READY_TIMEOUT_S, "cellapp-1's admin_port in the registry")
                before = cluster.balance_view()["spaces"]["default"]
                self.assertEqual(harness.layout_lines(before)[:1], [("x", 0)], before)
                # The token in the URL, as scripts/cluster prints it: the
                # page passes it on to every process it reads.
                url = "http://127.0.0.1:%s/map?token=%s" % (port, cluster.admin_token)

                stderr_path = os.path.join(cluster.dir, "chromium.log")
                chromium = Chromium(stderr_path)
                chromium.open(url)
                opened = time.monotonic()
                harness.log("map: %s in headless Chromium (stderr: %s)" % (url.split("?")[0], stderr_path))

                def page_status():
                    return status_of(chromium.dom(), required=False)

                def page_wait(predicate, what):
                    return harness.wait_for(predicate, PAGE_TIMEOUT_S, what, interval=PAGE_POLL_S)

                def shows(epoch, entities):
                    s = page_status()
                    return s.get("data-epoch") == str(epoch) and s.get("data-entities") == str(entities)

                def lived(seconds):
                    """The page is that old, or it counted an error (no use
                    waiting longer)."""
                    return time.monotonic() >= opened + seconds or page_status().get("data-errors") != "0"

                # The page is live: it drew the layout and every real.
                page_wait(lambda: shows(before["epoch"], expected_reals),
                          "the map showing epoch %s and %d entities" % (before["epoch"], expected_reals))
                page_wait(lambda: lived(MOVE_AFTER_S), "%.0f s of page life" % MOVE_AFTER_S)
                moved_ms = time.time() * 1000.0
                cluster.admin("move-line", "default", 0, MOVED_TO)
                after = cluster.balance_view()["spaces"]["default"]
                self.assertGreater(after["epoch"], before["epoch"], after)
                self.assertEqual(harness.layout_lines(after)[0], ("x", MOVED_TO), after)
                page_wait(lambda: str(after["epoch"]) in json.loads(page_status()["data-epoch-seen"]),
                          "the map drawing epoch %s" % after["epoch"])
                # The reals the move sent to the other cellapp have arrived
                # (a tick or two) and both streams say so.
                page_wait(lambda: reals() == expected_reals and shows(after["epoch"], expected_reals),
                          "%d entities on the map after the move" % expected_reals)
                page_wait(lambda: lived(PAGE_LIFE_S), "%.0f s of page life" % PAGE_LIFE_S)

                page_html = chromium.dom()
                with open(os.path.join(cluster.dir, "map-dom.html"), "w") as f:
                    f.write(page_html)
                status = status_of(page_html)
                harness.log("map status: %s" % json.dumps(status, sort_keys=True))
                registry_reals = reals()

                seen = json.loads(status["data-epoch-seen"])
                delay_ms = seen[str(after["epoch"])] - moved_ms
                print("map: epoch %s drawn %.0f ms after the line moved (deadline %d ms)"
                      % (after["epoch"], delay_ms, DRAW_DEADLINE_MS), flush=True)

                # Then the selected client's view, from the cellapp holding it.
                self.check_witness(chromium)
            finally:
                if chromium is not None:
                    chromium.close()
                # The bots have served: Ctrl-C ends their run early, with
                # their report.
                if bots.poll() is None:
                    bots.send_signal(signal.SIGINT)
                report = harness.finish_bots(bots)

            console = console_lines(stderr_path)
            problems = chromium.problems()
            self.assertEqual(console, [], "console messages from the map:\n" + "\n".join(console))
            self.assertEqual(problems, [], "the page reported problems:\n" + "\n".join(problems))
            self.assertEqual(status["data-errors"], "0", status)
            self.assertEqual(status["data-fetch-failures"], "0", status)
            self.assertEqual(status["data-stream-errors"], "0", status)

            self.assertEqual(registry_reals, expected_reals)
            self.assertEqual(status["data-entities"], str(registry_reals), status)
            self.assertGreater(int(status["data-ghosts"]), 0, "no ghosts near the line: %s" % status)

            self.assertEqual(status["data-epoch"], str(after["epoch"]), status)
            self.assertIn(str(after["epoch"]), seen, status)
            self.assertLessEqual(delay_ms, DRAW_DEADLINE_MS, "the move took %.0f ms to show" % delay_ms)
            lines = json.loads(status["data-lines"])
            self.assertEqual(lines[0], ["x", MOVED_TO], status)
            self.assertEqual([tuple(line) for line in lines], harness.layout_lines(after), status)

            self.assertEqual(report.get("logged_in"), BOTS, report)
            self.assertEqual(report.get("errors"), 0, report)

    def check_witness(self, chromium):
        """Clicks the first bot the map drew and waits until the map shows its
        view (data-witness) from the cellapp holding it as a real."""
        # Where the bot is on the canvas: the page's own record of its last
        # draw (the only way to aim a click at a dot).
        target = chromium.evaluate(
            "(() => { const p = state.picks.find(p => p.kind === 0 && p.witness);"
            " const r = canvas.getBoundingClientRect();"
            " return p && {id: p.id, x: r.left + p.px, y: r.top + p.py}; })()")
        self.assertIsNotNone(target, "the map drew no client")
        chromium.click(target["x"], target["y"])

        def witness():
            attributes = status_of(chromium.dom())
            shown = json.loads(attributes["data-witness"])
            return shown if attributes["data-selected"] == str(target["id"]) and shown else None
        shown = harness.wait_for(witness, PAGE_TIMEOUT_S, "the view of entity %s on the map" % target["id"])
        harness.log("map: selected %s: %s" % (target["id"], shown))
        self.assertEqual(shown["id"], target["id"], shown)
        # 30 bots within 50 m of the centre, a view radius of 50 m: it sees
        # some of them.
        self.assertGreater(shown["sees"], 0, shown)


class MapPanelText(unittest.TestCase):
    def test_header_and_panel_name_the_cluster(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        if not os.access(CHROMIUM, os.X_OK):
            raise AssertionError("no Chromium at %s (apt-get install chromium, or set TESSERA_CHROMIUM)" % CHROMIUM)
        with harness.Cluster(baseapps=1, cellapps=4, balance=True) as cluster:
            bots = harness.start_bots(cluster, 100, 40, ["--area", "200"])
            try:
                harness.wait_for(lambda: cluster.stat("baseapp-1", "clients") == 100, READY_TIMEOUT_S,
                                 "100 bots in the world")
                lease = harness.wait_for(lambda: cluster.redis.get("tessera:tessera:balancer_lease"),
                                         READY_TIMEOUT_S, "a balancer leader")
                port = int(cluster.registry_hash("baseapp-1")["admin_port"])
                url = "http://127.0.0.1:%d/map?poll&token=%s" % (port, cluster.admin_token)
                profile = tempfile.mkdtemp(prefix="tessera-map-text-")
                self.addCleanup(shutil.rmtree, profile, True)
                page = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                                       "--disable-background-networking", "--disable-component-update",
                                       "--disable-sync", "--no-first-run", "--window-size=1200,900",
                                       "--virtual-time-budget=9000", "--user-data-dir=" + profile, "--dump-dom",
                                       url], capture_output=True, text=True, timeout=90).stdout
            finally:
                if bots.poll() is None:
                    bots.send_signal(signal.SIGINT)
                harness.finish_bots(bots)
            with open(os.path.join(cluster.dir, "map-text-dom.html"), "w") as f:
                f.write(page)

            def text_of(element_id):
                match = re.search(r'<(\w+) id="%s"[^>]*>(.*?)</\1>' % element_id, page, re.S)
                self.assertIsNotNone(match, "no #%s in the page:\n%s" % (element_id, page[:2000]))
                return html.unescape(re.sub(r"<[^>]+>", " ", match.group(2)))

            header = text_of("status")
            harness.log("map header: %s" % header)
            self.assertTrue(header.startswith("tessera: 4 cellapps | "), header)
            entities = re.search(r"(\d+) entities, (\d+) ghosts", header)
            self.assertIsNotNone(entities, header)
            self.assertGreaterEqual(int(entities.group(1)), 100, header)
            leader = lease.split(":")[0]
            self.assertRegex(header, r"\| leader %s:\d+" % leader)
            # The rows are nested divs: everything between #cellapps and the
            # balancer's paragraph.
            start, end = page.find('id="cellapps"'), page.find('id="balancer"')
            self.assertTrue(0 <= start < end, "no #cellapps before #balancer in the page")
            panel = html.unescape(re.sub(r"<[^>]+>", " ", page[start:end]))
            names = re.findall(r"cellapp (\d+)( \(leader\))?", panel)
            self.assertEqual(len(names), 4, panel)
            self.assertEqual([n for n, mark in names if mark], [leader], panel)
            balancer = text_of("balancer")
            self.assertRegex(balancer, r"^leader %s:\d+ \(cellapp:fence\)" % leader)


if __name__ == "__main__":
    unittest.main(verbosity=2)
