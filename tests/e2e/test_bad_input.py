"""Bad input on the wire, end to end: the real sortd answered by raw bytes
from grpcio (no client-side serialization), so that messages which do not
parse, unknown fields and enums, and hostile size announcements reach the
server exactly as a broken or malicious client would send them. Each call
must end with its documented status and a message naming the problem, and
the server must stay healthy and drain cleanly afterwards.

Environment: SORTD_BIN, PYTHONPATH with client/python (stubs included).
"""
import os
import time
import unittest

import grpc
import numpy as np

from sortd.v1 import sort_pb2
from sortd_process import SortdProcess, metric

SORTD = os.environ["SORTD_BIN"]
SERVICE = "/sortd.v1.SortService/"
GARBAGE = b"\xff\xff\xff\xff"         # wire type 7: never valid protobuf
TRUNCATED = b"\x0a\x05ab"             # field 1, length 5, 2 bytes follow


def u32_request(keys, **fields):
    r = sort_pb2.SortRequest(**fields)
    r.keys.uint32.values.extend(keys)
    return r.SerializeToString()


class BadInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = SortdProcess(SORTD, "--max_message_bytes=1048576",
                                  "--max_chunked_bytes=67108864").start()
        opts = [("grpc.max_send_message_length", 8 << 20),
                ("grpc.max_receive_message_length", 8 << 20)]
        cls.channel = grpc.insecure_channel(cls.server.target, options=opts)
        # No serializers: requests and responses are bytes.
        cls.sort = cls.channel.unary_unary(SERVICE + "Sort")
        cls.sort_pairs = cls.channel.unary_unary(SERVICE + "SortPairs")
        cls.stream = cls.channel.stream_stream(SERVICE + "SortStream")
        cls.chunked = cls.channel.stream_stream(SERVICE + "SortChunked")

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        code = cls.server.terminate()
        log = cls.server.read_log()
        cls.server.__exit__(None, None, None)
        assert code == 0 and "drained" in log, log

    def tearDown(self):
        # After every case: nothing left in flight, and the server still sorts.
        deadline = time.time() + 10
        while metric(self.server.metrics_url, "sortd_inflight_requests") != 0:
            self.assertLess(time.time(), deadline, "requests still in flight")
            time.sleep(0.01)
        out = sort_pb2.SortResponse.FromString(self.sort(u32_request([3, 1, 2]), timeout=10))
        self.assertEqual(list(out.keys.uint32.values), [1, 2, 3])

    def assertStatus(self, err, code, prefix):
        self.assertEqual(err.code(), code, err.details())
        self.assertTrue(err.details().startswith(prefix), err.details())

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

    # --- sizes ----------------------------------------------------------
    def test_huge_chunked_announcement_is_refused_at_once(self):
        # Issue #16's wedge: 2^40 keys announced, 3 sent.
        header = sort_pb2.SortChunkedRequest()
        header.header.total_keys = 1 << 40
        chunk = sort_pb2.SortChunkedRequest()
        chunk.chunk.keys.uint64.values.extend([3, 1, 2])
        with self.assertRaises(grpc.RpcError) as cm:
            list(self.chunked(iter([header.SerializeToString(), chunk.SerializeToString()]),
                              timeout=10))
        self.assertStatus(cm.exception, grpc.StatusCode.RESOURCE_EXHAUSTED, "header.total_keys:")
        self.assertIn("--max_chunked_bytes", cm.exception.details())

    def test_response_over_the_message_limit_is_refused_before_sorting(self):
        keys = np.arange(100000, dtype=np.uint64)  # 800 KB in; 1.6 MB out with indices
        r = sort_pb2.SortRequest(return_indices=True)
        r.keys.uint64.values.extend(keys.tolist())
        with self.assertRaises(grpc.RpcError) as cm:
            self.sort(r.SerializeToString(), timeout=30)
        self.assertStatus(cm.exception, grpc.StatusCode.RESOURCE_EXHAUSTED, "response:")
        self.assertIn("SortChunked", cm.exception.details())


if __name__ == "__main__":
    unittest.main(verbosity=2)
