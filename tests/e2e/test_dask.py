"""dask on sortd, end to end: a dask.distributed LocalCluster of three worker
processes (small memory limits, spilling on) and three real CPU-engine
sortd replicas on loopback behind one `ipv4:a,b,c` target, sorting with
sortd_client.dask. The data is generated on the workers; what the checks
read comes back summarised (never the data itself):
- global order: each output partition in order (compared, on its worker,
  with pandas' stable sort of it), and the first and last rows of
  consecutive partitions in order;
- stability: a row id, increasing in input order, increases among rows
  equal on every key;
- the multiset of rows: row counts and a sum of row hashes equal the
  input's;
- partition skew: max / mean rows of the output partitions <= 1.5;
- no task failed for good (the computation returns), with one replica
  SIGKILLed while it has a request in flight.
The largest case is ~1.5 GiB of rows, more than any one worker's memory
limit (1 GiB).

Environment: SORTD_BIN, PYTHONPATH with client/python and tests/e2e.
"""
import os
import signal
import socket
import threading
import unittest

import numpy as np
import pandas as pd

import dask
import dask.array as da
import dask.dataframe as dd
import distributed

from sortd_client import dask as sortd_dask
from sortd_process import SortdProcess, metric, wait_until

SORTD = os.environ["SORTD_BIN"]
WORKER_MEMORY = 1 << 30
SKEW = 1.5


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replica():
    """A CPU-engine sortd that advertises its own address (its sessions'
    connections must come back to it, not to another replica)."""
    port = free_port()
    return SortdProcess(SORTD, "--engine=cpu", "--listen=127.0.0.1:%d" % port,
                        "--advertise_address=127.0.0.1:%d" % port).start()


# ------------------------------------------------------------ data, made on the workers

def make_partition(index, rows, kind, seed=7):
    """Partition `index` of a case: a row id `rid` increasing in input
    order, key columns by `kind`, and a payload."""
    rng = np.random.default_rng([seed, index])
    rid = np.arange(rows, dtype=np.int64) + index * (1 << 32)
    frame = {"rid": rid}
    if kind == "uniform":
        frame["k"] = rng.integers(0, 1 << 32, rows, dtype=np.uint64).astype(np.uint32)
    elif kind == "equal":
        frame["k"] = np.full(rows, 42, np.int64)
    elif kind == "heavy":
        k = rng.integers(-(1 << 40), 1 << 40, rows)
        k[rng.random(rows) < 0.9] = 12345
        frame["k"] = k
    elif kind == "nulls":
        k = rng.normal(size=rows)
        k[rng.random(rows) < 0.2] = np.nan
        frame["k"] = k
        n = pd.array(rng.integers(-5, 5, rows), dtype="Int64")
        n[rng.random(rows) < 0.3] = pd.NA
        frame["n"] = n
    elif kind == "strings":
        # No NULs: pandas 1.5's multi-key sort, the reference here, takes
        # "a\x00" for "a" (its string hash table stops at NUL); sortd does
        # not (e2e.tables covers them against single-key references).
        words = np.array(["", "a", "ab", "b", "zürich", "Zulu", "ab ", "é", None], dtype=object)
        frame["s"] = words[rng.integers(0, len(words), rows)]
        frame["k"] = rng.integers(0, 3, rows)
    elif kind == "wide":
        frame["k"] = rng.random(rows)
    if kind == "wide":
        block = rng.integers(0, 1 << 62, (rows, 14))
        for c in range(block.shape[1]):
            frame["p%d" % c] = block[:, c]
    else:
        frame["p"] = rng.integers(0, 1 << 62, rows)
    return pd.DataFrame(frame)


def case(kind, partitions, rows, empty=()):
    """A dask frame of `partitions` generated partitions; those in `empty` hold no rows."""
    meta = make_partition(0, 0, kind)
    parts = [dask.delayed(make_partition, pure=True)(i, 0 if i in empty else rows, kind)
             for i in range(partitions)]
    return dd.from_delayed(parts, meta=meta, verify_meta=False)


# ------------------------------------------------------------ checks, run on the workers

