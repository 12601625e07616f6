"""Tests for sortd_client against an in-process fake server.

Run from the repository root:
  PYTHONPATH=<build>/python:client/python \
      /usr/bin/python3 -m unittest discover -s client/python/tests
"""

import collections
import contextlib
import io
import threading
import time
import unittest
from concurrent import futures

import grpc
import numpy as np

from sortd.v1 import sort_pb2, sort_pb2_grpc

import sortd_client
from sortd_client import Client, ProtocolError, RequestError, SortdError
from sortd_client import arrays, health, responses, wire

NP_BY_FIELD = {
    "uint32": np.uint32, "int32": np.int32, "float32": np.float32,
    "uint64": np.uint64, "int64": np.int64, "float64": np.float64,
}
RESP_CHUNK = 1500  # elements per SortChunked response message of the fake


# ---------------------------------------------------------------------------
# Fake server: numpy sorts, element-wise protobuf (independent of the client).
# ---------------------------------------------------------------------------
def from_typed(ta):
    which = ta.WhichOneof("array")
    if which is None:
        return None, None
    if which == "bytes":
        return list(ta.bytes.values), which
    return np.array(getattr(ta, which).values, dtype=NP_BY_FIELD[which]), which


def to_typed(data, which, ta):
    sub = getattr(ta, which)
    sub.SetInParent()
    sub.values.extend(list(data) if which == "bytes" else data.tolist())


def permutation(keys, which, descending):
    n = len(keys)
    if which == "bytes":
        return np.array(sorted(range(n), key=keys.__getitem__, reverse=descending),
                        dtype=np.int64)
    if not descending:
        return np.argsort(keys, kind="stable")
    # Stable descending: equal keys keep their input order.
    return (n - 1 - np.argsort(keys[::-1], kind="stable"))[::-1]


def take(data, which, perm):
    return [data[i] for i in perm] if which == "bytes" else data[perm]


class FakeSortService(sort_pb2_grpc.SortServiceServicer):
    def __init__(self):
        self.calls = collections.Counter()
        self.max_request_bytes = 0
        self.chunks_received = 0
        self.lock = threading.Lock()

    def _note(self, method, request):
        with self.lock:
            self.calls[method] += 1
            self.max_request_bytes = max(self.max_request_bytes, request.ByteSize())

    def _special(self, request_id, context):
        if request_id == "boom":
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "too big for the fake")
        if request_id == "slow":
            time.sleep(1.0)

    def _sort_one(self, request):
        keys, which = from_typed(request.keys)
        if keys is None:
            raise ValueError("keys not set")
        perm = permutation(keys, which, request.order == sort_pb2.SORT_ORDER_DESCENDING)
        resp = sort_pb2.SortResponse(request_id=request.request_id,
                                     engine=sort_pb2.ENGINE_CPU)
        out = take(keys, which, perm)
        if request.request_id == "short":
            out = out[:-1]
        to_typed(out, which, resp.keys)
        if request.return_indices:
            resp.indices.extend(perm.tolist())
        return resp

    def Sort(self, request, context):
        self._note("Sort", request)
        self._special(request.request_id, context)
        try:
            return self._sort_one(request)
        except ValueError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))

    def SortPairs(self, request, context):
        self._note("SortPairs", request)
        self._special(request.request_id, context)
        keys, kw = from_typed(request.keys)
        values, vw = from_typed(request.values)
        if keys is None or values is None or len(keys) != len(values):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad pairs")
        perm = permutation(keys, kw, request.order == sort_pb2.SORT_ORDER_DESCENDING)
        resp = sort_pb2.SortPairsResponse(request_id=request.request_id,
                                          engine=sort_pb2.ENGINE_GPU_RADIX)
        to_typed(take(keys, kw, perm), kw, resp.keys)
        to_typed(take(values, vw, perm), vw, resp.values)
        return resp

    def SortStream(self, request_iterator, context):
        held = None  # answers in swapped pairs: completion order != send order
        for request in request_iterator:
            self._note("SortStream", request)
            if request.request_id.startswith("bad"):
                resp = sort_pb2.SortResponse(request_id=request.request_id)
                resp.error.code = grpc.StatusCode.INVALID_ARGUMENT.value[0]
                resp.error.message = "rejected by the fake"
            else:
                resp = self._sort_one(request)
            if held is None:
                held = resp
            else:
                yield resp
                yield held
                held = None
        if held is not None:
            yield held

    def SortChunked(self, request_iterator, context):
        it = iter(request_iterator)
        first = next(it, None)
        self._note("SortChunked", first or sort_pb2.SortChunkedRequest())
        if first is None or first.WhichOneof("item") != "header":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "header first")
        header = first.header
        keys, values, kw, vw = [], [], None, None
        for request in it:
            self._note("SortChunked", request)
            with self.lock:
                self.chunks_received += 1
            if request.WhichOneof("item") != "chunk":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "chunk expected")
            k, w = from_typed(request.chunk.keys)
            if kw not in (None, w):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "key type changed")
            kw = w
            keys.append(k)
            if header.with_values:
                v, w = from_typed(request.chunk.values)
                if v is None or len(v) != len(k) or vw not in (None, w):
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad values")
                vw = w
                values.append(v)
        if kw == "bytes":
            keys = [x for c in keys for x in c]
        elif keys:
            keys = np.concatenate(keys)
        if vw == "bytes":
            values = [x for c in values for x in c]
        elif values:
            values = np.concatenate(values)
        n = len(keys)
        if header.total_keys and header.total_keys != n:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "total_keys mismatch")
        if n == 0:
            yield sort_pb2.SortChunkedResponse(request_id=header.request_id)
            return
        perm = permutation(keys, kw, header.order == sort_pb2.SORT_ORDER_DESCENDING)
        skeys = take(keys, kw, perm)
        svalues = take(values, vw, perm) if header.with_values else None
        for off in range(0, n, RESP_CHUNK):
            end = min(n, off + RESP_CHUNK)
            resp = sort_pb2.SortChunkedResponse(offset=off)
            if off == 0:
                resp.total_keys = n
                resp.request_id = header.request_id
                resp.engine = sort_pb2.ENGINE_GPU_MERGE
            to_typed(skeys[off:end], kw, resp.chunk.keys)
            if header.with_values:
                to_typed(svalues[off:end], vw, resp.chunk.values)
            if header.return_indices:
                resp.indices.extend(perm[off:end].tolist())
            yield resp


