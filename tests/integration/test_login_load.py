#!/usr/bin/env python3
"""test_login_load -- logins are counted when they arrive, and the password
hashes they cost are bounded, whatever a client sends.

  - 100 wrong guesses of one account's password sent at once: at most
    the account's share of the hash queue is checked, the rest refused
    before any hashing with a retry hint; guessing on, past
    login_failures_per_account a minute even the right password is
    refused unhashed;
  - 200 logins of unknown accounts from one address, each sent again as
    the refusals ask: at most login_failures_per_address (a minute) are
    hashed;
  - 300 connections that send a login and reset at once are dropped from
    the hash queue unhashed, and a real player logs in meanwhile."""
import re
import socket
import struct
import time
import unittest

import harness
from harness import ERROR_CODES, frame, msg_hello, msg_login
from test_client_hardening import argon2id

PER_ACCOUNT = 10
PER_ADDRESS = 60


ERROR_NAMES = {code: name for name, code in ERROR_CODES.items()}


def hello(addr):
    s = harness.connect(addr)
    s.sendall(frame(msg_hello()))
    harness.read_until(s, "hello")
    return s


def answer(sock, timeout=20.0):
    try:
        return harness.read_until(sock, {"login_reply", "error"}, timeout=timeout) or {"kind": "closed"}
    except (TimeoutError, OSError):
        return {"kind": "closed"}


class LoginLoad(unittest.TestCase):
    def setUp(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)

    def settled(self, cluster, field):
        """baseapp-1's figure once its registry entry (renewed every
        heartbeat) has shown the same value for 1.5 s."""
        last = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            value = cluster.stat("baseapp-1", field) or 0
            if value == last:
                return value
            last = value
            time.sleep(1.5)
        raise AssertionError("baseapp-1's %s never settled" % field)

    def hashes(self, cluster):
        return self.settled(cluster, "login_hashes")

    def logged_in_once(self, cluster, account, password):
        """Logs `account` in and out; the hashes run so far."""
        sock, _ = harness.login(cluster.baseapps[0], account, password)
        sock.close()
        hashes = self.hashes(cluster)
        self.assertGreaterEqual(hashes, 1)
        return hashes

    def test_attempts_count_on_arrival(self):
        settings = ["baseapp.login_failures_per_account=%d" % PER_ACCOUNT,
                    "baseapp.login_failures_per_address=%d" % PER_ADDRESS, "baseapp.auto_create_accounts=false"]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings) as cluster:
            addr = cluster.baseapps[0]
            cluster.redis.hset("tessera:tessera:account:victim", "password_hash", argon2id(b"right"))
            before = self.logged_in_once(cluster, "victim", "right")

            # 100 wrong guesses at once: only the account's share of the
            # hash queue is checked, the rest refused before any work.
            socks = [hello(addr) for _ in range(100)]
            for i, s in enumerate(socks):
                s.sendall(frame(msg_login("victim", "guess-%d" % i)))
            answers = [answer(s) for s in socks]
            for s in socks:
                s.close()
            kinds = {}
            for a in answers:
                key = a["kind"] if a["kind"] != "error" else ERROR_NAMES.get(a["code"], a["code"])
                kinds[key] = kinds.get(key, 0) + 1
            harness.log("100 guesses at once: %r" % kinds)
            self.assertNotIn("login_reply", kinds, "a wrong guess got in: %r" % kinds)
            wrong = kinds.get("BAD_CREDENTIALS", 0)
            self.assertLessEqual(wrong, PER_ACCOUNT)
            # Guessing on, one at a time: past PER_ACCOUNT failures a minute
            # every attempt is refused unhashed, the right password too.
            for i in range(PER_ACCOUNT + 3):
                s = hello(addr)
                s.sendall(frame(msg_login("victim", "more-%d" % i)))
                a = answer(s)
                s.close()
                # Refused with at least 100 ms to wait: the right password,
                # sent at once, meets the same empty bucket.
                waiting = re.search(r"try again in (\d+) ms", a.get("message", ""))
                if a.get("code") == ERROR_CODES["RATE_LIMITED"] and waiting and int(waiting.group(1)) >= 100:
                    break
                if a.get("code") == ERROR_CODES["BAD_CREDENTIALS"]:
                    wrong += 1
            self.assertLessEqual(wrong, PER_ACCOUNT + 2)  # the bucket refills 1 in 6 s meanwhile
            s = hello(addr)
            s.sendall(frame(msg_login("victim", "right")))
            a = answer(s)
            s.close()
            self.assertEqual(a.get("code"), ERROR_CODES["RATE_LIMITED"], a)
            hashed = self.hashes(cluster) - before
            harness.log("hashed: %d for %d wrong guesses" % (hashed, 100 + PER_ACCOUNT + 1))
            self.assertLessEqual(hashed, PER_ACCOUNT + 2)

            # Unknown accounts from one address, each retried as asked:
            # at most PER_ADDRESS a minute are hashed.
            before = self.hashes(cluster)
            started = time.monotonic()
            failed = limited = 0
            sent = 0
            while sent < 200:
                wave = [hello(addr) for _ in range(min(20, 200 - sent))]
                for i, s in enumerate(wave):
                    s.sendall(frame(msg_login("nobody-%d" % (sent + i), "pw")))
                for s in wave:
                    a = answer(s)
                    s.close()
                    if a.get("code") == ERROR_CODES["BAD_CREDENTIALS"]:
                        failed += 1
                    elif a.get("code") == ERROR_CODES["RATE_LIMITED"]:
                        limited += 1
                    else:
                        self.assertEqual(a["kind"], "error", a)
                sent += len(wave)
            elapsed = time.monotonic() - started
            hashed = self.hashes(cluster) - before
            harness.log("200 unknown accounts in %.1f s: %d hashed, %d told wrong, %d rate-limited"
                        % (elapsed, hashed, failed, limited))
            # The bucket refills at PER_ADDRESS a minute while this runs.
            self.assertLessEqual(hashed, PER_ADDRESS + int(elapsed * PER_ADDRESS / 60) + 1)
            self.assertGreater(limited, 0)

            self.assertTrue(cluster.all_alive())

    def test_half_open_logins_are_not_hashed(self):
        settings = ["baseapp.login_failures_per_account=0", "baseapp.login_failures_per_address=0",
                    "baseapp.login_hashes_per_address=100000", "baseapp.login_hash_queue_max=1000",
                    "baseapp.login_hash_workers=1"]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings) as cluster:
            addr = cluster.baseapps[0]
            before = self.logged_in_once(cluster, "player", "pw")
            socks = [hello(addr) for _ in range(300)]
            for i, s in enumerate(socks):
                s.sendall(frame(msg_login("half-open-%d" % i, "pw")))
            time.sleep(0.05)
            for s in socks:
                # A reset, not a polite close.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            started = time.monotonic()
            sock, reply = harness.login(addr, "player", "pw")
            took = time.monotonic() - started
            sock.close()
            self.assertEqual(reply["kind"], "login_reply", reply)
            hashed = self.hashes(cluster) - before
            dropped = self.settled(cluster, "login_hashes_dropped")
            harness.log("300 half-open logins: %d hashed, %d dropped unhashed; the player's login took %.0f ms"
                        % (hashed, dropped, took * 1000))
            self.assertGreater(dropped, 0)
            self.assertLess(hashed, 300)
            self.assertTrue(cluster.all_alive())


if __name__ == "__main__":
    unittest.main()
