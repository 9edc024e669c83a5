#!/usr/bin/env python3
"""test_handover -- giveClientTo on a real baseapp.

  - the classic flow (player_entity_type Account): the client logs in to an
    Account, which has no cell part (a login reply with no space), calls
    its exposed enterWorld(), and the Account hands its client to the
    account's Avatar: the client hears PlayerDestroyed (the Account), then
    PlayerCreated (the Avatar), its BaseProperties, EnteredSpace and the new
    witness's stream, in that order; a reconnect with the new session token
    comes back to the Avatar; the Account is written (visits) and goes;
  - 24 bots do the same (tessera-bots --enter enterWorld) on 2 cellapps,
    and at the end every bot's view matches the truth;
  - each refusal, named by its rule (POST /admin/give-client): a source
    without a client, a target that is missing (looked up in the base
    directory, so the refusal comes after a 202), is the source, already
    has a client, and a source or target that is being destroyed (its last
    write waits for Redis); and a handover between two Avatars, where the
    client sees the destroy, the create, and the new witness streams."""
import json
import time
import unittest

import harness
from harness import PART_BASE, PART_CELL, frame, msg_call

ENTER_WORLD = 0     # Account's base method enterWorld()


def post(cluster, port, path):
    """(status, body) of an operator's POST, with the cluster's admin token."""
    status, body, _ = cluster.admin_http(port, path, method="POST")
    return status, body


def token_login(addr, account, token):
    """Connects, says hello and sends a TokenLogin; returns (socket, the
    login_reply or error dict)."""
    s = harness.connect(addr)
    s.sendall(frame(harness.msg_hello()))
    harness.read_until(s, "hello")
    s.sendall(frame(harness.field_message(6, harness.field_string(1, account) + harness.field_string(2, token))))
    return s, harness.read_until(s, {"login_reply", "error"}, timeout=10.0)


def read_kinds(sock, until, timeout=10.0):
    """The kinds of the messages read until one of kind `until` (included)."""
    kinds = []
    deadline = time.monotonic() + timeout
    while True:
        msg = harness.read_message(sock, max(0.1, deadline - time.monotonic()))
        if msg is None:
            raise AssertionError("connection closed after %r" % kinds)
        kinds.append(msg)
        if msg["kind"] == until:
            return kinds