def raw_health_handler():
    """grpc.health.v1.Health/Check on raw bytes (no grpc_health needed)."""

    def check(request, context):
        service = request[2:].decode() if request else ""  # 0x0a len name
        if service == "nope":
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return b"\x08\x02" if service == "down" else b"\x08\x01"

    return grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health",
        {"Check": grpc.unary_unary_rpc_method_handler(check)})


class FakeServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.service = FakeSortService()
        cls.server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8),
            options=[("grpc.max_receive_message_length", 256 << 20),
                     ("grpc.max_send_message_length", 256 << 20)])
        sort_pb2_grpc.add_SortServiceServicer_to_server(cls.service, cls.server)
        cls.server.add_generic_rpc_handlers((raw_health_handler(),))
        port = cls.server.add_insecure_port("127.0.0.1:0")
        cls.server.start()
        cls.target = "127.0.0.1:%d" % port
        cls.client = Client(cls.target)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop(None)

    def setUp(self):
        self.service.calls.clear()
        self.service.max_request_bytes = 0
        self.service.chunks_received = 0


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
RNG = np.random.default_rng(1234)
NUMERIC = ["uint32", "int32", "float32", "uint64", "int64", "float64"]


def random_array(dtype, n, dups=False):
    dtype = np.dtype(dtype)
    if dups:
        return RNG.integers(0, 7, n).astype(dtype)
    if dtype.kind == "f":
        return (RNG.standard_normal(n) * 1e6).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def random_bytes(n):
    return [bytes(RNG.integers(0, 256, RNG.integers(0, 12), dtype=np.uint8))
            for _ in range(n)]


def reference(keys, descending):
    if isinstance(keys, list) or keys.dtype.kind in "OS":
        lst = list(keys)
        return np.array(sorted(range(len(lst)), key=lst.__getitem__, reverse=descending))
    return permutation(keys, "num", descending)


def bits(a):
    a = np.asarray(a)
    return a.view("u%d" % a.dtype.itemsize) if a.dtype.kind == "f" else a


def elementwise_typed(arr, which):
    ta = sort_pb2.TypedArray()
    to_typed(arr, which, ta)
    return ta


