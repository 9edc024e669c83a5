#!/usr/bin/env python3
"""test_slow_client -- a client that stops reading is held, not flooded.

A player logs in with a small receive buffer and stops reading while 40
bots walk and fight around it. Its baseapp sees the bytes pile up past
client_congestion_bytes and tells the player's cell, whose witness then
sends it only enters and leaves (movement and property changes are held,
to go current once it drains: witness.c, and test_witness's unit test of
exactly that). The player is not dropped; when it reads again its baseapp
sees the queue drain, the cell resumes, and the player gets view updates
again. The bots never notice. A second player does the same over
WebSocket (the baseapp's websocket_port): a browser that stops reading is
treated as a TCP client that does."""
import json
import socket
import time
import unittest

import harness
from harness import frame, msg_hello, msg_login

BOTS = 40
SECONDS = 20
STALL_S = 12
CONGESTION_BYTES = 2048


class SlowClient(unittest.TestCase):
    def test_stalled_client_is_held_then_resumed(self):
        settings = ["baseapp.client_congestion_bytes=%d" % CONGESTION_BYTES,
                    "baseapp.client_send_buffer_bytes=4096",
                    "cellapp.game.npc_count=20",
                    # Every change every tick: enough traffic to fill the
                    # small buffers within the stall.
                    "cellapp.client_bytes_per_second=100000", "cellapp.update_near_distance=1000",
                    "cellapp.update_far_distance=2000"]
        with harness.Cluster(baseapps=1, cellapps=2, extra_set=settings, spawn_radius=20) as cluster:
            bots = harness.start_bots(cluster, BOTS, SECONDS, ["--area", 20, "--calls-per-second", 2])
            try:
                sock = self.login_slow_reader(cluster, "sleepy")
                self.addCleanup(sock.close)
                ws_addr = (cluster.login[0], int(cluster.registry_hash("baseapp-1")["websocket_port"]))
                ws, reply = harness.websocket_login(ws_addr, "sleepy-browser", "pw", receive_buffer=4096)
                self.addCleanup(ws.close)
                # Stop reading: the kernel buffers fill, then the baseapp's queue.
                harness.wait_for(lambda: cluster.stat("baseapp-1", "congested_clients") == 2, STALL_S,
                                 "the baseapp to notice both clients are not reading")
                # Held, not dropped, while they do not read. (The congestion may
                # clear and return meanwhile: the receiving kernel compacts its
                # queue of small segments and opens its window a little.)
                time.sleep(1.0)
                self.assertGreaterEqual(cluster.stat("baseapp-1", "congestion_events"), 2)
                # Still there: read everything, and the updates resume.
                frames = self.read_for(sock, 3.0)
                self.assertTrue(frames, "nothing arrived after the client read again")
                kinds = {f["kind"] for f in frames}
                self.assertNotIn("error", kinds, "the stalled client was dropped: %r" % frames[-1:])
                messages = self.read_websocket_for(ws, 3.0)
                self.assertTrue(messages, "nothing arrived after the browser read again")
                kinds = {m["kind"] for m in messages}
                self.assertFalse(kinds & {"error", "ws_close"}, "the stalled browser was dropped: %r" % messages[-1:])
                harness.wait_for(lambda: cluster.stat("baseapp-1", "congested_clients") == 0, 5,
                                 "the congestion to clear once the clients read")
                later = self.read_for(sock, 2.0)
                self.assertTrue(any(f["kind"] == "view" for f in later), "no view updates after draining")
                later = self.read_websocket_for(ws, 2.0)
                self.assertTrue(any(m["kind"] == "view" for m in later), "no view updates for the browser")
            finally:
                report = harness.finish_bots(bots)
        text = json.dumps(report, indent=2, sort_keys=True)
        self.assertEqual(report.get("logged_in"), BOTS, text)
        self.assertEqual(report.get("errors"), 0, text)

    def login_slow_reader(self, cluster, account):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(cluster.login)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.sendall(frame(msg_hello()))
        hello = harness.read_until(sock, {"hello", "error"}, 5)
        self.assertEqual(hello["kind"], "hello", hello)
        sock.sendall(frame(msg_login(account, "pw")))
        reply = harness.read_until(sock, {"login_reply", "error"}, 10)
        self.assertEqual(reply["kind"], "login_reply", reply)
        return sock

    def read_for(self, sock, seconds):
        """Every message that arrives within `seconds`."""
        frames = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                msg = harness.read_message(sock, max(0.05, deadline - time.monotonic()))
            except socket.timeout:
                break
            if msg is None:
                frames.append({"kind": "error", "message": "connection closed"})
                break
            frames.append(msg)
        return frames

    def read_websocket_for(self, ws, seconds):
        """Every message that arrives over the WebSocket within `seconds`."""
        messages = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                message = ws.read_message(max(0.05, deadline - time.monotonic()))
            except (socket.timeout, TimeoutError):
                break
            except harness.Closed:
                messages.append({"kind": "error", "message": "connection closed"})
                break
            messages.append(message)
            if message["kind"] == "ws_close":
                break
        return messages


if __name__ == "__main__":
    unittest.main(verbosity=2)
