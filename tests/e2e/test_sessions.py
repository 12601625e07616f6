"""Sort sessions, end to end: the real sortd binary driven by the real Python
client (sortd_client, which picks a session for large numeric arrays) and by
raw grpcio calls that build SessionPart bytes by hand
(sortd_client.session.part_message), so that parts arrive out of order, on
several connections, twice, short, past the end or not at all, exactly as a
broken or hostile client would send them (docs/api.md, "Sort sessions").

Every sort is checked against numpy: np.argsort(kind="stable") over keys
mapped to the server's total order (floats: -inf < negatives < -0.0 < +0.0
< positives < +inf; no NaN here), and for descending a stable argsort of the
negated ranks (equal keys keep their input order). Keys and values are
compared bitwise. Server state (open sessions, reserved bytes, expiries,
per-method request counts) is read from /metrics and always polled, never
waited for with a fixed sleep.

Environment: SORTD_BIN, PYTHONPATH with build/python, client/python and
tests/e2e.
"""
import contextlib
import io
import itertools
import os
import sys
import threading
import unittest

import grpc
import numpy as np

from sortd.v1 import sort_pb2
from sortd_client.client import Client
from sortd_client.session import parse_part, part_message
from slow_proxy import SlowProxy
from sort_reference import bits, make_array, reference_permutation
from sortd_process import SortdProcess, metric, scrape, total, wait_until

SORTD = os.environ["SORTD_BIN"]
SERVICE = "/sortd.v1.SortService/"
KEY_TYPES = ["uint32", "int32", "float32", "uint64", "int64", "float64"]
ELEMENT_TYPE = {
    "uint32": sort_pb2.ELEMENT_TYPE_UINT32, "int32": sort_pb2.ELEMENT_TYPE_INT32,
    "float32": sort_pb2.ELEMENT_TYPE_FLOAT32, "uint64": sort_pb2.ELEMENT_TYPE_UINT64,
    "int64": sort_pb2.ELEMENT_TYPE_INT64, "float64": sort_pb2.ELEMENT_TYPE_FLOAT64,
}
KEYS = sort_pb2.SESSION_ARRAY_KEYS
VALUES = sort_pb2.SESSION_ARRAY_VALUES
INDICES = sort_pb2.SESSION_ARRAY_INDICES
WAIT = 30  # seconds any polled condition may take on a loaded 2-core VM


def session_requests(url, code="OK", key_type=None):
    """sortd_requests_total of method SortSession (one key type, or all)."""
    labels = {"code": code, "method": "SortSession"}
    if key_type is not None:
        labels["key_type"] = key_type
    return total(scrape(url), "sortd_requests_total", **labels)


# --- raw grpcio -------------------------------------------------------------
class Raw:
    """Session calls on a channel of its own (its own connection): parts go
    up as bytes built by part_message, downloads come back as bytes."""

    def __init__(self, target, index=0):
        self.channel = grpc.insecure_channel(target, options=[
            ("grpc.use_local_subchannel_pool", 1), ("sortd.e2e_connection", index),
            ("grpc.enable_retries", 0)])
        ch = self.channel
        self.start_call = ch.unary_unary(
            SERVICE + "StartSortSession",
            request_serializer=sort_pb2.StartSortSessionRequest.SerializeToString,
            response_deserializer=sort_pb2.StartSortSessionResponse.FromString)
        self.upload_call = ch.stream_unary(
            SERVICE + "UploadParts", request_serializer=None,
            response_deserializer=sort_pb2.UploadPartsResponse.FromString)
        self.finish_call = ch.unary_unary(
            SERVICE + "FinishSortSession",
            request_serializer=sort_pb2.FinishSortSessionRequest.SerializeToString,
            response_deserializer=sort_pb2.FinishSortSessionResponse.FromString)
        self.download_call = ch.unary_stream(
            SERVICE + "DownloadParts",
            request_serializer=sort_pb2.DownloadPartsRequest.SerializeToString,
            response_deserializer=None)
        self.end_call = ch.unary_unary(
            SERVICE + "EndSortSession",
            request_serializer=sort_pb2.EndSortSessionRequest.SerializeToString,
            response_deserializer=sort_pb2.EndSortSessionResponse.FromString)

    def close(self):
        self.channel.close()

    def start(self, total_keys, key_type="uint32", **fields):
        return self.start_call(sort_pb2.StartSortSessionRequest(
            key_type=ELEMENT_TYPE[key_type], total_keys=total_keys, **fields), timeout=WAIT)

    def upload(self, parts):
        return self.upload_call(iter(parts), timeout=WAIT)

    def finish(self, sid):
        return self.finish_call(sort_pb2.FinishSortSessionRequest(session_id=sid), timeout=WAIT)

    def end(self, sid):
        return self.end_call(sort_pb2.EndSortSessionRequest(session_id=sid), timeout=WAIT)

    def download(self, sid, array, dtype, offset=0, count=0, part_bytes=0):
        """(elements, number of parts) of [offset, offset + count)."""
        dtype = np.dtype(dtype)
        call = self.download_call(sort_pb2.DownloadPartsRequest(
            session_id=sid, array=array, offset=offset, count=count, part_bytes=part_bytes),
            timeout=WAIT)
        bodies, at = [], offset
        for message in call:
            got_array, got_offset, body = parse_part(message)
            if got_array != array or got_offset != at or len(body) % dtype.itemsize:
                raise AssertionError("DownloadParts: part of array %d at %d (%d bytes), "
                                     "expected array %d at %d"
                                     % (got_array, got_offset, len(body), array, at))
            bodies.append(bytes(body))
            at += len(body) // dtype.itemsize
        return np.frombuffer(b"".join(bodies), dtype), len(bodies)