# ---------------------------------------------------------------------------
# Wire-level tests: the hand encodings equal protobuf's own.
# ---------------------------------------------------------------------------
class WireTest(unittest.TestCase):
    def test_varint(self):
        for v in [0, 1, 127, 128, 300, 16383, 16384, 2**32, 2**63, 2**64 - 1]:
            enc = wire.varint(v)
            self.assertEqual(wire.read_varint(enc, 0), (v, len(enc)))
            self.assertEqual(enc, sort_pb2.ChunkedSortHeader(total_keys=v)
                             .SerializeToString()[1:] if v else b"\x00")

    def test_iter_fields(self):
        msg = sort_pb2.SortResponse(request_id="abc", engine=2)
        msg.indices.extend([1, 2])
        fields = [(f, t) for f, t, _ in wire.iter_fields(msg.SerializeToString())]
        self.assertEqual(fields, [(2, 2), (3, 2), (4, 0)])


class EncodingTest(unittest.TestCase):
    def check_typed(self, data, which):
        inp = arrays.TypedInput(data)
        self.assertEqual(inp.kind, which)
        encoded = wire.join(inp.parts())
        expected = elementwise_typed(
            [bytes(x) for x in data] if which == "bytes" else np.asarray(data), which)
        self.assertEqual(encoded, expected.SerializeToString())
        self.assertEqual(sort_pb2.TypedArray.FromString(encoded), expected)
        self.assertEqual(inp.encoded_size(), len(encoded))

    def test_numeric_dtypes(self):
        for name in NUMERIC:
            for n in [0, 1, 2, 1000]:
                with self.subTest(dtype=name, n=n):
                    self.check_typed(random_array(name, n), name)

    def test_special_floats_exact_bits(self):
        for name in ["float32", "float64"]:
            a = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -2.25], dtype=name)
            inp = arrays.TypedInput(a)
            msg = sort_pb2.TypedArray.FromString(wire.join(inp.parts()))
            back = inp.finish([inp.decode(msg)])
            np.testing.assert_array_equal(bits(back), bits(a))

    def test_byte_order_and_strides(self):
        a = np.arange(20, dtype=">u4")[::3]  # big-endian, strided
        self.check_typed(a, "uint32")
        b = np.arange(10, dtype=">f8")
        self.check_typed(b, "float64")
        c = np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4))[:, 1]
        self.check_typed(c, "int64")

    def test_bytes_inputs(self):
        lst = random_bytes(300) + [b"", b"x" * 200, b"y" * 20000]
        self.check_typed(lst, "bytes")
        self.check_typed(np.array(lst, dtype=object), "bytes")
        self.check_typed(np.array([b"ab", b"c", b"def"], dtype="S3"), "bytes")
        self.check_typed([bytearray(b"ab"), memoryview(b"cd")], "bytes")

    def test_unsupported(self):
        for bad in [np.arange(3, dtype=np.complex64), np.zeros(2, dtype="i4,i4"),
                    np.array([1, 2], dtype="M8[10ms]"), np.array([1, "a"], dtype=object)]:
            with self.subTest(dtype=bad.dtype):
                self.assertRaises(TypeError, arrays.TypedInput, bad)
        self.assertRaises(ValueError, arrays.TypedInput, np.zeros((2, 2), np.uint32))

    def test_python_lists(self):
        self.assertEqual(arrays.TypedInput([3, 1, 2]).kind, "int64")
        self.assertEqual(arrays.TypedInput([3.0, 1.0]).kind, "float64")
        self.assertEqual(arrays.TypedInput([b"b", b"a"]).kind, "bytes")

    def test_sort_request_bytes(self):
        from sortd_client.client import _sort_request
        a = random_array("int32", 100)
        inp = arrays.TypedInput(a)
        for order, ri, rid in [(0, False, ""), (1, True, "req-7")]:
            expected = sort_pb2.SortRequest(order=order, return_indices=ri, request_id=rid)
            expected.keys.CopyFrom(elementwise_typed(a, "int32"))
            self.assertEqual(_sort_request(inp, order, ri, rid), expected.SerializeToString())


