#!/usr/bin/env python3
"""test_tls -- the client port speaking TLS 1.3.

  - a client that trusts the cluster's certificate and expects its name
    completes the handshake and speaks the usual protocol (Python's ssl
    module: only TLS 1.3 is offered and accepted);
  - bots over TLS log in, walk, see each other exactly as over plaintext;
  - a client that does not trust the certificate, or expects another name,
    refuses it (bots count connect_failed; nothing gets in);
  - a plaintext client on the TLS port is dropped at its first bytes, and
    the baseapp keeps serving everyone else;
  - a certificate that does not match its key stops the baseapp at start
    with a clear error, and --check says so too."""
import json
import os
import shutil
import socket
import ssl
import tempfile
import unittest

import harness
from harness import frame, msg_hello

NAME = "tessera.test"


class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        harness.require_binaries(harness.BASEAPP_BIN, harness.CELLAPP_BIN, harness.BOTS_BIN)
        if not shutil.which("openssl"):
            raise unittest.SkipTest("openssl is not installed (scripts/deps installs it)")
        cls.keys = tempfile.mkdtemp(prefix="tessera-tls-")
        cls.certificate, cls.key = harness.make_tls_certificate(cls.keys, "cluster", NAME)
        cls.stranger, cls.stranger_key = harness.make_tls_certificate(cls.keys, "stranger", NAME)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.keys, ignore_errors=True)

    def settings(self):
        return ["baseapp.client_tls_certificate_file=" + self.certificate,
                "baseapp.client_tls_key_file=" + self.key]

    def tls_socket(self, addr, ca, server_name=NAME):
        context = ssl.create_default_context(cafile=ca)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        raw = socket.create_connection(addr, timeout=5)
        return context.wrap_socket(raw, server_hostname=server_name)

    def test_clients_over_tls(self):
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=self.settings()) as cluster:
            addr = cluster.baseapps[0]
            # The usual protocol, inside TLS 1.3.
            s = self.tls_socket(addr, self.certificate)
            self.assertEqual(s.version(), "TLSv1.3")
            s.sendall(frame(msg_hello()))
            self.assertEqual(harness.read_until(s, {"hello", "error"})["kind"], "hello")
            s.sendall(frame(harness.msg_login("tls-player", "pw")))
            reply = harness.read_until(s, {"login_reply", "error"}, timeout=10)
            self.assertEqual(reply["kind"], "login_reply", reply)
            s.close()

            # Bots: the whole game over TLS.
            report = harness.run_bots(cluster, 20, 8, ["--verify-aoi", "--area", "40", "--tls-name", NAME,
                                                        "--tls-ca", self.certificate])
            harness.assert_bots_verified(self, report, 20)

            # A certificate the client does not trust, and a name it does
            # not expect: refused by the client.
            with self.assertRaises(ssl.SSLCertVerificationError):
                self.tls_socket(addr, self.stranger)
            with self.assertRaises(ssl.SSLCertVerificationError):
                self.tls_socket(addr, self.certificate, server_name="elsewhere.test")
            for args in (["--tls-name", NAME, "--tls-ca", self.stranger],
                         ["--tls-name", "elsewhere.test", "--tls-ca", self.certificate]):
                report = harness.run_bots(cluster, 3, 2, args)
                self.assertEqual(report.get("logged_in"), 0, report)
                self.assertEqual(report.get("error_reasons", {}).get("connect_failed"), 3, report)

            # Plaintext on the TLS port: dropped at its first bytes; the
            # baseapp serves on.
            p = harness.connect(addr)
            p.sendall(frame(msg_hello()))
            try:
                got = harness.read_frame(p, timeout=5)
            except (harness.Closed, OSError):
                got = None
            p.close()
            self.assertIsNone(got, "a plaintext client got an answer on the TLS port")
            harness.wait_for(lambda: "TLS: " in cluster.log("baseapp-1"), 5, "the TLS refusal in the log")
            s = self.tls_socket(addr, self.certificate)
            s.sendall(frame(msg_hello()))
            self.assertEqual(harness.read_until(s, {"hello", "error"})["kind"], "hello")
            s.close()
            self.assertTrue(cluster.all_alive())

    def test_a_key_that_does_not_match_stops_the_start(self):
        with harness.Cluster(baseapps=1, cellapps=1, extra_set=self.settings()) as cluster:
            with open(os.path.join(cluster.dir, "conf", "baseapp-1.json")) as f:
                config = json.load(f)
            config.update({"client_port": 0, "admin_port": 0, "internal_port": 0, "client_tls_key_file": self.stranger_key})
            path = os.path.join(self.keys, "mismatched.json")
            with open(path, "w") as f:
                json.dump(config, f)
            for extra in ([], ["--check"]):
                rc, _out, err, _took = harness.run_with_timeout([harness.BASEAPP_BIN, "--config", path] + extra, 20)
                self.assertIsNotNone(rc, "the baseapp did not stop")
                self.assertNotEqual(rc, 0, err)
                self.assertIn("does not match the certificate", err)
                self.assertEqual(harness.sanitizer_report(err), "", err)
            self.assertTrue(cluster.all_alive())


if __name__ == "__main__":
    unittest.main()
