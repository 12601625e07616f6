"""Bad input on the wire, end to end: the real sortd answered by raw bytes
from grpcio (no client-side serialization), so that messages which do not
parse, unknown fields and enums, and hostile size announcements reach the
server exactly as a broken or malicious client would send them. Each call
must end with its documented status and a message naming the problem, and
the server must stay healthy and drain cleanly afterwards.

The cases are the rows of docs/api.md, "Bad input, case by case". A test
marked @unittest.expectedFailure asserts the correct behaviour of a server
bug that is not fixed yet (the comment above it says which); remove the
marker with the fix.

Environment: SORTD_BIN, PYTHONPATH with client/python (stubs included).
"""
import os
import socket
import struct
import threading
import time
import unittest

import grpc
import numpy as np

from sortd.v1 import sort_pb2
from sortd_process import SortdProcess, metric, scrape, total, wait_until

SORTD = os.environ["SORTD_BIN"]
SERVICE = "/sortd.v1.SortService/"
GARBAGE = b"\xff\xff\xff\xff"         # wire type 7: never valid protobuf
TRUNCATED = b"\x0a\x05ab"             # field 1, length 5, 2 bytes follow
MESSAGE_LIMIT = 1 << 20               # the server's --max_message_bytes
RESPONSE_CHUNK = 256 << 10            # the server's --chunk_response_bytes
ONE_MB_ID = "i" * 1000000             # a request_id of 1 MB (fits the limit)
INVALID_ARGUMENT = grpc.StatusCode.INVALID_ARGUMENT.value[0]


def u32_request(keys, **fields):
    r = sort_pb2.SortRequest(**fields)
    r.keys.uint32.values.extend(keys)
    return r.SerializeToString()


# --- protobuf wire format by hand (for payloads grpcio should not see typed) --
def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def ld(field, body):
    """A length-delimited field: tag, length, body."""
    return varint((field << 3) | 2) + varint(len(body)) + body


TYPE_FIELD = {"uint32": 1, "int32": 2, "float32": 3, "uint64": 4, "int64": 5,
              "float64": 6, "bytes": 7}
NUMPY_TYPE = {"uint32": "<u4", "int32": "<i4", "float32": "<f4", "uint64": "<u8",
              "int64": "<i8", "float64": "<f8"}


def typed(kind, values):
    """TypedArray bytes: the oneof member `kind` holding `values`."""
    if kind == "bytes":
        body = b"".join(ld(1, v) for v in values)
    else:
        data = np.asarray(values, dtype=NUMPY_TYPE[kind]).tobytes()
        body = ld(1, data) if data else b""
    return ld(TYPE_FIELD[kind], body)


def header(order=None, with_values=False, total_keys=0, request_id="", return_indices=False):
    """SortChunkedRequest{header}; order may be any integer (unknown enums)."""
    body = b""
    if order is not None:
        body += b"\x08" + varint(order & (2**64 - 1))
    if return_indices:
        body += b"\x10\x01"
    if with_values:
        body += b"\x18\x01"
    if total_keys:
        body += b"\x20" + varint(total_keys)
    if request_id:
        body += ld(5, request_id.encode())
    return ld(1, body)


def chunk(keys=None, values=None, kind="uint32", value_kind="uint32"):
    """SortChunkedRequest{chunk}; keys/values None leaves the field unset."""
    body = b""
    if keys is not None:
        body += ld(1, typed(kind, keys))
    if values is not None:
        body += ld(2, typed(value_kind, values))
    return ld(2, body)


def large_chunks(keys, per_message=250000):
    """The header-less chunk messages of a uint32 upload, each under the limit."""
    return [chunk(keys[i:i + per_message]) for i in range(0, len(keys), per_message)]


