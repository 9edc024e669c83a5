#!/usr/bin/env python3
"""test_partition -- one "host" cut off from the cluster for 8 s, then the
heal: no player lost, nothing real twice.

The test makes a network namespace of its own, joined to this one by a
veth pair on a private /24 (10.213.X.0/24, X from the pid: .1 this side,
.2 the namespace's). Redis, the baseapp and cellapp-1 and -2 listen on the
.1 address here; cellapp-3 runs inside the namespace (`ip netns exec`) on
the .2 address. Three columns as in test_recovery, bots walking across
all of them (--verify-aoi) from here, NPCs on every cellapp.

The cut: every packet either way over the veth pair is dropped (a pfifo
qdisc of limit 0 on both ends: no reset, no ICMP, like a pulled cable;
taking the link down instead would reroute this side's packets for the
namespace out of the default route). cellapp-3 can reach nobody, Redis
included: its lease lapses, it fences itself, and the balancer's lease
holder declares it dead and restores its reals on cellapp-1 and -2. After
8 s the qdiscs go: cellapp-3 finds it was declared dead and joins again as
a new process, empty. No bot is dropped, every view is right at the end,
every entity is real exactly once among the three cellapps.

The balancer's lease holder must be on this side of the cut (it declares
the death): a cluster whose holder is cellapp-3 is stopped before any
load and another started.

Needs root and `ip netns`; skipped, saying so, only when the namespace
cannot be made. The namespace, the veths and every process are removed
whether the test passes or fails."""
import os
import shutil
import subprocess
import time
import unittest

import harness

BOTS = 45
NPCS_PER_CELLAPP = 3
SETTINGS = ["cellapp.game.npc_count=%d" % NPCS_PER_CELLAPP]
BOT_SECONDS = 40
# The cut starts this long into the bots' run (or up to 10 s later, once
# cellapp-3 holds players), so that they walk on for a while after the
# heal before they settle (their last 4 s) and check.
CUT_AT_S = 14.0
CUT_SECONDS = 8.0
CELLAPPS = ["cellapp-1", "cellapp-2", "cellapp-3"]
# The cellapp in the namespace.
VICTIM = "cellapp-3"
SURVIVORS = ["cellapp-1", "cellapp-2"]
# Every cellapp stands for the balancer's lease and the first to ask
# takes it: the one in the namespace does about one time in four. This test
# wants the holder on this side of the cut, so a cluster whose holder is
# the namespace's is stopped and another started, this many times at most.
LEASE_ATTEMPTS = 6


def run(argv, check=True):
    """Runs a command of the network setup; returns the CompletedProcess.
    Raises AssertionError with its stderr when it fails and `check`."""
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          text=True, timeout=15)
    if check and proc.returncode != 0:
        raise AssertionError("%s failed (exit %d): %s" % (" ".join(argv), proc.returncode, proc.stderr.strip()))
    return proc


