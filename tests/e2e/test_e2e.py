"""End-to-end: the real sortd binary driven by sortctl, the Python client and
buf curl (through server reflection).

Environment: SORTD_BIN, SORTCTL_BIN, BUF_BIN (optional: buf tests skip when
unset), PYTHONPATH with <build>/python and client/python.
"""
import base64
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

import numpy as np

from sortd_client import Client, SortdError
from sort_reference import bits, reference_permutation
from sortd_process import SortdProcess, metric, scrape, total, wait_until

SORTD = os.environ["SORTD_BIN"]
SORTCTL = os.environ["SORTCTL_BIN"]
BUF = os.environ.get("BUF_BIN", "")

NUMERIC = ["uint32", "int32", "float32", "uint64", "int64", "float64"]


def reference_order(keys, descending):
    """Stable order by the sortd rules: NaN last (first when descending)."""
    keys = np.asarray(keys)
    idx = np.arange(len(keys))
    if keys.dtype.kind == "f":
        nan = np.isnan(keys)
        finite_idx = idx[~nan]
        fk = keys[~nan]
        # -0.0 before +0.0: sort by (value, signbit reversed).
        order = np.lexsort((finite_idx, ~np.signbit(fk), fk)) if not descending else \
            np.lexsort((finite_idx, np.signbit(fk), -fk))
        ordered = finite_idx[order]
        return np.concatenate([idx[nan], ordered]) if descending else np.concatenate([ordered, idx[nan]])
    if descending:
        # stable descending: sort by negated rank, keep input order among equals
        ranks = np.unique(keys, return_inverse=True)[1]
        return np.lexsort((idx, -ranks))
    return np.argsort(keys, kind="stable")


def random_array(dtype, n, rng):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        a = (rng.standard_normal(n) * 1000).astype(dtype)
        if n >= 8:
            a[:8] = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, a[8 % n]]
            rng.shuffle(a)
        return a
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)


class EndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = SortdProcess(SORTD, "--max_message_bytes=67108864", "--diagnostics").start()
        cls.client = Client(cls.server.target)
        cls.tmp = tempfile.TemporaryDirectory(prefix="sortd-e2e-files-")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        code = cls.server.terminate()
        log = cls.server.read_log()
        cls.server.__exit__(None, None, None)
        cls.tmp.cleanup()
        assert code == 0, "sortd exited with %d:\n%s" % (code, log)
        assert "drained" in log, log

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def sortctl(self, *args, check=True):
        return subprocess.run([SORTCTL] + list(args) + ["--target=" + self.server.target],
                              capture_output=True, text=True, check=check, timeout=600)

    # --- sortctl -------------------------------------------------------

    def test_sortctl_health(self):
        self.assertEqual(self.sortctl("health").stdout.strip(), "SERVING")

    def test_sortctl_npy_every_type_both_orders_with_indices(self):
        rng = np.random.default_rng(1)
        for dtype in NUMERIC:
            for order in ("asc", "desc"):
                with self.subTest(dtype=dtype, order=order):
                    a = random_array(dtype, 10007, rng)
                    np.save(self.path("in.npy"), a)
                    self.sortctl("sort", "--in=" + self.path("in.npy"), "--out=" + self.path("out.npy"),
                                 "--order=" + order, "--indices_out=" + self.path("idx.npy"))
                    out, idx = np.load(self.path("out.npy")), np.load(self.path("idx.npy"))
                    want = reference_order(a, order == "desc")
                    np.testing.assert_array_equal(idx, want)
                    self.assertEqual(out.view(np.uint8).tobytes(), a[want].view(np.uint8).tobytes())

    def test_sortctl_text_and_binary(self):
        with open(self.path("in.txt"), "w") as f:
            f.write("5\n-3\n10\n-3\n0\n")
        self.sortctl("sort", "--type=int64", "--in=" + self.path("in.txt"), "--out=" + self.path("out.txt"))
        self.assertEqual(open(self.path("out.txt")).read().split(), ["-3", "-3", "0", "5", "10"])
        a = np.array([3.5, -1.0, 2.25], dtype="<f4")
        a.tofile(self.path("in.bin"))
        self.sortctl("sort", "--type=float32", "--order=desc", "--in=" + self.path("in.bin"),
                     "--out=" + self.path("out.bin"))
        np.testing.assert_array_equal(np.fromfile(self.path("out.bin"), dtype="<f4"), [3.5, 2.25, -1.0])
        with open(self.path("words.txt"), "w") as f:
            f.write("pear\napple\nfig\napple\n")
        self.sortctl("sort", "--type=bytes", "--in=" + self.path("words.txt"), "--out=" + self.path("sorted.txt"))
        self.assertEqual(open(self.path("sorted.txt")).read().split(), ["apple", "apple", "fig", "pear"])

    def test_sortctl_reports_bad_input(self):
        with open(self.path("bad.txt"), "w") as f:
            f.write("1\nnot-a-number\n")
        r = self.sortctl("sort", "--type=uint32", "--in=" + self.path("bad.txt"),
                         "--out=" + self.path("x.txt"), check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("line 2", r.stderr)

    def test_sortctl_chunked_sort_over_300_megabytes(self):
        n = 40_000_000  # 320 MB of uint64, well over the 64 MiB message limit
        src, dst = self.path("big.bin"), self.path("big_sorted.bin")
        self.sortctl("gen", "--type=uint64", "--count=%d" % n, "--out=" + src, "--seed=9")
        self.assertGreaterEqual(os.path.getsize(src), 300_000_000)
        r = self.sortctl("sort", "--type=uint64", "--in=" + src, "--out=" + dst)
        self.assertIn("sorted 40000000 keys", r.stderr)
        a = np.fromfile(src, dtype="<u8")
        b = np.fromfile(dst, dtype="<u8")
        a.sort()
        self.assertTrue(np.array_equal(a, b))
        os.remove(src)
        os.remove(dst)

    def test_sortctl_bench_runs(self):
        url = self.server.metrics_url
        before = total(scrape(url), "sortd_requests_total", method="Sort", code="OK")
        r = self.sortctl("bench", "--duration=1s", "--concurrency=2", "--keys=256")
        self.assertIn("req/s", r.stdout)
        m = re.search(r"requests: (\d+) ok, (\d+) errors", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        ok, errors = int(m.group(1)), int(m.group(2))
        self.assertGreater(ok, 0, r.stdout)
        self.assertEqual(errors, 0, r.stdout)
        # The server answered at least the calls the bench counted.
        self.assertGreaterEqual(
            total(scrape(url), "sortd_requests_total", method="Sort", code="OK") - before, ok)

    def test_sortctl_bench_against_echo_unary_and_stream(self):
        for method in ("sort", "stream"):
            r = self.sortctl("bench", "--with_echo", "--method=" + method, "--duration=1s",
                             "--concurrency=2", "--keys=512")
            echo = "echo_stream" if method == "stream" else "echo"
            self.assertIn("method %s," % echo, r.stdout)
            self.assertIn("method %s," % method, r.stdout)
            self.assertIn("Versus echo of the same payload", r.stdout)
            self.assertEqual(r.stdout.count(" 0 errors"), 2, r.stdout)

    # --- Python client -------------------------------------------------

    def test_python_every_type_with_indices(self):
        rng = np.random.default_rng(2)
        for dtype in NUMERIC:
            for descending in (False, True):
                with self.subTest(dtype=dtype, descending=descending):
                    a = random_array(dtype, 5003, rng)
                    out, idx = self.client.sort(a, descending=descending, return_indices=True)
                    want = reference_order(a, descending)
                    np.testing.assert_array_equal(idx, want)
                    self.assertEqual(out.tobytes(), a[want].tobytes())

    def test_python_pairs_and_bytes(self):
        keys = np.array([3, 1, 3, 2], dtype=np.int32)
        k, v = self.client.sort_pairs(keys, np.array([0.5, 1.5, 2.5, 3.5]))
        np.testing.assert_array_equal(k, [1, 2, 3, 3])
        np.testing.assert_array_equal(v, [1.5, 3.5, 0.5, 2.5])
        words = [b"pear", b"", b"\xff", b"apple", b"app"]
        self.assertEqual(self.client.sort(words), [b"", b"app", b"apple", b"pear", b"\xff"])
        k, v = self.client.sort_pairs(words, np.arange(5, dtype=np.uint64), descending=True)
        self.assertEqual(list(v), [2, 0, 3, 4, 1])

    def test_python_stream_of_thousand_requests(self):
        rng = np.random.default_rng(3)
        arrays = {str(i): rng.integers(0, 1000, size=1 + i % 500, dtype=np.uint32) for i in range(1000)}
        results = self.client.sort_many(arrays)
        self.assertEqual(set(results), set(arrays))
        for rid, a in arrays.items():
            np.testing.assert_array_equal(results[rid], np.sort(a, kind="stable"))

    def test_python_forced_chunked(self):
        a = np.random.default_rng(4).standard_normal(300_000)
        a[::7] = a[0]  # ties: the permutation shows stability
        url = self.server.metrics_url
        before = total(scrape(url), "sortd_requests_total", method="SortChunked", code="OK")
        out, idx = self.client.sort(a, return_indices=True, chunked=True)
        perm = reference_permutation(a, descending=False)
        np.testing.assert_array_equal(idx, perm)
        self.assertEqual(bits(out).tobytes(), bits(a[perm]).tobytes())
        # It went through SortChunked (the client would otherwise send one
        # Sort message: 2.4 MB fits the limit).
        self.assertTrue(wait_until(lambda: total(scrape(url), "sortd_requests_total",
                                                 method="SortChunked", code="OK") == before + 1, 10),
                        "the sort did not go through SortChunked")

    def test_python_errors(self):
        with self.assertRaises(SortdError) as cm:
            Client(self.server.target, max_message_bytes=256 << 20).sort(
                np.zeros(20_000_000, dtype=np.uint32), chunked=False)
        self.assertEqual(cm.exception.code.name, "RESOURCE_EXHAUSTED")
        self.assertEqual(self.client.health(), "SERVING")

    # --- buf curl (independent client, schema from reflection) ---------

    def buf_curl(self, method, body):
        return subprocess.run(
            [BUF, "curl", "--protocol", "grpc", "--http2-prior-knowledge", "-d", json.dumps(body),
             "http://%s/sortd.v1.SortService/%s" % (self.server.target, method)],
            capture_output=True, text=True, timeout=60)

    @unittest.skipUnless(BUF, "BUF_BIN not set")
    def test_buf_curl_sort_through_reflection(self):
        r = self.buf_curl("Sort", {"keys": {"float64": {"values": [2.5, "NaN", -0.0, 0.0, "-Infinity"]}},
                                   "returnIndices": True, "requestId": "buf-1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["keys"]["float64"]["values"], ["-Infinity", -0.0, 0.0, 2.5, "NaN"])
        self.assertEqual(out["indices"], ["4", "2", "3", "0", "1"])
        self.assertEqual(out["requestId"], "buf-1")
        self.assertEqual(out["engine"], "ENGINE_CPU")
        r = self.buf_curl("SortPairs", {
            "keys": {"bytes": {"values": [base64.b64encode(b"b").decode(), base64.b64encode(b"a").decode()]}},
            "values": {"int32": {"values": [1, 2]}}})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["values"]["int32"]["values"], [2, 1])

    @unittest.skipUnless(BUF, "BUF_BIN not set")
    def test_buf_curl_top_k_through_reflection(self):
        r = self.buf_curl("TopK", {"keys": {"int32": {"values": [5, -1, 9, 5, 7, 0]}}, "k": "3",
                                   "order": "SORT_ORDER_DESCENDING", "returnIndices": True,
                                   "rowLength": "3"})
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        # Rows [5, -1, 9] and [5, 7, 0]: each row's own order, positions in the row.
        self.assertEqual(out["keys"]["int32"]["values"], [9, 5, -1, 7, 5, 0])
        self.assertEqual(out["indices"], ["2", "0", "1", "1", "0", "2"])
        r = self.buf_curl("TopK", {"keys": {"int32": {"values": [1, 2]}}})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("k: must be at least 1", r.stdout + r.stderr)

    @unittest.skipUnless(BUF, "BUF_BIN not set")
    def test_buf_curl_bad_input_names_the_field(self):
        r = self.buf_curl("SortPairs", {"keys": {"uint32": {"values": [1, 2]}},
                                        "values": {"uint32": {"values": [1]}}})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("invalid_argument", r.stdout + r.stderr)
        self.assertIn("values: length 1 does not match keys length 2", r.stdout + r.stderr)


class Drain(unittest.TestCase):
    def test_sigterm_drains_in_flight_work(self):
        # Waits on observed state, not on sleeps: a loaded CI machine can take
        # long to send the 64 MB request or to start draining.
        # Every request is logged when it ends (--slow_request_seconds=0):
        # the log then shows whether the big sort ended after the signal.
        with SortdProcess(SORTD, "--drain_delay=5s", "--slow_request_seconds=0") as server:
            client = Client(server.target)
            big = np.random.default_rng(5).integers(0, 1 << 62, size=8_000_000, dtype=np.uint64)
            result = {}

            def run():
                try:
                    result["out"] = client.sort(big, request_id="big")
                except Exception as e:  # reported below, with its cause
                    result["error"] = e
            t = threading.Thread(target=run)
            t.start()
            # The request is on the server once it is admitted.
            admitted = wait_until(
                lambda: "out" in result or metric(server.metrics_url, "sortd_inflight_requests"),
                timeout=60)
            self.assertTrue(admitted, "the big sort never reached the server")
            server.proc.send_signal(signal.SIGTERM)
            self.assertTrue(wait_until(lambda: client.health() == "NOT_SERVING", timeout=4))
            with self.assertRaises(SortdError) as cm:
                client.sort(np.array([2, 1], dtype=np.uint32))
            self.assertEqual(cm.exception.code.name, "UNAVAILABLE")
            t.join(60)
            self.assertNotIn("error", result, result.get("error"))
            np.testing.assert_array_equal(result["out"], np.sort(big))
            self.assertEqual(server.proc.wait(60), 0)
            log = server.read_log()
            self.assertIn("drained", log)
            # The big sort was in flight at the signal: it ended after it.
            signal_at = log.find("received signal")
            big_at = log.find('request_id="big"')
            self.assertGreaterEqual(signal_at, 0, log)
            self.assertGreater(big_at, signal_at,
                               "the big sort finished before SIGTERM, so nothing was drained:\n" + log)


if __name__ == "__main__":
    unittest.main(verbosity=2)
