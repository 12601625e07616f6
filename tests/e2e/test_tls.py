"""TLS and mutual TLS, end to end: certificates made with openssl for this
run (a CA, a server certificate for 127.0.0.1/localhost, client certificates
from that CA and from another), the real sortd with --tls_cert/--tls_key
(and --tls_client_ca), the Python client and sortctl (the C++ client).

Environment: SORTD_BIN, SORTCTL_BIN, PYTHONPATH with client/python.
"""
import os
import subprocess
import tempfile
import unittest

import grpc
import numpy as np

from sortd_client import Client, SortdError
from sortd_process import SortdProcess

SORTD = os.environ["SORTD_BIN"]
SORTCTL = os.environ["SORTCTL_BIN"]


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True)


def make_ca(dir_, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", name + ".key", "-out", name + ".pem", "-subj", "/CN=" + name, cwd=dir_)


def make_cert(dir_, name, ca, san):
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
            "-out", name + ".csr", "-subj", "/CN=" + name, cwd=dir_)
    with open(os.path.join(dir_, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\n" % san)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-days", "2", "-out", name + ".pem", "-extfile", name + ".ext",
            cwd=dir_)


class Tls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="sortd-tls-")
        d = cls.tmp.name
        make_ca(d, "ca")
        make_ca(d, "other-ca")
        make_cert(d, "server", "ca", "IP:127.0.0.1,DNS:localhost")
        make_cert(d, "client", "ca", "DNS:client")
        make_cert(d, "stranger", "other-ca", "DNS:stranger")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def server_flags(self):
        return ["--tls_cert=" + self.path("server.pem"), "--tls_key=" + self.path("server.key")]

    def credentials(self, client=None):
        if client is None:
            return grpc.ssl_channel_credentials(root_certificates=self.read("ca.pem"))
        return grpc.ssl_channel_credentials(root_certificates=self.read("ca.pem"),
                                            private_key=self.read(client + ".key"),
                                            certificate_chain=self.read(client + ".pem"))

    def sortctl(self, server, *args):
        return subprocess.run([SORTCTL] + list(args) + ["--target=" + server.target, "--timeout=10s"],
                              capture_output=True, text=True, timeout=60)

    def assert_sorts(self, server, credentials):
        keys = np.random.default_rng(4).integers(-1000, 1000, 5000).astype(np.int32)
        with Client(server.target, credentials=credentials, timeout=10) as c:
            self.assertEqual(c.health(), "SERVING")
            np.testing.assert_array_equal(c.sort(keys), np.sort(keys, kind="stable"))

    def assert_refused(self, server, credentials):
        with Client(server.target, credentials=credentials, timeout=5) as c:
            with self.assertRaises(SortdError) as cm:
                c.sort(np.array([2, 1], dtype=np.uint32))
            self.assertEqual(cm.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_tls_serves_tls_clients_and_refuses_plaintext(self):
        with SortdProcess(SORTD, *self.server_flags()) as server:
            self.assert_sorts(server, self.credentials())
            # Plaintext against a TLS port: no handshake, no call.
            self.assert_refused(server, None)
            # sortctl (the C++ client): with the CA it connects, without it not.
            ok = self.sortctl(server, "health", "--tls_root_certs=" + self.path("ca.pem"))
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertEqual(ok.stdout.strip(), "SERVING")
            plain = self.sortctl(server, "health")
            self.assertNotEqual(plain.returncode, 0, plain.stdout)
            # A CA that did not sign the server's certificate: refused.
            wrong = self.sortctl(server, "health", "--tls_root_certs=" + self.path("other-ca.pem"))
            self.assertNotEqual(wrong.returncode, 0, wrong.stdout)

    def test_mutual_tls_requires_a_client_certificate_from_the_ca(self):
        flags = self.server_flags() + ["--tls_client_ca=" + self.path("ca.pem")]
        with SortdProcess(SORTD, *flags) as server:
            self.assert_sorts(server, self.credentials("client"))
            self.assert_refused(server, self.credentials())             # no certificate
            self.assert_refused(server, self.credentials("stranger"))   # another CA's
            ok = self.sortctl(server, "health", "--tls_root_certs=" + self.path("ca.pem"),
                              "--tls_client_cert=" + self.path("client.pem"),
                              "--tls_client_key=" + self.path("client.key"))
            self.assertEqual(ok.returncode, 0, ok.stderr)
            anonymous = self.sortctl(server, "health", "--tls_root_certs=" + self.path("ca.pem"))
            self.assertNotEqual(anonymous.returncode, 0, anonymous.stdout)

    def test_bad_tls_flags_stop_the_server_with_a_message(self):
        cases = [
            (["--tls_cert=" + self.path("server.pem")], "tls_cert and tls_key must be set together"),
            (["--tls_cert=" + self.path("missing.pem"), "--tls_key=" + self.path("server.key")],
             "tls_cert: cannot read"),
            (["--tls_client_ca=" + self.path("ca.pem")], "tls_client_ca: needs tls_cert"),
            # A key that is not the certificate's: the listener cannot start.
            (["--tls_cert=" + self.path("server.pem"), "--tls_key=" + self.path("client.key")],
             "tls_key is not the key of tls_cert"),
        ]
        for flags, message in cases:
            with self.subTest(flags=flags):
                run = subprocess.run([SORTD, "--listen=127.0.0.1:0", "--metrics_listen="] + flags,
                                     capture_output=True, text=True, timeout=60)
                self.assertNotEqual(run.returncode, 0)
                self.assertIn(message, run.stderr + run.stdout)

    def test_client_refuses_a_client_certificate_without_tls(self):
        run = subprocess.run([SORTCTL, "health", "--target=127.0.0.1:1",
                              "--tls_client_cert=" + self.path("client.pem"),
                              "--tls_client_key=" + self.path("client.key")],
                             capture_output=True, text=True, timeout=30)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("need tls_root_certs", run.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
