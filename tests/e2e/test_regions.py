"""Same-host regions, end to end: the real sortd binary (--shared_memory)
and the real Python client in this process, which creates POSIX shared
memory (sortd_client.SharedArray), registers it, and sorts arrays inside it
by reference (docs/api.md, "Shared-memory regions"). Bad references are
sent as raw protobuf requests over grpcio, so that the server, not the
client, refuses them.

Every sort is checked against numpy: a stable argsort of keys mapped to the
server's total order (floats: -inf < negatives < -0.0 < +0.0 < positives <
+inf < NaN, every NaN one key), and for descending a stable argsort of the
negated ranks (equal keys keep their input order). Keys and values are
compared bitwise. Server state (/metrics, ListRegions, /dev/shm) is polled,
never waited for with a fixed sleep.

The CUDA cases skip where no GPU is usable; on a GPU host they register
cudaMalloc memory through the client's CUDA IPC path.

Environment: SORTD_BIN, PYTHONPATH with build/python, client/python and
tests/e2e.
"""
import ctypes
import importlib
import os
import socket
import stat
import tempfile
import threading
import unittest
from multiprocessing import shared_memory

import grpc
import numpy as np

from sortd.v1 import sort_pb2
from sortd_client import Client, CudaError, SharedArray, SortdError
from sortd_client import cuda_ipc
from sort_reference import bits, make_array as make_any_array, reference_permutation
from sortd_process import SortdProcess, scrape, total, wait_until


def make_array(rng, name, n):
    """Test arrays with NaNs of either sign and several payloads."""
    return make_any_array(rng, name, n, nans=True)


SORTD = os.environ["SORTD_BIN"]
KEY_TYPES = ["uint32", "int32", "float32", "uint64", "int64", "float64"]
VALUE_TYPES = {4: ["uint32", "float32", "int32"], 8: ["float64", "int64", "uint64"]}
ELEMENT_TYPE = {np.dtype(n): getattr(sort_pb2, "ELEMENT_TYPE_" + n.upper()) for n in KEY_TYPES}
SIZES = (1, 1000, 1 << 20)  # 1 << 20: the large path (a GPU where one serves)
WAIT = 30  # seconds any polled condition may take on a loaded 2-core VM
CODE = grpc.StatusCode


def shm_objects():
    """This process's shared-memory objects (SharedArray names them so)."""
    prefix = "sortd-py-%d-" % os.getpid()
    return sorted(f for f in os.listdir("/dev/shm") if f.startswith(prefix))


# --- raw requests -------------------------------------------------------------
class Raw:
    """Region requests as protobuf messages on a channel of its own."""

    def __init__(self, target):
        self.channel = grpc.insecure_channel(target)

        def call(service, method, request, response):
            return self.channel.unary_unary(
                "/sortd.v1.%s/%s" % (service, method),
                request_serializer=request.SerializeToString,
                response_deserializer=response.FromString)
        self.sort = call("SortService", "Sort", sort_pb2.SortRequest, sort_pb2.SortResponse)
        self.sort_pairs = call("SortService", "SortPairs", sort_pb2.SortPairsRequest,
                               sort_pb2.SortPairsResponse)
        self.sort_table = call("SortService", "SortTable", sort_pb2.SortTableRequest,
                               sort_pb2.SortTableResponse)
        self.top_k = call("SortService", "TopK", sort_pb2.TopKRequest, sort_pb2.TopKResponse)
        self.register_cuda = call("RegionService", "RegisterCudaRegion",
                                  sort_pb2.RegisterCudaRegionRequest,
                                  sort_pb2.RegisterCudaRegionResponse)
        self.list = call("RegionService", "ListRegions", sort_pb2.ListRegionsRequest,
                         sort_pb2.ListRegionsResponse)

    def close(self):
        self.channel.close()


def rslice(region, offset, count, dtype):
    return sort_pb2.RegionSlice(region=region, offset=offset, count=count,
                                type=ELEMENT_TYPE.get(np.dtype(dtype), 0))


def start_server(*flags):
    return SortdProcess(SORTD, *flags).start()


def stop_server(server):
    code = server.terminate()
    log = server.read_log()
    server.__exit__(None, None, None)
    assert code == 0 and "drained" in log, log


class RegionTest(unittest.TestCase):
    """Helpers shared by the classes below."""

    def assertCode(self, cm, code, says=""):
        """cm's exception (SortdError or grpc.RpcError) has `code` and `says`."""
        err = cm.exception
        if isinstance(err, grpc.RpcError):
            got, details = err.code(), err.details()
        else:
            self.assertIsInstance(err, SortdError)
            got, details = err.code, err.details
        self.assertEqual(got, code, details)
        self.assertIn(says, details)

    def shared(self, client, count, dtype, **kw):
        """A SharedArray closed when the test ends."""
        handle = SharedArray(client, count, dtype, **kw)
        self.addCleanup(handle.close)
        return handle

    def wait_metrics(self, server, predicate, what):
        """Polls /metrics until predicate(samples) holds; the samples."""
        seen = {}

        def check():
            seen["s"] = scrape(server.metrics_url)
            return predicate(seen["s"])

        self.assertTrue(wait_until(check, WAIT, step=0.02), "%s: not within %ds; last: %s" % (
            what, WAIT, {k: v for k, v in seen.get("s", {}).items()
                         if k[0].startswith(("sortd_shm", "sortd_inflight"))}))
        return seen["s"]

    def check_sorted(self, got, keys, descending, values=None, got_values=None):
        perm = reference_permutation(keys, descending)
        np.testing.assert_array_equal(bits(got), bits(keys[perm]))
        if values is not None:
            np.testing.assert_array_equal(bits(got_values), bits(values[perm]))
        return perm


