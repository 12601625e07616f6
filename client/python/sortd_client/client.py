"""The sortd client: Sort, SortPairs, SortStream, SortChunked, same-host
regions and health."""

import collections
import collections.abc

import grpc
import numpy as np

from sortd.v1 import sort_pb2

from . import wire
from .arrays import INDEX_DTYPE, TypedInput, finish_indices, indices_from, view_payload
from .table import ELEMENT_TYPE_OF, TableInput
from .errors import ProtocolError, RequestError, SortdError
from .health import HealthChecker
from . import native as native_sessions
from . import progress as progress_module
from .regions import Regions, SharedArray
from .responses import SORT_PAIRS_RESPONSE, SORT_RESPONSE, read_response
from .session import SessionTransport
from . import top_k as top_k_module
from .top_k import TopKInput, split_call, split_segments

_SERVICE = sort_pb2.DESCRIPTOR.services_by_name["SortService"].full_name
# Room left under max_message_bytes for what the server adds to a response
# (engine, echoed ids, headers). Our own request sizes are computed exactly.
HEADROOM = 4096
DEFAULT_CHUNK_BYTES = 2 << 20
# Numeric sorts of at least this many payload bytes go through a sort
# session (parallel raw parts; docs/api.md "Choosing the path"): from 1 MiB
# through the C++ client's library, where a session beats one message (H200
# host, 1 MiB: 2.1 against 4.6 ms); through grpcio, whose sessions copy
# every part four times, from 4 MiB (there 11.8 against 21.1 ms; at 1 MiB
# 8.8 against 5.5; docs/benchmarks.md, "Mid-size arrays").
# session_min_bytes=None picks between the two.
NATIVE_SESSION_MIN_BYTES = 1 << 20
GRPCIO_SESSION_MIN_BYTES = 4 << 20
DEFAULT_SESSION_MIN_BYTES = None
DEFAULT_PART_BYTES = 4 << 20
_DEFAULT = object()  # "use the client's timeout"

# The default channel config, the same as the C++ client's
# (sortd::client::kDefaultServiceConfig; docs/deploy.md): round-robin over
# every address the target resolves to (a `dns:///` name of a headless
# Service, or `ipv4:a:p,b:p`), backends reporting NOT_SERVING on
# grpc.health.v1 (draining) skipped, calls refused with UNAVAILABLE retried
# on another backend (sorting is idempotent), and calls refused as busy
# (RESOURCE_EXHAUSTED with the server's grpc-retry-pushback-ms hint) retried
# after the hinted delay, within the call's deadline (docs/operations.md,
# "Admission"); a refusal that can never succeed carries -1: not retried.
DEFAULT_SERVICE_CONFIG = (
    '{"loadBalancingConfig":[{"round_robin":{}}],'
    '"healthCheckConfig":{"serviceName":"sortd.v1.SortService"},'
    '"methodConfig":[{"name":[{"service":"sortd.v1.SortService"}],'
    '"retryPolicy":{"maxAttempts":5,"initialBackoff":"0.05s","maxBackoff":"1s",'
    '"backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE","RESOURCE_EXHAUSTED"]}}]}')
# What retry_busy=False takes out of a service config.
_BUSY_RETRY_CODES = '"UNAVAILABLE","RESOURCE_EXHAUSTED"'

SortResult = collections.namedtuple(
    "SortResult", ["keys", "values", "indices", "request_id", "engine"])
SortResult.__doc__ = """Everything a sort returns. values / indices are None
when not requested; engine is the Engine enum name (e.g. "ENGINE_CPU")."""


def _engine_name(value):
    try:
        return sort_pb2.Engine.Name(value)
    except ValueError:
        return str(value)


def _check_count(what, got, want):
    if got != want:
        raise ProtocolError("%s: got %d elements, expected %d" % (what, got, want))