class Handover(unittest.TestCase):
    def setUp(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)

    def test_account_hands_its_client_to_the_avatar(self):
        settings = ["baseapp.player_entity_type=Account", "baseapp.client_detached_grace_ms=10000"]
        with harness.Cluster(baseapps=1, cellapps=2, extra_set=settings) as cluster:
            sock, reply = harness.login(cluster.login, "alice", "pw-alice")
            self.assertTrue(reply["no_space"], reply)
            self.assertEqual(reply["entity_type"], "Account")
            account = reply["entity_id"]
            # The Account has no cell part: a cell call through it is
            # refused, by name, rather than dropped in silence.
            bad, _ = harness.login(cluster.login, "mallory", "pw-mallory")
            bad.sendall(frame(msg_call(account, PART_CELL, 0)))
            refused = harness.read_until(bad, {"error"}, timeout=5.0)
            bad.close()
            self.assertIn("has no cell part", refused and refused["message"], refused)
            sock.sendall(frame(msg_call(account, PART_BASE, ENTER_WORLD)))
            seen = read_kinds(sock, "view")
            kinds = [m["kind"] for m in seen]
            order = [k for k in kinds if k in ("player_destroyed", "player_created", "entered_space", "view")]
            self.assertEqual(order, ["player_destroyed", "player_created", "entered_space", "view"], kinds)
            destroyed = next(m for m in seen if m["kind"] == "player_destroyed")
            created = next(m for m in seen if m["kind"] == "player_created")
            space = next(m for m in seen if m["kind"] == "entered_space")
            self.assertEqual(destroyed["entity_id"], account)
            self.assertEqual(created["entity_type"], "Avatar")
            avatar = created["entity_id"]
            self.assertNotEqual(avatar, account)
            self.assertEqual(space["entity_id"], avatar)
            self.assertGreater(space["max_aliases"], 0)
            created_at = kinds.index("player_created")
            self.assertIn("base_properties", kinds[created_at:kinds.index("entered_space")], kinds)
            sock.close()

            # The session is the Avatar's now.
            again, back = harness.reconnect(cluster.login, "alice", created["session_token"])
            self.assertEqual(back and back["kind"], "login_reply", back)
            self.assertEqual(back["entity_id"], avatar)
            self.assertFalse(back["no_space"])
            self.assertIsNotNone(harness.read_until(again, "view", timeout=5.0))
            again.close()

            # The Account was written as it went.
            key = "tessera:%s:entity:Account:alice" % cluster.info.get("cluster_name", "tessera")
            record = harness.wait_for(lambda: cluster.redis.get(key), 10.0, "the Account's record")
            self.assertEqual(json.loads(record)["properties"]["visits"], 1)

            report = harness.run_bots(cluster, 24, 10, ["--verify-aoi", "--enter", "enterWorld", "--area", "50"])
            harness.assert_bots_verified(self, report, 24)
            self.assertEqual(report["player_changes"], 24, report)
            self.assertGreaterEqual(cluster.stat("baseapp-1", "handovers") or 0, 25)
            self.assertTrue(cluster.all_alive())

    def test_refusals_and_a_handover_between_avatars(self):
        settings = ["baseapp.client_detached_grace_ms=30000", "baseapp.write_retry_ms=300"]
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=settings) as cluster:
            port = int(cluster.registry_hash("baseapp-1")["admin_port"])
            a_sock, a = harness.login(cluster.login, "alice", "pw-alice")
            b_sock, b = harness.login(cluster.login, "bob", "pw-bob")
            c_sock, c = harness.login(cluster.login, "carol", "pw-carol")
            alice, bob, carol = a["entity_id"], b["entity_id"], c["entity_id"]
            a_sock.close()          # alice is detached: no client, kept for a reconnect
            harness.wait_for(lambda: "the source has no client" in
                             post(cluster, port, "/admin/give-client?from=%d&to=%d" % (alice, carol))[1],
                             5.0, "the baseapp to notice alice's client is gone")

            def refused(source, target, rule):
                status, text = post(cluster, port, "/admin/give-client?from=%d&to=%d" % (source, target))
                self.assertEqual(status, 409, text)
                self.assertIn(rule, text)

            refused(alice, bob, "the source has no client")
            # A target that is not here is looked up in the base directory
            # (202); the refusal follows, and bob keeps his client.
            status, _ = post(cluster, port, "/admin/give-client?from=%d&to=987654321" % bob)
            self.assertEqual(status, 202)
            harness.wait_for(lambda: "giveClientTo entity 987654321 refused: the target is missing" in
                             cluster.log("baseapp-1"), 5.0, "the missing target's refusal")
            refused(bob, bob, "the target is the source")
            refused(bob, carol, "the target already has a client")
            refused(987654321, bob, "the source is destroyed")

            # A proxy being destroyed: carol is kicked while Redis is down,
            # so her last write waits (and is retried) and she stays.
            cluster.kill("redis")
            status, _ = post(cluster, port, "/admin/kick?account=carol")
            self.assertEqual(status, 200)
            self.assertTrue(harness.expect_closed(c_sock))
            refused(bob, carol, "the target is destroyed")
            cluster.restart_redis(pause_s=0.0)

            # Bob's client goes to alice's Avatar.
            status, text = post(cluster, port, "/admin/give-client?from=%d&to=%d" % (bob, alice))
            self.assertEqual(status, 200, text)
            # Bob's own stream runs until the handover: what counts is from
            # the destroy on.
            seen = read_kinds(b_sock, "entered_space")
            seen += read_kinds(b_sock, "view")
            kinds = [m["kind"] for m in seen]
            seen = seen[kinds.index("player_destroyed"):]
            order = [m["kind"] for m in seen if m["kind"] in ("player_destroyed", "player_created", "entered_space",
                                                              "view")]
            self.assertEqual(order, ["player_destroyed", "player_created", "entered_space", "view"])
            self.assertEqual(next(m for m in seen if m["kind"] == "player_destroyed")["entity_id"], bob)
            self.assertEqual(next(m for m in seen if m["kind"] == "player_created")["entity_id"], alice)
            # Bob's own entity stays, without a client; nobody may hand a
            # client from it now.
            refused(bob, alice, "the source has no client")
            # Carol's write landed once Redis was back, and she is gone.
            key = "tessera:%s:entity:Avatar:carol" % cluster.info.get("cluster_name", "tessera")
            harness.wait_for(lambda: cluster.redis.get(key), 10.0, "carol's last write after Redis came back")
            b_sock.close()
            self.assertTrue(cluster.all_alive())

    def test_across_baseapps(self):
        settings = ["baseapp.client_detached_grace_ms=30000", "baseapp.login_redirect=false"]
        with harness.Cluster(baseapps=2, cellapps=1, extra_set=settings) as cluster:
            first, second = cluster.baseapps
            port2 = int(cluster.registry_hash("baseapp-2")["admin_port"])
            a_sock, a = harness.login(first, "alice", "pw-alice")
            d_sock, d = harness.login(first, "dave", "pw-dave")
            b_sock, b = harness.login(second, "bob", "pw-bob")
            c_sock, c = harness.login(second, "carol", "pw-carol")
            alice, bob, carol, dave = a["entity_id"], b["entity_id"], c["entity_id"], d["entity_id"]
            a_sock.close()   # alice's entity waits, without a client, on baseapp-1
            harness.wait_for(lambda: "the source has no client" in
                             post(cluster, int(cluster.registry_hash("baseapp-1")["admin_port"]),
                                  "/admin/give-client?from=%d&to=%d" % (alice, dave))[1],
                             5.0, "baseapp-1 to notice alice's client is gone")

            # Refused over there: dave has a client. Carol keeps hers.
            status, _ = post(cluster, port2, "/admin/give-client?from=%d&to=%d" % (carol, dave))
            self.assertEqual(status, 202)
            harness.wait_for(lambda: "already has a client" in cluster.log("baseapp-2"), 5.0,
                             "baseapp-2 to hear the refusal")
            self.assertIsNotNone(harness.read_until(c_sock, "view", timeout=5.0))

            status, _ = post(cluster, port2, "/admin/give-client?from=%d&to=%d" % (bob, alice))
            self.assertEqual(status, 202)
            kinds = []
            redirect = None
            while redirect is None:
                body = harness.read_frame(b_sock, 10.0)
                self.assertIsNotNone(body, "bob's connection closed before a redirect (%r)" % kinds)
                number, _wt, inner = harness.parse_fields(body)[0]
                if number == 11:
                    f = harness.parse_fields(inner)
                    redirect = ((harness._first(f, 1, b"") or b"").decode(), harness._first(f, 2, 0),
                                (harness._first(f, 3, b"") or b"").decode())
                else:
                    msg = harness.decode_server(body)
                    kinds.append(msg)
            destroyed = [m for m in kinds if m["kind"] == "player_destroyed"]
            self.assertEqual([m["entity_id"] for m in destroyed], [bob], kinds)
            self.assertEqual(redirect[:2], first)
            b_sock.close()
            t, reply = token_login(first, "bob", redirect[2])
            self.assertEqual(reply and reply["kind"], "login_reply", reply)
            self.assertEqual(reply["entity_id"], alice)
            self.assertIsNotNone(harness.read_until(t, "view", timeout=5.0))
            for s in (t, c_sock, d_sock):
                s.close()
            self.assertTrue(cluster.all_alive())


    # ---- a baseapp killed or stopped during a giveClientTo across baseapps ----

    ACROSS_SETTINGS = ["baseapp.client_detached_grace_ms=30000", "baseapp.login_redirect=false"]

    def across_baseapps(self, cluster):
        """alice's entity waits without a client on baseapp-1, bob plays on
        baseapp-2. Returns (alice id, bob id, bob's socket, baseapp-2's
        admin port)."""
        first, second = cluster.baseapps
        a_sock, a = harness.login(first, "alice", "pw-alice")
        b_sock, b = harness.login(second, "bob", "pw-bob")
        a_sock.close()
        harness.wait_for(lambda: "disconnected" in cluster.log("baseapp-1"), 5.0, "alice's client gone")
        time.sleep(2.5)  # alice's base backed up to baseapp-2 at least twice
        port2 = int(cluster.registry_hash("baseapp-2")["admin_port"])
        return a["entity_id"], b["entity_id"], b_sock, port2

    def test_target_baseapp_killed_after_it_accepted(self):
        """The target's baseapp accepts bob's client and dies before the
        client gets there. Alice's base is restored on baseapp-2 from its
        backup; bob's TokenLogin there is told to retry until it is, and then
        takes alice: no password again."""
        with harness.Cluster(baseapps=2, cellapps=1, extra_set=self.ACROSS_SETTINGS, timeout=60) as cluster:
            alice, bob, b_sock, port2 = self.across_baseapps(cluster)
            status, _ = post(cluster, port2, "/admin/give-client?from=%d&to=%d" % (bob, alice))
            self.assertEqual(status, 202)
            redirect = None
            while redirect is None:
                body = harness.read_frame(b_sock, 10.0)
                self.assertIsNotNone(body, "bob's connection closed before a redirect")
                number, _wt, inner = harness.parse_fields(body)[0]
                if number == 11:
                    f = harness.parse_fields(inner)
                    redirect = (harness._first(f, 2, 0), (harness._first(f, 3, b"") or b"").decode())
            self.assertEqual(redirect[0], cluster.baseapps[0][1])
            cluster.kill("baseapp-1", "KILL")
            b_sock.close()
            answers = []
            deadline = time.monotonic() + 20
            while True:
                t, reply = token_login(cluster.baseapps[1], "bob", redirect[1])
                answers.append(reply and (reply["kind"], reply.get("code"), reply.get("retry_after_ms")))
                if reply and reply["kind"] == "login_reply":
                    break
                t.close()
                self.assertTrue(reply and reply["kind"] == "error" and reply["code"] == 7 and
                                reply["retry_after_ms"] > 0, answers)
                self.assertLess(time.monotonic(), deadline, answers)
                time.sleep(reply["retry_after_ms"] / 1000.0)
            self.assertEqual(reply["entity_id"], alice, answers)
            self.assertIsNotNone(harness.read_until(t, "view", timeout=10.0))
            t.close()
            harness.log("bob's TokenLogin answers on baseapp-2: %r" % answers)
            self.assertIn("restored in", cluster.log("baseapp-2"))
            # The token is spent now: good once.
            t, reply = token_login(cluster.baseapps[1], "bob", redirect[1])
            self.assertEqual((reply["kind"], reply["code"]), ("error", 17), reply)
            t.close()
            self.assertTrue(cluster.alive("baseapp-2") and cluster.alive("cellapp-1"))

    def test_target_baseapp_stopped_before_it_answered(self):
        """The target's baseapp is stopped before it answers the offer: once
        it is declared dead the handover is refused, and bob's client stays
        with bob, in the world."""
        with harness.Cluster(baseapps=2, cellapps=1, extra_set=self.ACROSS_SETTINGS, timeout=60) as cluster:
            alice, bob, b_sock, port2 = self.across_baseapps(cluster)
            old_id = cluster.registry_id("baseapp-1")
            cluster.kill("baseapp-1", "STOP")
            status, _ = post(cluster, port2, "/admin/give-client?from=%d&to=%d" % (bob, alice))
            self.assertEqual(status, 202)
            harness.wait_for(lambda: "refused: the target's baseapp died" in cluster.log("baseapp-2") or
                             "refused: the target's baseapp did not answer" in cluster.log("baseapp-2"),
                             20, "the handover refused")
            # Bob plays on: its view still streams, and a second handover
            # may be asked (the first is not pending forever).
            self.assertIsNotNone(harness.read_until(b_sock, "view", timeout=5.0))
            status, text = post(cluster, port2, "/admin/give-client?from=%d&to=%d" % (bob, alice))
            self.assertNotIn("handing its client over already", text)
            cluster.kill("baseapp-1", "CONT")
            cluster.wait_rejoined("baseapp-1", old_id)
            b_sock.close()
            self.assertTrue(cluster.alive("baseapp-2"))


if __name__ == "__main__":
    unittest.main()