class Regions(RegionTest):
    """One sortd with system regions for the sorting and error cases."""

    @classmethod
    def setUpClass(cls):
        cls.server = start_server("--shared_memory=system")
        cls.client = Client(cls.server.target, timeout=120)
        cls.raw = Raw(cls.server.target)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.raw.close()
        leftovers = shm_objects()
        stop_server(cls.server)
        assert not leftovers, "shared-memory objects left: %s" % leftovers

    def tearDown(self):
        # After every case: nothing in flight, and the server still sorts
        # inline and answers health checks. (The case's regions are closed
        # by its cleanups, which run after this.)
        self.wait_metrics(self.server, lambda s: total(s, "sortd_inflight_requests") == 0
                          and total(s, "sortd_inflight_bytes") == 0, "server idle")
        self.assertEqual(self.client.health(), "SERVING")
        keys = np.array([3, 1, 2], np.uint32)
        np.testing.assert_array_equal(self.client.sort(keys), [1, 2, 3])

    # --- sorting --------------------------------------------------------
    def test_every_key_type_in_place_and_out_of_place_both_orders(self):
        rng = np.random.default_rng(18)
        for name in KEY_TYPES:
            for n in SIZES:
                # Keys and an output slice in one region, at odd element
                # offsets (the offsets are bytes on the wire).
                handle = self.shared(self.client, 2 * n + 8, name)
                a, out = handle.array[3:3 + n], handle.array[n + 5:2 * n + 5]
                for descending in (False, True):
                    with self.subTest(key_type=name, n=n, descending=descending):
                        keys = make_array(rng, name, n)
                        a[:] = keys
                        got = self.client.sort(a, descending=descending)
                        self.assertIs(got, a)
                        self.check_sorted(a, keys, descending)

                        a[:] = keys
                        out[:] = 0
                        got = self.client.sort(a, descending=descending, out=out)
                        self.assertIs(got, out)
                        self.check_sorted(out, keys, descending)
                        np.testing.assert_array_equal(bits(a), bits(keys))  # untouched
                handle.close()

    def test_return_indices_inline_and_into_an_indices_region(self):
        rng = np.random.default_rng(7)
        for name in KEY_TYPES:
            for n in (1000, 1 << 20):
                handles = [self.shared(self.client, n, name), self.shared(self.client, n, name),
                           self.shared(self.client, n + 1, np.uint64)]
                a, out, idx_region = handles[0].array, handles[1].array, handles[2].array[1:]
                for descending in (False, True):
                    with self.subTest(key_type=name, n=n, descending=descending):
                        keys = make_array(rng, name, n)
                        perm = reference_permutation(keys, descending)
                        a[:] = keys
                        got, idx = self.client.sort(a, descending=descending,
                                                    return_indices=True)
                        self.assertIs(got, a)
                        self.assertEqual(idx.dtype, np.uint64)
                        np.testing.assert_array_equal(idx, perm)
                        np.testing.assert_array_equal(bits(a), bits(keys[perm]))

                        a[:] = keys
                        idx_region[:] = 0
                        got, idx = self.client.sort(a, descending=descending,
                                                    return_indices=True, indices_out=idx_region)
                        self.assertIs(idx, idx_region)
                        np.testing.assert_array_equal(idx_region, perm)
                        np.testing.assert_array_equal(bits(a), bits(keys[perm]))

                        # Out of place with indices into a region.
                        a[:] = keys
                        res = self.client.sort_full(a, descending=descending,
                                                    return_indices=True, out=out,
                                                    indices_out=idx_region)
                        self.assertIs(res.keys, out)
                        np.testing.assert_array_equal(bits(out), bits(keys[perm]))
                        np.testing.assert_array_equal(idx_region, perm)
                        np.testing.assert_array_equal(bits(a), bits(keys))
                for h in handles:
                    h.close()

    def test_tables_in_regions_answer_as_one_message_reordered_in_place(self):
        """sort_table over shared arrays: the columns go by reference, the
        answer is the message path's, and return_columns reorders the
        caller's own arrays where they lie."""
        rng = np.random.default_rng(49)
        for n in (1, 1000, 1 << 18):
            with self.subTest(n=n):
                data = {
                    "i32": rng.integers(-4, 5, n).astype(np.int32),
                    "f32": rng.choice(np.array([0.0, -0.0, np.nan, 1.5, -2.0], np.float32), n),
                    "i16": rng.integers(-3, 4, n).astype(np.int16),
                    "ts": rng.integers(0, 5, n).astype("datetime64[ns]"),
                    "flag": rng.integers(0, 2, n).astype(bool),
                }
                data["ts"][rng.random(n) < 0.15] = np.datetime64("NaT")
                mask = rng.random(n) < 0.25
                by, ascending = ["flag", "i32", "ts", "f32", "i16"], [False, True, False, True, False]
                nulls = ["last", "first", "first", "last", "last"]

                def table(arrays):
                    out = dict(arrays)
                    out["i32"] = np.ma.MaskedArray(arrays["i32"], mask=mask)
                    return out

                want = self.client.sort_table(table({k: v.copy() for k, v in data.items()}), by,
                                              ascending, nulls, return_columns=True, session=False)
                want_perm = self.client.sort_table(table(data), by, ascending, nulls, session=False)
                shared = {k: self.shared(self.client, n, v.dtype).array for k, v in data.items()}
                for k, v in data.items():
                    shared[k][:] = v
                # The permutation only: the columns are read, not written.
                perm = self.client.sort_table(table(shared), by, ascending, nulls)
                np.testing.assert_array_equal(perm, want_perm)
                for k, v in data.items():
                    np.testing.assert_array_equal(bits(shared[k]), bits(v))
                # Into an indices region.
                slots = self.shared(self.client, n, np.uint64).array
                got = self.client.sort_table(table(shared), by, ascending, nulls, indices_out=slots)
                self.assertIs(got, slots)
                np.testing.assert_array_equal(slots.view(np.int64), want_perm)
                # Reordered in place: the dict holds the caller's arrays.
                got = self.client.sort_table(table(shared), by, ascending, nulls,
                                             return_columns=True)
                for k in data:
                    arr = got[k].data if isinstance(got[k], np.ma.MaskedArray) else got[k]
                    self.assertTrue(np.shares_memory(arr, shared[k]), k)
                    np.testing.assert_array_equal(bits(np.ma.getdata(got[k])),
                                                  bits(np.ma.getdata(want[k])), k)
                np.testing.assert_array_equal(np.ma.getmaskarray(got["i32"]),
                                              np.ma.getmaskarray(want["i32"]))

        # Independently of the message path: numpy's stable lexsort.
        n = 1 << 16
        a = self.shared(self.client, n, np.int16).array
        b = self.shared(self.client, n, np.int32).array
        a[:] = rng.integers(-50, 50, n)
        b[:] = rng.integers(-1000, 1000, n)
        perm = self.client.sort_table({"a": a, "b": b}, ["a", "b"], [True, False])
        np.testing.assert_array_equal(perm, np.lexsort((-b.astype(np.int64), a)))

    def test_table_region_rules_and_refusals(self):
        n = 100
        col = self.shared(self.client, n, np.int32).array
        col[:] = np.arange(n)[::-1]
        ro = col.view()
        ro.flags.writeable = False
        with self.assertRaisesRegex(ValueError, "read-only"):
            self.client.sort_table({"c": ro}, "c", return_columns=True)
        with self.assertRaisesRegex(ValueError, "one SortTable message"):
            self.client.sort_table({"c": col}, "c", session=True)
        with self.assertRaisesRegex(ValueError, "must lie in a region"):
            self.client.sort_table({"c": col}, "c", indices_out=np.empty(n, np.uint64))
        # The server's own checks: a permutation slot over a column.
        raw = sort_pb2.SortTableRequest()
        column = raw.columns.add(name="c")
        column.values_region.CopyFrom(rslice(self.client.region_of(col), 0, n, np.int32))
        raw.by.add(column=0)
        raw.indices_region.CopyFrom(rslice(self.client.region_of(col), 0, n, np.uint64))
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.sort_table(raw)
        self.assertCode(cm, grpc.StatusCode.INVALID_ARGUMENT, "indices_region")
        np.testing.assert_array_equal(col, np.arange(n)[::-1])  # untouched

    def test_sort_pairs_with_4_and_8_byte_values_in_place_and_out_of_place(self):
        rng = np.random.default_rng(99)
        for i, name in enumerate(KEY_TYPES):
            for width in (4, 8):
                value_name = VALUE_TYPES[width][i % 3]
                for n in (1000, 1 << 20):
                    handles = [self.shared(self.client, n, name),
                               self.shared(self.client, n, value_name),
                               self.shared(self.client, 2 * n * 8, np.uint8)]
                    k, v, outs = (h.array for h in handles)
                    # The outputs share one region (disjoint slices).
                    k_out = outs[:n * k.itemsize].view(name)
                    v_out = outs[n * 8:n * 8 + n * v.itemsize].view(value_name)
                    for descending in (False, True):
                        with self.subTest(key_type=name, value_type=value_name, n=n,
                                          descending=descending):
                            keys = make_array(rng, name, n)
                            values = make_array(rng, value_name, n)
                            k[:], v[:] = keys, values
                            got_k, got_v = self.client.sort_pairs(k, v, descending=descending)
                            self.assertIs(got_k, k)
                            self.assertIs(got_v, v)
                            self.check_sorted(k, keys, descending, values, v)

                            k[:], v[:] = keys, values
                            got_k, got_v = self.client.sort_pairs(
                                k, v, descending=descending, out=k_out, values_out=v_out)
                            self.assertIs(got_k, k_out)
                            self.assertIs(got_v, v_out)
                            self.check_sorted(k_out, keys, descending, values, v_out)
                            np.testing.assert_array_equal(bits(k), bits(keys))
                            np.testing.assert_array_equal(bits(v), bits(values))
                    for h in handles:
                        h.close()

    def test_empty_slices_sort_to_nothing(self):
        a = self.shared(self.client, 4, np.uint32).array
        a[:] = [4, 3, 2, 1]
        got, idx = self.client.sort(a[2:2], return_indices=True)
        self.assertEqual((len(got), len(idx)), (0, 0))
        got_k, got_v = self.client.sort_pairs(a[1:1], a[3:3])
        self.assertEqual((len(got_k), len(got_v)), (0, 0))
        np.testing.assert_array_equal(a, [4, 3, 2, 1])
        # A region array of no elements registers and sorts to nothing.
        empty = self.shared(self.client, 0, np.float64).array
        self.assertEqual(len(self.client.sort(empty)), 0)

    def test_client_side_rules_of_the_region_path(self):
        a = self.shared(self.client, 8, np.uint32).array
        a[:] = [5, 1, 4, 1, 3, 9, 2, 6]
        plain = np.arange(8, dtype=np.uint32)
        with self.assertRaisesRegex(ValueError, "both lie in registered regions"):
            self.client.sort_pairs(a, plain)
        with self.assertRaisesRegex(ValueError, "keys_out must lie in a region"):
            self.client.sort(a, out=plain)
        with self.assertRaisesRegex(ValueError, "needs return_indices"):
            self.client.sort(a, indices_out=self.shared(self.client, 8, np.uint64).array)
        with self.assertRaisesRegex(ValueError, "expected 8 of uint32"):
            self.client.sort(a, out=self.shared(self.client, 8, np.int32).array)
        # chunked=False: a copy through a message; the region is left alone.
        got = self.client.sort(a, chunked=False)
        self.assertIsNot(got, a)
        np.testing.assert_array_equal(got, [1, 1, 2, 3, 4, 5, 6, 9])
        np.testing.assert_array_equal(a, [5, 1, 4, 1, 3, 9, 2, 6])
        # A strided view cannot be named by a slice: also a copy.
        got = self.client.sort(a[::2])
        np.testing.assert_array_equal(got, [2, 3, 4, 5])
        np.testing.assert_array_equal(a, [5, 1, 4, 1, 3, 9, 2, 6])

    # --- bad references -------------------------------------------------
    def test_bad_references_are_refused_naming_the_field_and_touch_nothing(self):
        h = self.shared(self.client, 1024, np.uint32, name="refs")
        self.shared(self.client, 1024, np.uint64, name="refs-idx")
        vals = self.shared(self.client, 1024, np.float64, name="refs-vals")
        data = np.random.default_rng(1).integers(0, 1 << 32, 1024, dtype=np.uint32)
        h.array[:] = data
        vals.array[:] = 0.5
        u32, u64 = np.uint32, np.uint64

        def sort(**fields):
            return self.raw.sort(sort_pb2.SortRequest(**fields), timeout=WAIT)

        def pairs(**fields):
            return self.raw.sort_pairs(sort_pb2.SortPairsRequest(**fields), timeout=WAIT)

        inline = sort_pb2.TypedArray()
        inline.uint32.values.extend([3, 1, 2])
        cases = [
            ("unknown region", sort, dict(keys_region=rslice("nope", 0, 4, u32)),
             CODE.NOT_FOUND, "keys_region.region: no region named 'nope'"),
            ("unknown output region", sort,
             dict(keys_region=rslice("refs", 0, 4, u32), keys_out_region=rslice("gone", 0, 4, u32)),
             CODE.NOT_FOUND, "keys_out_region.region: no region named 'gone'"),
            ("unknown values region", pairs,
             dict(keys_region=rslice("refs", 0, 4, u32), values_region=rslice("x", 0, 4, u32)),
             CODE.NOT_FOUND, "values_region.region"),
            ("misaligned offset", sort, dict(keys_region=rslice("refs", 2, 4, u32)),
             CODE.INVALID_ARGUMENT, "keys_region.offset: 2 is not a multiple of the element "
                                    "width 4"),
            ("past the end", sort, dict(keys_region=rslice("refs", 4, 1024, u32)),
             CODE.INVALID_ARGUMENT, "keys_region: 1024 elements of 4 bytes from offset 4 lie "
                                    "outside region 'refs'"),
            ("offset past the end", sort, dict(keys_region=rslice("refs", 8192, 0, u32)),
             CODE.INVALID_ARGUMENT, "keys_region"),
            ("huge count", sort, dict(keys_region=rslice("refs", 0, 1 << 62, u32)),
             CODE.INVALID_ARGUMENT, "keys_region"),
            ("no type", sort, dict(keys_region=sort_pb2.RegionSlice(region="refs", count=4)),
             CODE.INVALID_ARGUMENT, "keys_region.type"),
            ("no region name", sort, dict(keys_region=rslice("", 0, 4, u32)),
             CODE.INVALID_ARGUMENT, "keys_region.region: required"),
            ("indices of uint32", sort,
             dict(keys_region=rslice("refs", 0, 4, u32), return_indices=True,
                  indices_region=rslice("refs-idx", 0, 4, u32)),
             CODE.INVALID_ARGUMENT, "indices_region.type"),
            ("indices without return_indices", sort,
             dict(keys_region=rslice("refs", 0, 4, u32),
                  indices_region=rslice("refs-idx", 0, 4, u64)),
             CODE.INVALID_ARGUMENT, "indices_region: set only together with return_indices"),
            ("indices count", sort,
             dict(keys_region=rslice("refs", 0, 4, u32), return_indices=True,
                  indices_region=rslice("refs-idx", 0, 3, u64)),
             CODE.INVALID_ARGUMENT, "indices_region.count"),
            ("overlapping output", sort,
             dict(keys_region=rslice("refs", 0, 16, u32),
                  keys_out_region=rslice("refs", 32, 16, u32)),
             CODE.INVALID_ARGUMENT, "keys_out_region: overlaps keys_region"),
            ("indices overlapping keys", sort,
             dict(keys_region=rslice("refs", 0, 16, u32), return_indices=True,
                  indices_region=rslice("refs", 32, 16, u64)),
             CODE.INVALID_ARGUMENT, "indices_region: overlaps keys_region"),
            ("values overlapping keys", pairs,
             dict(keys_region=rslice("refs", 0, 16, u32),
                  values_region=rslice("refs", 60, 16, u32)),
             CODE.INVALID_ARGUMENT, "values_region: overlaps keys_region"),
            ("output count", sort,
             dict(keys_region=rslice("refs", 0, 16, u32),
                  keys_out_region=rslice("refs", 64, 15, u32)),
             CODE.INVALID_ARGUMENT,
             "keys_out_region.count: 15 does not match keys_region.count 16"),
            ("output type", sort,
             dict(keys_region=rslice("refs", 0, 16, u32),
                  keys_out_region=rslice("refs", 64, 16, np.int32)),
             CODE.INVALID_ARGUMENT, "keys_out_region.type"),
            ("values count", pairs,
             dict(keys_region=rslice("refs", 0, 16, u32),
                  values_region=rslice("refs-vals", 0, 15, np.float64)),
             CODE.INVALID_ARGUMENT, "values_region.count: 15 does not match keys_region.count 16"),
            ("values output type", pairs,
             dict(keys_region=rslice("refs", 0, 16, u32),
                  values_region=rslice("refs-vals", 0, 16, np.float64),
                  values_out_region=rslice("refs-vals", 256, 16, np.int64)),
             CODE.INVALID_ARGUMENT, "values_out_region.type"),
            ("inline keys beside keys_region", sort,
             dict(keys=inline, keys_region=rslice("refs", 0, 3, u32)),
             CODE.INVALID_ARGUMENT, "keys: leave unset when keys_region is set"),
            ("inline values beside values_region", pairs,
             dict(keys_region=rslice("refs", 0, 3, u32), values=inline,
                  values_region=rslice("refs-vals", 0, 3, np.float64)),
             CODE.INVALID_ARGUMENT, "values: leave unset when values_region is set"),
            ("output without keys_region", sort,
             dict(keys_out_region=rslice("refs", 0, 4, u32)),
             CODE.INVALID_ARGUMENT, "keys_region: required"),
            ("pairs without values_region", pairs, dict(keys_region=rslice("refs", 0, 4, u32)),
             CODE.INVALID_ARGUMENT, "values_region: required"),
        ]
        for what, call, fields, code, says in cases:
            with self.subTest(what):
                with self.assertRaises(grpc.RpcError) as cm:
                    call(**fields)
                self.assertCode(cm, code, says)
                np.testing.assert_array_equal(h.array, data)  # nothing was written
                np.testing.assert_array_equal(vals.array, 0.5)
        # The same through the client: SortdError with the code.
        with self.assertRaises(SortdError) as cm:
            self.client.register_system_region("refs", h.shm_key, 4096)
        self.assertCode(cm, CODE.ALREADY_EXISTS, "name: a region named 'refs'")
        # An output identical to its input is in place, and allowed.
        sort(keys_region=rslice("refs", 0, 1024, u32), keys_out_region=rslice("refs", 0, 1024, u32))
        np.testing.assert_array_equal(h.array, np.sort(data))

    def test_one_object_under_two_names_is_one_memory(self):
        # Overlap is judged on the memory: "alias" is the second page of
        # the object behind "base".
        h = self.shared(self.client, 2048, np.uint32, name="base")
        self.client.register_system_region("alias", h.shm_key, 4096, offset=4096)
        self.addCleanup(self.client.unregister_region, "alias")
        data = np.random.default_rng(3).integers(0, 1000, 512, dtype=np.uint32)
        h.array[1024:1536] = data
        keys = rslice("base", 4096, 512, np.uint32)  # object bytes [4096, 6144)
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.sort(sort_pb2.SortRequest(
                keys_region=keys, keys_out_region=rslice("alias", 1024, 512, np.uint32)),
                timeout=WAIT)
        self.assertCode(cm, CODE.INVALID_ARGUMENT, "keys_out_region: overlaps keys_region")
        # Disjoint: object bytes [6144, 8192).
        self.raw.sort(sort_pb2.SortRequest(
            keys_region=keys, keys_out_region=rslice("alias", 2048, 512, np.uint32)), timeout=WAIT)
        np.testing.assert_array_equal(h.array[1536:2048], np.sort(data))
        np.testing.assert_array_equal(h.array[1024:1536], data)
        # Identical memory under the other name: in place.
        self.raw.sort(sort_pb2.SortRequest(
            keys_region=keys, keys_out_region=rslice("alias", 0, 512, np.uint32),
            order=sort_pb2.SORT_ORDER_DESCENDING), timeout=WAIT)
        np.testing.assert_array_equal(h.array[1024:1536], np.sort(data)[::-1])

    def test_registration_errors(self):
        before = {r.name for r in self.client.list_regions()}
        missing = "/sortd-e2e-missing-%d" % os.getpid()
        h = self.shared(self.client, 1024, np.uint32, name="dup")
        objects = shm_objects()
        cases = [
            ("missing object", ("m", missing, 4096, 0), CODE.NOT_FOUND,
             "shm_key: cannot open '%s'" % missing),
            ("empty name", ("", h.shm_key, 4096, 0), CODE.INVALID_ARGUMENT, "name: 1 to 128"),
            ("long name", ("n" * 129, h.shm_key, 4096, 0), CODE.INVALID_ARGUMENT, "name: 1 to 128"),
            ("name with a space", ("a b", h.shm_key, 4096, 0), CODE.INVALID_ARGUMENT, "name:"),
            ("name with a slash", ("a/b", h.shm_key, 4096, 0), CODE.INVALID_ARGUMENT, "name:"),
            ("key with two slashes", ("k", "/a/b", 4096, 0), CODE.INVALID_ARGUMENT, "shm_key:"),
            ("empty key", ("k", "", 4096, 0), CODE.INVALID_ARGUMENT, "shm_key:"),
            ("duplicate name", ("dup", h.shm_key, 4096, 0), CODE.ALREADY_EXISTS,
             "name: a region named 'dup' is registered already"),
            ("offset off a page", ("o", h.shm_key, 1024, 100), CODE.INVALID_ARGUMENT,
             "offset: 100 is not a multiple of the page size"),
            ("past the object", ("p", h.shm_key, 8192, 0), CODE.INVALID_ARGUMENT,
             "byte_size: bytes [0, 8192)"),
            ("zero bytes", ("z", h.shm_key, 0, 0), CODE.INVALID_ARGUMENT, "byte_size"),
        ]
        for what, (name, key, size, offset), code, says in cases:
            with self.subTest(what):
                with self.assertRaises(SortdError) as cm:
                    self.client.register_system_region(name, key, size, offset=offset)
                self.assertCode(cm, code, says)
        with self.assertRaises(SortdError) as cm:
            self.client.unregister_region("never-registered")
        self.assertCode(cm, CODE.NOT_FOUND, "name: no region named 'never-registered'")
        # A SharedArray whose registration fails leaves no object behind.
        with self.assertRaises(SortdError) as cm:
            SharedArray(self.client, 16, np.uint32, name="dup")
        self.assertCode(cm, CODE.ALREADY_EXISTS, "dup")
        self.assertEqual(shm_objects(), objects)
        # CUDA regions are off on this server.
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.register_cuda(sort_pb2.RegisterCudaRegionRequest(
                name="c", raw_handle=bytes(64), device_id=0, byte_size=4096), timeout=WAIT)
        self.assertCode(cm, CODE.FAILED_PRECONDITION, "CUDA IPC regions are off")
        self.assertEqual({r.name for r in self.client.list_regions()}, before | {"dup"})

    def test_shared_arrays_are_owner_only_unless_a_mode_is_given(self):
        for mode in (None, 0o660, 0o640):
            kwargs = {} if mode is None else {"mode": mode}
            shared = SharedArray(self.client, 1024, np.uint32, **kwargs)
            self.addCleanup(shared.close)
            path = "/dev/shm" + shared.shm_key
            self.assertEqual(os.stat(path).st_mode & 0o777, mode or 0o600)
            # Registered and sorted in place like any other.
            shared.array[:] = np.arange(1024, dtype=np.uint32)[::-1]
            self.client.sort(shared.array)
            np.testing.assert_array_equal(shared.array, np.arange(1024, dtype=np.uint32))
            shared.close()
            self.assertFalse(os.path.exists(path))

    def test_list_regions_and_unregister(self):
        h = self.shared(self.client, 1000, np.int64, name="listed")
        regions = {r.name: r for r in self.client.list_regions()}
        self.assertIn("listed", regions)
        r = regions["listed"]
        self.assertEqual((r.kind, r.byte_size, r.shm_key, r.device_id, r.pinned),
                         ("REGION_KIND_SYSTEM", 8000, h.shm_key, -1, h.pinned))
        self.assertEqual(self.client.region_of(h.array[10:20]), "listed")
        self.assertTrue(os.path.exists("/dev/shm" + h.shm_key))
        view = h.array[:3]
        self.client.unregister_region("listed")
        self.assertNotIn("listed", {r.name for r in self.client.list_regions()})
        self.assertFalse(os.path.exists("/dev/shm" + h.shm_key))  # unlinked once
        self.assertIsNone(self.client.region_of(view))
        view[:] = [3, 2, 1]  # still mapped while views live
        np.testing.assert_array_equal(self.client.sort(view), [1, 2, 3])  # inline now
        h.close()  # a second release is a no-op

    # --- concurrency ------------------------------------------------------
    def test_unregister_while_sorts_run(self):
        """Threads sort 2^22-key slices of one region in a loop while
        another client unregisters and re-registers it: every sort either
        succeeds with the right result or fails NOT_FOUND having written
        nothing, and a sort running when its region goes still finishes."""
        n, threads = 1 << 22, 3
        h = self.shared(self.client, threads * n, np.uint32, name="churn")
        other = Client(self.server.target, timeout=120)
        self.addCleanup(other.close)
        rng = np.random.default_rng(5)
        refs = [rng.integers(0, 1 << 32, n, dtype=np.uint32) for _ in range(threads)]
        wants = [np.sort(r) for r in refs]
        lock = threading.Lock()
        counts = {"ok": 0, "not_found": 0}
        failures, stop = [], threading.Event()

        def sorter(t):
            view = h.array[t * n:(t + 1) * n]
            while not stop.is_set():
                view[:] = refs[t]
                try:
                    got = self.client.sort(view, descending=False)
                    ok = got is view and np.array_equal(view, wants[t])
                    key = "ok" if ok else None
                except SortdError as err:
                    ok = err.code == CODE.NOT_FOUND and np.array_equal(view, refs[t])
                    key = "not_found" if ok else None
                    if not ok:
                        failures.append("thread %d: %s" % (t, err))
                except Exception as err:  # noqa: BLE001 - reported below
                    key = None
                    failures.append("thread %d: %r" % (t, err))
                with lock:
                    if key is None:
                        failures.append("thread %d: wrong result" % t)
                        stop.set()
                    else:
                        counts[key] += 1

        def seen(key, more_than):
            with lock:
                return counts[key] > more_than or bool(failures)

        workers = [threading.Thread(target=sorter, args=(t,), daemon=True)
                   for t in range(threads)]
        for w in workers:
            w.start()
        try:
            for _ in range(4):
                with lock:
                    ok_before = counts["ok"]
                self.assertTrue(wait_until(lambda: seen("ok", ok_before), 2 * WAIT),
                                "no sort succeeded while registered")
                with lock:
                    nf_before = counts["not_found"]
                other.unregister_region("churn")
                self.assertTrue(wait_until(lambda: seen("not_found", nf_before), WAIT),
                                "no NOT_FOUND while unregistered")
                other.register_system_region("churn", h.shm_key, h.nbytes)
        finally:
            stop.set()
            for w in workers:
                w.join(2 * WAIT)
        self.assertEqual(failures, [])
        self.assertGreater(counts["ok"], 4)
        self.assertGreaterEqual(counts["not_found"], 4)
        self.assertIn("churn", {r.name for r in self.client.list_regions()})

    # --- metrics ----------------------------------------------------------
    def test_metrics_count_regions_bytes_and_requests(self):
        url = self.server.metrics_url
        before = scrape(url)

        def delta(s, name, **labels):
            return total(s, name, **labels) - total(before, name, **labels)

        n = 1 << 20
        h = self.shared(self.client, n, np.uint64)
        self.wait_metrics(self.server, lambda s: (
            delta(s, "sortd_shm_regions", kind="system") == 1
            and delta(s, "sortd_shm_registered_bytes", kind="system") == 8 * n),
            "one more system region of 8 MiB")
        h.array[:] = np.arange(n, 0, -1, dtype=np.uint64)
        for descending in (False, True, False):
            self.client.sort(h.array, descending=descending)
        self.assertEqual(h.array[0], 1)
        with self.assertRaises(grpc.RpcError):  # no region: not counted
            self.raw.sort(sort_pb2.SortRequest(keys_region=rslice("none", 0, 4, np.uint32)),
                          timeout=WAIT)
        after = self.wait_metrics(self.server, lambda s: (
            delta(s, "sortd_shm_requests_total", kind="system") == 3),
            "3 system-region requests counted")
        self.assertEqual(delta(after, "sortd_shm_requests_total", kind="cuda"), 0)
        # The keys did not cross the socket.
        self.assertLess(delta(after, "sortd_bytes_received_total", method="Sort"), 4096)
        h.close()
        self.wait_metrics(self.server, lambda s: (
            delta(s, "sortd_shm_regions", kind="system") == 0
            and delta(s, "sortd_shm_registered_bytes", kind="system") == 0),
            "the region gone from the gauges")