def u32(values):
    return np.array(values, "<u4")


def held_stream(parts, release):
    """An UploadParts request stream that sends `parts`, then stays open
    until `release` is set (a client still uploading)."""
    for p in parts:
        yield p
    release.wait(2 * WAIT)


class SessionTest(unittest.TestCase):
    """Helpers shared by the classes below."""

    def assertRpcError(self, cm, code, says):
        err = cm.exception
        self.assertIsInstance(err, grpc.RpcError)
        self.assertEqual(err.code(), code, err.details())
        self.assertIn(says, err.details())

    def wait_metrics(self, server, predicate, what):
        """Polls /metrics until predicate(samples) holds; the samples."""
        seen = {}

        def check():
            seen["s"] = scrape(server.metrics_url)
            return predicate(seen["s"])

        self.assertTrue(wait_until(check, WAIT, step=0.02),
                        "%s: not within %ds; last scrape: %s" % (
                            what, WAIT, {k: v for k, v in seen.get("s", {}).items()
                                         if k[0].startswith(("sortd_sort_sessions",
                                                             "sortd_inflight"))}))
        return seen["s"]

    def assert_session_keys_sent(self, server, sort, keys, coded, what=""):
        """Runs sort() (one session sorting `keys`, checked against numpy) and
        checks what the server sent for it: under 0.7 of the raw keys when
        `coded`, else exactly the raw keys."""
        before = scrape(server.metrics_url)
        np.testing.assert_array_equal(sort(), np.sort(keys))
        after = self.wait_metrics(server, lambda s: total(
            s, "sortd_requests_total", code="OK", method="SortSession") == total(
                before, "sortd_requests_total", code="OK", method="SortSession") + 1,
            "the session counted")
        sent = (total(after, "sortd_bytes_sent_total", method="SortSession")
                - total(before, "sortd_bytes_sent_total", method="SortSession"))
        if coded:
            self.assertLess(sent, keys.nbytes * 0.7, what)
        else:
            self.assertEqual(sent, keys.nbytes, what)

    def wait_idle(self, server):
        """Nothing in flight, no session open."""
        return self.wait_metrics(server, lambda s: (
            total(s, "sortd_inflight_requests") == 0 and total(s, "sortd_inflight_bytes") == 0
            and total(s, "sortd_sort_sessions") == 0), "server idle")


