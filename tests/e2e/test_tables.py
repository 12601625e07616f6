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
from sortd_process import SortdProcess, scrape, total, wait_until

SORTD = os.environ["SORTD_BIN"]
# cpu in the suite; the GPU host runs the same tests on auto (the GPU engine)
ENGINE = os.environ.get("SORTD_E2E_ENGINE", "cpu")


def frame(rng, n):
    """Few distinct values per column (later keys decide), nulls of every
    kind: NaN, None, NaT, pd.NA, categorical NaN."""
    f = rng.integers(-3, 3, n).astype(np.float64)
    f[rng.integers(0, n, n // 7)] = np.nan
    f[rng.integers(0, n, n // 9)] = -0.0
    names = np.array(["ann", "bob", "čeněk", "", "bob ", "ann\x00"], dtype=object)[rng.integers(0, 6, n)]
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
        "raw": np.array([b"a", b"\xff", b"", b"ab", b"a\x00"], dtype=object)[rng.integers(0, 5, n)],
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
                (["raw", "name"], [False, True], "first"),
            ]
            for (by, ascending, na), dictionary in [(c, d) for c in cases for d in (True, False)]:
                with self.subTest(n=n, by=by, ascending=ascending, na=na, dictionary=dictionary):
                    got = sortd_pandas.sort_values(df, by, ascending=ascending, na_position=na,
                                                   client=self.client, dictionary=dictionary)
                    want = df.sort_values(by, ascending=ascending, na_position=na, kind="stable")
                    pd.testing.assert_frame_equal(got, want)

    def test_pandas_sort_values_of_a_large_frame_equals_pandas(self):
        # Past the client's parallel-take threshold (2^18 rows): numpy and
        # masked columns gathered on threads, the rest by pandas, the index
        # a RangeIndex and a labelled one.
        rng = np.random.default_rng(6)
        df = frame(rng, 300_000)
        for index in (None, "id"):
            f = df.reset_index(drop=True) if index is None else df
            with self.subTest(index=index):
                got = sortd_pandas.sort_values(f, ["n", "f", "name"], ascending=[False, True, True],
                                               na_position="first", client=self.client)
                want = f.sort_values(["n", "f", "name"], ascending=[False, True, True],
                                     na_position="first", kind="stable")
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

    def test_table_sessions_answer_as_one_message_does(self):
        # Every fixed-width type, nulls by mask and by NaT/NaN, both orders
        # and placements; parts over 3 connections (bitmaps split too).
        rng = np.random.default_rng(21)
        for n in (1, 1000, 70_001):
            ts = rng.integers(0, 5, n).astype("datetime64[s]")
            ts[rng.integers(0, n, n // 6)] = np.datetime64("NaT")
            cols = {
                "i8": rng.integers(-3, 3, n).astype(np.int8),
                "u16": np.ma.MaskedArray(rng.integers(0, 4, n).astype(np.uint16),
                                         mask=rng.integers(0, 5, n) == 0),
                "h": rng.integers(-2, 2, n).astype(np.float16) / 2,
                "ok": rng.integers(0, 2, n).astype(bool),
                "ts": ts,
                "td": rng.integers(-2, 2, n).astype("timedelta64[ms]"),
                "f8": np.where(rng.integers(0, 7, n) == 0, np.nan, rng.integers(0, 3, n) / 3),
                "i64": np.ma.MaskedArray(rng.integers(-2**62, 2**62, n),
                                         mask=rng.integers(0, 9, n) == 0),
                "u32": rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32),
            }
            cases = [
                (["i8", "u16", "h"], [True, False, True], ["last", "first", "last"]),
                (["ts", "ok", "td", "u32"], [False, True, False, True], "first"),
                (["f8", "i64"], [True, False], ["first", "last"]),
                (["u16", "i64", "ts", "i8", "ok", "h"], True, "last"),
            ]
            for by, ascending, nulls in cases:
                with self.subTest(n=n, by=by):
                    one = self.client.sort_table(cols, by, ascending, nulls, session=False)
                    got = self.client.sort_table(cols, by, ascending, nulls, session=True,
                                                 connections=3)
                    np.testing.assert_array_equal(got, one)
                    self.assertEqual(got.dtype, np.int64)
                    reordered = self.client.sort_table(cols, by, ascending, nulls, session=True,
                                                       return_columns=True, connections=2)
                    for name, column in cols.items():
                        out = reordered[name]
                        self.assertEqual(out.dtype, column.dtype, name)
                        if isinstance(column, np.ma.MaskedArray):
                            # (a mask with no null comes back as a plain array)
                            np.testing.assert_array_equal(np.ma.getmaskarray(out),
                                                          np.ma.getmaskarray(column)[one])
                            np.testing.assert_array_equal(np.ma.getdata(out), column.data[one])
                        else:
                            self.assertNotIsInstance(out, np.ma.MaskedArray)
                            np.testing.assert_array_equal(out.view(np.uint8).reshape(n, -1),
                                                          column[one].view(np.uint8).reshape(n, -1))

    def test_tables_past_the_message_limit_travel_as_a_session(self):
        # 1 MiB messages: a 3 MiB table goes through a table session, which
        # one message could not carry.
        rng = np.random.default_rng(5)
        n = 300_000
        a = rng.integers(0, 50, n).astype(np.int32)
        b = rng.random(n).astype(np.float32)
        c = rng.integers(0, 2**40, n)
        with Client(self.server.target, max_message_bytes=1 << 20, native=False) as small:
            with self.assertRaisesRegex(ValueError, "fixed-width columns only"):
                small.sort_table({"s": np.array([b"x"] * 3, dtype=object)}, by="s", session=True)
            phases = set()
            perm = small.sort_table({"a": a, "b": b, "c": c}, by=["a", "b"],
                                    ascending=[False, True],
                                    progress=lambda phase, done, total: phases.add(phase))
        np.testing.assert_array_equal(perm, np.lexsort((np.arange(n), b, -a)))
        self.assertEqual(phases, {"upload", "sort", "download"})

    def test_a_server_without_table_sessions_gets_one_message(self):
        # What a server from before table sessions answers their start (a
        # plain session without key_type): the client sends the table, and
        # a converted array, in one message where it fits; forced, it fails.
        import grpc

        class OldServer(grpc.RpcError):
            def code(self):
                return grpc.StatusCode.INVALID_ARGUMENT

            def details(self):
                return "key_type: must be set (ELEMENT_TYPE_UINT32 ... ELEMENT_TYPE_FLOAT64)"

        def refuse(*args, **kwargs):
            raise OldServer()

        rng = np.random.default_rng(8)
        cols = {"a": rng.integers(0, 9, 5000).astype(np.int16), "b": rng.random(5000)}
        want = self.client.sort_table(cols, ["a", "b"], session=False)
        with Client(self.server.target, session_min_bytes=1, native=False) as c:
            c._sessions.sort_table = refuse
            np.testing.assert_array_equal(c.sort_table(cols, ["a", "b"]), want)
            keys, idx = c.sort(cols["a"], return_indices=True)
            np.testing.assert_array_equal(idx, np.argsort(cols["a"], kind="stable"))
            with self.assertRaisesRegex(SortdError, "key_type: must be set"):
                c.sort_table(cols, ["a", "b"], session=True)

    def test_bad_table_sessions_are_refused_naming_the_field(self):
        from sortd.v1 import sort_pb2
        import grpc
        start = self.client._start_session

        def refused(request, says):
            with self.assertRaises(grpc.RpcError) as err:
                start(request.SerializeToString())
            self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn(says, err.exception.details())

        req = sort_pb2.StartSortSessionRequest(total_keys=4)
        req.columns.add(name="when", type=sort_pb2.ELEMENT_TYPE_DATETIME64)
        req.by.add(column=0)
        refused(req, "columns[0].unit: required for ELEMENT_TYPE_DATETIME64")
        req.columns[0].unit = sort_pb2.TIME_UNIT_SECOND
        req.by[0].column = 3
        refused(req, "by[0].column: 3, but the table has 1 columns")
        req.by[0].column = 0
        req.key_type = sort_pb2.ELEMENT_TYPE_UINT32
        refused(req, "key_type, value_type: leave them unset in a table session")
        plain = sort_pb2.StartSortSessionRequest(total_keys=4, key_type=sort_pb2.ELEMENT_TYPE_INT8)
        refused(plain, "key_type: ELEMENT_TYPE_INT8 is for table columns")
        no_keys = sort_pb2.StartSortSessionRequest(total_keys=4)
        no_keys.columns.add(type=sort_pb2.ELEMENT_TYPE_UINT8)
        refused(no_keys, "by: required (at least one key column)")
        huge = sort_pb2.StartSortSessionRequest(total_keys=1 << 32)
        huge.columns.add(type=sort_pb2.ELEMENT_TYPE_UINT8)
        huge.by.add(column=0)
        refused(huge, "total_keys: 4294967296 rows; a table session sorts fewer than 2^32")
        wide = sort_pb2.StartSortSessionRequest(total_keys=1)
        for _ in range(4097):
            wide.columns.add(type=sort_pb2.ELEMENT_TYPE_UINT8)
        wide.by.add(column=0)
        refused(wide, "columns: 4097 columns, at most 4096")

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
            # Past its 1 MiB message limit the C++ client sends the table as
            # a table session (counted once as SortSession by the server).
            n_big = 300_000
            big = {"k": rng.integers(0, 7, n_big).astype(np.uint32),
                   "x": rng.integers(-4, 4, n_big).astype(np.float64) / 2,
                   "t": rng.integers(0, 1 << 40, n_big)}
            big_files = []
            for name, a in big.items():
                big_files.append(os.path.join(tmp, "big_" + name + ".npy"))
                np.save(big_files[-1], a)
            sessions = total(scrape(self.server.metrics_url), "sortd_requests_total",
                             method="SortSession", code="OK")
            run = subprocess.run(
                [os.environ["SORTCTL_BIN"], "table", "--target=" + self.server.target,
                 "--max_message_bytes=1048576", "--columns=" + ",".join(big_files),
                 "--by=big_k,big_x,big_t", "--orders=desc,asc,asc", "--nulls=last,last,last", "--out=" + out],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(run.returncode, 0, run.stderr)
            self.assertIn("sorted %d rows by 3 keys" % n_big, run.stderr)
            np.testing.assert_array_equal(
                np.load(out), np.lexsort((np.arange(n_big), big["t"], big["x"], -big["k"].astype(np.int64))))
            self.assertTrue(wait_until(lambda: total(scrape(self.server.metrics_url), "sortd_requests_total",
                                                     method="SortSession", code="OK") == sessions + 1, 10))
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
        wide = sort_pb2.SortTableRequest()
        for _ in range(4097):
            wide.columns.add().values.uint8.values = b"\x01"
        wide.by.add(column=0)
        with self.assertRaises(grpc.RpcError) as err:
            self.client._sort_table(wide.SerializeToString())
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("columns: 4097 columns, at most 4096", err.exception.details())


if __name__ == "__main__":
    unittest.main()