class RegionsOff(RegionTest):
    """A server without --shared_memory refuses every region call."""

    @classmethod
    def setUpClass(cls):
        cls.server = start_server()
        cls.client = Client(cls.server.target, timeout=60)
        cls.raw = Raw(cls.server.target)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.raw.close()
        stop_server(cls.server)

    def test_region_calls_are_failed_precondition(self):
        objects = shm_objects()
        with self.assertRaises(SortdError) as cm:
            self.client.shared_array(16, np.uint32)
        self.assertCode(cm, CODE.FAILED_PRECONDITION, "--shared_memory")
        self.assertEqual(shm_objects(), objects)  # the object went with it
        shm = shared_memory.SharedMemory(create=True, size=4096)
        self.addCleanup(shm.unlink)
        self.addCleanup(shm.close)
        calls = [
            lambda: self.client.register_system_region("x", "/" + shm.name, 4096),
            lambda: self.client.list_regions(),
            lambda: self.client.unregister_region("x"),
            lambda: self.raw.sort(sort_pb2.SortRequest(keys_region=rslice("x", 0, 4, np.uint32)),
                                  timeout=WAIT),
            lambda: self.raw.sort_pairs(sort_pb2.SortPairsRequest(
                keys_region=rslice("x", 0, 4, np.uint32),
                values_region=rslice("x", 16, 4, np.uint32)), timeout=WAIT),
        ]
        for i, call in enumerate(calls):
            with self.subTest(call=i):
                with self.assertRaises((SortdError, grpc.RpcError)) as cm:
                    call()
                self.assertCode(cm, CODE.FAILED_PRECONDITION, "shared_memory")
        np.testing.assert_array_equal(self.client.sort(np.array([2, 1], np.int32)), [1, 2])


