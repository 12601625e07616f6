"""End-to-end: same-host regions through the C++ client (sortctl sort --shm)
and buf curl (an independent client, over the Unix socket), against the
real sortd started with --shared_memory=system --unix_socket. The Python
client's region tests are in test_regions.py.

Environment: SORTD_BIN, SORTCTL_BIN, BUF_BIN (optional: buf tests skip when
unset).
"""
import json
import mmap
import os
import stat
import subprocess
import tempfile
import unittest

import numpy as np

from sortd_process import SortdProcess, scrape, total

SORTD = os.environ["SORTD_BIN"]
SORTCTL = os.environ["SORTCTL_BIN"]
BUF = os.environ.get("BUF_BIN", "")
TYPES = ["uint32", "int32", "float32", "uint64", "int64", "float64"]


def stable_order(keys, descending):
    """The sortd order as a permutation: stable both ways."""
    if not descending:
        return np.argsort(keys, kind="stable")
    # Reverse order of distinct keys, equal keys in input order.
    n = len(keys)
    flipped = np.argsort(keys[::-1], kind="stable")[::-1]
    return (n - 1) - flipped


class RegionsCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="sortd-e2e-regions-")
        cls.socket = os.path.join(cls.tmp.name, "sortd.sock")
        cls.server = SortdProcess(SORTD, "--shared_memory=system",
                                  "--unix_socket=" + cls.socket).start()

    @classmethod
    def tearDownClass(cls):
        code = cls.server.terminate()
        log = cls.server.read_log()
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()
        assert code == 0, "sortd exited with %d:\n%s" % (code, log)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def sortctl(self, *args, target=None, check=True):
        return subprocess.run([SORTCTL] + list(args) + ["--target=" + (target or "unix:" + self.socket)],
                              capture_output=True, text=True, check=check, timeout=300)

    def test_socket_file_has_the_default_mode(self):
        self.assertEqual(stat.S_IMODE(os.stat(self.socket).st_mode), 0o660)

    def test_sortctl_shm_every_type_both_orders_with_indices(self):
        rng = np.random.default_rng(5)
        for t in TYPES:
            keys = rng.integers(0, 1000, size=200003).astype(t)  # ties: stability shows
            keys.tofile(self.path("in.bin"))
            for order in ("asc", "desc"):
                self.sortctl("sort", "--shm", "--type=" + t, "--order=" + order,
                             "--in=" + self.path("in.bin"), "--out=" + self.path("out.bin"),
                             "--indices_out=" + self.path("idx.bin"))
                perm = stable_order(keys, order == "desc")
                got = np.fromfile(self.path("out.bin"), dtype=t)
                np.testing.assert_array_equal(got, keys[perm], err_msg=t + " " + order)
                np.testing.assert_array_equal(np.fromfile(self.path("idx.bin"), dtype=np.uint64),
                                              perm, err_msg=t + " " + order)

    def test_sortctl_shm_over_loopback_tcp(self):
        keys = np.random.default_rng(6).standard_normal(1 << 20)
        keys.tofile(self.path("f.bin"))
        before = scrape(self.server.metrics_url)
        self.sortctl("sort", "--shm", "--type=float64", "--in=" + self.path("f.bin"),
                     "--out=" + self.path("f.out"), target=self.server.target)
        np.testing.assert_array_equal(np.fromfile(self.path("f.out")), np.sort(keys, kind="stable"))
        # Sorted in shared memory: one system-region request, and the 8 MB
        # of keys did not cross the socket.
        after = scrape(self.server.metrics_url)
        self.assertEqual(total(after, "sortd_shm_requests_total", kind="system")
                         - total(before, "sortd_shm_requests_total", kind="system"), 1)
        self.assertLess(total(after, "sortd_bytes_received_total")
                        - total(before, "sortd_bytes_received_total"), 4096)

    def test_sortctl_shm_against_a_server_without_regions(self):
        with SortdProcess(SORTD) as plain:
            np.arange(10, dtype=np.uint32).tofile(self.path("small.bin"))
            r = self.sortctl("sort", "--shm", "--type=uint32", "--in=" + self.path("small.bin"),
                             "--out=" + self.path("small.out"), target=plain.target, check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("FAILED_PRECONDITION", r.stderr)
            self.assertIn("--shared_memory", r.stderr)
            self.assertEqual(plain.terminate(), 0)

    def test_peers_unix_refuses_loopback_tcp_but_serves_the_socket(self):
        sock = self.path("unix-only.sock")
        with SortdProcess(SORTD, "--shared_memory=system", "--shared_memory_peers=unix",
                          "--unix_socket=" + sock) as server:
            keys = np.arange(1000, 0, -1, dtype=np.uint32)
            keys.tofile(self.path("u.bin"))
            r = self.sortctl("sort", "--shm", "--type=uint32", "--in=" + self.path("u.bin"),
                             "--out=" + self.path("u.out"), target=server.target, check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("PERMISSION_DENIED", r.stderr)
            self.sortctl("sort", "--shm", "--type=uint32", "--in=" + self.path("u.bin"),
                         "--out=" + self.path("u.out"), target="unix:" + sock)
            np.testing.assert_array_equal(np.fromfile(self.path("u.out"), dtype=np.uint32),
                                          np.sort(keys))
            self.assertEqual(server.terminate(), 0)

    @unittest.skipIf(os.path.exists("/dev/nvidia0"), "a GPU is present")
    def test_cuda_regions_are_off_without_a_gpu_engine(self):
        with SortdProcess(SORTD, "--shared_memory=system,cuda") as server:
            self.assertIn("cuda regions off: no GPU engine", server.read_log())
            r = subprocess.run(
                [BUF, "curl", "--protocol", "grpc", "--http2-prior-knowledge", "-d",
                 json.dumps({"name": "g", "rawHandle": "AA" * 43, "byteSize": "4096"}),
                 "http://%s/sortd.v1.RegionService/RegisterCudaRegion" % server.target],
                capture_output=True, text=True, timeout=60) if BUF else None
            if r is not None:
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("no GPU engine runs", r.stderr)
            self.assertEqual(server.terminate(), 0)

    def buf_curl(self, method, body, service="RegionService"):
        return subprocess.run(
            [BUF, "curl", "--protocol", "grpc", "--http2-prior-knowledge", "--unix-socket", self.socket,
             "-d", json.dumps(body), "http://localhost/sortd.v1.%s/%s" % (service, method)],
            capture_output=True, text=True, timeout=60)

    @unittest.skipUnless(BUF, "BUF_BIN not set")
    def test_buf_curl_registers_sorts_lists_and_unregisters(self):
        name = "sortd-e2e-buf-%d" % os.getpid()
        n = 4096
        with open("/dev/shm/" + name, "w+b") as f:
            f.truncate(n * 4)
            memory = mmap.mmap(f.fileno(), n * 4)
        try:
            keys = np.frombuffer(memory, dtype=np.int32)
            original = np.random.default_rng(7).integers(-100, 100, size=n, dtype=np.int32)
            keys[:] = original
            r = self.buf_curl("RegisterSystemRegion", {"name": "buf", "shmKey": "/" + name,
                                                       "byteSize": str(n * 4)})
            self.assertEqual(r.returncode, 0, r.stderr)
            r = self.buf_curl("Sort", {"keysRegion": {"region": "buf", "count": str(n),
                                                      "type": "ELEMENT_TYPE_INT32"},
                                       "order": "SORT_ORDER_DESCENDING", "requestId": "buf-shm"},
                              service="SortService")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = json.loads(r.stdout)
            self.assertEqual(out["requestId"], "buf-shm")
            self.assertNotIn("keys", out)
            np.testing.assert_array_equal(keys, original[stable_order(original, True)])
            listed = json.loads(self.buf_curl("ListRegions", {}).stdout)["regions"]
            self.assertEqual([(x["name"], x["kind"], x["shmKey"]) for x in listed],
                             [("buf", "REGION_KIND_SYSTEM", "/" + name)])
            r = self.buf_curl("Sort", {"keysRegion": {"region": "buf", "offset": "2",
                                                      "count": "4", "type": "ELEMENT_TYPE_INT32"}},
                              service="SortService")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("keys_region.offset", r.stderr)
            self.assertEqual(self.buf_curl("UnregisterRegion", {"name": "buf"}).returncode, 0)
            r = self.buf_curl("UnregisterRegion", {"name": "buf"})
            self.assertIn("not_found", r.stderr.lower().replace(" ", "_"))
        finally:
            del keys
            memory.close()
            os.unlink("/dev/shm/" + name)


if __name__ == "__main__":
    unittest.main()