class DecodingTest(unittest.TestCase):
    def test_numeric_roundtrip(self):
        for name in NUMERIC:
            for n in [0, 1, 777]:
                with self.subTest(dtype=name, n=n):
                    a = random_array(name, n)
                    inp = arrays.TypedInput(a)
                    msg = elementwise_typed(a, name)
                    out = inp.finish([inp.decode(msg)])
                    self.assertEqual(out.dtype, np.dtype(name))
                    np.testing.assert_array_equal(bits(out), bits(a))
                    self.assertTrue(out.flags.writeable)

    def test_unset_oneof_is_empty(self):
        inp = arrays.TypedInput(np.zeros(0, np.float32))
        out = inp.finish([inp.decode(sort_pb2.TypedArray())])
        self.assertEqual(out.dtype, np.float32)
        self.assertEqual(len(out), 0)

    def test_type_mismatch(self):
        inp = arrays.TypedInput(np.zeros(2, np.float32))
        self.assertRaises(ProtocolError, inp.decode,
                          elementwise_typed(np.zeros(2, np.uint32), "uint32"))

    def test_indices(self):
        resp = sort_pb2.SortResponse(request_id="x")
        to_typed(np.arange(5, dtype=np.uint32), "uint32", resp.keys)
        resp.indices.extend([4, 3, 2**64 - 1, 0, 1])
        idx = arrays.finish_indices([arrays.indices_from(resp, 2, clear="keys")])
        self.assertEqual(idx.dtype, np.uint64)
        self.assertEqual(idx.tolist(), [4, 3, 2**64 - 1, 0, 1])
        empty = sort_pb2.SortResponse()
        self.assertEqual(len(arrays.indices_from(empty, 2, clear="keys")), 0)

    def test_serialized_responses_decode_as_messages_do(self):
        # The unary paths read the response's bytes (responses.py): every
        # type, sizes 0..777, must come out as the protobuf parse gives it.
        for name in NUMERIC:
            for n in [0, 1, 777]:
                with self.subTest(dtype=name, n=n):
                    a = random_array(name, n)
                    inp = arrays.TypedInput(a)
                    resp = sort_pb2.SortResponse(request_id="r-%d" % n, engine=2)
                    resp.keys.CopyFrom(elementwise_typed(a, name))
                    resp.indices.extend(range(n))
                    raw = responses.read_response(resp.SerializeToString(),
                                                  responses.SORT_RESPONSE)
                    out = inp.finish([inp.decode_serialized(raw.arrays[0])])
                    want = inp.finish([inp.decode(resp.keys)])
                    self.assertEqual(out.dtype, want.dtype)
                    np.testing.assert_array_equal(bits(out), bits(want))
                    self.assertTrue(out.flags.writeable)
                    self.assertEqual(raw.request_id, "r-%d" % n)
                    self.assertEqual(raw.engine, 2)
                    self.assertEqual(arrays.view_payload(raw.indices, arrays.INDEX_DTYPE).tolist(),
                                     list(range(n)))

    def test_serialized_response_refusals(self):
        inp = arrays.TypedInput(np.zeros(2, np.float32))
        resp = sort_pb2.SortResponse()
        resp.keys.CopyFrom(elementwise_typed(np.zeros(2, np.uint32), "uint32"))
        raw = responses.read_response(resp.SerializeToString(), responses.SORT_RESPONSE)
        with self.assertRaisesRegex(ProtocolError, "came back as uint32, sent float32"):
            inp.decode_serialized(raw.arrays[0])
        # No keys at all: an empty array, as an unset oneof decodes.
        raw = responses.read_response(b"", responses.SORT_RESPONSE)
        self.assertEqual(len(inp.finish([inp.decode_serialized(raw.arrays[0])])), 0)
        # A payload that is not whole elements, and bytes that do not parse.
        partial = b"\x0a\x05\x1a\x03\x0a\x01\x00"  # keys { float32 { values: 1 byte } }
        raw = responses.read_response(partial, responses.SORT_RESPONSE)
        with self.assertRaisesRegex(ProtocolError, "partial element"):
            inp.decode_serialized(raw.arrays[0])
        with self.assertRaisesRegex(ProtocolError, "does not parse"):
            responses.read_response(b"\x0a\x7f\x00", responses.SORT_RESPONSE)
        with self.assertRaisesRegex(ProtocolError, "partial element"):
            arrays.view_payload(memoryview(b"\x00" * 9), arrays.INDEX_DTYPE)

    def test_bytes_containers(self):
        lst = [b"b", b"a\x00", b""]
        for data, kind in [(lst, list), (np.array(lst, dtype=object), np.ndarray)]:
            inp = arrays.TypedInput(data)
            out = inp.finish([inp.decode(elementwise_typed(lst, "bytes"))])
            self.assertIsInstance(out, kind)
            self.assertEqual(list(out), lst)
        s = np.array([b"ab", b"c"], dtype="S2")
        inp = arrays.TypedInput(s)
        out = inp.finish([inp.decode(elementwise_typed([b"c", b"ab"], "bytes"))])
        self.assertEqual(out.dtype, s.dtype)
        self.assertEqual(out.tolist(), [b"c", b"ab"])


