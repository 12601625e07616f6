"""Sort sessions: one large numeric sort over several connections.

The arrays travel as raw SessionPart bodies (docs/api.md, "Sort sessions"):
each connection uploads a contiguous range of every array, the server sorts
once everything arrived, and each connection downloads its range straight
into one preallocated numpy result. Per part the client makes one copy on
the way up (numpy buffer -> the message bytes gRPC sends) and two on the way
down (gRPC's bytes -> the numpy result, after gRPC's own copy); no Python
work per element.
"""

import threading

import grpc
import numpy as np

from sortd.v1 import sort_pb2

from . import wire
from .errors import ProtocolError, SortdError

_PATH = "/sortd.v1.SortService/"
_BODY_FIELD = 15
_BODY_TAG = wire.tag(_BODY_FIELD, wire.WIRE_LEN)

# numpy wire dtype -> ElementType (numbered as TypedArray's fields)
ELEMENT_TYPES = {
    np.dtype("<u4"): sort_pb2.ELEMENT_TYPE_UINT32,
    np.dtype("<i4"): sort_pb2.ELEMENT_TYPE_INT32,
    np.dtype("<f4"): sort_pb2.ELEMENT_TYPE_FLOAT32,
    np.dtype("<u8"): sort_pb2.ELEMENT_TYPE_UINT64,
    np.dtype("<i8"): sort_pb2.ELEMENT_TYPE_INT64,
    np.dtype("<f8"): sort_pb2.ELEMENT_TYPE_FLOAT64,
}
_INDEX_DTYPE = np.dtype("<u8")


def part_message(session_id, array, offset, body, column=0):
    """A serialized SessionPart: header fields, then the body (one copy)."""
    head = (wire.string_field(1, session_id) + wire.varint_field(2, array)
            + wire.varint_field(3, offset) + wire.varint_field(4, column))
    view = memoryview(body).cast("B")
    return b"".join(head + [_BODY_TAG, wire.varint(view.nbytes), view])


def parse_part(message):
    """(array, offset, body memoryview) of a serialized SessionPart."""
    array = offset = 0
    body = memoryview(b"")
    for field, wire_type, value in wire.iter_fields(message):
        if field == 2 and wire_type == wire.WIRE_VARINT:
            array = value
        elif field == 3 and wire_type == wire.WIRE_VARINT:
            offset = value
        elif field == _BODY_FIELD and wire_type == wire.WIRE_LEN:
            body = value
    return array, offset, body


class _Progress:
    """Serialized progress reports of one phase."""

    def __init__(self, callback, phase, total):
        self.callback, self.phase, self.total = callback, phase, total
        self.done = 0
        self.lock = threading.Lock()

    def add(self, nbytes):
        if self.callback is None:
            return
        with self.lock:
            self.done += nbytes
            self.callback(self.phase, self.done, self.total)


def _run_parallel(count, work):
    """work(c) for c in range(count) on count threads; re-raises the first
    failure, preferring a cause over CANCELLED."""
    errors = [None] * count

    def run(c):
        try:
            work(c)
        except BaseException as exc:  # noqa: B902 - handed to the caller
            errors[c] = exc

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in range(1, count)]
    for t in threads:
        t.start()
    run(0)
    for t in threads:
        t.join()
    failures = [e for e in errors if e is not None]
    if not failures:
        return
    for e in failures:
        if not (isinstance(e, grpc.RpcError) and e.code() == grpc.StatusCode.CANCELLED):
            raise e
    raise failures[0]