class RegionLimits(RegionTest):
    """--max_shm_regions=2 and --max_shm_bytes=1 MiB."""

    @classmethod
    def setUpClass(cls):
        cls.server = start_server("--shared_memory=system", "--max_shm_regions=2",
                                  "--max_shm_bytes=1048576")
        cls.client = Client(cls.server.target, timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        stop_server(cls.server)

    def test_limits_are_resource_exhausted_until_room_is_made(self):
        objects = shm_objects()
        first = self.shared(self.client, 1024, np.uint32)
        second = self.shared(self.client, 1024, np.uint32)
        with self.assertRaises(SortdError) as cm:
            SharedArray(self.client, 1024, np.uint32)
        self.assertCode(cm, CODE.RESOURCE_EXHAUSTED, "regions: 2 registered, the limit "
                                                     "(--max_shm_regions)")
        first.close()
        third = self.shared(self.client, 1024, np.uint32)  # room again
        third.array[:] = np.arange(1024, 0, -1)
        self.client.sort(third.array)
        self.assertEqual(third.array[0], 1)
        second.close()
        with self.assertRaises(SortdError) as cm:
            SharedArray(self.client, (1 << 20) // 4, np.uint32)  # 1 MiB beside 4 KiB
        self.assertCode(cm, CODE.RESOURCE_EXHAUSTED, "--max_shm_bytes")
        third.close()
        self.assertEqual(shm_objects(), objects)


class UnixSocket(RegionTest):
    """Regions through --unix_socket (target unix:/path)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="sortd-regions-")
        cls.path = os.path.join(cls.tmp.name, "sortd.sock")
        cls.server = start_server("--shared_memory=system", "--unix_socket=" + cls.path)
        assert wait_until(lambda: os.path.exists(cls.path), WAIT), cls.server.read_log()
        cls.client = Client("unix:" + cls.path, timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        stop_server(cls.server)
        cls.tmp.cleanup()

    def test_sorts_in_shared_memory_over_the_unix_socket(self):
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o660)
        self.assertTrue(stat.S_ISSOCK(os.stat(self.path).st_mode))
        rng = np.random.default_rng(11)
        keys = make_array(rng, "float32", 100000)
        values = make_array(rng, "int64", 100000)
        k = self.shared(self.client, len(keys), np.float32).array
        v = self.shared(self.client, len(keys), np.int64).array
        k[:] = keys
        got, idx = self.client.sort(k, descending=True, return_indices=True)
        perm = self.check_sorted(k, keys, True)
        np.testing.assert_array_equal(idx, perm)
        k[:], v[:] = keys, values
        self.client.sort_pairs(k, v)
        self.check_sorted(k, keys, False, values, v)
        self.assertEqual(len(self.client.list_regions()), 2)
        np.testing.assert_array_equal(self.client.sort(np.array([2, 1], np.uint64)), [1, 2])


def non_loopback_address():
    """An IPv4 address of this host other than loopback, or None."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.255", 1))  # no packet is sent
        address = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if address.startswith("127.") else address


