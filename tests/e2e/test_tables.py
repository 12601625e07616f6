"""Table sorts end to end: the real sortd and the Python client's
Client.sort_table, sortd_client.pandas.sort_values and sortctl table. Every answer is
compared with pandas' own `df.sort_values(..., kind="stable")` (Debian's
python3-pandas) or numpy's lexsort: the same rows, in the same order, with
the same index; refusals name the column.

Environment: SORTD_BIN, SORTCTL_BIN, PYTHONPATH with client/python and tests/e2e.
"""
import os
import subprocess
import tempfile
import unittest

import numpy as np
import pandas as pd

from sortd_client import pandas as sortd_pandas
from sortd_client.client import Client
from sortd_client.errors import SortdError
from sortd_process import SortdProcess

SORTD = os.environ["SORTD_BIN"]
# cpu in the suite; the GPU host runs the same tests on auto (the GPU engine)
ENGINE = os.environ.get("SORTD_E2E_ENGINE", "cpu")


def frame(rng, n):
    """Few distinct values per column (later keys decide), nulls of every
    kind: NaN, None, NaT, pd.NA, categorical NaN."""
    f = rng.integers(-3, 3, n).astype(np.float64)
    f[rng.integers(0, n, n // 7)] = np.nan
    f[rng.integers(0, n, n // 9)] = -0.0
    names = np.array(["ann", "bob", "čeněk", "", "bob "], dtype=object)[rng.integers(0, 5, n)]
    names[rng.integers(0, n, n // 8)] = None
    ts = pd.to_datetime(rng.integers(0, 4, n) * 86_400, unit="s").to_numpy().copy()
    ts[rng.integers(0, n, n // 6)] = np.datetime64("NaT")
    nullable = pd.array(rng.integers(-2, 3, n), dtype="Int64")
    nullable[rng.integers(0, n, n // 5)] = pd.NA
    cat = pd.Categorical(np.array(["lo", "mid", "hi"], dtype=object)[rng.integers(0, 3, n)],
                         categories=["lo", "mid", "hi"], ordered=True)
    return pd.DataFrame({
        "i8": rng.integers(-2, 2, n).astype(np.int8),
        "u32": rng.integers(0, 3, n).astype(np.uint32),
        "f": f,
        "name": names,
        "ts": ts,
        "n": nullable,
        "flag": rng.integers(0, 2, n).astype(bool),
        "cat": cat,
        "payload": np.arange(n) * 3,
    }, index=pd.Index(rng.permutation(n) + 1000, name="id"))


class TablesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = SortdProcess(SORTD, "--engine=" + ENGINE).start()
        cls.client = Client(cls.server.target)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        assert cls.server.terminate() == 0

    def test_pandas_sort_values_equals_pandas(self):
        rng = np.random.default_rng(4)
        for n in (0, 1, 37, 5000):
            df = frame(rng, n)
            cases = [
                ("u32", True, "last"),
                (["f"], False, "first"),
                (["name", "i8"], [True, False], "last"),
                (["ts", "n", "f"], [False, True, True], "first"),
                (["cat", "flag", "name", "u32"], True, "last"),
                (["n", "cat"], [False, False], "last"),
            ]
            for by, ascending, na in cases:
                with self.subTest(n=n, by=by, ascending=ascending, na=na):
                    got = sortd_pandas.sort_values(df, by, ascending=ascending, na_position=na,
                                                   client=self.client)
                    want = df.sort_values(by, ascending=ascending, na_position=na, kind="stable")
                    pd.testing.assert_frame_equal(got, want)

    def test_sort_table_permutation_and_columns(self):
        rng = np.random.default_rng(9)
        n = 20_000
        a = rng.integers(0, 5, n).astype(np.int32)
        b = rng.integers(-5, 5, n).astype(np.float32) / 2  # ties, no -0.0 (numpy: -0.0 == 0.0)
        c = np.ma.MaskedArray(rng.integers(0, 3, n).astype(np.int16), mask=rng.integers(0, 4, n) == 0)
        perm = self.client.sort_table({"a": a, "b": b, "c": c}, by=["a", "c", "b"],
                                      ascending=[True, False, True], nulls=["last", "first", "last"])
        # numpy's lexsort (last key most significant), stable; c's nulls
        # first in c's descending pass: key (not null, -c).
        c_key = np.where(np.ma.getmaskarray(c), np.iinfo(np.int64).min, -c.data.astype(np.int64))
        want = np.lexsort((np.arange(n), b, c_key, a))
        np.testing.assert_array_equal(perm, want)
        cols = self.client.sort_table({"a": a, "b": b, "c": c}, by=["a", "c", "b"],
                                      ascending=[True, False, True], nulls=["last", "first", "last"],
                                      return_columns=True)
        np.testing.assert_array_equal(cols["a"], a[want])
        np.testing.assert_array_equal(cols["b"], b[want])
        np.testing.assert_array_equal(np.ma.getmaskarray(cols["c"]), np.ma.getmaskarray(c)[want])
        np.testing.assert_array_equal(cols["c"].data[~cols["c"].mask], c.data[want][~np.ma.getmaskarray(c)[want]])

    def test_sortctl_sorts_a_table_of_npy_column_files(self):
        rng = np.random.default_rng(12)
        n = 30_000
        cols = {"city": rng.integers(0, 4, n).astype(np.uint32),
                "price": rng.integers(-3, 3, n).astype(np.float64) / 4,
                "when": rng.integers(0, 5, n).astype(np.int64)}
        with tempfile.TemporaryDirectory() as tmp:
            files = []
            for name, a in cols.items():
                files.append(os.path.join(tmp, name + ".npy"))
                np.save(files[-1], a)
            out = os.path.join(tmp, "perm.npy")
            run = subprocess.run(
                [os.environ["SORTCTL_BIN"], "table", "--target=" + self.server.target,
                 "--columns=" + ",".join(files), "--by=price,city,when", "--orders=desc,asc,desc",
                 "--out=" + out], capture_output=True, text=True, timeout=120)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("sorted %d rows by 3 keys" % n, run.stderr)
            want = np.lexsort((np.arange(n), -cols["when"], cols["city"], -cols["price"]))
            np.testing.assert_array_equal(np.load(out), want)
            bad = subprocess.run(
                [os.environ["SORTCTL_BIN"], "table", "--target=" + self.server.target,
                 "--columns=" + ",".join(files), "--by=nope", "--out=" + out],
                capture_output=True, text=True, timeout=60)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn('no column "nope"', bad.stderr)

    def test_bad_tables_are_refused_naming_the_column(self):
        with self.assertRaisesRegex(ValueError, "column 'b': 2 rows, column 'a' has 3"):
            self.client.sort_table({"a": np.arange(3), "b": np.arange(2)}, by="a")
        with self.assertRaisesRegex(KeyError, "no column 'z'"):
            self.client.sort_table({"a": np.arange(3)}, by="z")
        # The server's own refusal (a key past the columns, sent by hand).
        from sortd.v1 import sort_pb2
        import grpc
        req = sort_pb2.SortTableRequest()
        req.columns.add(name="x").values.uint32.values.extend([3, 1])
        req.by.add(column=4)
        with self.assertRaises(grpc.RpcError) as err:
            self.client._sort_table(req.SerializeToString())
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("by[0].column: 4, but the table has 1 columns", err.exception.details())


if __name__ == "__main__":
    unittest.main()
