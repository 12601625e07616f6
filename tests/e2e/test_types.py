"""The types sorted by conversion, end to end: the real sortd binary and the
real Python client (sortd_client) with int8, uint8, int16, uint16, float16,
bool, datetime64, timedelta64 and numpy U strings, as keys (both orders,
with the permutation) and as values; each answer compared with numpy's
stable order (tests/e2e/sort_reference.py; NaT placed by nulls=), bit for
bit, in the caller's dtype, through one message and through table sessions
(past the message limit, or from session_min_bytes). The server's sorted-keys counter is read from
/metrics and must count every key.

Environment: SORTD_BIN, PYTHONPATH with client/python and tests/e2e.
"""
import os
import unittest

import numpy as np

from sortd_client.client import Client
from sort_reference import bits, make_array, reference_permutation, time_reference
from sortd_process import SortdProcess, scrape, total

SORTD = os.environ["SORTD_BIN"]
# cpu in the suite; the GPU host runs the same tests on auto (the GPU engine)
ENGINE = os.environ.get("SORTD_E2E_ENGINE", "cpu")
NARROW = ["i1", "u1", "<i2", ">i2", "<u2", "f2", "?"]


def narrow_array(rng, dtype, n):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = make_array(rng, "float16", n, nans=True)
    elif dt.kind == "b":
        a = rng.integers(0, 2, n).astype(bool)
    else:
        info = np.iinfo(dt)
        pool = np.array([info.min, info.max, 0, 1, info.min + 1], dtype=dt)
        a = np.where(rng.integers(0, 2, n) == 0, pool[rng.integers(0, len(pool), n)],
                     rng.integers(info.min, info.max, n, endpoint=True)).astype(dt)
    return a.astype(dt)


class TypesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = SortdProcess(SORTD, "--engine=" + ENGINE).start()
        cls.client = Client(cls.server.target)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        assert cls.server.terminate() == 0

    def keys_sorted(self):
        return total(scrape(self.server.metrics_url), "sortd_keys_sorted_total")

    def test_narrow_keys_both_orders_with_the_permutation(self):
        rng = np.random.default_rng(11)
        for dtype in NARROW:
            for n in (0, 1, 1000, 100_000):
                a = narrow_array(rng, dtype, n)
                for descending in (False, True):
                    with self.subTest(dtype=dtype, n=n, descending=descending):
                        before = self.keys_sorted()
                        keys, idx = self.client.sort(a, descending=descending, return_indices=True)
                        ref = reference_permutation(a, descending)
                        np.testing.assert_array_equal(idx, ref)
                        self.assertEqual(keys.dtype, a.dtype.newbyteorder("="))
                        np.testing.assert_array_equal(bits(keys), bits(a[ref].astype(keys.dtype)))
                        self.assertEqual(self.keys_sorted() - before, n)

    def test_times_place_nat_by_nulls(self):
        rng = np.random.default_rng(3)
        for dtype in ("M8[ns]", "M8[s]", "m8[us]", "M8[D]"):
            a = rng.integers(-50, 50, 20_000).astype(np.int64)
            a[rng.integers(0, len(a), 3000)] = np.iinfo(np.int64).min  # NaT
            a[:3] = [np.iinfo(np.int64).max, np.iinfo(np.int64).min + 1, 0]
            a = a.view(dtype)
            for descending in (False, True):
                for nulls in ("last", "first"):
                    with self.subTest(dtype=dtype, descending=descending, nulls=nulls):
                        keys, idx = self.client.sort(a, descending=descending,
                                                     return_indices=True, nulls=nulls)
                        ref = time_reference(a, descending, nulls)
                        np.testing.assert_array_equal(idx, ref)
                        self.assertEqual(keys.dtype, np.dtype(dtype))
                        np.testing.assert_array_equal(keys.view(np.int64), a[ref].view(np.int64))
        # Ascending with NaT last is numpy's own order.
        t = np.array(["2024-03-01", "NaT", "1970-01-01", "NaT", "2024-03-01"], dtype="M8[ms]")
        np.testing.assert_array_equal(self.client.sort(t).view(np.int64), np.sort(t).view(np.int64))

    def test_pairs_carry_converted_keys_and_values(self):
        rng = np.random.default_rng(5)
        keys = narrow_array(rng, "<i2", 50_000)
        values = rng.integers(-10**12, 10**12, len(keys)).view("m8[ns]")
        k, v = self.client.sort_pairs(keys, values, descending=True)
        ref = reference_permutation(keys, True)
        np.testing.assert_array_equal(k, keys[ref])
        self.assertEqual(v.dtype, values.dtype)
        np.testing.assert_array_equal(v.view(np.int64), values[ref].view(np.int64))
        fkeys = make_array(rng, "float32", 30_000, nans=True)
        flags = rng.integers(0, 2, len(fkeys)).astype(bool)
        k, v = self.client.sort_pairs(fkeys, flags)
        ref = reference_permutation(fkeys, False)
        np.testing.assert_array_equal(bits(k), bits(fkeys[ref]))
        np.testing.assert_array_equal(v, flags[ref])

    def test_unicode_strings_come_back_as_U_in_code_point_order(self):
        u = np.array(["b", "ä", "a", "", "ab", "日本", "Z", "ab", "\U0001F600", "é"])
        for descending in (False, True):
            with self.subTest(descending=descending):
                keys, idx = self.client.sort(u, descending=descending, return_indices=True)
                self.assertEqual(keys.dtype, u.dtype)
                expected = sorted(range(len(u)), key=lambda i: u[i], reverse=False)
                if descending:
                    # Reverse order of distinct keys, equal keys in input order.
                    expected = sorted(range(len(u)), key=lambda i: [-ord(c) for c in u[i]] + [1])
                np.testing.assert_array_equal(keys, u[expected])
                np.testing.assert_array_equal(idx, expected)
        np.testing.assert_array_equal(self.client.sort(u), np.sort(u))

    def test_a_stream_mixes_converted_and_numeric_requests(self):
        rng = np.random.default_rng(8)
        arrays = [narrow_array(rng, "u1", 300) if i % 2 else rng.integers(0, 99, 300).astype(np.uint32)
                  for i in range(40)]
        results = self.client.sort_many({"r%d" % i: a for i, a in enumerate(arrays)})
        self.assertEqual(len(results), len(arrays))
        for i, a in enumerate(arrays):
            got = results["r%d" % i]
            np.testing.assert_array_equal(got, np.sort(a, kind="stable"))
            self.assertEqual(got.dtype, a.dtype)

    def test_converted_arrays_past_the_message_limit_travel_as_table_sessions(self):
        # 1 MiB messages: 2 MiB of int8 and 1.6 MiB of datetime64 go as table
        # sessions of one key column (the values a second column), which
        # report progress as sessions do.
        rng = np.random.default_rng(13)
        with Client(self.server.target, max_message_bytes=1 << 20, native=False) as small:
            a = narrow_array(rng, "i1", 2 << 20)
            phases = set()
            keys, idx = small.sort(a, descending=True, return_indices=True,
                                   progress=lambda phase, done, total: phases.add(phase))
            self.assertEqual(phases, {"upload", "sort", "download"})
            ref = reference_permutation(a, True)
            np.testing.assert_array_equal(idx, ref)
            np.testing.assert_array_equal(keys, a[ref])
            t = rng.integers(-50, 50, 200_000).astype(np.int64)
            t[rng.integers(0, len(t), 30_000)] = np.iinfo(np.int64).min
            t = t.view("M8[us]")
            values = narrow_array(rng, "f2", len(t))
            k, v = small.sort_pairs(t, values, nulls="first")
            ref = time_reference(t, False, "first")
            self.assertEqual(k.dtype, t.dtype)
            np.testing.assert_array_equal(k.view(np.int64), t[ref].view(np.int64))
            np.testing.assert_array_equal(bits(v), bits(values[ref]))  # NaN payloads kept

    def test_session_and_one_message_answers_agree_for_every_converted_type(self):
        rng = np.random.default_rng(17)
        with Client(self.server.target, session_min_bytes=1, native=False) as sessions:
            for dtype in NARROW + ["M8[ns]", "m8[s]"]:
                a = (narrow_array(rng, dtype, 30_000) if dtype in NARROW
                     else rng.integers(-9, 9, 30_000).astype(np.int64).view(dtype))
                for descending in (False, True):
                    with self.subTest(dtype=dtype, descending=descending):
                        one = self.client.sort_full(a, descending=descending, return_indices=True,
                                                    chunked=False)
                        got = sessions.sort_full(a, descending=descending, return_indices=True)
                        np.testing.assert_array_equal(got.indices, one.indices)
                        np.testing.assert_array_equal(bits(got.keys), bits(one.keys))
                        self.assertEqual(got.keys.dtype, one.keys.dtype)

    def test_sessions_without_the_permutation_answer_as_one_message(self):
        # No indices asked: the one-column table session is started
        # without_permutation, and the server sorts the column as keys
        # alone (all but float16 / bfloat16, which keep their NaN payloads
        # through the permutation). The keys must be one message's, bit for
        # bit, NaT placed either way.
        rng = np.random.default_rng(23)
        with Client(self.server.target, session_min_bytes=1, native=False) as sessions:
            for dtype in NARROW + ["M8[ns]", "m8[s]"]:
                if dtype in NARROW:
                    a = narrow_array(rng, dtype, 40_000)
                else:
                    a = rng.integers(-9, 9, 40_000).astype(np.int64)
                    a[rng.integers(0, len(a), 4000)] = np.iinfo(np.int64).min
                    a = a.view(dtype)
                for descending in (False, True):
                    for nulls in ("last", "first"):
                        with self.subTest(dtype=dtype, descending=descending, nulls=nulls):
                            one = self.client.sort_full(a, descending=descending, chunked=False,
                                                        nulls=nulls)
                            got = sessions.sort_full(a, descending=descending, nulls=nulls)
                            self.assertIsNone(got.indices)
                            np.testing.assert_array_equal(bits(got.keys), bits(one.keys))
                            self.assertEqual(got.keys.dtype, one.keys.dtype)

    def test_times_in_sessions_place_nat_by_nulls_with_indices_and_values(self):
        # From session_min_bytes, times go as a plain int64 session and the
        # NaT block is moved where `nulls` says (Client._time_session).
        rng = np.random.default_rng(31)
        with Client(self.server.target, session_min_bytes=1, native=False) as sessions:
            for dtype in ("M8[ns]", "m8[s]"):
                a = rng.integers(-50, 50, 30_000).astype(np.int64)
                a[rng.integers(0, len(a), 4000)] = np.iinfo(np.int64).min
                a[:3] = [np.iinfo(np.int64).max, np.iinfo(np.int64).min + 1, 0]
                a = a.view(dtype)
                values = rng.standard_normal(len(a))
                for descending in (False, True):
                    for nulls in ("last", "first"):
                        with self.subTest(dtype=dtype, descending=descending, nulls=nulls):
                            ref = time_reference(a, descending, nulls)
                            got = sessions.sort_full(a, descending=descending,
                                                     return_indices=True, nulls=nulls)
                            np.testing.assert_array_equal(got.indices, ref)
                            self.assertEqual(got.keys.dtype, a.dtype)
                            np.testing.assert_array_equal(got.keys.view(np.int64),
                                                          a[ref].view(np.int64))
                            k, v = sessions.sort_pairs(a, values, descending=descending,
                                                       nulls=nulls)
                            np.testing.assert_array_equal(k.view(np.int64), a[ref].view(np.int64))
                            np.testing.assert_array_equal(v, values[ref])
            # All NaT, and none.
            for a in (np.full(5000, np.iinfo(np.int64).min).view("M8[us]"),
                      np.arange(5000)[::-1].copy().view("M8[us]")):
                got = sessions.sort_full(a, return_indices=True)
                np.testing.assert_array_equal(got.indices, time_reference(a, False, "last"))

    def test_a_session_without_the_permutation_refuses_its_download(self):
        import grpc
        from sortd.v1 import sort_pb2
        from sortd_client.session import part_message
        n = 1000
        a = np.arange(n, dtype=np.int16)[::-1].copy()
        start = sort_pb2.StartSortSessionRequest(total_keys=n, return_columns=True,
                                                 without_permutation=True)
        start.columns.add(name="k", type=sort_pb2.ELEMENT_TYPE_INT16)
        start.by.add(column=0)
        started = self.client._start_session(start.SerializeToString())
        ch = grpc.insecure_channel(self.server.target)
        self.addCleanup(ch.close)
        path = "/sortd.v1.SortService/"
        ch.stream_unary(path + "UploadParts")(iter([part_message(
            started.session_id, sort_pb2.SESSION_ARRAY_COLUMN, 0, a.view(np.uint8), 0)]))
        ch.unary_unary(path + "FinishSortSession")(sort_pb2.FinishSortSessionRequest(
            session_id=started.session_id).SerializeToString())
        download = ch.unary_stream(path + "DownloadParts")
        with self.assertRaises(grpc.RpcError) as err:
            list(download(sort_pb2.DownloadPartsRequest(
                session_id=started.session_id,
                array=sort_pb2.SESSION_ARRAY_INDICES).SerializeToString()))
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("without_permutation", err.exception.details())
        ch.unary_unary(path + "EndSortSession")(sort_pb2.EndSortSessionRequest(
            session_id=started.session_id).SerializeToString())


if __name__ == "__main__":
    unittest.main()
