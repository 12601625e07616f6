"""sortd_client.dask without a server (target=None sorts in the worker with
the same order) on dask's synchronous scheduler: the order keys, the
splitters, each row's destination, whole sorts against pandas and numpy,
skew, and the refusals. tests/e2e/test_dask.py runs it against real sortd
replicas on a distributed cluster.

Run from the repository root:
  PYTHONPATH=<build>/python:client/python \\
      /usr/bin/python3 -m unittest discover -s client/python/tests
"""
import unittest

import numpy as np
import pandas as pd

import dask
import dask.array as da
import dask.dataframe as dd

from sortd_client import dask as sortd_dask


def frame(rng, n):
    f = rng.normal(size=n)
    f[rng.random(n) < 0.1] = np.nan
    f[rng.random(n) < 0.1] = -0.0
    f[rng.random(n) < 0.1] = 0.0
    t = pd.to_datetime(rng.integers(0, 10 ** 12, n)).to_numpy().copy()
    t[rng.random(n) < 0.1] = np.datetime64("NaT")
    nullable = pd.array(rng.integers(-2, 3, n), dtype="Int64")
    nullable[rng.random(n) < 0.2] = pd.NA
    words = np.array(["", "a", "ab", "zé", "B", None], dtype=object)[rng.integers(0, 6, n)]
    return pd.DataFrame({
        "small": rng.integers(0, 4, n), "f": f, "t": t, "n": nullable, "s": words,
        "heavy": np.where(rng.random(n) < 0.9, 5, rng.integers(0, 100, n)),
        "tz": pd.to_datetime(rng.integers(0, 10 ** 12, n)).tz_localize("UTC").tz_convert("Asia/Tokyo"),
        "cat": pd.Categorical(rng.choice(["lo", "mid", "hi"], n), categories=["lo", "mid", "hi"]),
    })