class Namespace:
    """A network namespace joined to this one by a veth pair. create(),
    cut() and heal() the link, remove() (idempotent: whatever was made)."""

    def __init__(self):
        self.ip = shutil.which("ip") or "/usr/sbin/ip"
        self.tc = shutil.which("tc") or "/usr/sbin/tc"
        pid = os.getpid()
        self.name = "tessera-%d" % pid
        # Interface names are at most 15 characters.
        self.root_veth = "tsr%d" % pid
        self.ns_veth = "tsn%d" % pid
        self.root_addr = self.ns_addr = None
        self.made_ns = self.made_veth = False
        self.is_cut = False

    def _free_subnet(self):
        """10.213.X (X from the pid) unless an address of this namespace
        is in it already, else the next free X."""
        used = run([self.ip, "-o", "-4", "addr", "show"]).stdout
        start = os.getpid() % 250 + 1
        for i in range(250):
            x = (start + i - 1) % 250 + 1
            if " 10.213.%d." % x not in used:
                return "10.213.%d" % x
        raise AssertionError("no free 10.213.X.0/24 here")

    def available(self):
        """None if a namespace can be made here, else why not."""
        if not os.access(self.ip, os.X_OK):
            return "no `ip` program (iproute2)"
        proc = run([self.ip, "netns", "add", self.name], check=False)
        if proc.returncode != 0:
            return "`ip netns add` failed: %s" % proc.stderr.strip()
        self.made_ns = True
        return None

    def in_ns(self, argv):
        return [self.ip, "netns", "exec", self.name] + argv

    def create(self):
        """Makes the veth pair (after available() made the namespace)."""
        subnet = self._free_subnet()
        self.root_addr, self.ns_addr = subnet + ".1", subnet + ".2"
        run([self.ip, "link", "add", self.root_veth, "type", "veth", "peer", "name", self.ns_veth])
        self.made_veth = True
        run([self.ip, "link", "set", self.ns_veth, "netns", self.name])
        run([self.ip, "addr", "add", self.root_addr + "/24", "dev", self.root_veth])
        run([self.ip, "link", "set", self.root_veth, "up"])
        run(self.in_ns([self.ip, "addr", "add", self.ns_addr + "/24", "dev", self.ns_veth]))
        run(self.in_ns([self.ip, "link", "set", self.ns_veth, "up"]))
        run(self.in_ns([self.ip, "link", "set", "lo", "up"]))
        harness.log("namespace %s: %s (%s) <-> %s (%s)"
                    % (self.name, self.root_veth, self.root_addr, self.ns_veth, self.ns_addr))

    def cut(self):
        # A queue that holds nothing drops every packet sent, ARP included.
        self.is_cut = True
        run([self.tc, "qdisc", "add", "dev", self.root_veth, "root", "pfifo", "limit", "0"])
        run(self.in_ns([self.tc, "qdisc", "add", "dev", self.ns_veth, "root", "pfifo", "limit", "0"]))

    def heal(self):
        if not self.is_cut:
            return
        self.is_cut = False
        run([self.tc, "qdisc", "del", "dev", self.root_veth, "root"], check=False)
        run(self.in_ns([self.tc, "qdisc", "del", "dev", self.ns_veth, "root"]), check=False)

    def remove(self):
        # Deleting one end deletes the pair (and its qdiscs).
        if self.made_veth:
            self.made_veth = False
            run([self.ip, "link", "del", self.root_veth], check=False)
        if self.made_ns:
            self.made_ns = False
            run([self.ip, "netns", "del", self.name], check=False)
            harness.log("namespace %s removed" % self.name)


def counter(cluster, names, field):
    return sum(cluster.stat(name, field) or 0 for name in names)