class SessionTransport:
    """Channels for sort sessions (one connection each) and the session calls."""

    def __init__(self, target, credentials, max_message_bytes, part_bytes, connections):
        self.target = target
        self.credentials = credentials
        self.max_message_bytes = max_message_bytes
        self.part_bytes = part_bytes
        self.connections = connections
        self._lock = threading.Lock()
        self._channels = {}  # (target, index) -> channel

    def close(self):
        with self._lock:
            for ch in self._channels.values():
                ch.close()
            self._channels.clear()

    def channel(self, target, index):
        """The index-th transfer channel to target, each its own connection."""
        with self._lock:
            ch = self._channels.get((target, index))
            if ch is None:
                opts = [("grpc.max_send_message_length", self.max_message_bytes),
                        ("grpc.max_receive_message_length", self.max_message_bytes),
                        # A connection per channel (equal arguments would share
                        # one), and no retries (they would hold every part).
                        ("grpc.use_local_subchannel_pool", 1),
                        ("sortd.transfer_connection", index),
                        ("grpc.enable_retries", 0),
                        # A fixed receive window (the C++ client's
                        # receive_window_bytes): bounds what gRPC holds
                        # ahead of the client on a download.
                        ("grpc.http2.bdp_probe", 0),
                        ("grpc.http2.lookahead_bytes", 8 << 20)]
                if self.credentials is None:
                    ch = grpc.insecure_channel(target, options=opts)
                else:
                    ch = grpc.secure_channel(target, self.credentials, options=opts)
                self._channels[(target, index)] = ch
            return ch

    def sort(self, start_call, k, v, order, return_indices, request_id, deadline,
             connections=None, progress=None, transfer_only=False):
        """Runs one session; returns (keys, values, indices, engine number)."""
        n = k.n
        start = sort_pb2.StartSortSessionRequest(
            key_type=ELEMENT_TYPES[k.wire_dtype], total_keys=n,
            value_type=ELEMENT_TYPES[v.wire_dtype] if v is not None else 0,
            order=order, return_indices=return_indices, request_id=request_id,
            transfer_only=transfer_only)
        uploads = [(sort_pb2.SESSION_ARRAY_KEYS, 0, k.data)]
        if v is not None:
            uploads.append((sort_pb2.SESSION_ARRAY_VALUES, 0, v.data))
        keys_out = np.empty(n, k.wire_dtype)
        downloads = [(sort_pb2.SESSION_ARRAY_KEYS, 0, keys_out)]
        values_out = indices_out = None
        if v is not None:
            values_out = np.empty(n, v.wire_dtype)
            downloads.append((sort_pb2.SESSION_ARRAY_VALUES, 0, values_out))
        if return_indices:
            indices_out = np.empty(n, _INDEX_DTYPE)
            downloads.append((sort_pb2.SESSION_ARRAY_INDICES, 0, indices_out))
        engine = self._run(start_call, start, n, uploads, downloads, deadline, connections,
                           progress)
        if values_out is not None:
            values_out = values_out.astype(v.native_dtype, copy=False)
        return keys_out.astype(k.native_dtype, copy=False), values_out, indices_out, engine

    def sort_table(self, start_call, columns, by, return_columns, request_id, deadline,
                   connections=None, progress=None, want_indices=True):
        """Runs one table session (docs/api.md, "Table sessions").

        columns: (name, ElementType, time unit, wire data, validity bitmap
        bytes or None) per column; by: SortKey messages. Returns (uint64
        permutation (None without want_indices: not downloaded), [(data,
        bitmap or None) per column] with return_columns, else None, engine
        number)."""
        n = len(columns[0][3])
        start = sort_pb2.StartSortSessionRequest(
            total_keys=n, request_id=request_id, by=by, return_columns=return_columns,
            without_permutation=not want_indices,
            columns=[sort_pb2.SessionColumn(name=name, type=etype, unit=unit,
                                            has_validity=bitmap is not None)
                     for name, etype, unit, _, bitmap in columns])
        uploads = []
        for c, (_, _, _, data, bitmap) in enumerate(columns):
            uploads.append((sort_pb2.SESSION_ARRAY_COLUMN, c, data))
            if bitmap is not None:
                uploads.append((sort_pb2.SESSION_ARRAY_VALIDITY, c, bitmap))
        indices_out = np.empty(n, _INDEX_DTYPE) if want_indices else None
        downloads = [(sort_pb2.SESSION_ARRAY_INDICES, 0, indices_out)] if want_indices else []
        reordered = None
        if return_columns:
            reordered = []
            for c, (_, _, _, data, bitmap) in enumerate(columns):
                out = np.empty(n, data.dtype)
                downloads.append((sort_pb2.SESSION_ARRAY_COLUMN, c, out))
                bits = None
                if bitmap is not None:
                    bits = np.empty(len(bitmap), np.uint8)
                    downloads.append((sort_pb2.SESSION_ARRAY_VALIDITY, c, bits))
                reordered.append((out, bits))
        engine = self._run(start_call, start, n, uploads, downloads, deadline, connections,
                           progress)
        return indices_out, reordered, engine

    def _run(self, start_call, start, n, uploads, downloads, deadline, connections, progress):
        """Starts a session, uploads every (array, column, data), finishes
        it, downloads every (array, column, out) into `out`, ends it; returns
        the engine number. Each connection moves its share of every array."""
        started = start_call(start.SerializeToString(), timeout=deadline)
        # Every connection must reach the server that holds the session: the
        # address it advertises, else the target itself (one server, or
        # replicas that advertise themselves: docs/api.md).
        target = started.direct_target or self.target
        # Python moves parts with the GIL held for its copies: past 4
        # connections it only contends (docs/benchmarks.md).
        count = connections or self.connections or min(4, max(1, started.suggested_connections))
        count = max(1, min(int(count), 64, max(n, 1)))
        part_bytes = max(16, min(self.part_bytes, started.max_part_bytes,
                                 self.max_message_bytes - 1024))
        sid = started.session_id
        channels = [self.channel(target, c) for c in range(count)]
        control = channels[0]
        # Connected before the first part: a connection attempt that fails
        # once is retried by gRPC within the wait instead of failing a part.
        try:
            for ch in channels:
                grpc.channel_ready_future(ch).result(timeout=20)
        except grpc.FutureTimeoutError:
            # The session expires on the server (--session_idle_timeout).
            raise SortdError(grpc.StatusCode.UNAVAILABLE,
                             "sort session: cannot connect to %s (the server holding the "
                             "session; see --advertise_address)" % target) from None

        def end():
            try:
                control.unary_unary(_PATH + "EndSortSession")(
                    sort_pb2.EndSortSessionRequest(session_id=sid).SerializeToString(),
                    timeout=deadline)
            except grpc.RpcError:
                pass  # best effort: an abandoned session expires anyway

        def bounds(c, length):
            return length * c // count, length * (c + 1) // count

        up = _Progress(progress, "upload", sum(a.nbytes for _, _, a in uploads))

        def upload(c):
            def parts():
                first = True
                for array, column, data in uploads:
                    lo, hi = bounds(c, len(data))
                    step = max(1, part_bytes // data.itemsize)
                    for at in range(lo, hi, step):
                        body = data[at:min(at + step, hi)]
                        yield part_message(sid if first else "", array, at, body, column)
                        first = False
                        up.add(body.nbytes)

            if any(bounds(c, len(data))[0] < bounds(c, len(data))[1] for _, _, data in uploads):
                channels[c].stream_unary(_PATH + "UploadParts")(parts(), timeout=deadline)

        try:
            _run_parallel(count, upload)
            if progress is not None:
                progress("sort", 0, 1)
            finished = control.unary_unary(
                _PATH + "FinishSortSession",
                response_deserializer=sort_pb2.FinishSortSessionResponse.FromString)(
                    sort_pb2.FinishSortSessionRequest(session_id=sid).SerializeToString(),
                    timeout=deadline)
            if finished.total_keys != n:
                raise ProtocolError("FinishSortSession: server sorted %d keys, sent %d"
                                    % (finished.total_keys, n))
            if progress is not None:
                progress("sort", 1, 1)
            down = _Progress(progress, "download", sum(a.nbytes for _, _, a in downloads))

            def download(c):
                for array, column, out in downloads:
                    lo, hi = bounds(c, len(out))
                    if lo == hi:
                        continue
                    request = sort_pb2.DownloadPartsRequest(
                        session_id=sid, array=array, offset=lo, count=hi - lo,
                        part_bytes=part_bytes, column=column).SerializeToString()
                    call = channels[c].unary_stream(_PATH + "DownloadParts")(
                        request, timeout=deadline)
                    at = lo
                    target_bytes = out.view(np.uint8)
                    width = out.itemsize
                    for message in call:
                        got_array, offset, body = parse_part(message)
                        if (got_array != array or offset != at or len(body) % width
                                or offset + len(body) // width > hi):
                            call.cancel()
                            raise ProtocolError("DownloadParts: unexpected part at %d "
                                                "(%d bytes) while expecting %d"
                                                % (offset, len(body), at))
                        target_bytes[at * width:at * width + len(body)] = np.frombuffer(
                            body, np.uint8)
                        at += len(body) // width
                        down.add(len(body))
                    if at != hi:
                        raise ProtocolError("DownloadParts: stream ended at %d of [%d, %d)"
                                            % (at, lo, hi))

            _run_parallel(count, download)
        finally:
            end()
        return finished.engine