# --- a call that arrives with its deadline already passed ----------------
def _frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def _literal(name, value):
    # HPACK: literal header field without indexing, new name, no Huffman.
    name, value = name.encode(), value.encode()
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def call_with_expired_deadline(port, method, messages):
    """One call over a hand-made HTTP/2 connection with `grpc-timeout: 0n`
    (grpcio will not send a call whose deadline has passed; a request can
    still arrive that way when it spent its deadline in transit). Returns
    the grpc-status the server answered (an int; None when not found)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(4, 0, 0, b""))
        headers = b"".join(_literal(k, v) for k, v in [
            (":method", "POST"), (":scheme", "http"), (":path", SERVICE + method),
            (":authority", "127.0.0.1:%d" % port), ("content-type", "application/grpc"),
            ("te", "trailers"), ("grpc-timeout", "0n")])
        body = b"".join(b"\x00" + struct.pack(">I", len(m)) + m for m in messages)
        assert len(body) <= 16384  # one DATA frame, within the initial windows
        sock.sendall(_frame(1, 4, 1, headers) + _frame(0, 1, 1, body))
        buf, status = b"", None
        while True:
            data = sock.recv(65536)
            if not data:
                return status
            buf += data
            while len(buf) >= 9:
                n = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + n:
                    break
                ftype, flags = buf[3], buf[4]
                sid = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                payload, buf = buf[9:9 + n], buf[9 + n:]
                if ftype == 4 and not flags & 1:
                    sock.sendall(_frame(4, 1, 0, b""))  # SETTINGS ack
                if ftype == 1 and sid == 1 and b"grpc-status" in payload:
                    at = payload.index(b"grpc-status") + len(b"grpc-status")
                    status = int(payload[at + 1:at + 1 + payload[at]])
                if sid == 1 and (ftype == 3 or (ftype in (0, 1) and flags & 1)):
                    return status
    finally:
        sock.close()


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = SortdProcess(SORTD, "--max_message_bytes=%d" % MESSAGE_LIMIT,
                                  "--max_chunked_bytes=67108864",
                                  "--chunk_response_bytes=%d" % RESPONSE_CHUNK).start()
        opts = [("grpc.max_send_message_length", 8 << 20),
                ("grpc.max_receive_message_length", 8 << 20)]
        cls.channel = grpc.insecure_channel(cls.server.target, options=opts)
        # No serializers: requests and responses are bytes.
        cls.sort = cls.channel.unary_unary(SERVICE + "Sort")
        cls.sort_pairs = cls.channel.unary_unary(SERVICE + "SortPairs")
        cls.stream = cls.channel.stream_stream(SERVICE + "SortStream")
        cls.chunked = cls.channel.stream_stream(SERVICE + "SortChunked")
        # A client that buffers little of what it does not read: a 64 KiB
        # stream window and no BDP probing, so that a server writing to a
        # client that does not read is held by flow control (grpcio's
        # defaults would take several MiB unasked).
        cls.slow_channel = grpc.insecure_channel(
            cls.server.target,
            options=opts + [("grpc.http2.lookahead_bytes", 65536), ("grpc.http2.bdp_probe", 0)])
        cls.slow_stream = cls.slow_channel.stream_stream(SERVICE + "SortStream")
        cls.slow_chunked = cls.slow_channel.stream_stream(SERVICE + "SortChunked")

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.slow_channel.close()
        code = cls.server.terminate()
        log = cls.server.read_log()
        cls.server.__exit__(None, None, None)
        assert code == 0 and "drained" in log, log

    def tearDown(self):
        # After every case: nothing left in flight, and the server still sorts.
        self.wait_released()
        out = sort_pb2.SortResponse.FromString(self.sort(u32_request([3, 1, 2]), timeout=10))
        self.assertEqual(list(out.keys.uint32.values), [1, 2, 3])

    def assertStatus(self, err, code, prefix):
        self.assertEqual(err.code(), code, err.details())
        self.assertTrue(err.details().startswith(prefix), err.details())

    def assertRefused(self, method, payload, code, prefix):
        with self.assertRaises(grpc.RpcError) as cm:
            method(payload, timeout=10)
        self.assertStatus(cm.exception, code, prefix)
        return cm.exception

    def assertChunkedRefused(self, messages, code, prefix):
        with self.assertRaises(grpc.RpcError) as cm:
            list(self.chunked(iter(messages), timeout=10))
        self.assertStatus(cm.exception, code, prefix)
        return cm.exception

    def assertChunkedRefusedWhileOpen(self, messages, code, prefix):
        """A SortChunked call that sends `messages` and then holds its stream
        open (no half-close): it must be refused while still open, i.e. on
        arrival of what was sent, not at the end of the upload (waiting for
        that, it would run into its deadline)."""
        gate = threading.Event()
        self.addCleanup(gate.set)

        def held():
            yield from messages
            gate.wait(30)
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                list(self.chunked(held(), timeout=10))
        finally:
            gate.set()
        self.assertStatus(cm.exception, code, prefix)
        return cm.exception

    # What a sort leaves on /metrics: keys sorted (successes), engine
    # launches, and the queue time of a unary call that reached its sort.
    SORT_TRACES = ("sortd_keys_sorted_total", "sortd_batch_size_count",
                   "sortd_queue_duration_seconds_count")

    def assertNothingSorted(self, before, counted):
        """Waits until the calls `counted` ({(method, code): how many}) are
        counted since `before` (a call is counted when it ends, which can be
        after its client saw the status), then asserts that none of them
        was sorted."""
        def grown(s):
            return {key: self.requests(*key, samples=s) - self.requests(*key, samples=before)
                    for key in counted}
        self.assertTrue(wait_until(lambda: grown(self.samples()) == counted, 10),
                        "calls counted: %s, expected %s" % (grown(self.samples()), counted))
        after = self.samples()
        self.assertEqual({name: total(after, name) - total(before, name)
                          for name in self.SORT_TRACES},
                         dict.fromkeys(self.SORT_TRACES, 0), "sorted before it was refused")

    def samples(self):
        return scrape(self.server.metrics_url)

    def requests(self, method, code, samples=None):
        """sortd_requests_total of one method and code, over key types."""
        return total(samples or self.samples(), "sortd_requests_total", method=method, code=code)

    def inflight(self):
        s = self.samples()
        return (total(s, "sortd_inflight_requests"), total(s, "sortd_inflight_bytes"))

    def wait_released(self):
        self.assertTrue(wait_until(lambda: self.inflight() == (0, 0), 10),
                        "admission not released: %s" % (self.inflight(),))

    def run_stream(self, messages, stub=None, timeout=10):
        """All responses of a SortStream call, parsed; raises its error."""
        return [sort_pb2.SortResponse.FromString(raw)
                for raw in (stub or self.stream)(iter(messages), timeout=timeout)]

    # --- messages that do not parse ------------------------------------
    def test_unary_garbage_is_invalid_argument_not_unimplemented(self):
        for method, name in ((self.sort, "SortRequest"), (self.sort_pairs, "SortPairsRequest")):
            for payload in (GARBAGE, TRUNCATED):
                with self.assertRaises(grpc.RpcError) as cm:
                    method(payload, timeout=10)
                self.assertStatus(cm.exception, grpc.StatusCode.INVALID_ARGUMENT, "request: not a valid")
                self.assertIn("sortd.v1." + name, cm.exception.details())

    def test_stream_garbage_ends_the_stream_with_an_error_after_earlier_answers(self):
        call = self.stream(iter([u32_request([2, 1], request_id="first"), GARBAGE,
                                 u32_request([4, 3], request_id="never-read")]), timeout=10)
        responses = []
        with self.assertRaises(grpc.RpcError) as cm:
            for raw in call:
                responses.append(sort_pb2.SortResponse.FromString(raw))
        self.assertStatus(cm.exception, grpc.StatusCode.INVALID_ARGUMENT,
                          "SortStream message 2: not a valid sortd.v1.SortRequest")
        self.assertEqual([r.request_id for r in responses], ["first"])
        self.assertEqual(list(responses[0].keys.uint32.values), [1, 2])

    def test_chunked_garbage_is_invalid_argument(self):
        header = sort_pb2.SortChunkedRequest()
        header.header.total_keys = 2
        with self.assertRaises(grpc.RpcError) as cm:
            list(self.chunked(iter([header.SerializeToString(), GARBAGE]), timeout=10))
        self.assertStatus(cm.exception, grpc.StatusCode.INVALID_ARGUMENT,
                          "SortChunked message 2: not a valid sortd.v1.SortChunkedRequest")

    # --- messages that parse but are wrong --------------------------------
    def test_empty_message_names_the_missing_keys(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.sort(b"", timeout=10)
        self.assertStatus(cm.exception, grpc.StatusCode.INVALID_ARGUMENT, "keys:")

    def test_unknown_enum_names_the_field(self):
        raw = u32_request([2, 1]) + b"\x10\x07"  # field 2 (order) = 7
        with self.assertRaises(grpc.RpcError) as cm:
            self.sort(raw, timeout=10)
        self.assertStatus(cm.exception, grpc.StatusCode.INVALID_ARGUMENT, "order:")

    def test_unknown_fields_are_ignored(self):
        raw = u32_request([3, 1, 2]) + b"\xf8\x06\x01"  # field 111 (varint) = 1
        out = sort_pb2.SortResponse.FromString(self.sort(raw, timeout=10))
        self.assertEqual(list(out.keys.uint32.values), [1, 2, 3])

    # --- empty and missing oneofs ----------------------------------------
    def test_sort_keys_with_no_type_set_names_keys(self):
        # keys present (field 1, length 0) but no member of its oneof set.
        self.assertRefused(self.sort, b"\x0a\x00", grpc.StatusCode.INVALID_ARGUMENT, "keys: required")

    def test_sort_keys_of_a_type_this_server_does_not_know_names_keys(self):
        # TypedArray field 40: a member a later API version might add. Parsed
        # as an unknown field, so the oneof is unset.
        self.assertRefused(self.sort, ld(1, ld(40, b"")), grpc.StatusCode.INVALID_ARGUMENT,
                           "keys: required")

    def test_pairs_empty_message_names_keys(self):
        self.assertRefused(self.sort_pairs, b"", grpc.StatusCode.INVALID_ARGUMENT, "keys: required")

    def test_pairs_without_values_names_values(self):
        self.assertRefused(self.sort_pairs, ld(1, typed("uint32", [2, 1])),
                           grpc.StatusCode.INVALID_ARGUMENT, "values: required")

    def test_pairs_values_with_no_type_set_names_values(self):
        self.assertRefused(self.sort_pairs, ld(1, typed("uint32", [2, 1])) + b"\x12\x00",
                           grpc.StatusCode.INVALID_ARGUMENT, "values: required")

    def test_pairs_keys_with_no_type_set_names_keys(self):
        self.assertRefused(self.sort_pairs, b"\x0a\x00" + ld(2, typed("uint32", [2, 1])),
                           grpc.StatusCode.INVALID_ARGUMENT, "keys: required")

    def test_stream_items_without_keys_get_their_errors_and_the_stream_goes_on(self):
        responses = self.run_stream([
            u32_request([2, 1], request_id="a"),
            sort_pb2.SortRequest(request_id="no-keys").SerializeToString(),
            b"\x0a\x00" + ld(4, b"untyped"),  # keys with no member set
            u32_request([4, 3], request_id="d")])
        by_id = {r.request_id: r for r in responses}
        self.assertEqual(sorted(by_id), ["a", "d", "no-keys", "untyped"])
        for rid in ("no-keys", "untyped"):
            self.assertEqual(by_id[rid].error.code, INVALID_ARGUMENT)
            self.assertTrue(by_id[rid].error.message.startswith("keys: required"), by_id[rid].error)
        self.assertEqual(list(by_id["a"].keys.uint32.values), [1, 2])
        self.assertEqual(list(by_id["d"].keys.uint32.values), [3, 4])

    def test_chunked_first_message_with_neither_header_nor_chunk_names_header(self):
        self.assertChunkedRefused([b"", chunk([2, 1])], grpc.StatusCode.INVALID_ARGUMENT, "header:")

    def test_chunked_message_with_neither_after_the_header_names_chunk(self):
        self.assertChunkedRefused([header(), chunk([2, 1]), b""], grpc.StatusCode.INVALID_ARGUMENT,
                                  "chunk:")

    def test_chunked_chunk_without_keys_names_chunk_keys(self):
        for missing in (chunk(), ld(2, b"\x0a\x00")):  # no keys; keys with no member set
            with self.subTest(missing=missing):
                self.assertChunkedRefused([header(), missing], grpc.StatusCode.INVALID_ARGUMENT,
                                          "chunk.keys: required")

    # --- two members of one oneof (protobuf: the last one wins) -------------
    def test_typed_array_with_two_members_sorts_the_last(self):
        keys = typed("uint32", [30, 10, 20]) + typed("int64", [-1, 5, -7])
        out = sort_pb2.SortResponse.FromString(self.sort(ld(1, keys), timeout=10))
        self.assertEqual(out.keys.WhichOneof("array"), "int64")
        self.assertEqual(list(out.keys.int64.values), [-7, -1, 5])

    def test_chunked_first_message_with_header_then_chunk_is_a_chunk_names_header(self):
        # Both members of SortChunkedRequest.item in one message: parsed as
        # the chunk (the last), so the stream has no header.
        self.assertChunkedRefused([header(total_keys=2) + chunk([2, 1])],
                                  grpc.StatusCode.INVALID_ARGUMENT, "header:")

    # --- wrong counts ------------------------------------------------------
    def test_pairs_length_mismatch_names_values(self):
        payload = ld(1, typed("uint32", [3, 1, 2])) + ld(2, typed("float64", [1.0, 2.0]))
        err = self.assertRefused(self.sort_pairs, payload, grpc.StatusCode.INVALID_ARGUMENT,
                                 "values: length 2")
        self.assertIn("keys length 3", err.details())

    def test_chunked_values_length_mismatch_names_chunk_values(self):
        self.assertChunkedRefused([header(with_values=True), chunk([3, 1, 2], [7, 8])],
                                  grpc.StatusCode.INVALID_ARGUMENT, "chunk.values: length 2")

    def test_chunked_more_keys_than_announced_names_chunk_keys(self):
        err = self.assertChunkedRefused([header(total_keys=3), chunk([3, 1]), chunk([5, 4])],
                                        grpc.StatusCode.INVALID_ARGUMENT, "chunk.keys: more keys")
        self.assertIn("header.total_keys", err.details())

    def test_chunked_fewer_keys_than_announced_at_half_close_names_total_keys(self):
        err = self.assertChunkedRefused([header(total_keys=5), chunk([3, 1])],
                                        grpc.StatusCode.INVALID_ARGUMENT, "header.total_keys: 5")
        self.assertIn("2 keys received", err.details())

    # --- unknown enums on every RPC -----------------------------------------
    def test_negative_enum_names_the_field(self):
        raw = u32_request([2, 1]) + b"\x10" + varint(2**64 - 1)  # order = -1
        self.assertRefused(self.sort, raw, grpc.StatusCode.INVALID_ARGUMENT, "order: unknown value -1")

    def test_pairs_unknown_order_names_order(self):
        payload = ld(1, typed("uint32", [2, 1])) + ld(2, typed("uint32", [0, 1])) + b"\x18\x09"
        self.assertRefused(self.sort_pairs, payload, grpc.StatusCode.INVALID_ARGUMENT,
                           "order: unknown value 9")

    def test_stream_item_error_in_the_middle_is_answered_and_later_items_too(self):
        # DESIGN.md / api.md: one failed request does not end the stream.
        responses = self.run_stream([
            u32_request([2, 1], request_id="before"),
            u32_request([2, 1], request_id="bad-order") + b"\x10\x07",
            u32_request([6, 5, 4], request_id="after")])
        by_id = {r.request_id: r for r in responses}
        self.assertEqual(sorted(by_id), ["after", "bad-order", "before"])
        self.assertEqual(by_id["bad-order"].error.code, INVALID_ARGUMENT)
        self.assertTrue(by_id["bad-order"].error.message.startswith("order: unknown value 7"),
                        by_id["bad-order"].error)
        self.assertFalse(by_id["bad-order"].HasField("keys"))
        self.assertEqual(list(by_id["before"].keys.uint32.values), [1, 2])
        self.assertEqual(list(by_id["after"].keys.uint32.values), [4, 5, 6])
        self.assertFalse(by_id["after"].HasField("error"))

    def test_chunked_header_unknown_order_names_header_order(self):
        self.assertChunkedRefused([header(order=7), chunk([2, 1])],
                                  grpc.StatusCode.INVALID_ARGUMENT, "header.order: unknown value 7")

    # --- type mixing across chunks --------------------------------------------
    def test_chunked_key_type_changing_across_chunks_names_chunk_keys(self):
        for announced in (0, 4):  # columns growing, or reserved from the announcement
            with self.subTest(total_keys=announced):
                err = self.assertChunkedRefused(
                    [header(total_keys=announced), chunk([3, 1]), chunk([5, 4], kind="int64")],
                    grpc.StatusCode.INVALID_ARGUMENT, "chunk.keys: element type int64")
                self.assertIn("(uint32)", err.details())

    def test_chunked_byte_keys_then_numeric_keys_names_chunk_keys(self):
        self.assertChunkedRefused([header(), chunk([b"b", b"a"], kind="bytes"), chunk([5, 4])],
                                  grpc.StatusCode.INVALID_ARGUMENT, "chunk.keys: element type uint32")

    def test_chunked_value_type_changing_across_chunks_names_chunk_values(self):
        self.assertChunkedRefused(
            [header(with_values=True), chunk([3, 1], [7, 8]),
             chunk([5], [1.5], value_kind="float64")],
            grpc.StatusCode.INVALID_ARGUMENT, "chunk.values: element type float64")

    # --- duplicate and out-of-order parts --------------------------------------
    # The protocol has no chunk offsets: a part can only be repeated (a
    # second header) or early (a chunk before the header).
    def test_chunked_chunk_before_header_names_header(self):
        self.assertChunkedRefused([chunk([2, 1]), header()], grpc.StatusCode.INVALID_ARGUMENT,
                                  "header: the first SortChunked message must carry a header")

    def test_chunked_second_header_after_chunks_names_chunk(self):
        self.assertChunkedRefused([header(total_keys=4), chunk([2, 1]), header(total_keys=4),
                                   chunk([4, 3])], grpc.StatusCode.INVALID_ARGUMENT, "chunk:")

    def test_chunked_second_header_right_after_the_first_names_chunk(self):
        self.assertChunkedRefused([header(), header(order=1), chunk([2, 1])],
                                  grpc.StatusCode.INVALID_ARGUMENT, "chunk:")

    # --- with_values and the chunks disagreeing ----------------------------------
    def test_chunked_with_values_but_a_chunk_without_values_names_chunk_values(self):
        for messages in ([header(with_values=True), chunk([2, 1])],
                         [header(with_values=True), chunk([2, 1], [0, 1]), chunk([4, 3])]):
            with self.subTest(chunks=len(messages) - 1):
                err = self.assertChunkedRefused(messages, grpc.StatusCode.INVALID_ARGUMENT,
                                                "chunk.values: required")
                self.assertIn("header.with_values", err.details())

    def test_chunked_values_without_with_values_names_chunk_values(self):
        err = self.assertChunkedRefused([header(), chunk([2, 1], [0, 1])],
                                        grpc.StatusCode.INVALID_ARGUMENT, "chunk.values: set")
        self.assertIn("header.with_values", err.details())

    # --- invalid UTF-8 ----------------------------------------------------------
    # proto3 strings must be UTF-8: such a message does not parse. libprotobuf
    # also logs an ERROR line for each one, which would let any client flood
    # the server's log; sortd passes at most one such line per 10 s.
    def test_invalid_utf8_request_id_is_refused_and_does_not_flood_the_log(self):
        raw = u32_request([2, 1]) + b"\x22\x02\xff\xfe"  # field 4 (request_id) = ff fe
        with SortdProcess(SORTD) as server:
            with grpc.insecure_channel(server.target) as channel:
                sort = channel.unary_unary(SERVICE + "Sort")
                for _ in range(50):
                    with self.assertRaises(grpc.RpcError) as cm:
                        sort(raw, timeout=10)
                    self.assertStatus(cm.exception, grpc.StatusCode.INVALID_ARGUMENT,
                                      "request: not a valid sortd.v1.SortRequest")
            log = server.read_log()
        lines = [l for l in log.splitlines() if "invalid UTF-8" in l]
        self.assertGreaterEqual(len(lines), 1, log[-2000:])
        self.assertLessEqual(len(lines), 2, "\n".join(lines[:5]))

    # --- long request ids ----------------------------------------------------
    # request_id is echoed in every response (errors included) and logged:
    # over 4096 bytes it is refused naming the field (docs/api.md); the
    # longest allowed is echoed by every RPC, within the message limit.
    def test_request_id_over_4096_bytes_is_refused_naming_the_field(self):
        before = self.samples()
        pairs = sort_pb2.SortPairsRequest(request_id=ONE_MB_ID)
        pairs.keys.uint32.values.extend([2, 1])
        pairs.values.uint32.values.extend([0, 1])
        for method, raw in ((self.sort, u32_request([2, 1], request_id="i" * 4097)),
                            (self.sort, u32_request([2, 1], request_id=ONE_MB_ID)),
                            (self.sort_pairs, pairs.SerializeToString())):
            err = self.assertRefused(method, raw, grpc.StatusCode.INVALID_ARGUMENT, "request_id: ")
            self.assertIn("more than the 4096 allowed", err.details())
        self.assertNothingSorted(before, {("Sort", "INVALID_ARGUMENT"): 2,
                                          ("SortPairs", "INVALID_ARGUMENT"): 1})

    def test_stream_item_with_a_long_request_id_gets_its_error_and_the_stream_goes_on(self):
        responses = self.run_stream([u32_request([2, 1], request_id=ONE_MB_ID),
                                     u32_request([4, 3], request_id="small")])
        by_id = {r.request_id: r for r in responses}
        # The refusal echoes the id cut to 4096 bytes, so that it fits.
        self.assertEqual(sorted(by_id, key=len), ["small", ONE_MB_ID[:4096]])
        refused = by_id[ONE_MB_ID[:4096]]
        self.assertEqual(refused.error.code, INVALID_ARGUMENT)
        self.assertTrue(refused.error.message.startswith("request_id: 1000000 bytes"),
                        refused.error.message)
        self.assertEqual(list(by_id["small"].keys.uint32.values), [3, 4])

    def test_a_long_multibyte_request_id_is_cut_on_a_character_boundary(self):
        # 4097 bytes: cut at 4096 would split the last two-byte character,
        # and a response with invalid UTF-8 would not parse on the client.
        long_id = "a" + "\u00e9" * 2048
        self.assertEqual(len(long_id.encode()), 4097)
        responses = self.run_stream([u32_request([2, 1], request_id=long_id),
                                     u32_request([4, 3], request_id="after")])
        by_id = {r.request_id: r for r in responses}
        self.assertEqual(sorted(by_id, key=len), ["after", long_id[:2048]])
        self.assertEqual(by_id[long_id[:2048]].error.code, INVALID_ARGUMENT)
        self.assertEqual(list(by_id["after"].keys.uint32.values), [3, 4])

    def test_chunked_element_too_large_to_return_is_refused_on_arrival(self):
        # It fits an upload message, but its response (framing, an 8-byte
        # index) would not fit the limit: refused before the sort, not after.
        big = b"x" * (MESSAGE_LIMIT - 100)
        before = self.samples()
        self.assertChunkedRefusedWhileOpen(
            [header(return_indices=True), chunk([big], kind="bytes")],
            grpc.StatusCode.RESOURCE_EXHAUSTED, "chunk.keys: element 0 takes")
        self.assertNothingSorted(before, {("SortChunked", "RESOURCE_EXHAUSTED"): 1})

    def test_chunked_request_id_over_4096_bytes_is_refused_naming_the_field(self):
        self.assertChunkedRefused([header(request_id=ONE_MB_ID), chunk([3, 1, 2])],
                                  grpc.StatusCode.INVALID_ARGUMENT, "header.request_id: ")

    def test_the_longest_request_id_is_echoed_by_every_rpc(self):
        longest = "m" * 4096
        out = sort_pb2.SortResponse.FromString(
            self.sort(u32_request([3, 1, 2], request_id=longest), timeout=10))
        self.assertEqual((out.request_id, list(out.keys.uint32.values)), (longest, [1, 2, 3]))
        streamed = self.run_stream([u32_request([2, 1], request_id=longest)])
        self.assertEqual([(r.request_id, list(r.keys.uint32.values)) for r in streamed],
                         [(longest, [1, 2])])
        chunked = [sort_pb2.SortChunkedResponse.FromString(raw) for raw in self.chunked(
            iter([header(request_id=longest), chunk([3, 1, 2])]), timeout=10)]
        self.assertEqual(chunked[0].request_id, longest)
        self.assertEqual(list(chunked[0].chunk.keys.uint32.values), [1, 2, 3])

    def test_request_id_over_the_message_limit_is_refused_by_grpc(self):
        # The request itself does not fit: gRPC refuses it before sortd sees
        # it (so the message is gRPC's, naming the sizes, not a field).
        big = u32_request([2, 1], request_id="i" * MESSAGE_LIMIT)
        self.assertRefused(self.sort, big, grpc.StatusCode.RESOURCE_EXHAUSTED,
                           "Received message larger than max")
        with self.assertRaises(grpc.RpcError) as cm:
            self.run_stream([big])
        self.assertStatus(cm.exception, grpc.StatusCode.RESOURCE_EXHAUSTED,
                          "Received message larger than max")

    # The first SortChunked response shares the message limit with the
    # request_id it echoes (was: the id on top of --chunk_response_bytes of
    # keys, a message gRPC refused after the sort, the upload lost).
    def test_chunked_first_response_shares_the_message_limit_with_the_request_id(self):
        longest = "m" * 4096
        with SortdProcess(SORTD, "--max_message_bytes=%d" % MESSAGE_LIMIT,
                          "--chunk_response_bytes=%d" % (MESSAGE_LIMIT - 1000)) as server:
            with grpc.insecure_channel(server.target, options=[
                    ("grpc.max_receive_message_length", 8 << 20)]) as channel:
                keys = np.arange(300000, 0, -1, dtype=np.uint32)
                call = channel.stream_stream(SERVICE + "SortChunked")(
                    iter([header(request_id=longest)] + large_chunks(keys)), timeout=30)
                try:
                    raws = list(call)
                except grpc.RpcError as err:
                    self.fail("%s: %s" % (err.code(), err.details()))
                self.assertLessEqual(max(len(r) for r in raws), MESSAGE_LIMIT)
                out = [sort_pb2.SortChunkedResponse.FromString(r) for r in raws]
                self.assertEqual(out[0].request_id, longest)
                got = np.concatenate([np.array(o.chunk.keys.uint32.values, dtype=np.uint32)
                                      for o in out])
                np.testing.assert_array_equal(got, np.sort(keys))

    # SortChunked responses stay within --max_message_bytes whatever
    # --chunk_response_bytes says (was: 4 MiB responses under a 1 MiB limit,
    # refused by gRPC after the sort and counted CANCELLED).
    def test_chunked_responses_fit_the_message_limit_with_default_chunk_size(self):
        with SortdProcess(SORTD, "--max_message_bytes=%d" % MESSAGE_LIMIT) as server:
            with grpc.insecure_channel(server.target, options=[
                    ("grpc.max_receive_message_length", 8 << 20)]) as channel:
                keys = np.arange(300000, 0, -1, dtype=np.uint32)  # 1.2 MB
                call = channel.stream_stream(SERVICE + "SortChunked")(
                    iter([header(total_keys=len(keys))] + large_chunks(keys)), timeout=30)
                try:
                    raws = list(call)
                except grpc.RpcError as err:
                    self.fail("%s: %s" % (err.code(), err.details()))
                self.assertLessEqual(max(len(r) for r in raws), MESSAGE_LIMIT)
                got = np.concatenate([np.array(sort_pb2.SortChunkedResponse.FromString(r)
                                               .chunk.keys.uint32.values, dtype=np.uint32)
                                      for r in raws])
                np.testing.assert_array_equal(got, np.sort(keys))

    # With every default, SortChunked responses fit gRPC's default receive
    # limit (4 MiB), so a stock client reads them (was: 4194327-byte messages,
    # 4 MiB of elements plus their framing; a default grpcio channel failed
    # RESOURCE_EXHAUSTED "Received message larger than max").
    def test_chunked_responses_with_defaults_fit_a_stock_clients_receive_limit(self):
        with SortdProcess(SORTD) as server:
            with grpc.insecure_channel(server.target) as channel:  # gRPC's defaults
                keys = np.random.default_rng(5).integers(0, 2**32, 1500000,
                                                         dtype=np.uint64).astype(np.uint32)
                call = channel.stream_stream(SERVICE + "SortChunked")(
                    iter([header(total_keys=len(keys), return_indices=True)] + large_chunks(keys)),
                    timeout=60)
                try:
                    raws = list(call)
                except grpc.RpcError as err:
                    self.fail("%s: %s" % (err.code(), err.details()))
                self.assertLessEqual(max(len(r) for r in raws), 4 << 20)
                self.assertGreater(len(raws), 3)  # 18 MB: several full-size responses
                out = [sort_pb2.SortChunkedResponse.FromString(r) for r in raws]
                want = np.argsort(keys, kind="stable")
                np.testing.assert_array_equal(
                    np.concatenate([np.array(o.indices, np.uint64) for o in out]), want)
                np.testing.assert_array_equal(
                    np.concatenate([np.array(o.chunk.keys.uint32.values, np.uint32) for o in out]),
                    keys[want])

    # --- clients that never read -------------------------------------------------
    def test_chunked_client_that_never_reads_is_released_at_its_deadline(self):
        keys = np.random.default_rng(1).integers(0, 2**32, 1000000, dtype=np.uint64).astype(np.uint32)
        before = self.samples()
        timeout = 5.0
        call = self.slow_chunked(iter([header()] + large_chunks(keys)), timeout=timeout)
        deadline = time.time() + timeout
        self.addCleanup(call.cancel)
        # Sorted (the launch is counted before the first write) ...
        self.assertTrue(wait_until(lambda: total(self.samples(), "sortd_batch_size_count") >
                                   total(before, "sortd_batch_size_count"), timeout))
        # ... then held by the unread response, its admission kept, until
        # shortly before the deadline ...
        self.assertFalse(wait_until(lambda: self.inflight()[0] == 0,
                                    max(0.0, deadline - time.time() - 1.0)),
                         "finished before its deadline: the test did not hold the server")
        self.assertGreater(self.inflight()[1], 0)
        # ... and released by it, counted as the client saw it.
        self.assertEqual(call.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.wait_released()
        after = self.samples()
        self.assertEqual(self.requests("SortChunked", "CANCELLED", after),
                         self.requests("SortChunked", "CANCELLED", before) + 1)
        self.assertEqual(self.requests("SortChunked", "OK", after),
                         self.requests("SortChunked", "OK", before))

    def _stream_nobody_reads(self, stub, metrics_url, timeout, items=4):
        """A SortStream call whose 800 KB responses are never read; returns
        the call once the server has sorted every item."""
        def sorted_items():
            return total(scrape(metrics_url), "sortd_requests_total", method="SortStream", code="OK")
        before = sorted_items()
        rng = np.random.default_rng(2)
        messages = [ld(1, typed("uint32", rng.integers(0, 2**32, 200000, dtype=np.uint64)
                                .astype(np.uint32))) + ld(4, b"item%d" % i) for i in range(items)]
        call = stub(iter(messages), timeout=timeout)
        self.addCleanup(call.cancel)
        self.assertTrue(wait_until(lambda: sorted_items() == before + items, timeout),
                        "the server did not sort every item")
        return call

    def test_stream_client_that_never_reads_ends_at_its_deadline(self):
        # A server of its own, so that its drain shows whether the stream
        # really ended: a stream still open would hold SIGTERM's drain for
        # its whole --drain_timeout (20 s here).
        server = SortdProcess(SORTD, "--max_message_bytes=%d" % MESSAGE_LIMIT,
                              "--drain_timeout=20s").start()
        self.addCleanup(server.__exit__, None, None, None)
        channel = grpc.insecure_channel(server.target, options=[
            ("grpc.http2.lookahead_bytes", 65536), ("grpc.http2.bdp_probe", 0)])
        self.addCleanup(channel.close)
        stub = channel.stream_stream(SERVICE + "SortStream")
        call = self._stream_nobody_reads(stub, server.metrics_url, timeout=3.0)
        self.assertEqual(call.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertTrue(wait_until(lambda: metric(server.metrics_url, "sortd_inflight_requests") == 0
                                   and metric(server.metrics_url, "sortd_inflight_bytes") == 0, 10))
        # The connection is not left without flow-control window: a new
        # stream on it is answered.
        out = self.run_stream([u32_request([2, 1], request_id="next")], stub=stub)
        self.assertEqual([(r.request_id, list(r.keys.uint32.values)) for r in out],
                         [("next", [1, 2])])
        # The client goes first: a connected idle grpcio client can hold the
        # exit several seconds on its own (docs/hardening.md, "Open"), which
        # is not what this test measures.
        channel.close()
        start = time.time()
        self.assertEqual(server.terminate(), 0)
        self.assertLess(time.time() - start, 10, "the drain waited for the unread stream")
        self.assertIn("drained", server.read_log())

    # A SortStream item keeps its admission until its response is written,
    # so responses waiting for a client that does not read count against
    # --max_inflight_bytes (was: released when sorted; sortd_inflight_bytes
    # read 0 while 4 x 800 KB waited in the stream's queue).
    def test_stream_responses_held_for_a_client_that_never_reads_stay_admitted(self):
        call = self._stream_nobody_reads(self.slow_stream, self.server.metrics_url, timeout=10.0)
        held_bytes = self.inflight()[1]
        call.cancel()
        self.assertGreaterEqual(held_bytes, 2 * 800000)  # of the 3+ responses not yet sent

    # --- cancellation mid-upload and mid-download -------------------------------
    def _cancel_mid_upload(self, total_keys):
        """Cancels an upload of 3 x 100000 keys after the first two chunks
        were admitted; returns the CANCELLED count's growth and the
        INVALID_ARGUMENT count's."""
        before = self.samples()
        gate = threading.Event()
        self.addCleanup(gate.set)
        keys = np.arange(300000, dtype=np.uint32)

        def messages():
            yield header(total_keys=total_keys)
            yield chunk(keys[:100000])
            yield chunk(keys[100000:200000])
            gate.wait(30)  # the third chunk never comes
        call = self.chunked(messages(), timeout=30)
        # Announced: admitted whole at the first chunk (2 x 1.2 MB + 2.4 MB);
        # otherwise chunk by chunk (1.6 MB each).
        admitted = 4800000 if total_keys else 2 * 1600000
        self.assertTrue(wait_until(lambda: self.inflight()[1] >= admitted, 10), self.inflight())
        call.cancel()
        gate.set()
        self.assertEqual(call.code(), grpc.StatusCode.CANCELLED)
        self.wait_released()
        self.assertTrue(wait_until(lambda: self.requests("SortChunked", "CANCELLED") +
                                   self.requests("SortChunked", "INVALID_ARGUMENT") >
                                   self.requests("SortChunked", "CANCELLED", before) +
                                   self.requests("SortChunked", "INVALID_ARGUMENT", before), 10))
        after = self.samples()
        return (self.requests("SortChunked", "CANCELLED", after) -
                self.requests("SortChunked", "CANCELLED", before),
                self.requests("SortChunked", "INVALID_ARGUMENT", after) -
                self.requests("SortChunked", "INVALID_ARGUMENT", before))

    def test_chunked_cancelled_mid_upload_is_released_and_counted_cancelled(self):
        self.assertEqual(self._cancel_mid_upload(total_keys=0), (1, 0))

    # A SortChunked call cancelled while the reactor waits for a message
    # gets OnReadDone(ok=false), usually before OnCancel, like a half-close;
    # the call is counted when it is done, as CANCELLED (was: INVALID_ARGUMENT
    # "header.total_keys: 300000 announced but 200000 keys received" in 9
    # tries of 10). Six tries, so that the old behaviour cannot pass.
    def test_chunked_cancelled_mid_upload_after_an_announcement_is_counted_cancelled(self):
        for _ in range(6):
            self.assertEqual(self._cancel_mid_upload(total_keys=300000), (1, 0))

    def test_chunked_cancelled_mid_download_is_released_and_counted_cancelled(self):
        keys = np.random.default_rng(3).integers(0, 2**32, 1000000, dtype=np.uint64).astype(np.uint32)
        before = self.samples()
        call = self.slow_chunked(iter([header()] + large_chunks(keys)), timeout=30)
        self.addCleanup(call.cancel)
        first = sort_pb2.SortChunkedResponse.FromString(next(call))
        self.assertEqual((first.offset, first.total_keys), (0, len(keys)))
        got = np.array(first.chunk.keys.uint32.values, dtype=np.uint32)
        self.assertGreater(len(got), 0)
        self.assertLess(len(got), len(keys))
        np.testing.assert_array_equal(got, np.sort(keys)[:len(got)])
        # Mid-download: the server is still writing (held by flow control).
        self.assertEqual(self.inflight()[0], 1)
        call.cancel()
        self.wait_released()
        self.assertTrue(wait_until(lambda: self.requests("SortChunked", "CANCELLED") ==
                                   self.requests("SortChunked", "CANCELLED", before) + 1, 10))
        self.assertEqual(self.requests("SortChunked", "OK"), self.requests("SortChunked", "OK", before))

    def test_chunked_upload_stalled_past_its_deadline_is_released_and_counted_cancelled(self):
        before = self.samples()
        gate = threading.Event()
        self.addCleanup(gate.set)

        def messages():
            yield header()
            yield chunk(np.arange(100000, dtype=np.uint32))
            gate.wait(30)  # the client stalls, holding its stream open
        call = self.chunked(messages(), timeout=2.0)
        self.assertTrue(wait_until(lambda: self.inflight()[1] > 0, 10), "the chunk was not admitted")
        self.assertEqual(call.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        gate.set()
        self.wait_released()
        self.assertTrue(wait_until(lambda: self.requests("SortChunked", "CANCELLED") ==
                                   self.requests("SortChunked", "CANCELLED", before) + 1, 10))

    # --- deadlines already expired ------------------------------------------
    # A Sort or SortPairs small enough to be sorted inline that arrives with
    # its deadline already passed is not sorted and is counted CANCELLED: the
    # handler checks ctx->deadline(), as ctx->IsCancelled() is still false
    # there (was: sorted and counted OK in 19 tries of 20; three tries per
    # method).
    def test_unary_call_arriving_after_its_deadline_is_not_sorted(self):
        pairs = ld(1, typed("uint32", [3, 1, 2])) + ld(2, typed("uint32", [0, 1, 2]))
        for method, payload in 3 * (("Sort", u32_request([3, 1, 2])), ("SortPairs", pairs)):
            with self.subTest(method=method):
                before = self.samples()
                status = call_with_expired_deadline(self.server.port, method, [payload])
                self.assertEqual(status, grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
                self.assertTrue(wait_until(lambda: self.requests(method, "OK") +
                                           self.requests(method, "CANCELLED") >
                                           self.requests(method, "OK", before) +
                                           self.requests(method, "CANCELLED", before), 10))
                after = self.samples()
                self.assertEqual(total(after, "sortd_keys_sorted_total"),
                                 total(before, "sortd_keys_sorted_total"), "sorted anyway")
                self.assertEqual(self.requests(method, "CANCELLED", after),
                                 self.requests(method, "CANCELLED", before) + 1)

    def test_unary_call_arriving_after_its_deadline_is_not_sorted_when_batched(self):
        keys = list(range(2000, 0, -1))  # over --inline_max_keys, batched
        before = self.samples()
        status = call_with_expired_deadline(self.server.port, "Sort", [u32_request(keys)])
        self.assertEqual(status, grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
        self.assertTrue(wait_until(lambda: self.requests("Sort", "CANCELLED") ==
                                   self.requests("Sort", "CANCELLED", before) + 1, 10))
        after = self.samples()
        self.assertEqual(total(after, "sortd_keys_sorted_total"),
                         total(before, "sortd_keys_sorted_total"))
        self.assertEqual(self.requests("Sort", "OK", after), self.requests("Sort", "OK", before))

    def test_stream_arriving_after_its_deadline_sorts_nothing(self):
        before = self.samples()
        status = call_with_expired_deadline(self.server.port, "SortStream",
                                            [u32_request([3, 1, 2], request_id="late")])
        self.assertEqual(status, grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
        self.wait_released()
        after = self.samples()
        self.assertEqual(total(after, "sortd_keys_sorted_total"),
                         total(before, "sortd_keys_sorted_total"))
        self.assertEqual(self.requests("SortStream", "OK", after),
                         self.requests("SortStream", "OK", before))

    # The same OnReadDone(ok=false) as mid-upload: a SortChunked call that
    # arrives after its deadline is counted CANCELLED (was: INVALID_ARGUMENT
    # "header: SortChunked stream closed without a header" in about two
    # tries of three; twelve tries).
    def test_chunked_arriving_after_its_deadline_is_counted_cancelled(self):
        for _ in range(12):
            before = self.samples()
            status = call_with_expired_deadline(self.server.port, "SortChunked",
                                                [header(total_keys=3), chunk([3, 1, 2])])
            self.assertEqual(status, grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
            self.assertTrue(wait_until(
                lambda: self.requests("SortChunked", "CANCELLED") +
                self.requests("SortChunked", "INVALID_ARGUMENT") >
                self.requests("SortChunked", "CANCELLED", before) +
                self.requests("SortChunked", "INVALID_ARGUMENT", before), 10))
            after = self.samples()
            self.assertEqual(self.requests("SortChunked", "INVALID_ARGUMENT", after),
                             self.requests("SortChunked", "INVALID_ARGUMENT", before),
                             "counted INVALID_ARGUMENT")
            self.assertEqual(self.requests("SortChunked", "CANCELLED", after),
                             self.requests("SortChunked", "CANCELLED", before) + 1)

    # --- sizes ----------------------------------------------------------
    def test_huge_chunked_announcement_is_refused_at_once(self):
        # Issue #16's wedge: 2^40 keys announced, 3 sent, the stream left
        # open: refused at the header, not at the end of the upload.
        before = self.samples()
        err = self.assertChunkedRefusedWhileOpen(
            [header(total_keys=1 << 40), chunk([3, 1, 2], kind="uint64")],
            grpc.StatusCode.RESOURCE_EXHAUSTED, "header.total_keys:")
        self.assertIn("--max_chunked_bytes", err.details())
        self.assertNothingSorted(before, {("SortChunked", "RESOURCE_EXHAUSTED"): 1})

    def test_response_over_the_message_limit_is_refused_before_sorting(self):
        keys = np.arange(100000, dtype=np.uint64)  # 800 KB in; 1.6 MB out with indices
        r = sort_pb2.SortRequest(return_indices=True)
        r.keys.uint64.values.extend(keys.tolist())
        before = self.samples()
        with self.assertRaises(grpc.RpcError) as cm:
            self.sort(r.SerializeToString(), timeout=30)
        self.assertStatus(cm.exception, grpc.StatusCode.RESOURCE_EXHAUSTED, "response:")
        self.assertIn("SortChunked", cm.exception.details())
        self.assertNothingSorted(before, {("Sort", "RESOURCE_EXHAUSTED"): 1})


if __name__ == "__main__":
    unittest.main(verbosity=2)