class RemotePeer(RegionTest):
    """A caller that is not on loopback or the Unix socket is refused."""

    def test_a_peer_off_loopback_is_permission_denied(self):
        address = non_loopback_address()
        if address is None:
            self.skipTest("no non-loopback IPv4 address on this host")
        server = start_server("--shared_memory=system", "--listen=0.0.0.0:0")
        self.addCleanup(stop_server, server)
        with Client("%s:%d" % (address, server.port), timeout=60) as client:
            with self.assertRaises(SortdError) as cm:
                client.shared_array(16, np.uint32)
            self.assertCode(cm, CODE.PERMISSION_DENIED, "this call came from ipv4:" + address)
            raw = Raw("%s:%d" % (address, server.port))
            self.addCleanup(raw.close)
            with self.assertRaises(grpc.RpcError) as cm:
                raw.sort(sort_pb2.SortRequest(keys_region=rslice("x", 0, 4, np.uint32)),
                         timeout=WAIT)
            self.assertCode(cm, CODE.PERMISSION_DENIED, "server's host only")
            np.testing.assert_array_equal(client.sort(np.array([2, 1], np.int32)), [1, 2])


# --- CUDA -----------------------------------------------------------------------
def cuda_devices():
    """How many GPUs the CUDA runtime sees here (0 without CUDA)."""
    try:
        rt = cuda_ipc.cudart()
    except CudaError:
        return 0
    count = ctypes.c_int(0)
    return count.value if rt.cudaGetDeviceCount(ctypes.byref(count)) == 0 else 0


