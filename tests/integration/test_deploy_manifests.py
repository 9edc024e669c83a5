#!/usr/bin/env python3
"""test_deploy_manifests -- the deployment files agree with each other and
with the binaries they start.

Covers every manifest in deploy/k8s and the systemd units in deploy/systemd:
each container's ports are the ports its config sets (its ConfigMap's JSON,
then its --set arguments); the probes hit /readyz and /healthz on the admin
port; the grace period outlasts drain_timeout_ms; every ConfigMap key is a
real setting of that program (the key list is parsed from `--help`) and the
whole config passes the binary's own check (`--check`); processes listen on
the pod IP, never a wildcard; each baseapp advertises an address clients
outside the cluster reach (its node's IP from the downward API and a
hostPort on its client port that is the advertised port), never its pod
IP; the Services select the pods and ports they name; Redis is bound to its pod IP with appendonly on; the systemd units
reload with SIGHUP and wait longer than a drain. It starts no cluster: the
binaries run only with --help and --check. Needs python3-yaml.

Every failure names the file, the object and the field.
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

import yaml

import harness
import tessera_cluster

K8S_DIR = os.path.join(harness.SOURCE_DIR, "deploy", "k8s")
SYSTEMD_DIR = os.path.join(harness.SOURCE_DIR, "deploy", "systemd")
CONFIG_DIR = os.path.join(harness.SOURCE_DIR, "deploy", "config")

PROGRAMS = {"baseapp": harness.BASEAPP_BIN, "cellapp": harness.CELLAPP_BIN}

# The settings that make a process listen, with the container port name that
# must carry each port (names are the Services' targetPorts).
PORT_KEYS = {"internal_port": "internal", "admin_port": "admin", "client_port": "client", "websocket_port": "websocket"}
HOST_KEYS = ("internal_host", "admin_host", "client_host")
# Listening on these breaks "a process listens only on the addresses in its
# config" (wildcards) or cannot be reached by probes and peers (loopback).
FORBIDDEN_HOSTS = ("", "0.0.0.0", "::", "*", "127.0.0.1", "::1", "localhost")

# What the downward API's status.podIP stands for when the args are expanded.
SAMPLE_POD_IP = "10.244.1.7"
# ... and status.hostIP, the node's address.
SAMPLE_NODE_IP = "192.0.2.41"
DOWNWARD_SAMPLES = {"status.podIP": SAMPLE_POD_IP, "status.hostIP": SAMPLE_NODE_IP}

# Pod templates live in these kinds, at spec.template.
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")

# A --help or --check run finds its answer before anything starts.
QUICK_S = 10

# Flags that load and check a config without starting, most specific first.
CHECK_FLAGS = ("--check-config", "--check")

HELP_LINE = re.compile(r"^([a-z_][a-z0-9_]*) = (.*?)  # ")
ENV_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def rel(path):
    return os.path.relpath(path, harness.SOURCE_DIR)


def program_help(role):
    """{key: default value} parsed from `tessera-<role> --help`, and the text."""
    rc, out, err, _ = harness.run_with_timeout([PROGRAMS[role], "--help"], QUICK_S)
    if rc != 0:
        raise AssertionError("tessera-%s --help exited %s: %s" % (role, rc, err))
    keys = {}
    for line in out.splitlines():
        m = HELP_LINE.match(line)
        if m:
            text = m.group(2)
            try:
                keys[m.group(1)] = json.loads(text)
            except ValueError:
                keys[m.group(1)] = text
    if not keys:
        raise AssertionError("tessera-%s --help lists no 'key = value' lines:\n%s" % (role, out))
    return keys


def program_check_flag(role):
    """The flag that checks a config without starting, or None. A flag is
    probed with --help after it: an unknown one fails argument parsing
    before --help is honoured, so nothing ever starts."""
    for flag in CHECK_FLAGS:
        rc, _, _, _ = harness.run_with_timeout([PROGRAMS[role], flag, "--help"], QUICK_S)
        if rc == 0:
            return flag
    return None


def as_setting(default, text):
    """A --set value typed like the key's default, as the binary reads it."""
    if isinstance(default, bool):
        return text in ("true", "1")
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            return text
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            return text
    return text


class Manifest:
    """One YAML document of a file in deploy/k8s."""

    def __init__(self, path, index, doc):
        self.path = path
        self.index = index
        self.doc = doc
        self.kind = doc.get("kind", "?")
        self.name = (doc.get("metadata") or {}).get("name", "?")

    def where(self):
        return "%s: %s %s" % (rel(self.path), self.kind, self.name)