class Partition(unittest.TestCase):
    def check_once(self, cluster, names, everyone, timeout):
        """Every entity real exactly once among `names`."""
        def settled():
            where = harness.reals_by_id(cluster.dump_states(names))
            return len(where) == everyone and all(len(v) == 1 for v in where.values())
        try:
            harness.wait_for(settled, timeout, "every entity real exactly once among %s" % names, interval=0.2)
        except AssertionError:
            where = harness.reals_by_id(cluster.dump_states(names))
            twice = {k: v for k, v in where.items() if len(v) > 1}
            self.fail("%d reals among %s (expected %d), real twice: %s" % (len(where), names, everyone, twice))

    def lease_holder(self, cluster):
        held = harness.wait_for(lambda: cluster.balance_view()["leader"], 15, "a cellapp to take the lease")
        ids = {cluster.registry_id(n): n for n in CELLAPPS}
        return ids.get(held[0], "cellapp %s, not one of ours" % held[0])

    # Under the sanitizers the suite's time is kept in bounds.
    @unittest.skipIf(harness.SANITIZED, "the normal build runs it; fencing and rejoining run under the sanitizers in test_recovery")
    def test_cut_off_cellapp_fences_and_rejoins(self):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        ns = Namespace()
        self.addCleanup(ns.remove)
        harness.add_emergency_cleanup(ns.remove)
        self.addCleanup(harness.remove_emergency_cleanup, ns.remove)
        why = ns.available()
        if why:
            self.skipTest("needs a network namespace of its own: %s" % why)
        ns.create()
        for attempt in range(1, LEASE_ATTEMPTS + 1):
            with harness.Cluster(baseapps=1, cellapps=3, grid="3x1", spawn_radius=60, extra_set=SETTINGS,
                                 timeout=60, host=ns.root_addr, process_hosts={VICTIM: ns.ns_addr},
                                 process_prefixes={VICTIM: ns.in_ns([])}) as cluster:
                lead = self.lease_holder(cluster)
                if lead == VICTIM:
                    harness.log("%s, in the namespace, took the balancer's lease (cluster %d of at most %d)"
                                % (VICTIM, attempt, LEASE_ATTEMPTS))
                    continue
                self.cut_and_heal(cluster, ns, lead)
                return
        self.fail("%s, the cellapp in the namespace, took the balancer's lease in all %d clusters started: "
                  "this test wants the holder on the other side of the cut" % (VICTIM, LEASE_ATTEMPTS))

    def cut_and_heal(self, cluster, ns, lead):
        everyone = BOTS + 3 * NPCS_PER_CELLAPP
        self.assertEqual(cluster.login[0], ns.root_addr)
        self.assertEqual(cluster.registry_hash(VICTIM).get("host"), ns.ns_addr)
        # Three narrow columns around the spawn disc, as in test_recovery.
        cluster.admin("move-line", "default", 0, -20)
        cluster.admin("move-line", "default", 1, 20)
        bots_started = time.monotonic()
        bots = harness.start_bots(cluster, BOTS, BOT_SECONDS,
                                  ["--verify-aoi", "--area", 60, "--speed", 3, "--calls-per-second", 0.5,
                                   "--settle-seconds", 4])
        try:
            harness.wait_for(lambda: (cluster.stat("baseapp-1", "clients") or 0) == BOTS, 30,
                             "every bot in the world")
            # Backups of everyone, walking across lines.
            time.sleep(max(3.0, bots_started + CUT_AT_S - time.monotonic()))
            harness.wait_for(lambda: (cluster.stat(VICTIM, "reals") or 0) >= NPCS_PER_CELLAPP + 3, 10,
                             "%s to hold some players" % VICTIM)
            self.assertEqual(self.lease_holder(cluster), lead, "the balancer's lease moved")
            old_id = cluster.registry_id(VICTIM)
            harness.log("lease holder %s; %s (id %s) holds %d reals; cutting it off for %.0f s"
                        % (lead, VICTIM, old_id, cluster.stat(VICTIM, "reals"), CUT_SECONDS))
            cut_wall = time.time()
            cut_at = time.monotonic()
            ns.cut()
            try:
                # While it is cut off: the survivors declare it dead and
                # restore what it held.
                declared_s = None
                while time.monotonic() < cut_at + CUT_SECONDS:
                    if declared_s is None and counter(cluster, SURVIVORS, "deaths_declared") > 0:
                        declared_s = time.monotonic() - cut_at
                    time.sleep(0.1)
            finally:
                ns.heal()
            healed_at = time.monotonic()
            healed_wall = time.time()
            harness.log("healed after %.1f s; %s declared dead %s" % (
                healed_at - cut_at, VICTIM,
                "%.1f s after the cut" % declared_s if declared_s is not None else "not yet"))
            self.assertIsNotNone(declared_s, "%s was not declared dead while cut off" % VICTIM)
            self.assertIn("fenced: this cellapp's lease lapsed", cluster.log(VICTIM))
            harness.wait_for(lambda: "declared dead by the cluster" in cluster.log(VICTIM), 20,
                             "%s to learn it was declared dead" % VICTIM)

            def rejoined():
                entry = cluster.registry_hash(VICTIM)
                return entry["id"] if entry and entry["id"] != old_id else None
            new_id = harness.wait_for(rejoined, 30, "%s to join again as a new process" % VICTIM)
            rejoin_s = time.monotonic() - healed_at
            self.check_once(cluster, CELLAPPS, everyone, 30)
            once_s = time.monotonic() - healed_at
            harness.log("%s rejoined as %s %.1f s after the heal; every entity real once among the three "
                        "%.1f s after it" % (VICTIM, new_id, rejoin_s, once_s))
        finally:
            ns.heal()
            report = harness.finish_bots(bots)
        checked_s = bots_started + report.get("seconds", BOT_SECONDS) - healed_at
        text = harness.assert_bots_verified(self, report, BOTS)
        self.assertGreater(report.get("restores", 0), 0, text)
        after_cut = sorted(ms / 1000.0 - cut_wall for ms in report.get("restore_wall_ms", []))
        harness.log("bots: %d restores (%d from ghosts), %.1f-%.1f s after the cut (the heal: %.1f s after it); "
                    "every view right at their check, %.1f s after the heal"
                    % (report["restores"], report.get("restores_from_ghost", 0),
                       after_cut[0] if after_cut else 0, after_cut[-1] if after_cut else 0,
                       healed_wall - cut_wall, checked_s))
        victim_log = cluster.log(VICTIM)
        self.assertIn("fenced: this cellapp's lease lapsed", victim_log)
        self.assertIn("rejoining the cluster as a new process", victim_log)
        self.assertEqual(counter(cluster, SURVIVORS, "restores_failed"), 0)
        for name in ["baseapp-1"] + CELLAPPS:
            self.assertTrue(cluster.alive(name), "%s died" % name)

    # ---- a baseapp cut off ------------------------------------------------------------

    # Under the sanitizers the suite's time is kept in bounds.
    @unittest.skipIf(harness.SANITIZED, "the normal build runs it; a baseapp's fencing runs under the sanitizers "
                                        "in test_base_recovery")
    def test_cut_off_baseapp_fences_and_its_clients_follow(self):
        """baseapp-2 runs in the namespace; the bots (on this side) log in
        at baseapp-1 and half are sent to baseapp-2. The cut leaves those
        connected to nothing: baseapp-2's lease lapses and it fences itself,
        the lease holder declares it dead, and baseapp-1 restores its bases
        from their backups. At the heal baseapp-2 learns it was declared
        dead, sends each of its clients to baseapp-1 (where their sessions
        live now) and joins again, empty. Nobody types a password again and
        no account lives twice."""
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        ns = Namespace()
        self.addCleanup(ns.remove)
        harness.add_emergency_cleanup(ns.remove)
        self.addCleanup(harness.remove_emergency_cleanup, ns.remove)
        why = ns.available()
        if why:
            self.skipTest("needs a network namespace of its own: %s" % why)
        ns.create()
        victim, survivor, bots_count = "baseapp-2", "baseapp-1", 30
        with harness.Cluster(baseapps=2, cellapps=2, extra_set=SETTINGS, timeout=60, host=ns.root_addr,
                             process_hosts={victim: ns.ns_addr}, process_prefixes={victim: ns.in_ns([])}) as cluster:
            self.assertEqual(cluster.registry_hash(victim).get("host"), ns.ns_addr)

            def clients(name):
                return cluster.stat(name, "clients") or 0
            bots = harness.start_bots(cluster, bots_count, 30,
                                      ["--verify-aoi", "--area", 60, "--speed", 3, "--calls-per-second", 0.5,
                                       "--settle-seconds", 4, "--login-spread-ms", 2000])
            try:
                harness.wait_for(lambda: clients(survivor) + clients(victim) == bots_count, 30,
                                 "every bot in the world")
                harness.wait_for(lambda: clients(victim) >= 3, 10, "%s to hold some players" % victim)
                time.sleep(3)  # every base backed up at least twice
                held = clients(victim)
                old_id = cluster.registry_id(victim)
                harness.log("%s (id %s) holds %d of %d clients; cutting it off" % (victim, old_id, held, bots_count))
                ns.cut()
                try:
                    harness.wait_for(lambda: (cluster.stat(survivor, "bases_restored") or 0) >= held, 20,
                                     "%s to restore the cut-off baseapp's players" % survivor)
                finally:
                    ns.heal()
                cluster.wait_rejoined(victim, old_id)
                harness.wait_for(lambda: clients(survivor) == bots_count, 30,
                                 "every player on %s, which restored the cut-off one's" % survivor)
                cellapps = cluster.names("cellapp")
                where = harness.reals_by_id(cluster.dump_states(cellapps))
                self.assertEqual(clients(victim), 0)
            finally:
                ns.heal()
                report = harness.finish_bots(bots)
            text = harness.assert_bots_verified(self, report, bots_count)
            self.assertFalse({k: v for k, v in where.items() if len(v) != 1}, "a real twice")
            self.assertEqual(report.get("recovery_failed"), 0, text)
            self.assertEqual(report.get("password_logins"), bots_count, text)
            victim_log = cluster.log(victim)
            self.assertIn("fenced: this baseapp's lease lapsed", victim_log)
            self.assertIn("rejoining the cluster as a new process", victim_log)
            for name in [survivor, victim] + cellapps:
                self.assertTrue(cluster.alive(name), "%s died" % name)


if __name__ == "__main__":
    unittest.main()