class Sessions(SessionTest):
    """One sortd for the sorting and protocol cases."""

    @classmethod
    def setUpClass(cls):
        cls.server = SortdProcess(SORTD).start()
        # Sessions through the C++ client's C library (the default when it
        # loads, as it does from the build) and through grpcio.
        cls.client = Client(cls.server.target, session_min_bytes=1, connections=3,
                            part_bytes=4096, timeout=120, native=True)
        cls.grpcio = Client(cls.server.target, session_min_bytes=1, connections=3,
                            part_bytes=4096, timeout=120, native=False)
        cls.raw = Raw(cls.server.target, 0)
        cls.raw2 = Raw(cls.server.target, 1)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.grpcio.close()
        cls.raw.close()
        cls.raw2.close()
        code = cls.server.terminate()
        log = cls.server.read_log()
        cls.server.__exit__(None, None, None)
        assert code == 0 and "drained" in log, log

    def tearDown(self):
        # After every case: no session left open, nothing reserved, and the
        # server still sorts (one message and one session).
        self.wait_idle(self.server)
        sort = self.raw.channel.unary_unary(
            SERVICE + "Sort", request_serializer=sort_pb2.SortRequest.SerializeToString,
            response_deserializer=sort_pb2.SortResponse.FromString)
        request = sort_pb2.SortRequest()
        request.keys.uint32.values.extend([3, 1, 2])
        self.assertEqual(list(sort(request, timeout=WAIT).keys.uint32.values), [1, 2, 3])
        before = session_requests(self.server.metrics_url, key_type="int64")
        keys = np.array([5, -1, 5, 3, -7, 0], np.int64)
        np.testing.assert_array_equal(self.client.sort(keys), np.sort(keys))
        self.wait_metrics(self.server, lambda s: total(
            s, "sortd_requests_total", code="OK", method="SortSession",
            key_type="int64") == before + 1, "the after-test sort went through a session")
        self.wait_idle(self.server)

    # --- 1. every key type, both orders, through the client ----------------
    def test_every_key_type_sorts_through_sessions_in_both_orders(self):
        self.assertTrue(self.client.native)
        self.assertFalse(self.grpcio.native)
        rng = np.random.default_rng(20240601)
        url = self.server.metrics_url
        for i, name in enumerate(KEY_TYPES):
            value_name = KEY_TYPES[(i + 1) % len(KEY_TYPES)]
            before = session_requests(url, key_type=name)
            sorts = 0
            for n, client, descending in itertools.product(
                    (1, 7, 10007), (self.client, self.grpcio), (False, True)):
                keys = make_array(rng, name, n)
                values = make_array(rng, value_name, n)
                with self.subTest(key_type=name, n=n, descending=descending,
                                  native=client.native):
                    perm = reference_permutation(keys, descending)
                    want_keys = keys[perm]
                    got = client.sort(keys, descending=descending)
                    self.assertEqual(got.dtype, keys.dtype)
                    np.testing.assert_array_equal(bits(got), bits(want_keys))

                    got, idx = client.sort(keys, descending=descending, return_indices=True)
                    np.testing.assert_array_equal(bits(got), bits(want_keys))
                    self.assertEqual(idx.dtype, np.uint64)
                    np.testing.assert_array_equal(idx, perm)

                    got, got_values = client.sort_pairs(keys, values, descending=descending)
                    np.testing.assert_array_equal(bits(got), bits(want_keys))
                    self.assertEqual(got_values.dtype, values.dtype)
                    np.testing.assert_array_equal(bits(got_values), bits(values[perm]))

                    res = client.sort_full(keys, values, descending=descending,
                                           return_indices=True)
                    np.testing.assert_array_equal(bits(res.keys), bits(want_keys))
                    np.testing.assert_array_equal(bits(res.values), bits(values[perm]))
                    np.testing.assert_array_equal(res.indices, perm)
                    sorts += 4
            # Every one of them was a session (not a Sort or SortPairs call).
            self.wait_metrics(self.server, lambda s: total(
                s, "sortd_requests_total", code="OK", method="SortSession",
                key_type=name) == before + sorts, "%d %s sessions counted" % (sorts, name))

    # --- 2. a large array with the default client ----------------------------
    def test_large_array_goes_through_a_session_by_default(self):
        rng = np.random.default_rng(2)
        keys = rng.integers(0, 1 << 32, 1 << 22, dtype=np.uint32)  # 16 MiB >= 8 MiB
        url = self.server.metrics_url
        before = scrape(url)
        with Client(self.server.target) as client:
            res = client.sort_full(keys)
        got = res.keys
        np.testing.assert_array_equal(got, np.sort(keys, kind="stable"))
        self.wait_metrics(self.server, lambda s: total(
            s, 'sortd_requests_total', code="OK", key_type="uint32",
            method="SortSession") == total(before, 'sortd_requests_total', code="OK",
                                           key_type="uint32", method="SortSession") + 1,
            "sortd_requests_total{code=OK,key_type=uint32,method=SortSession} + 1")
        after = scrape(url)
        self.assertGreaterEqual(
            total(after, "sortd_bytes_received_total", method="SortSession")
            - total(before, "sortd_bytes_received_total", method="SortSession"), keys.nbytes)
        for method in ("Sort", "SortChunked"):
            self.assertEqual(total(after, "sortd_requests_total", method=method),
                             total(before, "sortd_requests_total", method=method), method)
        # The client asks for coded keys from 1 MiB; this server
        # (--key_encoding=auto) declines for a client on its own host when
        # the CPU engine sorts (coding on the way out loses on loopback) and
        # grants 32-bit keys sorted on a GPU (docs/api.md).
        sent = (total(after, "sortd_bytes_sent_total", method="SortSession")
                - total(before, "sortd_bytes_sent_total", method="SortSession"))
        if res.engine == "ENGINE_CPU":
            self.assertEqual(sent, keys.nbytes)
        else:
            self.assertLess(sent, keys.nbytes * 0.7, res.engine)

    def test_compressed_downloads_of_every_key_type_match_the_reference(self):
        rng = np.random.default_rng(77)
        # This server codes whenever asked: under auto it would not for a
        # loopback client of the CPU engine.
        coding = SortdProcess(SORTD, "--key_encoding=always").start()
        self.addCleanup(coding.__exit__, None, None, None)
        with Client(coding.target, compress=None) as default:
            # The default asks from 1 MiB of keys: a 4 MiB array comes down
            # coded, a 512 KiB one (a session too here) raw.
            for n, coded in ((1 << 20, True), (1 << 17, False)):
                keys = rng.integers(0, 1 << 32, n, dtype=np.uint32)
                if not coded:
                    default.session_min_bytes = 1
                self.assert_session_keys_sent(coding, lambda: default.sort(keys), keys, coded, n)
        with Client(coding.target, session_min_bytes=1, connections=3, part_bytes=4096,
                    timeout=120, compress=True) as client, \
                Client(coding.target, session_min_bytes=1, connections=3,
                       part_bytes=4096, timeout=120, compress=False) as raw:
            self.assertTrue(client.native)
            for i, name in enumerate(KEY_TYPES):
                value_name = KEY_TYPES[(i + 2) % len(KEY_TYPES)]
                for n, descending in itertools.product((7, 65536, 200003), (False, True)):
                    keys = make_array(rng, name, n)
                    values = make_array(rng, value_name, n)
                    with self.subTest(key_type=name, n=n, descending=descending):
                        perm = reference_permutation(keys, descending)
                        got, idx = client.sort(keys, descending=descending, return_indices=True)
                        np.testing.assert_array_equal(bits(got), bits(keys[perm]))
                        np.testing.assert_array_equal(idx, perm)
                        got, got_values = client.sort_pairs(keys, values, descending=descending)
                        np.testing.assert_array_equal(bits(got), bits(keys[perm]))
                        np.testing.assert_array_equal(bits(got_values), bits(values[perm]))
            # What crossed the wire: coded keys, smaller than raw ones.
            keys = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint32)
            for c, coded in ((client, True), (raw, False)):
                self.assert_session_keys_sent(coding, lambda: c.sort(keys), keys, coded)

    # --- 3. protocol failures over raw grpcio --------------------------------
    def test_parts_out_of_order_on_two_connections_make_one_sort(self):
        sid = self.raw.start(9).session_id
        self.assertEqual(len(sid), 32)
        # The last third first, on the second connection.
        r = self.raw2.upload([part_message(sid, KEYS, 6, u32([3, 1, 2]))])
        self.assertEqual((r.parts, r.elements), (1, 3))
        # Then the middle and the first, on the first connection; the second
        # part of a stream may leave the session id out.
        r = self.raw.upload([part_message(sid, KEYS, 3, u32([9, 8, 7])),
                             part_message("", KEYS, 0, u32([6, 5, 4]))])
        self.assertEqual((r.parts, r.elements), (2, 6))
        finished = self.raw.finish(sid)
        self.assertEqual(finished.total_keys, 9)
        # Download in two ranges on the two connections, one element per part.
        first, nparts = self.raw2.download(sid, KEYS, "<u4", 0, 4, part_bytes=4)
        self.assertEqual(nparts, 4)
        second, _ = self.raw.download(sid, KEYS, "<u4", 4, 0)
        np.testing.assert_array_equal(np.concatenate([first, second]), np.arange(1, 10))
        # A repeated finish answers again (a client retrying a lost reply).
        self.assertEqual(self.raw2.finish(sid).total_keys, 9)
        self.raw.end(sid)
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.end(sid)
        self.assertRpcError(cm, grpc.StatusCode.NOT_FOUND, "no open session")

    # A download with the default part size reaches a client with gRPC's
    # default receive limit (was: 4 MiB bodies plus framing, one message
    # over the limit: RESOURCE_EXHAUSTED on every full part).
    def test_default_download_parts_fit_a_stock_clients_receive_limit(self):
        keys = np.random.default_rng(3).integers(0, 2**32, 1_500_000, dtype=np.uint64).astype("<u4")
        sid = self.raw.start(len(keys)).session_id
        halves = np.array_split(keys, 2)  # each part under the 4 MiB upload limit too
        self.raw.upload([part_message(sid, KEYS, 0, halves[0]),
                         part_message("", KEYS, len(halves[0]), halves[1])])
        self.raw.finish(sid)
        got, nparts = self.raw.download(sid, KEYS, "<u4")  # part_bytes 0: the default
        self.assertEqual(nparts, 2)  # 6 MB: one full part and the rest
        np.testing.assert_array_equal(got, np.sort(keys))
        self.raw.end(sid)

    def test_duplicate_or_overlapping_part_is_already_exists(self):
        sid = self.raw.start(6).session_id
        self.raw.upload([part_message(sid, KEYS, 0, u32([5, 4, 3]))])
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw2.upload([part_message(sid, KEYS, 0, u32([9, 9, 9]))])
        self.assertRpcError(cm, grpc.StatusCode.ALREADY_EXISTS, "[0, 3)")
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.upload([part_message(sid, KEYS, 2, u32([0, 0]))])
        self.assertRpcError(cm, grpc.StatusCode.ALREADY_EXISTS,
                            "overlaps elements already sent [2, 3)")
        # The first part stands; the rest completes the sort.
        self.raw.upload([part_message(sid, KEYS, 3, u32([2, 1, 0]))])
        self.raw.finish(sid)
        got, _ = self.raw.download(sid, KEYS, "<u4")
        np.testing.assert_array_equal(got, [0, 1, 2, 3, 4, 5])
        self.raw.end(sid)

    def test_finish_with_a_gap_names_the_missing_range(self):
        sid = self.raw.start(10).session_id
        self.raw.upload([part_message(sid, KEYS, 0, u32([1, 2])),
                         part_message("", KEYS, 5, u32([1, 2]))])
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.finish(sid)
        self.assertRpcError(cm, grpc.StatusCode.FAILED_PRECONDITION,
                            "6 keys not received: [2, 5) [7, 10)")
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.download(sid, KEYS, "<u4")
        self.assertRpcError(cm, grpc.StatusCode.FAILED_PRECONDITION, "not sorted yet")
        # The missing parts may still come; then the sort goes ahead.
        self.raw2.upload([part_message(sid, KEYS, 7, u32([9, 9, 0]))])
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.finish(sid)
        self.assertRpcError(cm, grpc.StatusCode.FAILED_PRECONDITION,
                            "3 keys not received: [2, 5)")
        self.raw2.upload([part_message(sid, KEYS, 2, u32([7, 3, 3]))])
        self.assertEqual(self.raw.finish(sid).total_keys, 10)
        got, _ = self.raw.download(sid, KEYS, "<u4")
        np.testing.assert_array_equal(got, [0, 1, 1, 2, 2, 3, 3, 7, 9, 9])
        self.raw.end(sid)

    def test_unknown_session_id_is_not_found(self):
        never = "0123456789abcdef0123456789abcdef"
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.upload([part_message(never, KEYS, 0, u32([1]))])
        self.assertRpcError(cm, grpc.StatusCode.NOT_FOUND, 'no open session "%s"' % never)
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.finish("no-such-session")
        self.assertRpcError(cm, grpc.StatusCode.NOT_FOUND, "no-such-session")
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.download(never, KEYS, "<u4")
        self.assertRpcError(cm, grpc.StatusCode.NOT_FOUND, "no open session")
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.end(never)
        self.assertRpcError(cm, grpc.StatusCode.NOT_FOUND, "no open session")
        # An id that was real once is unknown after its end.
        sid = self.raw.start(1).session_id
        self.raw.end(sid)
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.upload([part_message(sid, KEYS, 0, u32([1]))])
        self.assertRpcError(cm, grpc.StatusCode.NOT_FOUND, sid)

    def test_part_past_total_keys_is_invalid_argument(self):
        sid = self.raw.start(4).session_id
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                self.raw.upload([part_message(sid, KEYS, 3, u32([1, 2]))])
            self.assertRpcError(cm, grpc.StatusCode.INVALID_ARGUMENT,
                                "[3, 5) of keys past total_keys 4")
            with self.assertRaises(grpc.RpcError) as cm:
                self.raw.upload([part_message(sid, KEYS, 1 << 40, u32([1]))])
            self.assertRpcError(cm, grpc.StatusCode.INVALID_ARGUMENT, "past total_keys 4")
            # Nothing of the refused parts was taken.
            with self.assertRaises(grpc.RpcError) as cm:
                self.raw.finish(sid)
            self.assertRpcError(cm, grpc.StatusCode.FAILED_PRECONDITION,
                                "4 keys not received: [0, 4)")
        finally:
            self.raw.end(sid)

    def test_body_not_a_multiple_of_the_element_width_is_invalid_argument(self):
        sid = self.raw.start(4, key_type="uint64").session_id
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                self.raw.upload([part_message(sid, KEYS, 0, b"\x01" * 12)])
            self.assertRpcError(cm, grpc.StatusCode.INVALID_ARGUMENT,
                                "12 bytes is not a positive multiple of the 8-byte element")
            with self.assertRaises(grpc.RpcError) as cm:
                self.raw.finish(sid)
            self.assertRpcError(cm, grpc.StatusCode.FAILED_PRECONDITION,
                                "4 keys not received: [0, 4)")
        finally:
            self.raw.end(sid)

    def test_bytes_that_are_not_a_session_part_are_invalid_argument(self):
        sid = self.raw.start(4).session_id
        try:
            for junk in (b"\xff\xff\xff", b"\x0a\x05ab"):  # wire type 7; truncated id
                with self.subTest(junk=junk):
                    with self.assertRaises(grpc.RpcError) as cm:
                        self.raw.upload([junk])
                    self.assertRpcError(cm, grpc.StatusCode.INVALID_ARGUMENT,
                                        "not a SessionPart")
            # A good part, then junk on the same stream: the stream fails at
            # message 2, the good part stays.
            with self.assertRaises(grpc.RpcError) as cm:
                self.raw.upload([part_message(sid, KEYS, 0, u32([4, 3])), b"\xff\xff"])
            self.assertRpcError(cm, grpc.StatusCode.INVALID_ARGUMENT,
                                "UploadParts message 2: not a SessionPart")
            with self.assertRaises(grpc.RpcError) as cm:
                self.raw.finish(sid)
            self.assertRpcError(cm, grpc.StatusCode.FAILED_PRECONDITION,
                                "2 keys not received: [2, 4)")
        finally:
            self.raw.end(sid)

    def test_body_that_is_not_the_last_field_is_invalid_argument(self):
        sid = self.raw.start(4).session_id
        try:
            # body, then offset again after it: valid protobuf, but the body
            # must end the message.
            message = part_message(sid, KEYS, 0, u32([1, 2])) + b"\x18\x02"
            with self.assertRaises(grpc.RpcError) as cm:
                self.raw.upload([message])
            self.assertRpcError(cm, grpc.StatusCode.INVALID_ARGUMENT, "must be the last field")
            with self.assertRaises(grpc.RpcError) as cm:
                self.raw.finish(sid)
            self.assertRpcError(cm, grpc.StatusCode.FAILED_PRECONDITION,
                                "4 keys not received: [0, 4)")
        finally:
            self.raw.end(sid)

    def test_transfer_only_without_diagnostics_is_invalid_argument(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.start(4, transfer_only=True)
        self.assertRpcError(cm, grpc.StatusCode.INVALID_ARGUMENT, "--diagnostics")
        with self.assertRaises(Exception) as cm:
            self.client.transfer_roundtrip(np.arange(100, dtype=np.uint32))
        self.assertEqual(cm.exception.code, grpc.StatusCode.INVALID_ARGUMENT, str(cm.exception))
        self.assertEqual(total(scrape(self.server.metrics_url), "sortd_sort_sessions"), 0)

    # --- 6. a cancelled upload -----------------------------------------------
    def test_cancelled_upload_leaves_its_parts_missing_and_end_frees_memory(self):
        url = self.server.metrics_url
        cancelled_before = session_requests(url, code="CANCELLED", key_type="uint32")
        n = 1 << 20
        sid = self.raw.start(n).session_id
        release = threading.Event()
        try:
            call = self.raw.upload_call.future(
                held_stream([part_message(sid, KEYS, 0, np.full(1024, 7, "<u4"))], release),
                timeout=2 * WAIT)
            missing = "%d keys not received: [1024, %d)" % (n - 1024, n)

            def part_arrived():
                try:
                    self.raw2.finish(sid)
                except grpc.RpcError as err:
                    return missing in err.details()
                raise AssertionError("finish succeeded with keys missing")

            self.assertTrue(wait_until(part_arrived, WAIT, step=0.02),
                            "the first part never arrived")
            self.assertTrue(call.cancel())
            self.assertEqual(call.code(), grpc.StatusCode.CANCELLED)
        finally:
            release.set()
        with self.assertRaises(grpc.RpcError) as cm:
            self.raw.finish(sid)
        self.assertRpcError(cm, grpc.StatusCode.FAILED_PRECONDITION, missing)
        s = scrape(url)
        self.assertEqual(total(s, "sortd_sort_sessions"), 1)
        self.assertGreaterEqual(total(s, "sortd_inflight_bytes"), n * 4)
        self.raw.end(sid)
        s = self.wait_metrics(self.server, lambda s: total(s, "sortd_inflight_bytes") == 0,
                              "sortd_inflight_bytes back to 0 after EndSortSession")
        self.assertEqual(total(s, "sortd_sort_sessions"), 0)
        self.wait_metrics(self.server, lambda s: total(
            s, "sortd_requests_total", code="CANCELLED", key_type="uint32",
            method="SortSession") == cancelled_before + 1, "the ended session counted CANCELLED")

    # --- 7. two large sorts at once ----------------------------------------
    def test_two_large_sorts_at_once_each_get_their_own_result(self):
        rng = np.random.default_rng(7)
        a_keys = rng.integers(0, 1 << 32, 1 << 22, dtype=np.uint32)
        a_keys[::3] = a_keys[0]  # many equal keys: the permutation shows stability
        b_keys = (rng.standard_normal(1 << 21) * 1000).round(1)
        b_values = rng.integers(-(1 << 31), 1 << 31, 1 << 21, dtype=np.int32)
        url = self.server.metrics_url
        before_a = session_requests(url, key_type="uint32")
        before_b = session_requests(url, key_type="float64")
        open_together = []
        barrier = threading.Barrier(2, timeout=WAIT, action=lambda: open_together.append(
            metric(url, "sortd_sort_sessions")))
        results, errors = {}, {}

        def overlap():
            # Each sort's first upload progress waits for the other's: both
            # sessions are then open and uploading at once.
            waited = []
            lock = threading.Lock()

            def progress(phase, done, total_bytes):
                if phase != "upload":
                    return
                with lock:
                    if waited:
                        return
                    waited.append(True)
                barrier.wait()
            return progress

        def run(name, fn):
            try:
                results[name] = fn()
            except BaseException as exc:  # noqa: B902 - reported below
                errors[name] = exc

        with Client(self.server.target, timeout=120) as client:
            threads = [
                threading.Thread(target=run, args=("a", lambda: client.sort_full(
                    a_keys, descending=True, return_indices=True, progress=overlap()))),
                threading.Thread(target=run, args=("b", lambda: client.sort_full(
                    b_keys, b_values, progress=overlap()))),
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
        self.assertEqual(errors, {})
        self.assertEqual(open_together, [2.0])
        perm_a = reference_permutation(a_keys, descending=True)
        np.testing.assert_array_equal(results["a"].keys, a_keys[perm_a])
        np.testing.assert_array_equal(results["a"].indices, perm_a)
        perm_b = reference_permutation(b_keys, descending=False)
        np.testing.assert_array_equal(bits(results["b"].keys), bits(b_keys[perm_b]))
        np.testing.assert_array_equal(results["b"].values, b_values[perm_b])
        self.wait_metrics(self.server, lambda s: (
            total(s, "sortd_requests_total", code="OK", method="SortSession",
                  key_type="uint32") == before_a + 1
            and total(s, "sortd_requests_total", code="OK", method="SortSession",
                      key_type="float64") == before_b + 1), "both sorts counted as sessions")


# --- 4. an abandoned session ------------------------------------------------
class IdleExpiry(SessionTest):
    def test_abandoned_session_is_freed_after_the_idle_timeout(self):
        with SortdProcess(SORTD, "--session_idle_timeout=300ms") as server:
            raw = Raw(server.target)
            try:
                started = raw.start(1000, key_type="uint64")
                self.assertEqual(started.idle_timeout_ms, 300)
                sid = started.session_id
                # Half the keys, on a stream held open (a call in progress
                # keeps the session): then it is open and holds its memory.
                release = threading.Event()
                try:
                    call = raw.upload_call.future(held_stream(
                        [part_message(sid, KEYS, 0, np.arange(500, dtype="<u8"))], release),
                        timeout=2 * WAIT)
                    missing = "500 keys not received: [500, 1000)"

                    def part_arrived():
                        try:
                            raw.finish(sid)
                        except grpc.RpcError as err:
                            return missing in err.details()
                        raise AssertionError("finish succeeded with keys missing")

                    self.assertTrue(wait_until(part_arrived, WAIT, step=0.02))
                    s = scrape(server.metrics_url)
                    self.assertEqual(total(s, "sortd_sort_sessions"), 1)
                    self.assertGreaterEqual(total(s, "sortd_inflight_bytes"), 1000 * 8)
                    self.assertEqual(total(s, "sortd_sort_sessions_expired_total"), 0)
                finally:
                    release.set()
                r = call.result(timeout=WAIT)
                self.assertEqual((r.parts, r.elements), (1, 500))
                # Then nobody calls: the session expires and frees everything.
                s = self.wait_metrics(server, lambda s: total(
                    s, "sortd_sort_sessions_expired_total") == 1, "the session expired")
                self.assertEqual(total(s, "sortd_sort_sessions"), 0)
                self.assertEqual(total(s, "sortd_inflight_bytes"), 0)
                self.assertEqual(total(s, "sortd_requests_total", code="DEADLINE_EXCEEDED",
                                       key_type="uint64", method="SortSession"), 1)
                with self.assertRaises(grpc.RpcError) as cm:
                    raw.finish(sid)
                self.assertRpcError(cm, grpc.StatusCode.NOT_FOUND, "no open session")
                with self.assertRaises(grpc.RpcError) as cm:
                    raw.upload([part_message(sid, KEYS, 500, np.arange(500, dtype="<u8"))])
                self.assertRpcError(cm, grpc.StatusCode.NOT_FOUND, "no open session")
            finally:
                raw.close()


# --- 5. --max_sessions ----------------------------------------------------
class SessionLimit(SessionTest):
    def test_sessions_beyond_max_sessions_are_refused_until_one_ends(self):
        with SortdProcess(SORTD, "--max_sessions=1") as server:
            raw = Raw(server.target)
            try:
                first = raw.start(4).session_id
                with self.assertRaises(grpc.RpcError) as cm:
                    raw.start(4)
                self.assertRpcError(cm, grpc.StatusCode.RESOURCE_EXHAUSTED, "--max_sessions")
                # The client's session is refused the same way.
                with Client(server.target, session_min_bytes=1) as client:
                    with self.assertRaises(Exception) as cm:
                        client.sort(np.arange(10, dtype=np.uint32))
                    self.assertEqual(cm.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
                    self.assertIn("--max_sessions", cm.exception.details)
                    raw.end(first)
                    second = raw.start(3).session_id
                    self.assertNotEqual(second, first)
                    raw.upload([part_message(second, KEYS, 0, u32([2, 0, 1]))])
                    raw.finish(second)
                    got, _ = raw.download(second, KEYS, "<u4")
                    np.testing.assert_array_equal(got, [0, 1, 2])
                    raw.end(second)
                    # Its end makes room for the client's session again.
                    keys = np.array([9, 3, 3, 1], np.uint32)
                    np.testing.assert_array_equal(client.sort(keys), [1, 3, 3, 9])
                self.wait_idle(server)
            finally:
                raw.close()


# --- transfer_only under --diagnostics ----------------------------------------
class TransferOnly(SessionTest):
    def test_transfer_only_under_diagnostics_returns_the_upload_unsorted(self):
        with SortdProcess(SORTD, "--diagnostics") as server:
            keys = np.random.default_rng(5).integers(0, 1 << 32, 100003, dtype=np.uint32)
            before = scrape(server.metrics_url)
            with Client(server.target, connections=3, part_bytes=4096) as client:
                got = client.transfer_roundtrip(keys)
            np.testing.assert_array_equal(got, keys)
            self.assertFalse(np.array_equal(got, np.sort(keys)))
            # Counted when it ended, as a session that sorted nothing: no
            # keys sorted, no engine launched.
            after = self.wait_metrics(server, lambda s: total(
                s, "sortd_requests_total", code="OK", method="SortSession", key_type="uint32")
                == total(before, "sortd_requests_total", code="OK", method="SortSession",
                         key_type="uint32") + 1, "the transfer-only session counted")
            for name in ("sortd_keys_sorted_total", "sortd_batch_size_count"):
                self.assertEqual(total(after, name), total(before, name), name)
            self.wait_idle(server)


# --- progress=True: a tqdm bar for transfers over a second ---------------------
class ProgressBars(SessionTest):
    """The bar is drawn for a session whose download is held to ~2 MB/s by
    a proxy (over two seconds), and not for one that ends within a second."""

    RATE = 2 << 20  # bytes per second, server to client, per connection

    def sort_with_bar(self, target, keys):
        err = io.StringIO()
        with Client(target, connections=1, timeout=120) as client:
            self.assertTrue(client.native)
            with contextlib.redirect_stderr(err):
                got = client.sort(keys, progress=True)
        np.testing.assert_array_equal(got, np.sort(keys))
        return err.getvalue()

    def test_a_slow_download_draws_a_bar(self):
        keys = np.random.default_rng(8).integers(0, 1 << 32, 1 << 20, dtype=np.uint32)
        with SortdProcess(SORTD) as server:
            proxy = SlowProxy(server.port, self.RATE)
            try:
                drawn = self.sort_with_bar("127.0.0.1:%d" % proxy.port, keys)
            finally:
                proxy.close()
        # Its last state: the whole 4 MiB download, in tqdm's binary units.
        self.assertIn("sortd download", drawn)
        self.assertIn("4.00M/4.00M", drawn)

    def test_a_fast_sort_draws_nothing(self):
        keys = np.random.default_rng(9).integers(0, 1 << 32, 1 << 18, dtype=np.uint32)
        with SortdProcess(SORTD) as server:
            # A session (1 MiB), over at once on loopback: under the delay.
            self.assertEqual(self.sort_with_bar(server.target, keys), "")

    def test_progress_needs_tqdm_and_a_callable_or_true(self):
        with SortdProcess(SORTD) as server, Client(server.target) as client:
            keys = np.arange(1 << 18, dtype=np.uint32)[::-1].copy()
            with self.assertRaisesRegex(TypeError, "progress must be a callable"):
                client.sort(keys, progress="yes")
            saved = sys.modules.get("tqdm")
            sys.modules["tqdm"] = None  # import tqdm now raises ImportError
            try:
                with self.assertRaisesRegex(ValueError, "install tqdm"):
                    client.sort(keys, progress=True)
            finally:
                if saved is None:
                    del sys.modules["tqdm"]
                else:
                    sys.modules["tqdm"] = saved
            np.testing.assert_array_equal(client.sort(keys, progress=True), np.sort(keys))


if __name__ == "__main__":
    unittest.main()