class Container:
    """A Tessera container of a workload, with its config resolved."""

    def __init__(self, manifest, pod_spec, spec, role):
        self.manifest = manifest
        self.pod_spec = pod_spec
        self.spec = spec
        self.role = role
        self.name = spec.get("name", "?")
        self.argv = list(spec.get("command") or []) + list(spec.get("args") or [])
        self.config_path = None
        self.sets = []          # (key, raw value as written, value after $(VAR) expansion)
        self.arg_errors = []
        self.configmap = None   # Manifest of the ConfigMap the config file comes from
        self.config_key = None  # its data key
        self.config_text = None
        self.config = None      # the parsed JSON
        self.config_error = None

    def where(self, field=None):
        text = "%s container %s" % (self.manifest.where(), self.name)
        return text + (": " + field if field else "")

    def env(self):
        """{name: value} of the container's env; status.podIP stands for
        SAMPLE_POD_IP, status.hostIP for SAMPLE_NODE_IP."""
        values = {}
        for entry in self.spec.get("env") or []:
            if "value" in entry:
                values[entry["name"]] = str(entry["value"])
            else:
                field = ((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
                values[entry["name"]] = DOWNWARD_SAMPLES.get(field, "<%s>" % field)
        return values

    def expand(self, text):
        """The kubelet's $(VAR) expansion; an undefined VAR stays literal, as
        the kubelet leaves it."""
        env = self.env()

        def sub(m):
            if m.group(0) == "$$":
                return "$"
            return env.get(m.group(1), m.group(0))

        return ENV_REF.sub(sub, text)

    def parse_argv(self):
        args = self.argv[1:]
        i = 0
        while i < len(args):
            arg = args[i]
            if arg in ("--config", "--set"):
                if i + 1 >= len(args):
                    self.arg_errors.append("%s has no value" % arg)
                    break
                value = args[i + 1]
                i += 2
            elif arg.startswith("--config=") or arg.startswith("--set="):
                arg, value = arg.split("=", 1)
                i += 1
            else:
                self.arg_errors.append("argument '%s' is neither --config FILE nor --set key=value" % arg)
                i += 1
                continue
            if arg == "--config":
                self.config_path = value
            elif "=" not in value:
                self.arg_errors.append("--set '%s' is not key=value" % value)
            else:
                key, raw = value.split("=", 1)
                self.sets.append((key, raw, self.expand(raw)))

    def resolve_config(self, configmaps):
        """Finds the ConfigMap and data key behind --config through the
        container's volumeMounts and the pod's volumes."""
        if not self.config_path:
            self.config_error = "no --config FILE in command/args %r" % self.argv
            return
        volumes = {v.get("name"): v for v in self.pod_spec.get("volumes") or []}
        for mount in self.spec.get("volumeMounts") or []:
            mount_path = mount.get("mountPath", "").rstrip("/")
            if mount.get("subPath"):
                if self.config_path != mount_path:
                    continue
                file_in_volume = mount["subPath"]
            elif self.config_path.startswith(mount_path + "/"):
                file_in_volume = self.config_path[len(mount_path) + 1:]
            else:
                continue
            volume = volumes.get(mount.get("name"))
            if volume is None or "configMap" not in volume:
                self.config_error = "--config %s is on volume '%s', which is not a configMap volume" % (
                    self.config_path, mount.get("name"))
                return
            cm_name = volume["configMap"].get("name")
            key = file_in_volume
            for item in volume["configMap"].get("items") or []:
                if item.get("path") == file_in_volume:
                    key = item.get("key")
            cm = configmaps.get(cm_name)
            if cm is None:
                self.config_error = "--config %s comes from ConfigMap '%s', which no manifest in %s defines" % (
                    self.config_path, cm_name, rel(K8S_DIR))
                return
            data = cm.doc.get("data") or {}
            if key not in data:
                self.config_error = "--config %s needs key '%s' in %s data, which has %s" % (
                    self.config_path, key, cm.where(), sorted(data))
                return
            self.configmap, self.config_key, self.config_text = cm, key, data[key]
            try:
                self.config = json.loads(self.config_text)
            except ValueError as e:
                self.config_error = "%s data.%s is not valid JSON: %s" % (cm.where(), key, e)
                return
            if not isinstance(self.config, dict):
                self.config_error = "%s data.%s is not a JSON object" % (cm.where(), key)
            return
        self.config_error = "--config %s is on no volumeMount of the container" % self.config_path

    def config_where(self):
        return "%s data.%s" % (self.configmap.where(), self.config_key)

    def effective(self, defaults):
        """The settings the process runs with: defaults, the JSON, then --set,
        and for each key where its value was set."""
        values = dict(defaults)
        source = {k: "default (tessera-%s --help)" % self.role for k in defaults}
        for key, value in (self.config or {}).items():
            values[key] = value
            source[key] = self.config_where() + " key " + key
        for key, raw, expanded in self.sets:
            values[key] = as_setting(defaults.get(key), expanded)
            source[key] = self.where("--set %s=%s" % (key, raw))
        return values, source

    def container_ports(self):
        return {p.get("name"): p.get("containerPort") for p in self.spec.get("ports") or []}

    def host_ports(self):
        return {p.get("name"): p.get("hostPort") for p in self.spec.get("ports") or []}


def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def load_manifests():
    files = sorted(os.path.join(K8S_DIR, f) for f in os.listdir(K8S_DIR) if f.endswith((".yaml", ".yml")))
    if not files:
        raise AssertionError("no *.yaml in %s" % rel(K8S_DIR))
    manifests = []
    for path in files:
        with open(path) as f:
            try:
                docs = list(yaml.safe_load_all(f))
            except yaml.YAMLError as e:
                raise AssertionError("%s is not valid YAML: %s" % (rel(path), e))
        for index, doc in enumerate(docs):
            if doc is None:
                continue
            if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
                raise AssertionError("%s: document %d has no kind/apiVersion" % (rel(path), index + 1))
            manifests.append(Manifest(path, index, doc))
    return manifests


def read_unit(path):
    """{key: [values]} of a systemd unit's [Service] section."""
    values = {}
    section = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "Service" and "=" in line:
                key, value = line.split("=", 1)
                values.setdefault(key.strip(), []).append(value.strip())
    return values


class DeployManifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binaries(*PROGRAMS.values())
        cls.defaults = {role: program_help(role) for role in PROGRAMS}
        cls.check_flags = {role: program_check_flag(role) for role in PROGRAMS}
        cls.manifests = load_manifests()
        cls.configmaps = {m.name: m for m in cls.manifests if m.kind == "ConfigMap"}
        cls.services = [m for m in cls.manifests if m.kind == "Service"]
        cls.workloads = [m for m in cls.manifests if m.kind in WORKLOAD_KINDS]
        cls.containers = []
        cls.other_containers = []  # (workload, pod spec, container spec) of non-Tessera containers
        for w in cls.workloads:
            pod_spec = ((w.doc.get("spec") or {}).get("template") or {}).get("spec") or {}
            for spec in pod_spec.get("containers") or []:
                argv = list(spec.get("command") or []) + list(spec.get("args") or [])
                program = os.path.basename(argv[0]) if argv else ""
                role = program[len("tessera-"):] if program.startswith("tessera-") else None
                if role in PROGRAMS:
                    c = Container(w, pod_spec, spec, role)
                    c.parse_argv()
                    c.resolve_config(cls.configmaps)
                    cls.containers.append(c)
                else:
                    cls.other_containers.append((w, pod_spec, spec))

    def tessera_containers(self):
        """Every Tessera container; fails unless both programs have one."""
        roles = {c.role for c in self.containers}
        for role in PROGRAMS:
            self.assertIn(role, roles, "no workload in %s runs tessera-%s (its command must name the binary)" % (
                rel(K8S_DIR), role))
        return self.containers

    def require_config(self, c):
        """Fails (in the caller's subTest) unless c's args and config resolved."""
        if c.arg_errors:
            self.fail("%s: %s" % (c.where("command/args"), "; ".join(c.arg_errors)))
        if c.config_error:
            self.fail("%s: %s" % (c.where("--config"), c.config_error))

    def settings(self, c):
        return c.effective(self.defaults[c.role])

    def pod_labels(self, workload):
        return ((workload.doc["spec"].get("template") or {}).get("metadata") or {}).get("labels") or {}

    # -- config keys and values ---------------------------------------------

    def test_config_keys_are_settings(self):
        for c in self.tessera_containers():
            with self.subTest(container=c.where()):
                self.require_config(c)
                known = self.defaults[c.role]
                for key in c.config:
                    if key not in known:
                        self.fail("%s: key '%s' is not a setting of tessera-%s (see its --help)" % (
                            c.config_where(), key, c.role))
                for key, raw, _ in c.sets:
                    if key not in known:
                        self.fail("%s: '%s' is not a setting of tessera-%s (see its --help)" % (
                            c.where("--set %s=%s" % (key, raw)), key, c.role))

    def test_config_passes_the_binary_check(self):
        for c in self.tessera_containers():
            with self.subTest(container=c.where()):
                self.require_config(c)
                flag = self.check_flags[c.role]
                if flag is None:
                    self.skipTest("tessera-%s has no config check flag (tried %s): keys checked only" % (
                        c.role, ", ".join(CHECK_FLAGS)))
                for key, raw, expanded in c.sets:
                    self.assertNotIn("$(", expanded, "%s: $(...) names no env var of the container" % c.where(
                        "--set %s=%s" % (key, raw)))
                with tempfile.TemporaryDirectory(prefix="tessera-manifest-") as tmp:
                    path = os.path.join(tmp, c.config_key)
                    with open(path, "w") as f:
                        f.write(c.config_text)
                    argv = [PROGRAMS[c.role], "--config", path]
                    for key, _, expanded in c.sets:
                        argv += ["--set", "%s=%s" % (key, expanded)]
                    # The baseapp's TLS files (a Secret's mount) are loaded
                    # by the check: stand-ins made here.
                    if c.role == "baseapp":
                        argv += harness.tls_stand_in_sets()
                    # So are the secrets' files (Secret mounts) and the game
                    # (a ConfigMap, the image's module): stand-ins.
                    argv += harness.secret_stand_in_sets() + harness.game_stand_in_sets()
                    argv.append(flag)
                    rc, out, err, _ = harness.run_with_timeout(argv, QUICK_S)
                self.assertEqual(rc, 0, "%s with the container's --set args fails tessera-%s %s (exit %s):\n%s%s" % (
                    c.config_where(), c.role, flag, rc, out, err))

    # -- listening ----------------------------------------------------------

    def test_hosts_are_the_pod_ip(self):
        for c in self.tessera_containers():
            with self.subTest(container=c.where()):
                self.require_config(c)
                values, source = self.settings(c)
                env = {e.get("name"): e for e in c.spec.get("env") or []}
                for key in HOST_KEYS:
                    if key not in self.defaults[c.role]:
                        continue
                    self.assertNotIn(values[key], FORBIDDEN_HOSTS, "%s: %s is '%s'; it must be the pod IP, given as "
                                     "--set %s=$(POD_IP)" % (source[key], key, values[key], key))
                    self.assertEqual(values[key], SAMPLE_POD_IP,
                                     "%s: %s must be the pod IP (--set %s=$(POD_IP) with POD_IP from fieldRef "
                                     "status.podIP), not '%s'" % (source[key], key, key, values[key]))
                ref = (((env.get("POD_IP") or {}).get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
                self.assertEqual(ref, "status.podIP", c.where("env POD_IP.valueFrom.fieldRef.fieldPath"))

    def test_baseapps_advertise_their_node_address(self):
        """A LoginRedirect, a handover and a login reply's other baseapps
        name one baseapp's public address; a pod IP is no use to a client
        outside the cluster."""
        for c in self.tessera_containers():
            if c.role != "baseapp":
                continue
            with self.subTest(container=c.where()):
                self.require_config(c)
                values, source = self.settings(c)
                for key in ("client_public_host", "client_public_port"):
                    self.assertIn(key, values, "tessera-baseapp --help lists no %s" % key)
                host = values["client_public_host"] or values["client_host"]
                port = values["client_public_port"] or values["client_port"]
                self.assertNotIn(host, FORBIDDEN_HOSTS, "%s: client_public_host is '%s'" % (
                    source["client_public_host"], host))
                self.assertNotEqual(host, SAMPLE_POD_IP, "%s: clients would be sent to the pod IP, which they "
                                    "cannot reach from outside the cluster; give client_public_host an address "
                                    "they reach (--set client_public_host=$(NODE_IP), NODE_IP from fieldRef "
                                    "status.hostIP)" % source["client_public_host"])
                self.assertEqual(host, SAMPLE_NODE_IP, "%s: client_public_host is '%s', not the node's IP "
                                 "(status.hostIP)" % (source["client_public_host"], host))
                # The node forwards the advertised port to the client port.
                self.assertEqual(c.host_ports().get("client"), port, "%s: hostPort is %s but clients are sent to "
                                 "port %s (client_public_port, from %s)" % (
                                     c.where("ports[name=client].hostPort"), c.host_ports().get("client"), port,
                                     source["client_public_port"]))

    def test_container_ports_are_the_configured_ports(self):
        for c in self.tessera_containers():
            with self.subTest(container=c.where()):
                self.require_config(c)
                values, source = self.settings(c)
                ports = c.container_ports()
                expected = {}
                for key, port_name in PORT_KEYS.items():
                    if key not in self.defaults[c.role]:
                        continue
                    port = values[key]
                    self.assertIsInstance(port, int, "%s: %s is not a number" % (source[key], key))
                    self.assertGreater(port, 0, "%s: %s is %s; Kubernetes needs a fixed port (probes, Services, "
                                       "containerPort)" % (source[key], key, port))
                    expected[port_name] = port
                    self.assertIn(port_name, ports, "%s: no port named '%s' for %s %d (from %s)" % (
                        c.where("ports"), port_name, key, port, source[key]))
                    self.assertEqual(ports[port_name], port, "%s: containerPort is %s but %s is %d (from %s)" % (
                        c.where("ports[name=%s]" % port_name), ports[port_name], key, port, source[key]))
                for name, number in ports.items():
                    self.assertIn(name, expected, "%s: port '%s' (%s) is none of the configured ports %s" % (
                        c.where("ports"), name, number, expected))

    def test_probes_hit_the_admin_port(self):
        for c in self.tessera_containers():
            with self.subTest(container=c.where()):
                self.require_config(c)
                values, source = self.settings(c)
                admin = values["admin_port"]
                ports = c.container_ports()
                for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
                    get = (c.spec.get(probe) or {}).get("httpGet")
                    self.assertIsNotNone(get, "%s: missing (an httpGet on %s)" % (c.where(probe + ".httpGet"), path))
                    self.assertEqual(get.get("path"), path, c.where(probe + ".httpGet.path"))
                    port = get.get("port")
                    number = ports.get(port) if isinstance(port, str) else port
                    self.assertEqual(number, admin, "%s is %r (%s), but admin_port is %s (from %s)" % (
                        c.where(probe + ".httpGet.port"), port, number, admin, source["admin_port"]))
                    # The kubelet probes the pod IP unless told otherwise; the
                    # admin listener is bound to nothing else.
                    self.assertNotIn("host", get, "%s: set; the admin listener is on the pod IP, the kubelet's "
                                     "default" % c.where(probe + ".httpGet.host"))
                    self.assertIn(get.get("scheme", "HTTP"), ("HTTP",), c.where(probe + ".httpGet.scheme"))

    # -- stopping -----------------------------------------------------------

    def test_grace_period_outlasts_the_drain(self):
        for c in self.tessera_containers():
            with self.subTest(container=c.where()):
                self.require_config(c)
                grace = c.pod_spec.get("terminationGracePeriodSeconds")
                self.assertIsNotNone(grace, "%s spec.template.spec.terminationGracePeriodSeconds: not set (state it "
                                     "next to the drain, even at the default 30 s)" % c.manifest.where())
                if "drain_timeout_ms" not in self.defaults[c.role]:
                    self.skipTest("tessera-%s has no drain_timeout_ms setting yet (its --help); once it has, its "
                                  "config must set one under terminationGracePeriodSeconds" % c.role)
                values, source = self.settings(c)
                drain_s = values["drain_timeout_ms"] / 1000.0
                self.assertGreater(grace, drain_s,
                                   "%s spec.template.spec.terminationGracePeriodSeconds is %s s, not more than "
                                   "drain_timeout_ms %s ms (from %s): SIGKILL would cut the drain short" % (
                                       c.manifest.where(), grace, values["drain_timeout_ms"],
                                       source["drain_timeout_ms"]))

    # -- Services -----------------------------------------------------------

    def selected_workloads(self, service):
        selector = (service.doc.get("spec") or {}).get("selector") or {}
        return [w for w in self.workloads if labels_match(selector, self.pod_labels(w))]

    def test_workload_selectors_match_their_pods(self):
        for w in self.workloads:
            with self.subTest(workload=w.where()):
                selector = ((w.doc["spec"].get("selector") or {}).get("matchLabels")) or {}
                self.assertTrue(labels_match(selector, self.pod_labels(w)),
                                "%s: spec.selector.matchLabels %s does not match spec.template.metadata.labels %s" % (
                                    w.where(), selector, self.pod_labels(w)))

    def test_services_reach_ports_of_their_pods(self):
        for s in self.services:
            with self.subTest(service=s.where()):
                selected = self.selected_workloads(s)
                self.assertTrue(selected, "%s: spec.selector %s selects no pod template in %s" % (
                    s.where(), (s.doc.get("spec") or {}).get("selector"), rel(K8S_DIR)))
                for port in s.doc["spec"].get("ports") or []:
                    target = port.get("targetPort", port.get("port"))
                    for w in selected:
                        pod_spec = w.doc["spec"]["template"]["spec"]
                        found = [p for ct in pod_spec.get("containers") or [] for p in ct.get("ports") or []
                                 if p.get("name") == target or p.get("containerPort") == target]
                        self.assertTrue(found, "%s: spec.ports[%s].targetPort %r is no container port of %s" % (
                            s.where(), port.get("name"), target, w.where()))

    def test_headless_service_selects_the_cellapps(self):
        cellapp_workloads = {c.manifest.name for c in self.containers if c.role == "cellapp"}
        headless = [s for s in self.services if (s.doc.get("spec") or {}).get("clusterIP") == "None"]
        self.assertTrue(headless, "no Service in %s has spec.clusterIP: None (the cellapps' headless Service)" %
                        rel(K8S_DIR))
        selecting = []
        for s in headless:
            names = {w.name for w in self.selected_workloads(s)}
            if names & cellapp_workloads:
                selecting.append(s)
                self.assertEqual(names, names & cellapp_workloads, "%s: spec.selector also selects %s" % (
                    s.where(), sorted(names - cellapp_workloads)))
        self.assertTrue(selecting, "no headless Service's spec.selector selects the cellapp pods (%s): %s" % (
            sorted(cellapp_workloads), [s.where() for s in headless]))

    def test_clients_have_a_service(self):
        for c in self.tessera_containers():
            if c.role != "baseapp":
                continue
            with self.subTest(container=c.where()):
                self.require_config(c)
                values, _ = self.settings(c)
                ok = [s for s in self.services if c.manifest in self.selected_workloads(s)
                      and any(p.get("targetPort") in ("client", values["client_port"])
                              for p in s.doc["spec"].get("ports") or [])]
                self.assertTrue(ok, "%s: no Service sends clients to client_port %s" % (c.manifest.where(),
                                                                                        values["client_port"]))

    # -- Redis --------------------------------------------------------------

    def test_processes_reach_redis_through_its_service(self):
        by_name = {s.name: s for s in self.services}
        for c in self.tessera_containers():
            with self.subTest(container=c.where()):
                self.require_config(c)
                values, source = self.settings(c)
                service = by_name.get(values["redis_host"])
                self.assertIsNotNone(service, "%s: redis_host '%s' names no Service in %s (have %s)" % (
                    source["redis_host"], values["redis_host"], rel(K8S_DIR), sorted(by_name)))
                ports = [p.get("port") for p in service.doc["spec"].get("ports") or []]
                self.assertIn(values["redis_port"], ports, "%s: redis_port %s is not a port of %s (%s)" % (
                    source["redis_port"], values["redis_port"], service.where(), ports))

    def test_admin_token_comes_from_a_secret(self):
        """admin_token_file is set and lies in a mounted Secret volume whose
        mode no other user may read (the binaries refuse such a file)."""
        for c in self.tessera_containers():
            with self.subTest(container=c.where()):
                self.require_config(c)
                values, source = self.settings(c)
                path = values.get("admin_token_file") or ""
                self.assertTrue(path, "%s: admin_token_file is not set" % c.where())
                volumes = {v.get("name"): v for v in c.pod_spec.get("volumes") or []}
                mounts = [m for m in c.spec.get("volumeMounts") or []
                          if path.startswith(m.get("mountPath", "").rstrip("/") + "/")]
                self.assertTrue(mounts, "%s: admin_token_file %s is in no volume mount" % (source["admin_token_file"],
                                                                                         path))
                secret = (volumes.get(mounts[0].get("name")) or {}).get("secret")
                self.assertIsNotNone(secret, "%s: %s is not a Secret volume" % (c.where(), mounts[0].get("name")))
                mode = secret.get("defaultMode", 0o644)
                self.assertEqual(mode & 0o004, 0, "%s: the Secret's defaultMode %o lets every user read it" % (
                    c.where(), mode))

    def test_network_policies_fence_admin_and_redis(self):
        """Every Tessera pod and Redis is selected by a NetworkPolicy, and none
        lets everyone reach the admin or Redis port."""
        policies = [m for m in self.manifests if m.kind == "NetworkPolicy"]
        self.assertTrue(policies, "no NetworkPolicy in %s" % rel(K8S_DIR))
        pods = [(w, self.pod_labels(w)) for w in self.workloads]
        for w, labels in pods:
            with self.subTest(workload=w.where()):
                mine = [p for p in policies if all(labels.get(k) == v for k, v in
                                                   ((p.doc["spec"].get("podSelector") or {}).get("matchLabels")
                                                    or {}).items())
                        and "Ingress" in (p.doc["spec"].get("policyTypes") or ["Ingress"])]
                self.assertTrue(mine, "%s: no NetworkPolicy selects its pods" % w.where())
                for policy in mine:
                    for rule in policy.doc["spec"].get("ingress") or []:
                        ports = [str(p.get("port")) for p in rule.get("ports") or []]
                        for fenced in ("admin", "20080", "redis", "6379"):
                            if not rule.get("from") and (fenced in ports or not ports):
                                self.fail("%s lets everyone reach port %s" % (policy.where(), fenced))

    @staticmethod
    def secret_mount(pod_spec, spec, path):
        """(Secret name, its volume's defaultMode) of the Secret volume that
        container `spec` mounts over `path`, or None."""
        volumes = {v.get("name"): v for v in pod_spec.get("volumes") or []}
        for mount in spec.get("volumeMounts") or []:
            if path.startswith(mount.get("mountPath", "").rstrip("/") + "/"):
                secret = (volumes.get(mount.get("name")) or {}).get("secret")
                if secret:
                    return secret.get("secretName"), secret.get("defaultMode", 0o644)
        return None

    def redis_containers(self):
        redis = [(w, pod_spec, spec) for w, pod_spec, spec in self.other_containers
                 if "redis-server" in " ".join(list(spec.get("command") or []) + list(spec.get("args") or []))]
        self.assertTrue(redis, "no container in %s runs redis-server" % rel(K8S_DIR))
        return redis

    def test_redis_password_comes_from_one_secret(self):
        """Redis wants a password, read from a file of a mounted Secret, and
        every Tessera container reads the same Secret's file
        (redis_password_file). The password is on no command line: no
        --requirepass and no redis_password in any argv or config."""
        secrets = set()
        for w, pod_spec, spec in self.redis_containers():
            where = "%s container %s" % (w.where(), spec.get("name"))
            argv = list(spec.get("command") or []) + list(spec.get("args") or [])
            self.assertNotIn("--requirepass", argv, "%s: the password is on redis-server's command line" % where)
            script = " ".join(argv)
            self.assertIn("requirepass", script, "%s: Redis is given no password (requirepass)" % where)
            files = [m.get("mountPath", "").rstrip("/") for m in spec.get("volumeMounts") or []
                     if self.secret_mount(pod_spec, spec, m.get("mountPath", "").rstrip("/") + "/x")]
            read = [f for f in files if f + "/" in script]
            self.assertTrue(read, "%s: requirepass is not read from a mounted Secret" % where)
            name, mode = self.secret_mount(pod_spec, spec, read[0] + "/x")
            self.assertEqual(mode & 0o004, 0, "%s: the Secret's defaultMode %o lets every user read it" % (where, mode))
            secrets.add(name)
        for c in self.tessera_containers():
            with self.subTest(container=c.where()):
                self.require_config(c)
                values, source = self.settings(c)
                self.assertFalse(values.get("redis_password"), "%s: redis_password is given in the clear; use "
                                 "redis_password_file" % source.get("redis_password", c.where()))
                path = values.get("redis_password_file") or ""
                self.assertTrue(path, "%s: redis_password_file is not set" % c.where())
                found = self.secret_mount(c.pod_spec, c.spec, path)
                self.assertIsNotNone(found, "%s: redis_password_file %s is in no Secret volume mount" % (
                    source["redis_password_file"], path))
                self.assertIn(found[0], secrets, "%s: redis_password_file is not from Redis's Secret %s" % (
                    c.where(), sorted(secrets)))
                self.assertEqual(found[1] & 0o004, 0, "%s: the Secret's defaultMode %o lets every user read it" % (
                    c.where(), found[1]))

    def test_redis_command_reads_its_password(self):
        """The Redis container's command, run here (its mounts mapped to
        scratch directories, POD_IP to 127.0.0.1, a free port): a client
        without the password is refused, one with it is answered, and the
        password is not in the server's command line."""
        password = "k8s-stand-in-password-0123456789"
        for w, pod_spec, spec in self.redis_containers():
            where = "%s container %s" % (w.where(), spec.get("name"))
            with tempfile.TemporaryDirectory(prefix="tessera-redis-manifest-") as tmp:
                remap = {}
                for i, m in enumerate(spec.get("volumeMounts") or []):
                    local = os.path.join(tmp, "mount%d" % i)
                    os.makedirs(local)
                    remap[m["mountPath"].rstrip("/")] = local
                    if self.secret_mount(pod_spec, spec, m["mountPath"].rstrip("/") + "/x"):
                        with open(os.path.join(local, "password"), "w") as f:
                            f.write(password)
                        os.chmod(os.path.join(local, "password"), 0o440)
                bin_dir = os.path.join(tmp, "bin")
                os.makedirs(bin_dir)
                os.symlink(tessera_cluster.find_redis_server(), os.path.join(bin_dir, "redis-server"))
                (port,) = harness.free_ports(1)

                def local(text):
                    for mount in sorted(remap, key=len, reverse=True):
                        text = text.replace(mount + "/", remap[mount] + "/").replace(mount + " ", remap[mount] + " ")
                        if text == mount:
                            text = remap[mount]
                    return text.replace("$(POD_IP)", "127.0.0.1")
                args = [local(a) for a in spec.get("args") or []]
                args[args.index("--port") + 1] = str(port)
                argv = [local(a) for a in spec.get("command") or []] + args
                env = dict(os.environ, PATH=bin_dir + ":" + os.environ.get("PATH", ""))
                proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
                try:
                    def answer(auth):
                        client = tessera_cluster._Redis(host="127.0.0.1", port=port, password=auth,
                                                        socket_timeout=2, socket_connect_timeout=2)
                        try:
                            return client.ping()
                        finally:
                            client.close()
                    harness.wait_for(lambda: self.refused(answer, None), 10, where + ": Redis to start")
                    self.assertTrue(answer(password), where + ": Redis refused its own Secret's password")
                    with open("/proc/%d/cmdline" % proc.pid, "rb") as f:
                        self.assertNotIn(password.encode(), f.read(), where + ": the password is on a command line")
                finally:
                    proc.kill()
                    proc.wait()

    @staticmethod
    def refused(answer, auth):
        """True once Redis answers and refuses a client without AUTH."""
        try:
            answer(auth)
        except harness.RedisError as e:
            return "NOAUTH" in str(e) or "Authentication" in str(e)
        except OSError:
            return False
        return False

    def test_redis_is_bound_to_its_pod_ip_with_appendonly(self):
        redis = [(w, pod_spec, spec) for w, pod_spec, spec in self.other_containers
                 if "redis-server" in " ".join(list(spec.get("command") or []) + list(spec.get("args") or []))]
        self.assertTrue(redis, "no container in %s runs redis-server" % rel(K8S_DIR))
        for w, _, spec in redis:
            where = "%s container %s" % (w.where(), spec.get("name"))
            argv = list(spec.get("command") or []) + list(spec.get("args") or [])
            env = {e.get("name"): e for e in spec.get("env") or []}
            self.assertIn("--bind", argv, where + ": command/args has no --bind")
            bind = argv[argv.index("--bind") + 1] if argv.index("--bind") + 1 < len(argv) else ""
            var = re.fullmatch(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", bind)
            self.assertIsNotNone(var, "%s: --bind %r is not the pod IP $(VAR)" % (where, bind))
            ref = (((env.get(var.group(1)) or {}).get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
            self.assertEqual(ref, "status.podIP", "%s: env %s.valueFrom.fieldRef.fieldPath" % (where, var.group(1)))
            self.assertIn("--appendonly", argv, where + ": command/args has no --appendonly")
            self.assertEqual(argv[argv.index("--appendonly") + 1], "yes", where + ": --appendonly")

    # -- resources ----------------------------------------------------------

    def test_containers_have_requests_and_limits(self):
        every = [(c.manifest, c.spec, c.role) for c in self.containers]
        every += [(w, spec, None) for w, _, spec in self.other_containers]
        for w, spec, role in every:
            where = "%s container %s" % (w.where(), spec.get("name"))
            with self.subTest(container=where):
                resources = spec.get("resources") or {}
                for kind in ("requests", "limits"):
                    for what in ("cpu", "memory"):
                        self.assertIn(what, resources.get(kind) or {}, "%s: resources.%s.%s is not set" % (
                            where, kind, what))
                if role == "cellapp":
                    # One core each: a cellapp's loop runs on one thread.
                    for kind in ("requests", "limits"):
                        self.assertIn(str(resources[kind]["cpu"]), ("1", "1000m"), "%s: resources.%s.cpu must be "
                                      "one core" % (where, kind))

    # -- systemd ------------------------------------------------------------

    def test_systemd_units_reload_and_wait_for_the_drain(self):
        for role in PROGRAMS:
            path = os.path.join(SYSTEMD_DIR, "tessera-%s@.service" % role)
            with self.subTest(unit=rel(path)):
                self.assertTrue(os.path.exists(path), "%s is missing" % rel(path))
                unit = read_unit(path)
                reload_ = unit.get("ExecReload", [""])[-1]
                self.assertRegex(reload_, r"kill -HUP \$MAINPID$", "%s: [Service] ExecReload" % rel(path))
                self.assertEqual(unit.get("KillSignal", [""])[-1], "SIGTERM", "%s: [Service] KillSignal" % rel(path))
                stop = unit.get("TimeoutStopSec", ["0"])[-1]
                self.assertRegex(stop, r"^\d+$", "%s: [Service] TimeoutStopSec is not whole seconds" % rel(path))
                self.assertGreater(int(stop), 60, "%s: [Service] TimeoutStopSec" % rel(path))
                if "drain_timeout_ms" in self.defaults[role]:
                    drain = self.defaults[role]["drain_timeout_ms"]
                    config = os.path.join(CONFIG_DIR, "%s.json" % role)
                    with open(config) as f:
                        drain = json.load(f).get("drain_timeout_ms", drain)
                    self.assertGreater(int(stop), drain / 1000.0, "%s: [Service] TimeoutStopSec %s is not more than "
                                       "drain_timeout_ms %s in %s" % (rel(path), stop, drain, rel(config)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