def row_hash(frame):
    """The sum of the rows' hashes (mod 2^64), and the row count."""
    if len(frame) == 0:
        return 0, 0
    hashes = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    return int(hashes.sum(dtype=np.uint64)), len(frame)


def summary(frame, by, ascending, na_position):
    """(rows, hash sum, in order, first row, last row) of one output partition.
    In order: the partition equals pandas' stable sort of it by the keys and
    then the row id (rows equal on every key keep their input order)."""
    h, n = row_hash(frame)
    if n == 0:
        return n, h, True, None, None
    expected = frame.sort_values(by + ["rid"], ascending=ascending + [True],
                                 na_position=na_position, kind="stable")
    in_order = bool(np.array_equal(expected["rid"].to_numpy(), frame["rid"].to_numpy()))
    ends = frame.iloc[[0, n - 1]][by + ["rid"]]
    return n, h, in_order, ends.iloc[:1], ends.iloc[1:]


class DaskOnSortd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.replicas = [replica() for _ in range(3)]
        cls.target = "ipv4:" + ",".join(r.target for r in cls.replicas)
        cls.cluster = distributed.LocalCluster(
            n_workers=3, threads_per_worker=1, processes=True, memory_limit=WORKER_MEMORY,
            dashboard_address=None, silence_logs=40)
        cls.client = distributed.Client(cls.cluster)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.cluster.close()
        for r in cls.replicas:
            r.__exit__(None, None, None)

    def check(self, source, result, by, ascending=True, na_position="last", skew=True):
        """Everything the module docstring lists, of `result` = source sorted."""
        by = [by] if isinstance(by, str) else list(by)
        asc = list(ascending) if isinstance(ascending, (list, tuple)) else [ascending] * len(by)
        got = dask.compute(*[dask.delayed(summary)(p, by, asc, na_position)
                             for p in result.to_delayed()])
        want = dask.compute(*[dask.delayed(row_hash)(p) for p in source.to_delayed()])
        self.assertEqual(sum(n for n, *_ in got), sum(n for _, n in want), "rows lost or added")
        self.assertEqual(sum(h for _, h, *_ in got) % (1 << 64),
                         sum(h for h, _ in want) % (1 << 64), "rows changed")
        self.assertTrue(all(ok for _, _, ok, _, _ in got), "a partition out of order")
        ends = pd.concat([e for n, _, _, first, last in got if n for e in (first, last)])
        expected = ends.sort_values(by + ["rid"], ascending=asc + [True], na_position=na_position,
                                    kind="stable")
        self.assertEqual(list(expected["rid"]), list(ends["rid"]), "partitions out of order")
        sizes = [n for n, *_ in got]
        if skew:
            self.assertLessEqual(max(sizes) / np.mean(sizes), SKEW, sizes)
        return sizes

    def sort(self, source, by, ascending=True, na_position="last", **kw):
        return sortd_dask.sort_values(source, by, ascending, na_position, target=self.target, **kw)

    def test_uniform(self):
        src = case("uniform", 6, 200_000)
        self.check(src, self.sort(src, "k"), "k")

    def test_all_equal_keys_spread_over_partitions(self):
        src = case("equal", 6, 100_000)
        sizes = self.check(src, self.sort(src, "k"), "k")
        self.assertEqual(len(sizes), 6)

    def test_ninety_percent_one_key_spread_over_partitions(self):
        src = case("heavy", 8, 100_000)
        sizes = self.check(src, self.sort(src, "k", npartitions=10), "k")
        self.assertEqual(len(sizes), 10)

    def test_nan_and_nulls_first_and_last(self):
        src = case("nulls", 5, 60_000)
        for na in ("last", "first"):
            with self.subTest(na_position=na):
                self.check(src, self.sort(src, ["n", "k"], [False, True], na), ["n", "k"],
                           [False, True], na)

    def test_strings_descending_with_nulls(self):
        src = case("strings", 5, 50_000)
        self.check(src, self.sort(src, ["s", "k"], [False, True]), ["s", "k"], [False, True])

    def test_descending_two_keys(self):
        src = case("heavy", 4, 80_000)
        src = src.assign(k2=src["p"] % 3)
        self.check(src, self.sort(src, ["k2", "k"], False, npartitions=3), ["k2", "k"], False)

    def test_empty_partitions(self):
        src = case("uniform", 7, 50_000, empty=(0, 3, 6))
        self.check(src, self.sort(src, "k", npartitions=4), "k")

    def test_dask_own_sort_values_with_partition_sort(self):
        src = case("uniform", 5, 100_000)
        out = src.sort_values("k", sort_function=sortd_dask.partition_sort,
                              sort_function_kwargs={"target": self.target, "local_rows": 0})
        self.check(src, out, "k", skew=False)

    def test_array_sort_and_argsort(self):
        rng = np.random.default_rng(3)
        values = rng.integers(-1000, 1000, 1_500_000).astype(np.float64)
        values[rng.random(len(values)) < 0.6] = 7.0
        values[::131] = np.nan
        x = da.from_array(values, chunks=200_000)
        keys, idx = sortd_dask.sort(x, return_indices=True, target=self.target, npartitions=6)
        self.assertFalse(any(np.isnan(keys.chunks[0])), "chunk sizes unknown")
        self.assertLessEqual(max(keys.chunks[0]) / np.mean(keys.chunks[0]), SKEW)
        ref = np.argsort(values, kind="stable")
        got_keys, got_idx = dask.compute(keys, idx)
        np.testing.assert_array_equal(got_idx, ref)
        np.testing.assert_array_equal(got_keys, values[ref])
        ints = rng.integers(0, 50, 1_000_000)
        y = da.from_array(ints, chunks=150_000)
        desc = sortd_dask.argsort(y, descending=True, target=self.target).compute()
        np.testing.assert_array_equal(desc, np.argsort(-ints, kind="stable"))

    def test_array_topk(self):
        # Every chunk's first k by a replica's TopK, then the candidates'.
        rng = np.random.default_rng(4)
        values = rng.integers(0, 5000, 1_200_000).astype(np.int64)
        x = da.from_array(values, chunks=200_000)
        keys, idx = sortd_dask.topk(x, 100, return_indices=True, target=self.target,
                                    local_rows=0)
        got_keys, got_idx = dask.compute(keys, idx)
        want = (len(values) - 1 - np.argsort(values[::-1], kind="stable"))[::-1][:100]
        np.testing.assert_array_equal(got_idx, want)
        np.testing.assert_array_equal(got_keys, values[want])
        small = sortd_dask.topk(x, 10, largest=False, target=self.target, local_rows=0).compute()
        np.testing.assert_array_equal(small, np.sort(values, kind="stable")[:10])

    def test_zz_replica_killed_mid_run(self):
        """Last: a fourth replica joins the target and is SIGKILLed while it
        has a request in flight; every row comes back, in order."""
        doomed = replica()
        target = self.target + "," + doomed.target
        killed = threading.Event()

        def kill_when_busy():
            if wait_until(lambda: (metric(doomed.metrics_url, "sortd_inflight_requests") or 0) > 0,
                          120, step=0.002):
                doomed.proc.send_signal(signal.SIGKILL)
                killed.set()

        killer = threading.Thread(target=kill_when_busy, daemon=True)
        killer.start()
        try:
            src = case("uniform", 12, 250_000)
            out = sortd_dask.sort_values(src, "k", target=target).persist()
            distributed.wait(out)
            killer.join(120)
            self.assertTrue(killed.is_set(), "the replica never had a request in flight")
            self.check(src, out, "k")
        finally:
            doomed.__exit__(None, None, None)

    def test_large_spills_past_a_workers_memory(self):
        """~1.5 GiB of rows (16 key + payload columns, 128 B a row), more than
        any worker's memory limit."""
        rows, partitions = 500_000, 24
        src = case("wide", partitions, rows)
        self.assertGreater(rows * partitions * 128, 1.4 * WORKER_MEMORY)
        out = self.sort(src, "k").persist()
        distributed.wait(out)
        self.check(src, out, "k")
        spilled = self.client.run(
            lambda dask_worker: dask_worker.data.get_metrics()["disk_write_bytes_total"])
        self.assertGreater(sum(spilled.values()), 0, "no worker spilled: the case is too small")


if __name__ == "__main__":
    unittest.main()
