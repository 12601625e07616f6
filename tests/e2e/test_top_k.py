"""Top-k end to end: the real sortd, the Python client's Client.topk and
sortctl topk. Every answer is compared with numpy's stable argsort of the
same keys (its first k; descending: the stable descending order, equal keys
in input order, NaN first); refusals name the field; the server counts the
calls as method="TopK" and sends bytes proportional to k.

Environment: SORTD_BIN, SORTCTL_BIN, PYTHONPATH with client/python and tests/e2e.
"""
import os
import subprocess
import tempfile
import unittest

import grpc
import numpy as np

from sortd.v1 import sort_pb2
from sortd_client.client import Client
from sortd_client.errors import SortdError
from sortd_process import SortdProcess, scrape, total

SORTD = os.environ["SORTD_BIN"]
SORTCTL = os.environ.get("SORTCTL_BIN")
ENGINE = os.environ.get("SORTD_E2E_ENGINE", "cpu")


def stable_order(a, largest):
    """numpy's stable order; largest: keys descending, ties in input order."""
    a = np.asarray(a)
    if not largest:
        return np.argsort(a, kind="stable")
    n = len(a)
    return (n - 1 - np.argsort(a[::-1], kind="stable"))[::-1]


class TopKTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = SortdProcess(SORTD, "--engine=" + ENGINE).start()
        cls.client = Client(cls.server.target)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.terminate()

    def check(self, keys, k, largest):
        got, idx = self.client.topk(keys, k, largest=largest)
        want = stable_order(keys, largest)[:k]
        np.testing.assert_array_equal(idx, want)
        np.testing.assert_array_equal(got, np.asarray(keys)[want])
        self.assertEqual(got.dtype, np.asarray(keys).dtype)

    def test_every_numpy_dtype_with_repeats(self):
        rng = np.random.default_rng(1)
        for dtype in (np.uint32, np.int32, np.float32, np.uint64, np.int64, np.float64,
                      np.int8, np.uint8, np.int16, np.uint16, np.float16, np.bool_):
            keys = rng.integers(0, 40, 5000).astype(dtype)
            if np.dtype(dtype).kind == "f":
                keys[rng.integers(0, 5000, 50)] = np.nan
            for largest in (True, False):
                for k in (1, 10, 4999, 5000, 10 ** 9):
                    with self.subTest(dtype=np.dtype(dtype).name, largest=largest, k=k):
                        self.check(keys, k, largest)

    def test_times_with_nat_first_and_last(self):
        rng = np.random.default_rng(2)
        keys = (rng.integers(0, 30, 3000) * 86_400).astype("datetime64[s]")
        keys[rng.integers(0, 3000, 100)] = np.datetime64("NaT")
        nat = np.isnat(keys)
        for nulls in ("last", "first"):
            for largest in (True, False):
                got, idx = self.client.topk(keys, 50, largest=largest, nulls=nulls)
                # The order without NaT, with the NaTs (in input order) put
                # first or last whatever the direction.
                values = keys[~nat].astype(np.int64)
                rest = np.flatnonzero(~nat)[stable_order(values, largest)]
                nats = np.flatnonzero(nat)
                want = np.concatenate([nats, rest] if nulls == "first" else [rest, nats])[:50]
                np.testing.assert_array_equal(idx, want)
                np.testing.assert_array_equal(got.view(np.int64), keys[want].view(np.int64))

    def test_strings(self):
        rng = np.random.default_rng(3)
        words = [b"", b"a", b"ab", b"a\x00", b"\xff", b"b"]
        keys = [words[i] for i in rng.integers(0, len(words), 2000)]
        for largest in (True, False):
            got, idx = self.client.topk(keys, 25, largest=largest)
            ref = np.array(keys, dtype=object)
            # Python's bytes order is sortd's (unsigned, a prefix first).
            want = sorted(range(len(keys)), key=lambda i: keys[i], reverse=False)
            if largest:
                want = sorted(range(len(keys)), key=lambda i: (_neg(keys[i]), i))
            self.assertEqual(list(idx), want[:25])
            self.assertEqual(got, [ref[i] for i in want[:25]])
        # 10 MB of strings: past the 8 MiB pieces of fixed-width arrays, in
        # one message all the same (strings are not split).
        many = [b"%099d" % (i * 7919 % 100_000) for i in range(100_000)]
        got, idx = self.client.topk(many, 3)
        self.assertEqual(got, sorted(many, reverse=True)[:3])
        text = np.array(["b", "č", "a", "ab", "č"], dtype="U2")
        got, idx = self.client.topk(text, 2)
        np.testing.assert_array_equal(got, np.array(["č", "č"], dtype="U2"))
        np.testing.assert_array_equal(idx, [1, 4])

    def test_rows_of_a_matrix(self):
        # The retrieval shape: scores per query, k best of each row.
        rng = np.random.default_rng(4)
        scores = rng.integers(0, 200, (1000, 256)).astype(np.float32) / 8
        for k in (10, 100, 300):
            for largest in (True, False):
                got, idx = self.client.topk(scores, k, largest=largest)
                kept = min(k, 256)
                self.assertEqual(got.shape, (1000, kept))
                self.assertEqual(idx.shape, (1000, kept))
                for r in (0, 1, 500, 999):
                    want = stable_order(scores[r], largest)[:kept]
                    np.testing.assert_array_equal(idx[r], want)
                    np.testing.assert_array_equal(got[r], scores[r][want])
        # Values of the same shape ride along (e.g. document ids).
        ids = np.arange(scores.size, dtype=np.int64).reshape(scores.shape)
        got, idx, vals = self.client.topk(scores, 5, values=ids)
        np.testing.assert_array_equal(vals, np.take_along_axis(ids, idx.astype(np.int64), 1))

    def test_ragged_segments_with_empty_ones(self):
        rng = np.random.default_rng(5)
        lengths = [0, 17, 3, 0, 400, 1]
        keys = rng.integers(-50, 50, sum(lengths)).astype(np.int64)
        values = rng.random(len(keys))
        got, idx, vals = self.client.topk(keys, 5, largest=False, values=values,
                                          segment_lengths=lengths)
        self.assertEqual(len(got), len(lengths))
        start = 0
        for s, length in enumerate(lengths):
            seg = keys[start:start + length]
            want = stable_order(seg, False)[:5]
            np.testing.assert_array_equal(idx[s], want)
            np.testing.assert_array_equal(got[s], seg[want])
            np.testing.assert_array_equal(vals[s], values[start:start + length][want])
            start += length
        full = self.client.topk_full(keys, 5, segment_lengths=lengths)
        np.testing.assert_array_equal(full.counts, [0, 5, 3, 0, 5, 1])
        self.assertEqual(full.engine, "ENGINE_CPU")

    def test_over_one_message_goes_in_pieces(self):
        # A client whose messages hold 1 MiB: 4-8 MB requests are split.
        rng = np.random.default_rng(8)
        small = Client(self.server.target, max_message_bytes=1 << 20)
        try:
            keys = rng.integers(0, 3000, 1_000_000).astype(np.float64)
            ids = np.arange(len(keys), dtype=np.int32)
            for largest in (True, False):
                got, idx, vals = small.topk(keys, 100, largest=largest, values=ids)
                want = stable_order(keys, largest)[:100]
                np.testing.assert_array_equal(idx, want)
                np.testing.assert_array_equal(got, keys[want])
                np.testing.assert_array_equal(vals, ids[want])
            # Candidates over a message too: merged in more than one round.
            got = small.topk(keys, 40_000, return_indices=False)
            np.testing.assert_array_equal(got, keys[stable_order(keys, True)[:40_000]])
            rows = rng.integers(0, 100, (4000, 512)).astype(np.float32)
            got, idx = small.topk(rows, 7)
            self.assertEqual(got.shape, (4000, 7))
            for r in (0, 1999, 3999):
                np.testing.assert_array_equal(idx[r], stable_order(rows[r], True)[:7])
            lengths = [0] + [99_000] * 10 + [3, 0, 9_997]  # grouped under 1 MiB
            got, idx = small.topk(keys, 5, largest=False, segment_lengths=lengths)
            start = 0
            for s, length in enumerate(lengths):
                np.testing.assert_array_equal(
                    idx[s], stable_order(keys[start:start + length], False)[:5])
                start += length
            with self.assertRaisesRegex(ValueError, "more than one message"):
                small.topk(keys, 500_000)
            with self.assertRaisesRegex(ValueError, "a segment of 1000000 keys"):
                small.topk(keys, 5, segment_lengths=[len(keys)])
            with self.assertRaisesRegex(ValueError, "byte strings travels in one message"):
                small.topk([b"x" * 100] * 20_000, 5)
        finally:
            small.close()

    def test_bad_input(self):
        with self.assertRaisesRegex(ValueError, "k must be at least 1"):
            self.client.topk(np.arange(5), 0)
        with self.assertRaisesRegex(ValueError, "k must be at least 1"):
            self.client.topk(np.arange(5), -3)
        with self.assertRaisesRegex(TypeError, "k must be an integer"):
            self.client.topk(np.arange(5), 2.5)
        with self.assertRaisesRegex(ValueError, "sum to 4 but keys has 5"):
            self.client.topk(np.arange(5), 2, segment_lengths=[1, 3])
        with self.assertRaisesRegex(ValueError, "differ in length"):
            self.client.topk(np.arange(5), 2, values=np.arange(4))
        # What the server says to a request the client would not send.
        request = sort_pb2.TopKRequest(keys=sort_pb2.TypedArray(
            int32=sort_pb2.Int32Array(values=[3, 1, 2])), k=0)
        with self.assertRaises(grpc.RpcError) as caught:
            self.client._top_k(request.SerializeToString())
        self.assertEqual(caught.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("k: must be at least 1", caught.exception.details())
        request.k = 2
        request.row_length = 2
        with self.assertRaises(grpc.RpcError) as caught:
            self.client._top_k(request.SerializeToString())
        self.assertIn("not a whole number of rows", caught.exception.details())
        # Through topk(): gRPC's refusal of a response over this client's
        # message limit, as a SortdError.
        small = Client(self.server.target, max_message_bytes=1 << 20)
        try:
            with self.assertRaises(SortdError) as refused:
                small.topk(np.arange(100000, dtype=np.int64), 100000)
            self.assertEqual(refused.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        finally:
            small.close()

    def test_counted_and_bytes_back_proportional_to_k(self):
        before = scrape(self.server.metrics_url)
        keys = np.random.default_rng(6).random(1 << 19)  # 4 MiB: one message
        self.client.topk(keys, 100)
        after = scrape(self.server.metrics_url)

        def grew(name, **labels):
            return total(after, name, **labels) - total(before, name, **labels)

        self.assertEqual(grew("sortd_requests_total", method="TopK", code="OK"), 1)
        self.assertEqual(grew("sortd_bytes_received_total", method="TopK"), 4 << 20)
        # 100 keys and 100 indices back, not the array.
        self.assertEqual(grew("sortd_bytes_sent_total", method="TopK"), 100 * (8 + 8))
        # 12 MiB: two pieces of at most 8 MiB (top_k.PIECE_BYTES) in
        # parallel, then one call over their 200 candidates.
        before = scrape(self.server.metrics_url)
        self.client.topk(np.random.default_rng(7).random(3 << 19), 100)
        after = scrape(self.server.metrics_url)
        self.assertEqual(grew("sortd_requests_total", method="TopK", code="OK"), 3)
        self.assertEqual(grew("sortd_bytes_received_total", method="TopK"), (12 << 20) + 1600)

    @unittest.skipIf(SORTCTL is None, "SORTCTL_BIN not set")
    def test_sortctl_topk(self):
        rng = np.random.default_rng(7)
        keys = rng.integers(0, 1000, 10000).astype(np.uint32)
        with tempfile.TemporaryDirectory() as tmp:
            src, out, idx = (os.path.join(tmp, x) for x in ("in.npy", "out.npy", "idx.npy"))
            np.save(src, keys)
            subprocess.run([SORTCTL, "topk", "--target=" + self.server.target, "--in=" + src,
                            "--out=" + out, "--indices_out=" + idx, "--k=20", "--order=desc"],
                           check=True, capture_output=True)
            want = stable_order(keys, True)[:20]
            np.testing.assert_array_equal(np.load(idx), want)
            np.testing.assert_array_equal(np.load(out), keys[want])
            rows = keys.reshape(100, 100)
            subprocess.run([SORTCTL, "topk", "--target=" + self.server.target, "--in=" + src,
                            "--out=" + out, "--k=3", "--row_length=100"],
                           check=True, capture_output=True)
            got = np.load(out).reshape(100, 3)
            for r in (0, 99):
                np.testing.assert_array_equal(got[r], rows[r][stable_order(rows[r], False)[:3]])
            bad = subprocess.run([SORTCTL, "topk", "--target=" + self.server.target,
                                  "--in=" + src, "--out=" + out, "--k=3", "--row_length=7"],
                                 capture_output=True, text=True)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("not a whole number of rows", bad.stderr)


class RegionTopKTest(unittest.TestCase):
    """Keys and values in shared arrays (system regions) go by reference."""

    @classmethod
    def setUpClass(cls):
        cls.server = SortdProcess(SORTD, "--engine=" + ENGINE, "--shared_memory=system").start()
        cls.client = Client(cls.server.target)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.terminate()

    def test_shared_arrays_are_read_where_they_lie(self):
        rng = np.random.default_rng(9)
        keys = self.client.shared_array((2000, 4096), np.float32)
        ids = self.client.shared_array((2000, 4096), np.int64)
        try:
            keys[:] = rng.integers(0, 500, keys.shape) / 4
            ids[:] = np.arange(ids.size).reshape(ids.shape)
            before = scrape(self.server.metrics_url)
            got, idx, vals = self.client.topk(keys, 20, values=ids)
            after = scrape(self.server.metrics_url)
            for r in (0, 1234, 1999):
                want = stable_order(keys[r], True)[:20]
                np.testing.assert_array_equal(idx[r], want)
                np.testing.assert_array_equal(got[r], keys[r][want])
                np.testing.assert_array_equal(vals[r], ids[r][want])
            # 32 MB of keys and 64 MB of values stayed where they were.
            sent = (total(after, "sortd_bytes_received_total", method="TopK")
                    - total(before, "sortd_bytes_received_total", method="TopK"))
            self.assertEqual(sent, 0)
            self.assertEqual(total(after, "sortd_requests_total", method="TopK", code="OK")
                             - total(before, "sortd_requests_total", method="TopK", code="OK"), 1)
            flat = keys.reshape(-1)
            best = self.client.topk(flat, 5, return_indices=False)
            np.testing.assert_array_equal(best, flat[stable_order(flat, True)[:5]])
        finally:
            for a in (keys, ids):
                self.client.unregister_region(self.client.region_of(a.reshape(-1)))


def _neg(b):
    """A key whose ascending order is bytes' descending order."""
    return _Desc(b)


class _Desc:
    __slots__ = ("b",)

    def __init__(self, b):
        self.b = b

    def __lt__(self, other):
        return self.b > other.b

    def __eq__(self, other):
        return self.b == other.b


if __name__ == "__main__":
    unittest.main()
