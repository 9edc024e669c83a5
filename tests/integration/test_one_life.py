#!/usr/bin/env python3
"""test_one_life -- one account, one live character, whatever the clients do.

  - one fresh account logs in at both baseapps at the same moment, round
    after round: each round ends with exactly one session of it in the
    cluster (one proxy, one Avatar), and a client that got in while the
    other also did was told REPLACED; the other was sent to the holder, or
    told to retry;
  - a login while the account's session entry names a baseapp that is in
    the cluster but this one does not know (just started, say) is told to
    retry: nothing of the account is loaded on the second baseapp;
  - an entry naming a baseapp that left the cluster is claimed at once."""
import threading
import time
import unittest

import harness
from harness import ERROR_CODES, frame
from test_redirect import decode_redirect, msg_token_login

ROUNDS = 8


def attempt(addr, account, password, outcome, barrier):
    """One login at `addr`, following one redirect: outcome gets the
    socket and what came back ('in', 'error <code>', 'closed')."""
    s = harness.connect(addr)
    s.sendall(frame(harness.msg_hello()))
    harness.read_until(s, "hello")
    barrier.wait(10)
    s.sendall(frame(harness.msg_login(account, password)))
    kind, got = decode_redirect(s)
    if kind == "login_redirect":
        s.close()
        s = harness.connect((got["host"], got["port"]))
        s.sendall(frame(harness.msg_hello()))
        harness.read_until(s, "hello")
        s.sendall(frame(msg_token_login(account, got["token"])))
        reply = harness.read_until(s, {"login_reply", "error"}, timeout=10.0)
        kind, got = (reply["kind"], reply) if reply else ("closed", {})
    outcome["socket"] = s
    outcome["kind"] = kind
    outcome["reply"] = got


def error_within(sock, seconds):
    """The error the server sends on `sock` within `seconds`, or None."""
    try:
        return harness.read_until(sock, {"error"}, timeout=seconds)
    except (TimeoutError, OSError):
        return None


def refused_login(addr, account):
    """A login at `addr` that must not get in: the server's answer."""
    s = harness.connect(addr)
    try:
        s.sendall(frame(harness.msg_hello()))
        harness.read_until(s, "hello")
        s.sendall(frame(harness.msg_login(account, "pw")))
        return harness.read_until(s, {"login_reply", "error"}, timeout=10.0)
    finally:
        s.close()


def session_value(cluster, account):
    return cluster.redis.get("tessera:%s:session:%s" % (cluster.info.get("cluster_name", "tessera"), account))


class OneLife(unittest.TestCase):
    def setUp(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN)

    def accounts_held(self, cluster):
        return sum(cluster.stat(name, "clients") or 0 for name in cluster.names("baseapp"))

    def test_simultaneous_logins_leave_one_life(self):
        with harness.Cluster(baseapps=2, cellapps=1) as cluster:
            sockets = []
            try:
                for round_number in range(ROUNDS):
                    account = "twin%d" % round_number
                    outcomes = [{}, {}]
                    barrier = threading.Barrier(2)
                    threads = [threading.Thread(target=attempt, args=(addr, account, "pw", outcome, barrier))
                               for addr, outcome in zip(cluster.baseapps, outcomes)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join(30)
                    sockets += [o["socket"] for o in outcomes if "socket" in o]
                    kinds = [o.get("kind") for o in outcomes]
                    self.assertIn("login_reply", kinds, "round %d: nobody got in: %r" % (round_number, outcomes))
                    # Both in: the first must hear REPLACED (one life).
                    ins = [o for o in outcomes if o.get("kind") == "login_reply"]
                    if len(ins) == 2:
                        kicked = [error_within(o["socket"], 3.0) for o in ins]
                        codes = sorted((k or {}).get("code", 0) for k in kicked)
                        self.assertEqual(codes.count(ERROR_CODES["REPLACED"]), 1,
                                         "round %d: two live clients of one account: %r" % (round_number, kicked))
                        self.assertEqual(ins[0]["reply"]["entity_id"], ins[1]["reply"]["entity_id"],
                                         "round %d: two characters of one account" % round_number)
                    for o in outcomes:
                        if o.get("kind") == "error":
                            self.assertIn(o["reply"].get("code"), (ERROR_CODES["UNAVAILABLE"], ERROR_CODES["REPLACED"]),
                                          o["reply"])
                    harness.wait_for(lambda: self.accounts_held(cluster) == round_number + 1, 10,
                                     "one proxy per account after round %d" % round_number)
                    value = session_value(cluster, account)
                    self.assertIsNotNone(value, "round %d: no session entry" % round_number)
                # Every account has its one proxy on the baseapp its entry names.
                time.sleep(0.5)
                self.assertEqual(self.accounts_held(cluster), ROUNDS)
                for round_number in range(ROUNDS):
                    holder = session_value(cluster, "twin%d" % round_number).split(":")[0]
                    self.assertIn(holder, [cluster.registry_id(n) for n in cluster.names("baseapp")])
                refused = sum(cluster.stat(n, "session_claims_refused") or 0 for n in cluster.names("baseapp"))
                harness.log("claims refused over %d rounds: %d" % (ROUNDS, refused))
                self.assertTrue(cluster.all_alive())
            finally:
                for s in sockets:
                    s.close()

    def test_a_holder_unknown_here_is_not_overridden(self):
        with harness.Cluster(baseapps=1, cellapps=1) as cluster:
            prefix = "tessera:%s:" % cluster.info.get("cluster_name", "tessera")
            # A baseapp this one has not heard of yet: registered (in P
            # processes) but not in its registry picture.
            cluster.redis.sadd(prefix + "processes", "9999")
            cluster.redis.set(prefix + "session:ghosted", "9999:4")
            reply = refused_login(cluster.baseapps[0], "ghosted")
            self.assertEqual(reply and reply.get("code"), ERROR_CODES["UNAVAILABLE"], reply)
            self.assertIn("another baseapp (9999)", reply.get("message", ""))
            self.assertEqual(session_value(cluster, "ghosted"), "9999:4")
            self.assertEqual(cluster.stat("baseapp-1", "clients"), 0)

            # Gone from the cluster (it stopped): the entry is claimed, and
            # the claim counts on from the old one.
            cluster.redis.srem(prefix + "processes", "9999")
            sock, reply = harness.login(cluster.baseapps[0], "ghosted", "pw")
            self.assertEqual(reply["kind"], "login_reply", reply)
            self.assertEqual(session_value(cluster, "ghosted").split(":")[0], cluster.registry_id("baseapp-1"))
            self.assertGreater(int(session_value(cluster, "ghosted").split(":")[1]), 4)

            # Declared dead a moment ago: its sessions are being restored,
            # so a login waits; long ago: claimed.
            cluster.redis.set(prefix + "session:restoring", "9998:1")
            cluster.redis.zadd(prefix + "dead", {"9998": int(time.time() * 1000)})
            reply = refused_login(cluster.baseapps[0], "restoring")
            self.assertEqual(reply and reply.get("code"), ERROR_CODES["UNAVAILABLE"], reply)
            self.assertIn("being restored", reply.get("message", ""))
            cluster.redis.zadd(prefix + "dead", {"9998": int(time.time() * 1000) - 60000})
            again, reply = harness.login(cluster.baseapps[0], "restoring", "pw")
            self.assertEqual(reply["kind"], "login_reply", reply)
            for x in (sock, again):
                x.close()
            self.assertTrue(cluster.all_alive())


if __name__ == "__main__":
    unittest.main()