class DaskUnitTest(unittest.TestCase):
    def setUp(self):
        self.scheduler = dask.config.set(scheduler="sync")
        self.scheduler.__enter__()

    def tearDown(self):
        self.scheduler.__exit__(None, None, None)

    def test_order_bits_follow_sortd_order(self):
        values = np.array([np.nan, 1.5, -0.0, 0.0, -np.inf, np.inf, -2.0, -np.nan], np.float32)
        order = np.argsort(sortd_dask._order_bits(values, False), kind="stable")
        self.assertEqual(order.tolist(), [4, 6, 2, 3, 1, 5, 0, 7])
        order = np.argsort(sortd_dask._order_bits(values, True), kind="stable")
        self.assertEqual(order.tolist(), [0, 7, 5, 1, 3, 2, 6, 4])
        ints = np.array([3, -1, np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0])
        self.assertEqual(np.argsort(sortd_dask._order_bits(ints, False)).tolist(), [2, 1, 4, 0, 3])
        times = np.array(["NaT", "2020-01-01", "1960-01-01"], "M8[s]")
        self.assertEqual(np.argsort(sortd_dask._order_bits(times, False, "last")).tolist(), [2, 1, 0])
        self.assertEqual(np.argsort(sortd_dask._order_bits(times, True, "last"),
                                    kind="stable").tolist(), [1, 2, 0])
        self.assertEqual(np.argsort(sortd_dask._order_bits(times, False, "first")).tolist(), [0, 2, 1])

    def test_destinations_count_the_splitters_at_or_below_each_row(self):
        rng = np.random.default_rng(5)
        for index in (0, 1, 2):
            bits = rng.integers(0, 4, 500).astype(np.uint64)
            splitters = sorted((int(rng.integers(0, 4)), int(rng.integers(0, 3)),
                                int(rng.integers(0, 500))) for _ in range(9))
            sb = np.array([b for b, _, _ in splitters], np.uint64)
            st = np.array([(p << 40) | r for _, p, r in splitters], np.uint64)
            got = sortd_dask._destinations(bits, index, sb, st)
            want = [sum(s <= (int(b), index, r) for s in splitters) for r, b in enumerate(bits)]
            self.assertEqual(got.tolist(), want)

    def test_splitters_weigh_partitions_by_their_rows(self):
        # One partition of 9000 rows sampled 10 times, one of 1000 sampled 10 times.
        big = [((1, k), 0, k) for k in range(10)]
        small = [((1, 100 + k), 1, k) for k in range(10)]
        splitters = sortd_dask._splitters([(9000, big), (1000, small)], 2)
        # Half of the 10000 rows lie below the 6th sample of the big partition.
        self.assertEqual(splitters, [((1, 5), 0, 5)])

    def test_frames_sort_as_pandas_stable_sort(self):
        rng = np.random.default_rng(1)
        df = frame(rng, 30_000)
        ddf = dd.from_pandas(df, npartitions=6)
        cases = [("small", True, "last"), (["small", "f"], [True, False], "first"),
                 (["s", "n"], [False, True], "last"), ("t", False, "first"),
                 (["tz", "cat"], [True, False], "last"), ("heavy", True, "last")]
        for by, ascending, na in cases:
            with self.subTest(by=by, ascending=ascending, na_position=na):
                out = sortd_dask.sort_values(ddf, by, ascending, na, npartitions=5)
                parts = [len(p.compute()) for p in out.to_delayed()]
                want = df.sort_values(by, ascending=ascending, na_position=na, kind="stable")
                pd.testing.assert_frame_equal(out.compute(), want)
                self.assertLessEqual(max(parts) / np.mean(parts), 1.5, parts)

    def test_string_dtype_keys(self):
        rng = np.random.default_rng(4)
        words = pd.array(rng.choice(["b", "a", "ab", "é", ""], 20_000), dtype="string")
        words[rng.random(20_000) < 0.1] = pd.NA
        df = pd.DataFrame({"s": words, "v": np.arange(20_000)})
        out = sortd_dask.sort_values(dd.from_pandas(df, npartitions=4), "s", False, npartitions=3)
        pd.testing.assert_frame_equal(out.compute(),
                                      df.sort_values("s", ascending=False, kind="stable"))

    def test_partition_sort_is_pandas_stable_sort(self):
        rng = np.random.default_rng(2)
        df = frame(rng, 5000)
        got = sortd_dask.partition_sort(df, ["small", "f"], [False, True], "first")
        want = df.sort_values(["small", "f"], ascending=[False, True], na_position="first",
                              kind="stable")
        pd.testing.assert_frame_equal(got, want)
        self.assertEqual(len(sortd_dask.partition_sort(df.iloc[:0], "small")), 0)

    def test_more_outputs_than_rows_and_empty_partitions(self):
        df = pd.DataFrame({"k": [3, 1, 2], "v": [0, 1, 2]})
        ddf = dd.from_pandas(df, npartitions=1)
        out = sortd_dask.sort_values(ddf, "k", npartitions=5)
        self.assertEqual(out.npartitions, 5)
        pd.testing.assert_frame_equal(out.compute(), df.sort_values("k", kind="stable"))
        empty = dd.from_pandas(df.iloc[:0], npartitions=1)
        self.assertEqual(len(sortd_dask.sort_values(empty, "k", npartitions=3).compute()), 0)
        keys = sortd_dask.sort(da.from_array(np.zeros(0, np.uint32)), npartitions=2)
        self.assertEqual(keys.chunks, ((0, 0),))
        self.assertEqual(keys.compute().size, 0)

    def test_arrays_sort_as_numpy_stable_argsort(self):
        rng = np.random.default_rng(3)
        values = np.where(rng.random(50_000) < 0.9, 2.5, rng.normal(size=50_000))
        values[::37] = np.nan
        x = da.from_array(values, chunks=7000)
        keys, idx = sortd_dask.sort(x, return_indices=True, npartitions=4)
        self.assertEqual(len(keys.chunks[0]), 4)
        self.assertLessEqual(max(keys.chunks[0]) / np.mean(keys.chunks[0]), 1.5)
        ref = np.argsort(values, kind="stable")
        np.testing.assert_array_equal(idx.compute(), ref)
        np.testing.assert_array_equal(keys.compute(), values[ref])
        ints = rng.integers(-5, 5, 20_000).astype(np.int16)
        got = sortd_dask.argsort(da.from_array(ints, chunks=3000), descending=True).compute()
        np.testing.assert_array_equal(got, np.argsort(-ints.astype(np.int64), kind="stable"))

    def test_topk_is_the_first_k_of_numpy_stable_argsort(self):
        rng = np.random.default_rng(4)
        values = rng.integers(0, 30, 40_000).astype(np.float32)
        values[::53] = np.nan
        x = da.from_array(values, chunks=6000)
        for largest in (True, False):
            for k in (1, 25, 40_000, 10 ** 9):
                keys, idx = sortd_dask.topk(x, k, largest=largest, return_indices=True)
                order = (np.argsort(values, kind="stable") if not largest
                         else (len(values) - 1 - np.argsort(values[::-1], kind="stable"))[::-1])
                want = order[:k]
                self.assertEqual(keys.shape, (len(want),))
                np.testing.assert_array_equal(idx.compute(), want)
                np.testing.assert_array_equal(keys.compute(), values[want])
        with self.assertRaisesRegex(ValueError, "k must be"):
            sortd_dask.topk(x, 0)
        with self.assertRaisesRegex(ValueError, "1-D"):
            sortd_dask.topk(da.zeros((4, 4), chunks=2), 3)
        with self.assertRaisesRegex(ValueError, "unknown"):
            sortd_dask.topk(x[x > 5], 3)

    def test_refusals_name_the_problem(self):
        x = da.zeros((4, 4), chunks=2)
        with self.assertRaisesRegex(ValueError, "1-D"):
            sortd_dask.sort(x)
        with self.assertRaisesRegex(TypeError, "dtype"):
            sortd_dask.sort(da.from_array(np.array(["a", "b"])))
        ddf = dd.from_pandas(pd.DataFrame({"k": [1, 2]}), npartitions=1)
        with self.assertRaises(KeyError):
            sortd_dask.sort_values(ddf, "missing")
        with self.assertRaisesRegex(ValueError, "na_position"):
            sortd_dask.sort_values(ddf, "k", na_position="middle")
        with self.assertRaisesRegex(ValueError, "ascending"):
            sortd_dask.sort_values(ddf, "k", ascending=[True, False])
        with self.assertRaisesRegex(ValueError, "npartitions"):
            sortd_dask.sort_values(ddf, "k", npartitions=-1)


if __name__ == "__main__":
    unittest.main()