def _chunk_bounds(n, sizes, limit):
    """[start, stop) ranges whose encoded elements take about `limit` bytes."""
    if isinstance(sizes, int):
        step = max(1, limit // sizes)
        return [(i, min(i + step, n)) for i in range(0, n, step)]
    cum = np.cumsum(sizes)
    bounds, start = [], 0
    while start < n:
        base = int(cum[start - 1]) if start else 0
        stop = int(np.searchsorted(cum, base + limit, side="right"))
        stop = min(n, max(stop, start + 1))
        bounds.append((start, stop))
        start = stop
    return bounds


class Client:
    """A connection to a sortd server.

    Client(target, max_message_bytes=64 << 20, timeout=None) opens an insecure
    channel (pass `credentials` for TLS). `timeout` is the default deadline in
    seconds for every call (None: no deadline); each method also takes
    `timeout=`. Arrays whose request or response would not fit in
    max_message_bytes go through SortChunked in pieces of about chunk_bytes.
    Numeric sorts of at least session_min_bytes (keys + values; 0: never;
    None: 1 MiB where the C++ client's library loaded, else 4 MiB) go
    through a sort session instead: raw parts of part_bytes over
    `connections` connections in parallel (None: as the server suggests).
    `compress`: sessions through the C++ client's library get their sorted
    keys as delta-coded blocks (docs/api.md, "Compressed downloads"), decoded
    there: None as the C++ client's default (asked from 1 MiB of keys; the
    server grants it where it pays, sortd --key_encoding), True always,
    False never (grpcio sessions never).
    `service_config` is the channel's gRPC service config (JSON):
    DEFAULT_SERVICE_CONFIG load-balances and retries; None leaves gRPC's
    defaults (pick_first, no retries). `retry_busy`: calls the server
    refused as busy (RESOURCE_EXHAUSTED with a retry hint: its admission
    queue full or waited out) are retried after the hinted delay; False
    returns them at once (both paths, grpcio and the C++ library).
    Same-host regions (shared_array, register_cuda_array; the server needs
    --shared_memory): arrays inside them are sorted in place by reference,
    and the target must reach one server on this host (unix:/path or
    loopback).
    The client is thread-safe; use it as a context manager or call close().
    """

    def __init__(self, target, max_message_bytes=64 << 20, timeout=None,
                 chunk_bytes=DEFAULT_CHUNK_BYTES, credentials=None, options=(),
                 service_config=DEFAULT_SERVICE_CONFIG,
                 session_min_bytes=DEFAULT_SESSION_MIN_BYTES, connections=None,
                 part_bytes=DEFAULT_PART_BYTES, native=None, compress=None,
                 retry_busy=True):
        if max_message_bytes < 4 * HEADROOM:
            raise ValueError("max_message_bytes must be at least %d" % (4 * HEADROOM))
        # gRPC and protobuf cap one message at 2 GiB.
        self.max_message_bytes = int(min(max_message_bytes, (1 << 31) - 1))
        self.timeout = timeout
        self.chunk_bytes = int(min(chunk_bytes, self.max_message_bytes - HEADROOM))
        opts = [("grpc.max_send_message_length", self.max_message_bytes),
                ("grpc.max_receive_message_length", self.max_message_bytes)]
        self.retry_busy = bool(retry_busy)
        if service_config and not self.retry_busy:
            service_config = service_config.replace(_BUSY_RETRY_CODES, '"UNAVAILABLE"')
        if service_config:
            # gRPC retries only calls whose request fits its retry buffer
            # (256 KiB by default): let every single-message request qualify.
            opts += [("grpc.service_config", service_config),
                     ("grpc.per_rpc_retry_buffer_size", self.max_message_bytes)]
        opts += list(options)

        def channel(extra=()):
            if credentials is None:
                return grpc.insecure_channel(target, options=opts + list(extra))
            return grpc.secure_channel(target, credentials, options=opts + list(extra))

        self._channel = channel()
        # health() reports what a server says, NOT_SERVING included: on the
        # sorting channel a draining backend is skipped (healthCheckConfig),
        # so the check has its own channel without client-side health checks.
        self._health_channel = channel([("grpc.inhibit_health_checking", 1)])
        # Requests are serialized by hand: no request serializer (raw bytes).
        path = "/%s/" % _SERVICE
        self._sort = self._channel.unary_unary(
            path + "Sort", response_deserializer=sort_pb2.SortResponse.FromString)
        self._sort_pairs = self._channel.unary_unary(
            path + "SortPairs", response_deserializer=sort_pb2.SortPairsResponse.FromString)
        # The arrays' own paths read the answers' bytes (responses.py).
        self._sort_raw = self._channel.unary_unary(path + "Sort")
        self._sort_pairs_raw = self._channel.unary_unary(path + "SortPairs")
        self._top_k = self._channel.unary_unary(path + "TopK")
        self._sort_table = self._channel.unary_unary(
            path + "SortTable", response_deserializer=sort_pb2.SortTableResponse.FromString)
        self._sort_stream = self._channel.stream_stream(
            path + "SortStream", response_deserializer=sort_pb2.SortResponse.FromString)
        self._sort_chunked = self._channel.stream_stream(
            path + "SortChunked", response_deserializer=sort_pb2.SortChunkedResponse.FromString)
        self._health = HealthChecker(self._health_channel)
        self._regions = Regions(self._channel)
        self._start_session = self._channel.unary_unary(
            path + "StartSortSession",
            response_deserializer=sort_pb2.StartSortSessionResponse.FromString)
        self._sessions = SessionTransport(target, credentials, self.max_message_bytes,
                                          int(part_bytes), connections)
        # Sessions through the C++ client when its C library loads
        # (sortd_client/native.py): plaintext only (grpc credentials objects
        # cannot be handed over); `options` and `service_config` apply to
        # the grpcio channels alone.
        if compress not in (None, True, False):
            raise ValueError("compress: None, True or False, not %r" % (compress,))
        self.compress = compress
        self._native = None
        if native is not False and credentials is None:
            lib = native_sessions.load()
            if lib is not None:
                self._native = native_sessions.NativeSessions(
                    lib, target, self.max_message_bytes, int(part_bytes), connections,
                    retry_busy=self.retry_busy)
        if native is True and self._native is None:
            raise ValueError("native=True: " + (native_sessions.load_error() or
                                                "the C++ path takes plaintext targets only"))
        # Table sessions (and the small types, sent as one) travel through
        # grpcio whichever path loaded: its crossover, unless one was named.
        self._table_session_min_bytes = int(
            GRPCIO_SESSION_MIN_BYTES if session_min_bytes is None else session_min_bytes or 0)
        if session_min_bytes is None:
            session_min_bytes = (NATIVE_SESSION_MIN_BYTES if self._native is not None
                                 else GRPCIO_SESSION_MIN_BYTES)
        self.session_min_bytes = int(session_min_bytes or 0)

    @property
    def native(self):
        """Whether sort sessions go through the C++ client (libsortd_client_c)."""
        return self._native is not None

    # ---- lifecycle -----------------------------------------------------
    def close(self):
        # Regions first: they unregister over the channel (bounded: a server
        # that is gone must not hold close() up).
        self._regions.close(timeout=self.timeout if self.timeout is not None else 10)
        if self._native is not None:
            self._native.close()
        self._sessions.close()
        self._channel.close()
        self._health_channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _deadline(self, timeout):
        return self.timeout if timeout is _DEFAULT else timeout

    # ---- health --------------------------------------------------------
    def health(self, service="", timeout=_DEFAULT):
        """grpc.health.v1 status name: "SERVING", "NOT_SERVING", ..."""
        try:
            return self._health.check(service, timeout=self._deadline(timeout))
        except grpc.RpcError as err:
            raise SortdError.from_rpc_error(err) from None

    # ---- same-host regions ---------------------------------------------
    def shared_array(self, shape_or_count, dtype, name=None, timeout=_DEFAULT, mode=0o600):
        """A numpy array in new POSIX shared memory registered with the
        server under `name` (default: a unique one); sorts of it, or of any
        contiguous 1-D slice of it, go by reference and sort in place.
        unregister_region(region_of(array)) or Client.close() frees it (the
        object is unlinked then; the memory stays mapped while views of it
        live). mode: the object's permissions (owner-only by default; 0o660
        for a server running as another user of the object's group).
        SharedArray gives the handle (name, shm_key, pinned, close())."""
        return SharedArray(self, shape_or_count, dtype, name,
                           timeout=self._deadline(timeout), mode=mode).array

    def register_system_region(self, name, shm_key, byte_size, offset=0, buffer=None,
                               timeout=_DEFAULT):
        """RegisterSystemRegion: bytes [offset, offset + byte_size) of the
        shm_open object shm_key (offset page-aligned). Returns whether the
        server pinned them. buffer: this process's mapping of those bytes,
        so that sorts of arrays inside it take the region path (the client
        holds a view of it while registered)."""
        return self._regions.register_system(name, shm_key, byte_size, offset, buffer,
                                             timeout=self._deadline(timeout))

    def register_cuda_array(self, array, name=None, device_id=None, timeout=_DEFAULT):
        """Registers the device allocation holding `array` (an object with
        __cuda_array_interface__: CuPy, PyTorch, ...) through CUDA IPC;
        returns its CudaRegion (name, device_id, close()). Sorts of device
        arrays inside it then sort in place on the server's GPU. device_id:
        the server's ordinal of that GPU, where the server numbers GPUs
        otherwise (CUDA_VISIBLE_DEVICES); default: this process's. The
        client keeps `array` referenced while registered (its allocation
        must not be freed under the server). Needs the CUDA runtime here
        (cuda_ipc; CudaError where there is none)."""
        return self._regions.register_cuda(array, name, device_id,
                                           timeout=self._deadline(timeout))

    def unregister_region(self, name, timeout=_DEFAULT):
        """UnregisterRegion; a region this client created (shared_array) is
        unlinked too. Sorts using it that already started finish first."""
        self._regions.unregister(name, timeout=self._deadline(timeout))

    def list_regions(self, timeout=_DEFAULT):
        """The server's registered regions (all clients'), as RegionInfo."""
        return self._regions.list(timeout=self._deadline(timeout))

    def region_of(self, array):
        """The name of the region of this client holding `array`, or None."""
        return self._regions.name_of(array)

    # ---- single sorts --------------------------------------------------
    def sort(self, keys, descending=False, return_indices=False, request_id="",
             chunked=None, timeout=_DEFAULT, progress=None, out=None, indices_out=None,
             nulls="last"):
        """Sorted keys, or (sorted keys, uint64 indices) with return_indices.

        nulls: "last" or "first", where NaT goes (datetime64/timedelta64).
        Keys in a registered region are sorted in place (see sort_full)."""
        res = self.sort_full(keys, None, descending, return_indices, request_id,
                             chunked, timeout, progress, out=out, indices_out=indices_out,
                             nulls=nulls)
        return (res.keys, res.indices) if return_indices else res.keys

    # ---- selection -----------------------------------------------------
    def topk(self, keys, k, largest=True, return_indices=True, values=None,
             segment_lengths=None, request_id="", timeout=_DEFAULT, nulls="last"):
        """The k largest (largest=False: smallest) keys in sorted order, as
        torch.topk: (keys, indices) with return_indices, else keys.

        keys: any 1-D array sort() takes; a 2-D numpy array is rows, k of
        each kept (results of shape (rows, min(k, columns))); 1-D keys with
        segment_lengths are cut into consecutive segments of those lengths
        (results: a list, one array per segment). Stable: among equal keys
        the earliest positions win; indices are positions within the row or
        segment. A k past a length keeps all of it, sorted; k < 1 is a
        ValueError. values: as many as keys (same shape), returned for the
        kept keys: (keys, indices, values) then (indices None without
        return_indices). A request over 8 MiB (top_k.PIECE_BYTES; fixed-
        width arrays) goes as several TopK calls of about that, four in
        flight at once: groups of rows or segments, or pieces of one array
        whose first k are merged by one more call; none over
        max_message_bytes.
        Keys (and values) in this client's system regions (shared_array;
        the server needs --shared_memory=system) go by reference, read
        where they lie: one small message whatever their size.
        """
        res = self.topk_full(keys, k, largest, return_indices, values, segment_lengths,
                             request_id, timeout, nulls)
        out = [res.keys, res.indices]
        if segment_lengths is not None:
            out = [split_segments(x, res.counts) for x in out]
            res = res._replace(values=split_segments(res.values, res.counts))
        if values is not None:
            return out[0], out[1], res.values
        return (out[0], out[1]) if return_indices else out[0]

    def topk_full(self, keys, k, largest=True, return_indices=True, values=None,
                  segment_lengths=None, request_id="", timeout=_DEFAULT, nulls="last"):
        """topk() returning a TopKResult (flat keys per segment, counts, engine)."""
        call = TopKInput(keys, k, largest, values, segment_lengths, nulls, self._regions)
        deadline = self._deadline(timeout)

        def one(piece, want_indices):
            try:
                raw = self._top_k(piece.request(want_indices, request_id), timeout=deadline)
            except grpc.RpcError as err:
                raise SortdError.from_rpc_error(err) from None
            return piece.result(raw, want_indices, _engine_name)

        budget = self.max_message_bytes - HEADROOM
        # Arrays in this client's system regions go by reference.
        # Byte strings go in one message (up to the limit; split_call
        # refuses them past it).
        pieces_from = budget if call.has_strings() else min(top_k_module.PIECE_BYTES, budget)
        if call.on_device():
            # Read where they lie: cut only when the answer is over one message.
            if call.answer_bytes() <= budget:
                return one(call, bool(return_indices))
        elif call.by_reference(self._regions) or call.request_bytes() <= pieces_from:
            return one(call, bool(return_indices))
        # Large: pieces of rows, of segments, or of the array, in parallel.
        res = split_call(call, budget, one, top_k_module.PIECE_BYTES)
        return res if return_indices else res._replace(indices=None)

    def sort_table(self, columns, by, ascending=True, nulls="last", return_columns=False,
                   request_id="", timeout=_DEFAULT, session=None, connections=None,
                   progress=None, indices_out=None):
        """Sorts the rows of a table by one or more key columns (SortTable).

        columns: a dict (or any mapping) name -> 1-D array, or a sequence of
        arrays (named "0", "1", ...); numpy masked arrays carry nulls. by: a
        column name (or index) or a list of them, most significant first.
        ascending and nulls ("last" or "first"; NaT counts as a null): one
        for every key, or a list, one per key. Stable: rows equal on every
        key keep their input order.

        Returns the permutation (int64: row i of the sorted table is input
        row perm[i]), or with return_columns a dict name -> column in the
        sorted order (masked arrays where the input had nulls).

        session: None picks a table session (docs/api.md, "Table
        sessions": parts over `connections`, progress as for sort_full) for
        tables of fixed-width columns of at least session_min_bytes, or
        too large for one message, else one SortTable message; True/False
        force either. Tables with byte-string or str columns travel in one
        message (max_message_bytes).

        Same-host regions (docs/api.md, "Tables in regions"): fixed-width
        columns whose memory lies in a region of this client (shared_array,
        register_system_region with buffer=) travel by reference in one
        SortTable message; with return_columns they are reordered where
        they lie and the dict holds those same arrays. indices_out: a uint64
        region array of one slot a row that receives the permutation (then
        returned instead of a new array). Masks travel in the message.
        """
        table = TableInput(columns, by, ascending, nulls)
        slices = table.region_slices(self._regions, writable=return_columns)
        indices_slice = None
        if indices_out is not None:
            if (not isinstance(indices_out, np.ndarray) or indices_out.dtype != np.dtype("<u8")
                    or indices_out.shape != (table.rows,) or not indices_out.flags.writeable):
                raise ValueError("indices_out: a writable uint64 array of %d elements" % table.rows)
            indices_slice = self._regions.table_slice(indices_out, sort_pb2.ELEMENT_TYPE_UINT64)
            if indices_slice is None:
                raise ValueError("indices_out must lie in a region this client registered")
        # Arrays in regions go by reference, in one message.
        by_reference = bool(slices) or indices_slice is not None
        if by_reference and session:
            raise ValueError("a table with arrays in regions travels as one SortTable "
                             "message (session=True is for tables in memory)")
        too_large = not by_reference and table.size() > self.max_message_bytes - HEADROOM
        chosen = session
        if session is None:
            session = not by_reference and table.fixed_width() and (too_large or (
                self._table_session_min_bytes
                and table.size() >= self._table_session_min_bytes))
        if session:
            if not table.fixed_width():
                raise ValueError("a table session carries fixed-width columns only; byte-string "
                                 "and str columns travel in one SortTable message")
            progress, done = progress_module.resolve(progress)
            try:
                perm, reordered, _ = self._sessions.sort_table(
                    self._start_session, table.session_columns(), table.session_keys(),
                    return_columns, request_id, self._deadline(timeout),
                    connections=connections, progress=progress, want_indices=not return_columns)
                if return_columns:
                    return table.reordered_from_session(reordered)
                return perm.view(np.int64)
            except grpc.RpcError as err:
                error = SortdError.from_rpc_error(err)
            finally:
                done()
            # A server older than table sessions reads the start as a plain
            # session without key_type: one message, where the table fits.
            if chosen is not None or too_large or not _no_table_sessions(error):
                raise error from None
        if too_large:
            raise ValueError("the table is %d bytes; SortTable carries one message (%d bytes "
                             "here) and a table session fixed-width columns only: sort fewer "
                             "rows per call" % (table.size(), self.max_message_bytes - HEADROOM))
        try:
            resp = self._sort_table(table.request(return_columns, request_id, slices, indices_slice),
                                    timeout=self._deadline(timeout))
        except grpc.RpcError as err:
            raise SortdError.from_rpc_error(err) from None
        if return_columns:
            return table.reordered(resp, slices)
        if indices_slice is not None:
            return indices_out
        perm = table.permutation(resp)
        _check_count("indices", len(perm), table.rows)
        return perm

    def sort_pairs(self, keys, values, descending=False, request_id="",
                   chunked=None, timeout=_DEFAULT, progress=None, out=None,
                   values_out=None, nulls="last"):
        """(sorted keys, values permuted along with them).

        Keys and values in registered regions are sorted in place (see
        sort_full)."""
        res = self.sort_full(keys, values, descending, False, request_id,
                             chunked, timeout, progress, out=out, values_out=values_out,
                             nulls=nulls)
        return res.keys, res.values

    def sort_full(self, keys, values=None, descending=False, return_indices=False,
                  request_id="", chunked=None, timeout=_DEFAULT, progress=None,
                  connections=None, out=None, values_out=None, indices_out=None,
                  nulls="last"):
        """Sort or SortPairs returning a SortResult (with engine and id).

        Types: see arrays.SUPPORTED. int8/uint8/int16/uint16/float16/bfloat16/
        bool/datetime64/timedelta64 travel in one message (Sort, SortPairs)
        below session_min_bytes, else (and past the message limit) as a
        table session of one key column (docs/api.md, "Table sessions").
        nulls ("last" or "first"): where NaT keys go, in either order.

        chunked: None picks the region path for arrays in regions this
        client registered, else a sort session for numeric arrays of at
        least session_min_bytes, else SortChunked only when the request or
        response would exceed max_message_bytes - HEADROOM; True/False force
        SortChunked or one message (copies, for region arrays too).
        progress(phase, done, total), for a session, is called as "upload",
        "sort" and "download" advance (from the client's transfer threads);
        progress=True draws a tqdm bar for transfers that last over a second
        (sortd_client/progress.py).
        connections overrides the client's.

        The region path (keys, and values if given, inside regions of this
        client: shared_array, register_system_region with buffer=,
        register_cuda_array) sends references, not arrays, and the server
        sorts them where they lie: IN PLACE, unlike every other path, and
        the result holds the caller's own objects, now sorted. out= (and
        values_out=) name region arrays of the same type and length to sort
        into instead, leaving the input as it was. indices_out= names a
        uint64 region array to receive the permutation (needs
        return_indices=True); when omitted, the indices come in the
        response, as on every path.
        """
        progress, done = progress_module.resolve(progress)
        try:
            return self._sort_full(keys, values, descending, return_indices, request_id,
                                   chunked, timeout, progress, connections, out, values_out,
                                   indices_out, nulls)
        finally:
            done()

    def _sort_full(self, keys, values, descending, return_indices, request_id, chunked,
                   timeout, progress, connections, out, values_out, indices_out, nulls):
        if chunked is None:
            refs = self._regions.plan(keys, values, out, values_out, indices_out,
                                      return_indices)
            if refs is not None:
                order = (sort_pb2.SORT_ORDER_DESCENDING if descending
                         else sort_pb2.SORT_ORDER_ASCENDING)
                keys_out, values_out, indices, rid, engine = self._regions.sort(
                    refs, self._sort, self._sort_pairs, order, return_indices, request_id,
                    self._deadline(timeout))
                return SortResult(keys_out, values_out, indices, rid, _engine_name(engine))
        elif any(x is not None for x in (out, values_out, indices_out)):
            raise ValueError("out=, values_out= and indices_out= need chunked=None "
                             "(the region path)")
        if nulls not in ("last", "first"):
            raise ValueError('nulls must be "last" or "first", got %r' % (nulls,))
        null_placement = (sort_pb2.NULL_PLACEMENT_FIRST if nulls == "first"
                          else sort_pb2.NULL_PLACEMENT_LAST)
        k = TypedInput(keys, "keys")
        v = None if values is None else TypedInput(values, "values")
        if v is not None and v.n != k.n:
            raise ValueError("keys and values differ in length (%d vs %d)" % (k.n, v.n))
        order = sort_pb2.SORT_ORDER_DESCENDING if descending else sort_pb2.SORT_ORDER_ASCENDING
        converted = k.converted or (v is not None and v.converted)
        numeric = (not k.is_bytes and (v is None or not v.is_bytes)) and not converted
        payload = (k.data.nbytes + (v.data.nbytes if v is not None else 0)) if numeric else 0
        if (chunked is None and numeric and self.session_min_bytes
                and payload >= self.session_min_bytes):
            try:
                keys_out, values_out, indices, engine = self._session_sort(
                    k, v, order, return_indices, request_id, self._deadline(timeout),
                    connections=connections, progress=progress)
                return SortResult(keys_out, values_out, indices, request_id,
                                  _engine_name(engine))
            except grpc.RpcError as err:
                # A server without sort sessions (older than them): SortChunked.
                if err.code() != grpc.StatusCode.UNIMPLEMENTED:
                    raise SortdError.from_rpc_error(err) from None
                chunked = True
            except SortdError as err:
                if err.code != grpc.StatusCode.UNIMPLEMENTED:
                    raise
                chunked = True
        if converted and chunked is not False and not k.is_bytes and (v is None or not v.is_bytes):
            # Converted types travel as a table session of one key column
            # (and the values), reordered there: past the message limit, or
            # from session_min_bytes like the numeric types' sessions.
            fixed = k.data.nbytes + (v.data.nbytes if v is not None else 0)
            beyond = fixed > self.max_message_bytes - HEADROOM
            # Times go as a plain int64 session (the numeric threshold), the
            # rest as a table session (grpcio's).
            as_int64 = (k.kind in ("datetime64", "timedelta64")
                        and (v is None or not (v.converted or v.is_bytes)))
            least = self.session_min_bytes if as_int64 else self._table_session_min_bytes
            if chunked or beyond or (least and fixed >= least):
                if as_int64 and not chunked:
                    try:
                        return self._time_session(k, v, order, null_placement, return_indices,
                                                  request_id, self._deadline(timeout),
                                                  connections=connections, progress=progress)
                    except SortdError as err:
                        if err.code != grpc.StatusCode.UNIMPLEMENTED:
                            raise
                    except grpc.RpcError as err:
                        if err.code() != grpc.StatusCode.UNIMPLEMENTED:
                            raise SortdError.from_rpc_error(err) from None
                try:
                    return self._converted_session(k, v, order, null_placement, return_indices,
                                                   request_id, self._deadline(timeout),
                                                   connections, progress)
                except grpc.RpcError as err:
                    error = SortdError.from_rpc_error(err)
                # An older server (no table sessions): one message, if it fits.
                if chunked or beyond or not _no_table_sessions(error):
                    raise error from None
        if v is not None:
            if return_indices and not chunked:
                raise ValueError("return_indices with values needs chunked=True "
                                 "(SortPairs has no indices)")
        if chunked is None:
            size = _ld_size_of(k.encoded_size()) + len(request_id.encode()) + 16
            if v is not None:
                size += _ld_size_of(v.encoded_size())
            if return_indices:
                size += 16 + 8 * k.n  # the response is larger than the request
            chunked = size > self.max_message_bytes - HEADROOM
        if chunked and converted:
            raise ValueError("%s arrays with byte-string keys or values travel in one message "
                             "(%d bytes at most here)"
                             % ((k if k.converted else v).kind, self.max_message_bytes - HEADROOM))
        deadline = self._deadline(timeout)
        try:
            if chunked:
                return self._chunked(k, v, order, return_indices, request_id, deadline)
            if v is None:
                return self._unary_sort(k, order, return_indices, request_id, deadline,
                                        null_placement)
            return self._unary_pairs(k, v, order, request_id, deadline, null_placement)
        except grpc.RpcError as err:
            raise SortdError.from_rpc_error(err) from None

    def _time_session(self, k, v, order, nulls, return_indices, request_id, deadline, **kw):
        """datetime64 / timedelta64 keys as a plain int64 session, sorted as
        any int64 array is (on the GPU while the parts arrive): int64 order
        is time order, and NaT, the int64 minimum, ends up first ascending
        and last descending, one stable block, which moves to where `nulls`
        puts it."""
        ik = TypedInput(k.data, "keys")
        keys, values, indices, engine = self._session_sort(ik, v, order, return_indices,
                                                           request_id, deadline, **kw)
        least = np.iinfo(np.int64).min
        # (a reduction first: most arrays hold no NaT, and then no count)
        nat = int(np.count_nonzero(k.data == least)) if k.n and k.data.min() == least else 0
        descending = order == sort_pb2.SORT_ORDER_DESCENDING
        nulls_first = nulls == sort_pb2.NULL_PLACEMENT_FIRST
        if nat and nat < k.n and descending == nulls_first:
            # Ascending: the block leads, nulls last moves it behind;
            # descending: it trails, nulls first moves it ahead.
            shift = nat if descending else -nat
            keys = np.roll(keys, shift)
            values = np.roll(values, shift) if values is not None else None
            indices = np.roll(indices, shift) if indices is not None else None
        return SortResult(k.finish([keys]), values, indices, request_id, _engine_name(engine))

    def _converted_session(self, k, v, order, nulls, return_indices, request_id, deadline,
                           connections, progress):
        columns = [("keys", ELEMENT_TYPE_OF[k.kind], k.time_unit, k.data, None)]
        if v is not None:
            columns.append(("values", ELEMENT_TYPE_OF[v.kind], v.time_unit, v.data, None))
        by = [sort_pb2.SortKey(column=0, order=order, nulls=nulls)]
        perm, reordered, engine = self._sessions.sort_table(
            self._start_session, columns, by, True, request_id, deadline,
            connections=connections, progress=progress, want_indices=return_indices)
        keys = k.finish([reordered[0][0]])
        values = v.finish([reordered[1][0]]) if v is not None else None
        return SortResult(keys, values, perm if return_indices else None, request_id,
                          _engine_name(engine))

    def _unary_sort(self, k, order, return_indices, request_id, deadline, nulls=0):
        resp = read_response(
            self._sort_raw(_sort_request(k, order, return_indices, request_id, nulls),
                           timeout=deadline), SORT_RESPONSE)
        keys = k.finish([k.decode_serialized(resp.arrays[0])])
        _check_count("keys", len(keys), k.n)
        indices = None
        if return_indices:
            indices = finish_indices([view_payload(resp.indices, INDEX_DTYPE)])
            _check_count("indices", len(indices), k.n)
        return SortResult(keys, None, indices, resp.request_id, _engine_name(resp.engine))

    def _unary_pairs(self, k, v, order, request_id, deadline, nulls=0):
        parts = (wire.len_field(1, k.parts()) + wire.len_field(2, v.parts())
                 + wire.varint_field(3, order) + wire.string_field(4, request_id)
                 + wire.varint_field(9, nulls))
        resp = read_response(self._sort_pairs_raw(wire.join(parts), timeout=deadline),
                             SORT_PAIRS_RESPONSE)
        keys = k.finish([k.decode_serialized(resp.arrays[0])])
        values = v.finish([v.decode_serialized(resp.arrays[1])])
        _check_count("keys", len(keys), k.n)
        _check_count("values", len(values), k.n)
        return SortResult(keys, values, None, resp.request_id, _engine_name(resp.engine))

    def transfer_roundtrip(self, keys, connections=None, timeout=_DEFAULT, compress=False):
        """Moves numeric keys up and back through a transfer-only session
        (no sort; the server needs --diagnostics): what the transport alone
        costs, for benchmarks (raw both ways unless compress). Returns the
        keys as the server sent them."""
        k = TypedInput(keys, "keys")
        try:
            keys_out, _, _, _ = self._session_sort(
                k, None, 0, False, "", self._deadline(timeout), connections=connections,
                transfer_only=True, compress=compress)
        except grpc.RpcError as err:
            raise SortdError.from_rpc_error(err) from None
        return keys_out

    def _session_sort(self, k, v, order, return_indices, request_id, deadline, **kw):
        """A sort session through the C++ client where it loaded, else grpcio."""
        compress = kw.pop("compress", self.compress)
        if self._native is not None:
            return self._native.sort(k, v, order, return_indices, request_id, deadline,
                                     compress=compress, **kw)
        return self._sessions.sort(self._start_session, k, v, order, return_indices,
                                   request_id, deadline, **kw)

    # ---- SortChunked -----------------------------------------------------
    def _chunked(self, k, v, order, return_indices, request_id, deadline):
        sizes = k.element_sizes()
        if v is not None:
            sizes = sizes + v.element_sizes()
        bounds = _chunk_bounds(k.n, sizes, self.chunk_bytes - 64)

        def requests():
            header = (wire.varint_field(1, order) + wire.varint_field(2, return_indices)
                      + wire.varint_field(3, v is not None) + wire.varint_field(4, k.n)
                      + wire.string_field(5, request_id))
            yield wire.join(wire.len_field(1, header))
            for start, stop in bounds:
                chunk = wire.len_field(1, k.parts(start, stop))
                if v is not None:
                    chunk += wire.len_field(2, v.parts(start, stop))
                yield wire.join(wire.len_field(2, chunk))

        call = self._sort_chunked(requests(), timeout=deadline)
        key_pieces, value_pieces, index_pieces = [], [], []
        got, rid, engine = 0, request_id, 0
        try:
            for i, resp in enumerate(call):
                if i == 0:
                    _check_count("SortChunked total_keys", resp.total_keys, k.n)
                    rid, engine = resp.request_id, resp.engine
                if resp.offset != got:
                    raise ProtocolError("chunk at offset %d, expected %d" % (resp.offset, got))
                piece = k.decode(resp.chunk.keys)
                key_pieces.append(piece)
                if v is not None:
                    value_pieces.append(v.decode(resp.chunk.values))
                    _check_count("chunk values", len(value_pieces[-1]), len(piece))
                if return_indices:
                    index_pieces.append(indices_from(resp, 2, clear="chunk"))
                    _check_count("chunk indices", len(index_pieces[-1]), len(piece))
                got += len(piece)
        finally:
            call.cancel()  # no-op when the call completed
        _check_count("SortChunked keys", got, k.n)
        return SortResult(k.finish(key_pieces),
                          v.finish(value_pieces) if v is not None else None,
                          finish_indices(index_pieces) if return_indices else None,
                          rid, _engine_name(engine))

    # ---- SortStream ------------------------------------------------------
    def sort_stream(self, arrays, descending=False, return_indices=False,
                    raise_errors=True, timeout=_DEFAULT):
        """Sorts many arrays over one SortStream; yields (request_id, result).

        Items of `arrays` are arrays (request_id = str(position)) or
        (request_id, array) tuples; ids must be unique among requests in
        flight. Results come in completion order; a result is the sorted
        array, or (sorted, indices) with return_indices. A request the server
        rejects raises RequestError (ending the stream) or, with
        raise_errors=False, is yielded as (request_id, RequestError instance).
        Each request must fit in max_message_bytes (use sort() for larger).
        The arrays are read lazily while the stream runs.
        """
        order = sort_pb2.SORT_ORDER_DESCENDING if descending else sort_pb2.SORT_ORDER_ASCENDING
        pending = {}
        failure = []  # an exception raised while producing requests
        calls = []

        def requests():
            try:
                for pos, item in enumerate(arrays):
                    if (isinstance(item, tuple) and len(item) == 2
                            and isinstance(item[0], str)):
                        rid, keys = item
                    else:
                        rid, keys = str(pos), item
                    if rid in pending:
                        raise ValueError("request_id %r is already in flight" % rid)
                    k = TypedInput(keys, "keys")
                    data = _sort_request(k, order, return_indices, rid)
                    if len(data) > self.max_message_bytes - HEADROOM:
                        raise ValueError("request %r is %d bytes, over max_message_bytes; "
                                         "use sort()" % (rid, len(data)))
                    pending[rid] = k
                    yield data
            except Exception as exc:  # reported by the response side
                failure.append(exc)
                if calls:
                    calls[0].cancel()

        call = self._sort_stream(requests(), timeout=self._deadline(timeout))
        calls.append(call)
        try:
            for resp in call:
                rid = resp.request_id
                k = pending.pop(rid, None)
                if k is None:
                    raise ProtocolError("response for unknown request_id %r" % rid)
                if resp.HasField("error"):
                    err = RequestError(resp.error.code, resp.error.message, rid)
                    if raise_errors:
                        raise err
                    yield rid, err
                    continue
                keys = k.finish([k.decode(resp.keys)])
                _check_count("keys of %r" % rid, len(keys), k.n)
                if return_indices:
                    indices = finish_indices([indices_from(resp, 2, clear="keys")])
                    _check_count("indices of %r" % rid, len(indices), k.n)
                    yield rid, (keys, indices)
                else:
                    yield rid, keys
        except grpc.RpcError as err:
            if failure:
                raise failure[0] from None
            raise SortdError.from_rpc_error(err) from None
        finally:
            call.cancel()
        if failure:
            raise failure[0]
        if pending:
            raise ProtocolError("stream ended without responses for %s" % sorted(pending))

    def sort_many(self, arrays, descending=False, return_indices=False,
                  raise_errors=True, timeout=_DEFAULT):
        """sort_stream() collected into a dict request_id -> result.

        `arrays` may also be a mapping request_id -> array.
        """
        if isinstance(arrays, collections.abc.Mapping):
            arrays = list(arrays.items())
        return dict(self.sort_stream(arrays, descending, return_indices,
                                     raise_errors, timeout))


def _no_table_sessions(error):
    """Whether a refused table session came from a server without them (it
    reads the start as a plain session whose key_type is missing)."""
    return (error.code == grpc.StatusCode.INVALID_ARGUMENT
            and "key_type: must be set" in (error.details or ""))


def _ld_size_of(inner):
    return 1 + len(wire.varint(inner)) + inner


def _sort_request(k, order, return_indices, request_id, nulls=0):
    """Serialized SortRequest (one join: the payload is copied once)."""
    return wire.join(wire.len_field(1, k.parts()) + wire.varint_field(2, order)
                     + wire.varint_field(3, return_indices)
                     + wire.string_field(4, request_id) + wire.varint_field(8, nulls))