# ---------------------------------------------------------------------------
# Client against the fake server
# ---------------------------------------------------------------------------
class SortTest(FakeServerTest):
    def check_sort(self, client, a, descending, return_indices=False):
        res = client.sort(a, descending=descending, return_indices=return_indices)
        perm = reference(a, descending)
        if return_indices:
            res, idx = res
            self.assertEqual(idx.dtype, np.uint64)
            np.testing.assert_array_equal(idx, perm)
        if isinstance(a, list):
            self.assertEqual(res, [a[i] for i in perm])
        else:
            np.testing.assert_array_equal(bits(res), bits(np.asarray(a)[perm]))
        return res

    def test_numeric(self):
        for name in NUMERIC:
            for desc in (False, True):
                with self.subTest(dtype=name, descending=desc):
                    out = self.check_sort(self.client, random_array(name, 1000), desc, True)
                    self.assertEqual(out.dtype, np.dtype(name))
                    out[0] = 0  # writable
                    self.check_sort(self.client, random_array(name, 500, dups=True), desc, True)
        self.assertEqual(self.service.calls["Sort"], 24)
        self.assertEqual(self.service.calls["SortChunked"], 0)

    def test_empty_and_single(self):
        for a in [np.zeros(0, np.uint64), np.array([5], np.int32), []]:
            out, idx = self.client.sort(a, return_indices=True)
            self.assertEqual(len(out), len(a))
            self.assertEqual(idx.tolist(), list(range(len(a))))

    def test_bytes(self):
        lst = random_bytes(400) + [b"", b"\xff", b"\x00"]
        for desc in (False, True):
            self.check_sort(self.client, lst, desc, True)
            out = self.client.sort(np.array(lst, dtype=object), descending=desc)
            self.assertEqual(out.dtype, object)
        s = np.array([b"bb", b"a", b"ab"], dtype="S2")
        self.assertEqual(self.client.sort(s).tolist(), [b"a", b"ab", b"bb"])

    def test_sort_full(self):
        res = self.client.sort_full(np.array([3, 1, 2], np.uint32), request_id="r1",
                                    return_indices=True)
        self.assertEqual(res.keys.tolist(), [1, 2, 3])
        self.assertEqual(res.indices.tolist(), [1, 2, 0])
        self.assertEqual((res.request_id, res.engine), ("r1", "ENGINE_CPU"))

    def test_pairs(self):
        keys = random_array("uint32", 600, dups=True)
        cases = [random_array(t, 600) for t in NUMERIC] + [random_bytes(600)]
        for values in cases:
            for desc in (False, True):
                with self.subTest(values=type(values).__name__, descending=desc):
                    k, v = self.client.sort_pairs(keys, values, descending=desc)
                    perm = reference(keys, desc)
                    np.testing.assert_array_equal(k, keys[perm])
                    if isinstance(values, list):
                        self.assertEqual(v, [values[i] for i in perm])
                    else:
                        self.assertEqual(v.dtype, values.dtype)
                        np.testing.assert_array_equal(bits(v), bits(values[perm]))
        bkeys = random_bytes(300)
        k, v = self.client.sort_pairs(bkeys, np.arange(300, dtype=np.int64))
        self.assertEqual(k, sorted(bkeys))
        self.assertEqual(v.tolist(), reference(bkeys, False).tolist())
        self.assertRaises(ValueError, self.client.sort_pairs, keys, keys[:-1])

    def test_errors(self):
        with self.assertRaises(SortdError) as cm:
            self.client.sort(np.arange(3, dtype=np.uint32), request_id="boom")
        self.assertEqual(cm.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertIn("too big", cm.exception.details)
        with self.assertRaises(ProtocolError):
            self.client.sort(np.arange(3, dtype=np.uint32), request_id="short")
        with self.assertRaises(SortdError) as cm:
            self.client.sort(np.arange(3, dtype=np.uint32), request_id="slow", timeout=0.2)
        self.assertEqual(cm.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertRaises(TypeError, self.client.sort, np.arange(3, dtype=np.complex64))

    def test_unavailable(self):
        with Client("127.0.0.1:1", timeout=10) as c:  # refused at once; the deadline is only a bound
            with self.assertRaises(SortdError) as cm:
                c.sort(np.arange(3, dtype=np.uint32))
            self.assertEqual(cm.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_health(self):
        self.assertEqual(self.client.health(), "SERVING")
        raw = health.HealthChecker(self.client._channel, use_grpc_health=False)
        self.assertEqual(raw.check(""), "SERVING")
        self.assertEqual(raw.check("down"), "NOT_SERVING")
        self.assertEqual(self.client.health("down"), "NOT_SERVING")
        with self.assertRaises(SortdError) as cm:
            self.client.health("nope")
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertEqual(health.encode_request("ab"), b"\x0a\x02ab")
        self.assertEqual(health.decode_response(b""), "UNKNOWN")

    def test_cli(self):
        from sortd_client.__main__ import main
        base = ["--target", self.target]
        with contextlib.redirect_stdout(io.StringIO()) as out:
            self.assertEqual(main(base + ["health"]), 0)
            self.assertEqual(main(base + ["health", "--service", "down"]), 1)
            self.assertEqual(main(base + ["check", "--n", "3000", "--dtype", "float32",
                                          "--descending", "--indices"]), 0)
            self.assertEqual(main(base + ["check", "--n", "3000", "--dtype", "int64",
                                          "--chunked"]), 0)
        self.assertIn("SERVING", out.getvalue())
        self.assertEqual(out.getvalue().count("OK: 3000"), 2)


class ChunkedTest(FakeServerTest):
    LIMIT = 64 << 10

    def small_client(self, **kw):
        return Client(self.target, max_message_bytes=self.LIMIT, **kw)

    def assert_chunked(self, min_chunks=2):
        self.assertEqual(self.service.calls["Sort"] + self.service.calls["SortPairs"], 0)
        self.assertGreaterEqual(self.service.chunks_received, min_chunks)
        self.assertLessEqual(self.service.max_request_bytes, self.LIMIT - sortd_client.HEADROOM)

    def test_numeric_auto_chunked(self):
        with self.small_client() as c:
            for name in NUMERIC:
                for desc in (False, True):
                    with self.subTest(dtype=name, descending=desc):
                        a = random_array(name, 40000, dups=desc)
                        res = c.sort_full(a, descending=desc, return_indices=True,
                                          request_id="big")
                        perm = reference(a, desc)
                        np.testing.assert_array_equal(res.indices, perm)
                        np.testing.assert_array_equal(bits(res.keys), bits(a[perm]))
                        self.assertEqual((res.request_id, res.engine), ("big", "ENGINE_GPU_MERGE"))
        self.assert_chunked(min_chunks=12 * 2)

    def test_a_server_without_sessions_gets_sortchunked(self):
        # The fake has no sort sessions (UNIMPLEMENTED), as servers older than
        # them: a sort above session_min_bytes falls back to SortChunked.
        with self.small_client(session_min_bytes=1024) as c:
            a = random_array("uint32", 40000, dups=True)  # several chunks
            res = c.sort_full(a, return_indices=True)
            perm = reference(a, False)
            np.testing.assert_array_equal(res.indices, perm)
            np.testing.assert_array_equal(res.keys, a[perm])
        self.assert_chunked()

    def test_threshold(self):
        with self.small_client() as c:
            fits = (self.LIMIT - sortd_client.HEADROOM - 64) // 4
            c.sort(np.zeros(fits, np.uint32))
            self.assertEqual(self.service.calls["Sort"], 1)
            # Keys fit but keys + indices in the response do not.
            c.sort(np.zeros(fits, np.uint32), return_indices=True)
            self.assertEqual(self.service.calls["SortChunked"], 2)  # header + 1 chunk

    def test_pairs_and_bytes_chunked(self):
        with self.small_client(chunk_bytes=16 << 10) as c:
            keys = random_array("int64", 20000, dups=True)
            values = random_bytes(20000)
            k, v = c.sort_pairs(keys, values, descending=True)
            perm = reference(keys, True)
            np.testing.assert_array_equal(k, keys[perm])
            self.assertEqual(v, [values[i] for i in perm])
            bkeys = random_bytes(20000)
            out, idx = c.sort(np.array(bkeys, dtype=object), return_indices=True)
            perm = reference(bkeys, False)
            self.assertEqual(list(out), [bkeys[i] for i in perm])
            np.testing.assert_array_equal(idx, perm)
            res = c.sort_full(keys, values=np.arange(20000, dtype=np.float32),
                              return_indices=True, chunked=True)
            np.testing.assert_array_equal(res.indices, reference(keys, False))
            np.testing.assert_array_equal(res.values, res.indices.astype(np.float32))
        self.assertLessEqual(self.service.max_request_bytes, 16 << 10)
        self.assert_chunked(min_chunks=10)

    def test_forced(self):
        out, idx = self.client.sort(np.array([3, 1, 2], np.float64), chunked=True,
                                    return_indices=True)
        self.assertEqual(out.tolist(), [1.0, 2.0, 3.0])
        self.assertEqual(idx.tolist(), [1, 2, 0])
        out = self.client.sort(np.zeros(0, np.uint32), chunked=True)
        self.assertEqual((out.dtype, len(out)), (np.uint32, 0))
        self.assertEqual(self.service.calls["SortChunked"], 3)  # 2 headers + 1 chunk

    def test_oversize_without_chunking(self):
        with self.small_client() as c:
            with self.assertRaises(SortdError) as cm:
                c.sort(np.zeros(self.LIMIT, np.uint32), chunked=False)
            self.assertEqual(cm.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)


class StreamTest(FakeServerTest):
    def test_stream(self):
        items = [random_array(NUMERIC[i % 6], 50 + i) for i in range(9)]
        got = list(self.client.sort_stream(items, descending=True))
        self.assertEqual(sorted(rid for rid, _ in got), sorted(str(i) for i in range(9)))
        self.assertNotEqual([rid for rid, _ in got], [str(i) for i in range(9)])
        for rid, out in got:
            a = items[int(rid)]
            self.assertEqual(out.dtype, a.dtype)
            np.testing.assert_array_equal(bits(out), bits(a[reference(a, True)]))

    def test_sort_many_with_ids_and_indices(self):
        items = {"a": np.array([3, 1, 2], np.uint64), "b": [b"z", b"y"],
                 "c": np.zeros(0, np.float32)}
        res = self.client.sort_many(items, return_indices=True)
        self.assertEqual(res["a"][0].tolist(), [1, 2, 3])
        self.assertEqual(res["a"][1].tolist(), [1, 2, 0])
        self.assertEqual(res["b"][0], [b"y", b"z"])
        self.assertEqual(len(res["c"][0]), 0)

    def test_request_errors(self):
        items = [("ok1", np.array([2, 1], np.int32)), ("bad1", np.array([1], np.int32)),
                 ("ok2", np.array([1.0], np.float64))]
        res = self.client.sort_many(items, raise_errors=False)
        self.assertEqual(res["ok1"].tolist(), [1, 2])
        err = res["bad1"]
        self.assertIsInstance(err, RequestError)
        self.assertEqual((err.code, err.rpc_code, err.request_id),
                         (grpc.StatusCode.INVALID_ARGUMENT, 3, "bad1"))
        self.assertEqual(err.message, "rejected by the fake")
        with self.assertRaises(RequestError):
            self.client.sort_many(items)

    def test_bad_input_in_stream(self):
        items = [np.arange(3, dtype=np.uint32), np.arange(3, dtype=np.complex64)]
        self.assertRaises(TypeError, self.client.sort_many, items)
        dup = [("x", np.arange(3, dtype=np.uint32)), ("x", np.arange(2, dtype=np.uint32))]
        self.assertRaises(ValueError, self.client.sort_many, dup)

    def test_lazy_generator_and_early_stop(self):
        gen = (np.arange(n, 0, -1, dtype=np.int64) for n in range(1, 200))
        stream = self.client.sort_stream(gen)
        rid, out = next(stream)
        self.assertEqual(out.tolist(), sorted(out.tolist()))
        stream.close()  # cancels the call


if __name__ == "__main__":
    unittest.main()