class DeviceArray:
    """Device memory from cudaMalloc with __cuda_array_interface__: the
    least a CuPy or PyTorch array offers. view() gives arrays inside it."""

    H2D, D2H = 1, 2

    def __init__(self, nbytes, pointer=None, count=0, dtype=np.uint8, owner=None):
        self.rt = cuda_ipc.cudart()
        self.owner = owner
        if pointer is None:
            p = ctypes.c_void_p()
            cuda_ipc.check(self.rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(nbytes)),
                           "cudaMalloc")
            pointer, count = p.value, nbytes
        self.pointer, self.count, self.dtype = pointer, count, np.dtype(dtype)
        self.__cuda_array_interface__ = {
            "shape": (count,), "typestr": self.dtype.str, "data": (pointer, False),
            "version": 3, "strides": None, "stream": None}

    def view(self, offset, count, dtype):
        return DeviceArray(0, self.pointer + offset, count, dtype, owner=self)

    def rows(self, columns):
        """This array as rows of `columns` (2-D, C order)."""
        rows = DeviceArray(0, self.pointer, self.count, self.dtype, owner=self)
        rows.__cuda_array_interface__ = dict(self.__cuda_array_interface__,
                                             shape=(self.count // columns, columns))
        return rows

    def free(self):
        cuda_ipc.check(self.rt.cudaFree(ctypes.c_void_p(self.pointer)), "cudaFree")

    def upload(self, array):
        array = np.ascontiguousarray(array, self.dtype)
        assert len(array) == self.count
        cuda_ipc.check(self.rt.cudaMemcpy(ctypes.c_void_p(self.pointer),
                                          ctypes.c_void_p(array.ctypes.data),
                                          ctypes.c_size_t(array.nbytes), self.H2D), "cudaMemcpy")

    def download(self):
        out = np.empty(self.count, self.dtype)
        cuda_ipc.check(self.rt.cudaMemcpy(ctypes.c_void_p(out.ctypes.data),
                                          ctypes.c_void_p(self.pointer),
                                          ctypes.c_size_t(out.nbytes), self.D2H), "cudaMemcpy")
        return out


@unittest.skipUnless(cuda_devices() > 0, "no CUDA runtime or GPU here")
class CudaRegions(RegionTest):
    """Device memory registered through CUDA IPC and sorted where it lies."""

    @classmethod
    def setUpClass(cls):
        cls.server = start_server("--shared_memory=system,cuda")
        cls.client = Client(cls.server.target, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        stop_server(cls.server)

    def test_a_gpu_the_server_does_not_sort_on_is_refused(self):
        # Checked before the handle is opened: no CUDA context elsewhere.
        raw = Raw(self.server.target)
        self.addCleanup(raw.close)
        with self.assertRaises(grpc.RpcError) as cm:
            raw.register_cuda(sort_pb2.RegisterCudaRegionRequest(
                name="elsewhere", raw_handle=bytes(64), device_id=99, byte_size=4096),
                timeout=WAIT)
        self.assertCode(cm, CODE.INVALID_ARGUMENT, "device_id: 99 is not a GPU this server sorts on")

    def allocation(self, nbytes):
        memory = DeviceArray(nbytes)
        self.addCleanup(memory.free)
        return memory

    def register(self, memory):
        region = self.client.register_cuda_array(memory)
        self.addCleanup(region.close)
        return region

    def test_device_keys_sort_in_place_and_out_of_place(self):
        rng = np.random.default_rng(4)
        url = self.server.metrics_url
        before = total(scrape(url), "sortd_shm_requests_total", kind="cuda")
        sorts = 0
        for name in KEY_TYPES:
            for n in (1000, 1 << 20):
                width = np.dtype(name).itemsize
                memory = self.allocation(2 * n * width + 4096)
                # Both arrays inside one allocation, the first at an offset:
                # the region is the allocation, the slices name offsets.
                a = memory.view(256, n, name)
                out = memory.view(256 + n * width, n, name)
                region = self.register(a)
                self.assertEqual(self.client.register_cuda_array(out), region)  # one allocation
                self.assertEqual(self.client.region_of(out), region.name)
                for descending in (False, True):
                    with self.subTest(key_type=name, n=n, descending=descending):
                        keys = make_array(rng, name, n)
                        a.upload(keys)
                        res = self.client.sort_full(a, descending=descending)
                        self.assertIs(res.keys, a)
                        # Device memory is sorted by a GPU only.
                        self.assertIn(res.engine, ("ENGINE_GPU_RADIX", "ENGINE_GPU_MERGE"))
                        self.check_sorted(a.download(), keys, descending)

                        a.upload(keys)
                        got, idx = self.client.sort(a, descending=descending,
                                                    return_indices=True, out=out)
                        self.assertIs(got, out)
                        perm = self.check_sorted(out.download(), keys, descending)
                        np.testing.assert_array_equal(idx, perm)
                        np.testing.assert_array_equal(bits(a.download()), bits(keys))
                        sorts += 2
        regions = [r for r in self.client.list_regions() if r.kind == "REGION_KIND_CUDA"]
        self.assertTrue(regions and all(r.device_id >= 0 for r in regions), regions)
        self.wait_metrics(self.server, lambda s: total(
            s, "sortd_shm_requests_total", kind="cuda") == before + sorts,
            "%d CUDA-region requests counted" % sorts)

    def test_device_keys_select_on_the_gpu(self):
        """TopK of device memory: selected on the server's GPU where it lies
        (engine ENGINE_GPU_RADIX), the same answer as a stable sort's first
        k: one array, rows, segments, values gathered on the device."""
        rng = np.random.default_rng(12)
        url = self.server.metrics_url
        before = total(scrape(url), "sortd_requests_total", method="TopK", code="OK")
        calls = 0
        for name in ("uint32", "float32", "int64", "float64"):
            n = 1 << 20
            width = np.dtype(name).itemsize
            memory = self.allocation(n * (width + 8) + 4096)
            keys_dev = memory.view(0, n, name)
            values_dev = memory.view(n * width, n, "uint64")
            self.register(keys_dev)
            keys = make_array(rng, name, n)
            values = rng.integers(0, 1 << 63, n, dtype=np.uint64)
            keys_dev.upload(keys)
            values_dev.upload(values)
            for largest in (False, True):
                with self.subTest(key_type=name, largest=largest):
                    for k in (1, 100, 3000):  # the guess path, and the sort past 2048
                        res = self.client.topk_full(keys_dev, k, largest=largest,
                                                    values=values_dev)
                        self.assertEqual(res.engine, "ENGINE_GPU_RADIX")
                        perm = reference_permutation(keys, largest)[:k]
                        np.testing.assert_array_equal(res.indices, perm)
                        np.testing.assert_array_equal(bits(res.keys), bits(keys[perm]))
                        np.testing.assert_array_equal(res.values, values[perm])
                        calls += 1
                    # Rows of 1024 (the rows path), k of each.
                    top, idx = self.client.topk(keys_dev.rows(1024), 10, largest=largest)
                    self.assertEqual(top.shape, (n // 1024, 10))
                    for r in (0, 77, n // 1024 - 1):
                        row = keys[r * 1024:(r + 1) * 1024]
                        perm = reference_permutation(row, largest)[:10]
                        np.testing.assert_array_equal(idx[r], perm)
                        np.testing.assert_array_equal(bits(top[r]), bits(row[perm]))
                    # Ragged segments, a long one among them.
                    lengths = [0, 5, 5000, n - 5005]
                    top, idx = self.client.topk(keys_dev, 7, largest=largest,
                                                segment_lengths=lengths)
                    start = 0
                    for length, got_keys, got_idx in zip(lengths, top, idx):
                        segment = keys[start:start + length]
                        perm = reference_permutation(segment, largest)[:7]
                        np.testing.assert_array_equal(got_idx, perm)
                        np.testing.assert_array_equal(bits(got_keys), bits(segment[perm]))
                        start += length
                    calls += 2
            # The keys are read, never written.
            np.testing.assert_array_equal(bits(keys_dev.download()), bits(keys))
        # Values elsewhere than the keys are refused, naming the rule.
        memory = self.allocation(4096)
        dev = memory.view(0, 512, "uint32")
        self.register(dev)
        host_values = self.shared(self.client, 512, np.uint32).array
        raw = Raw(self.server.target)
        self.addCleanup(raw.close)
        with self.assertRaises(grpc.RpcError) as cm:
            raw.top_k(sort_pb2.TopKRequest(
                keys_region=self.client._regions.locate(dev, "keys").slice, k=3,
                values_region=self.client._regions.locate(host_values, "values").slice),
                timeout=WAIT)
        self.assertCode(cm, CODE.FAILED_PRECONDITION, "values_region: must lie where keys_region")
        self.wait_metrics(self.server, lambda s: total(
            s, "sortd_requests_total", method="TopK", code="OK") >= before + calls,
            "%d TopK calls counted" % calls)

    def test_device_pairs_and_indices_into_host_and_device_regions(self):
        rng = np.random.default_rng(8)
        n = 1 << 20
        memory = self.allocation(n * (8 + 4 + 8) + 4096)
        k = memory.view(0, n, "float64")
        v = memory.view(8 * n, n, "uint32")
        dev_idx = memory.view(12 * n + 4096 - (12 * n) % 8, n, "uint64")
        self.register(k)
        host_idx = self.shared(self.client, n, np.uint64).array
        keys, values = make_array(rng, "float64", n), make_array(rng, "uint32", n)
        k.upload(keys)
        v.upload(values)
        got_k, got_v = self.client.sort_pairs(k, v, descending=True)
        self.assertIs(got_k, k)
        self.check_sorted(k.download(), keys, True, values, v.download())
        k.upload(keys)
        _, idx = self.client.sort(k, return_indices=True, indices_out=host_idx)
        perm = self.check_sorted(k.download(), keys, False)
        np.testing.assert_array_equal(host_idx, perm)
        k.upload(keys)
        _, idx = self.client.sort(k, return_indices=True, indices_out=dev_idx)
        self.assertIs(idx, dev_idx)
        np.testing.assert_array_equal(dev_idx.download(), perm)

    def test_tables_in_device_memory_answer_as_the_same_table_in_a_message(self):
        """SortTable with columns (and the permutation) in a CUDA region:
        sorted on its GPU from the columns where they lie, the same
        permutation as the table sent in a message."""
        rng = np.random.default_rng(49)
        n = 1 << 18  # its 2 MiB of indices fit a stock receive limit
        a = rng.integers(-4, 5, n).astype(np.int32)
        b = rng.choice(np.array([0.0, -0.0, np.nan, 1.5, -2.0], np.float32), n)
        t = rng.integers(-3, 4, n).astype(np.int16)
        mask = rng.random(n) < 0.2
        memory = self.allocation(n * (4 + 4 + 2 + 8) + 8192)
        offsets = {"a": 0, "b": 4 * n, "t": 8 * n, "perm": 10 * n + 8 - (10 * n) % 8}
        region = self.register(memory.view(0, n, "int32"))
        for name, values in (("a", a), ("b", b), ("t", t)):
            memory.view(offsets[name], n, values.dtype).upload(values)
        by, ascending, nulls = ["t", "a", "b"], [True, False, True], ["first", "last", "last"]
        want = self.client.sort_table({"a": np.ma.MaskedArray(a, mask), "b": b, "t": t}, by,
                                      ascending, nulls, session=False)
        request = sort_pb2.SortTableRequest()
        for name, etype in (("a", sort_pb2.ELEMENT_TYPE_INT32), ("b", sort_pb2.ELEMENT_TYPE_FLOAT32),
                            ("t", sort_pb2.ELEMENT_TYPE_INT16)):
            column = request.columns.add(name=name)
            column.values_region.CopyFrom(sort_pb2.RegionSlice(
                region=region.name, offset=offsets[name], count=n, type=etype))
        request.columns[0].validity = np.packbits(~mask, bitorder="little").tobytes()
        for name, up, last in zip(by, ascending, nulls):
            request.by.add(column=["a", "b", "t"].index(name),
                           order=sort_pb2.SORT_ORDER_ASCENDING if up else sort_pb2.SORT_ORDER_DESCENDING,
                           nulls=sort_pb2.NULL_PLACEMENT_LAST if last == "last"
                           else sort_pb2.NULL_PLACEMENT_FIRST)
        raw = Raw(self.server.target)
        self.addCleanup(raw.close)
        resp = raw.sort_table(request, timeout=WAIT)
        self.assertEqual(resp.engine, sort_pb2.ENGINE_GPU_RADIX)
        np.testing.assert_array_equal(np.array(resp.indices, np.int64), want)
        # The permutation into the device region.
        request.indices_region.CopyFrom(sort_pb2.RegionSlice(
            region=region.name, offset=offsets["perm"], count=n, type=sort_pb2.ELEMENT_TYPE_UINT64))
        resp = raw.sort_table(request, timeout=WAIT)
        self.assertEqual(len(resp.indices), 0)
        np.testing.assert_array_equal(
            memory.view(offsets["perm"], n, "uint64").download().view(np.int64), want)
        # Device memory is not reordered: return_columns is refused.
        request.return_columns = True
        with self.assertRaises(grpc.RpcError) as cm:
            raw.sort_table(request, timeout=WAIT)
        self.assertCode(cm, CODE.INVALID_ARGUMENT, "columns in device memory are not reordered")
        np.testing.assert_array_equal(memory.view(offsets["a"], n, "int32").download(), a)

    def test_a_system_region_is_pinned_and_sorted_on_the_gpu(self):
        n = 1 << 22
        h = self.shared(self.client, n, np.uint32)
        self.assertTrue(h.pinned)
        keys = make_array(np.random.default_rng(6), "uint32", n)
        h.array[:] = keys
        res = self.client.sort_full(h.array, descending=True)
        self.assertIn(res.engine, ("ENGINE_GPU_RADIX", "ENGINE_GPU_MERGE"))
        self.check_sorted(h.array, keys, True)

    def test_cupy_and_torch_arrays_sort_in_place(self):
        rng = np.random.default_rng(12)
        for lib in ("cupy", "torch"):
            with self.subTest(lib=lib):
                try:
                    module = importlib.import_module(lib)
                except ImportError:
                    self.skipTest("%s is not installed" % lib)
                keys = make_array(rng, "float32", 1 << 20)
                if lib == "cupy":
                    array, to_host = module.asarray(keys), module.asnumpy
                else:
                    array = module.from_numpy(keys).cuda()
                    to_host = lambda t: t.cpu().numpy()  # noqa: E731
                self.register(array)
                self.assertIs(self.client.sort(array, descending=True), array)
                self.check_sorted(to_host(array), keys, True)
                part = array[10:5000]  # a slice: an offset into the allocation
                expect = to_host(part).copy()
                self.client.sort(part)
                self.check_sorted(to_host(part), expect, False)

    def test_an_unregistered_device_array_is_refused_by_the_client(self):
        memory = self.allocation(4096)
        with self.assertRaisesRegex(ValueError, "register_cuda_array"):
            self.client.sort(memory.view(0, 16, "uint32"))
        region = self.client.register_cuda_array(memory)
        names = {r.name for r in self.client.list_regions()}
        self.assertIn(region.name, names)
        region.close()
        self.assertNotIn(region.name, {r.name for r in self.client.list_regions()})


if __name__ == "__main__":
    unittest.main()
