#!/usr/bin/python3
"""Bounded soak of a real sortd: every RPC, every key type, table sorts,
random sizes and orders, cancellations and short deadlines mixed in; every
answer checked against numpy, the server's RSS sampled, and its request
counters reconciled with what the soak sent (docs/hardening.md, "Soak").

  /usr/bin/python3 bench/soak.py --sortd=build/server/sortd \
      [--duration=60 --clients=32 --max_keys=4194304] [-- extra sortd flags]
  /usr/bin/python3 bench/soak.py --target=host:port --metrics_url=http://host:9464/metrics \
      [--pid=PID]   # a server already running (and used by nobody else)

Needs Debian's python3-grpcio and python3-numpy; PYTHONPATH with
client/python and tests/e2e (added from this checkout when missing).

What it does
  1. Warm-up (--warmup seconds of the same load), then waits until nothing
     is in flight (sortd_inflight_requests == 0) and the RSS stops falling
     (idle trim): that RSS is the baseline.
  2. Load: --clients threads, each calling in a loop one RPC picked at random
     (Sort, SortPairs, SortStream with 2-12 requests, SortChunked through
     the Python client's chunked path, SortTable through
     Client.sort_table), one key type (uint32, int32, float32, uint64,
     int64, float64, bytes; values of any type), a size from 0 to
     --max_keys skewed to small ones, a random order, with or without
     indices. About 40% of the Sort calls sort a converted key type
     instead (int8, uint8, int16, uint16, float16, bool, datetime64 in a
     random unit with NaT, NaT first or last; at most 1 Mi keys, one
     message: Client.sort with return_indices; the type with the fewest
     checked answers so far, so that a short run covers them all). A
     SortTable call sorts a random table (up to 64 Ki rows, 16 Ki with
     string columns) by 1-4 key columns of int32, float32 (NaN and signed
     zeros), uint8, int16, datetime64[ns] (NaT), byte strings (object or S
     arrays) or U strings, now and then one column twice, each key with a
     random order and null placement; about half the columns are masked
     arrays (nulls); 0-2 more columns of any type travel along; about 30%
     of the calls ask for return_columns; a third of the tables without
     string columns whose call is not to be cancelled or cut short go as a
     table session (counted as SortSession), and a quarter of the other
     fixed-width tables lie in shared arrays (system regions, by
     reference; --table_regions, on for the soak's own sortd, which it
     starts with --shared_memory=system). About --cancel_fraction of the
     calls are cancelled after a random 0.5-300 ms and --deadline_fraction
     get a deadline of 1-500 ms. About CODED_SESSION_FRACTION of the
     numeric Sort calls in the normal mode (and the first one) go as a
     plain sort session that asks for delta-coded sorted keys (counted as
     SortSession; the soak's own sortd runs with --key_encoding=always, so
     the CPU engine codes them; a --target server under auto may send them
     raw, which the client reads the same). The RSS is sampled every 0.5 s.
  3. Waits for in-flight 0 again and watches the RSS for up to --idle_wait
     seconds, until it is within 10% of the baseline or stops falling.
  4. Burst (--burst_clients, 0: none): that many clients each sort one
     uint32 array of up to --burst_keys (at most a 24th of the server's
     --max_inflight_bytes) at once, more than it admits at once: all must
     come back exact and none refused (the soak's own sortd runs with
     --max_inflight_bytes=--inflight_bytes, 256 MiB, and at least one must
     have waited for admission).
  5. Reconciles sortd_requests_total with the calls made, prints a summary,
     and (when it started sortd) stops it with SIGTERM: exit 0 expected.

Outcomes of a call (client's view)
  ok          answered, and the answer is exactly numpy's (stable argsort in
              sortd's order: -0.0 before +0.0, every NaN one key after +inf,
              payloads unchanged; bytes in memcmp order; values and indices
              permuted with the keys; request_id echoed)
  late        cancelled or given a short deadline by the soak, but answered
              (and checked) before that took effect
  cancelled   CANCELLED on a call the soak cancelled
  deadline    DEADLINE_EXCEEDED (or CANCELLED) on a call with a short deadline
  unexpected  anything else: another status, or CANCELLED/DEADLINE_EXCEEDED
              on a call the soak neither cancelled nor gave a short deadline
              (those have --call_timeout, 120 s); goal 0
  wrong       an answer that differs from numpy's; must be 0
Converted keys are checked against numpy's stable argsort in their own
order (tests/e2e/sort_reference.py; times by their int64 counts with NaT
placed by nulls= in both orders), keys bit for bit in the caller's dtype.
A table's permutation (or, with return_columns, every column, its values
bit for bit and its mask) is checked against np.lexsort of per-key dense
ranks computed here: floats -inf < ... < -0.0 < +0.0 < ... < +inf < NaN
with every NaN one value, bytes in memcmp order, U strings by code point;
masked entries and NaT are nulls, equal to each other, first or last by
their key's nulls whatever its order; the row number as the last key
(stable).
The RPC counted is the one the client really invoked (hooks on its gRPC
callables): Sort or SortPairs calls too large for one message go through
SortChunked and count there.

How the server's counters are reconciled
  sortd_requests_total counts requests as the server finished them, by
  method and code; SortStream counts each request on the stream (each
  item), the other methods each call. A call (item) the soak saw answered
  certainly reached the server; one it cancelled, or whose deadline
  passed, may have been given up before the server saw it (nothing sent
  yet, or the stream's later items never read), so it may be missing from
  the counters. Per method, with the increase S over the run:
    answered <= S[all codes] <= answered + unanswered
    S[OK] >= answered OK        (every OK the client saw is counted OK)
    S[CANCELLED] + S[DEADLINE_EXCEEDED] <= cancelled + deadline calls
    S[other codes] <= the client's unexpected errors
  The server records a cancelled call (client gone or deadline passed) as
  CANCELLED, never DEADLINE_EXCEEDED (server/grpc/*.cc); one that it
  finished before the cancellation arrived is OK (reported as "late OK").
  With more than 50 cancelled/deadline calls, at least one must be counted
  CANCELLED. A --target server must have no other clients while the soak
  runs, or its counters will not add up.
  SortTable is also reconciled per key_type label (the first key column's
  type as the server sorts it: 8/16-bit and bool as uint32, times as
  uint64, U strings as bytes) with the same bounds on all codes and OK;
  a call cancelled before its request arrived is labelled "none" (no
  columns seen): at most the cancelled/deadline SortTable calls, never OK.

What must have happened (a soak that made no call proves nothing)
  The warm-up (unless --warmup=0) and the load phase each made calls;
  every RPC (Sort, SortPairs, SortStream, SortChunked, SortTable) and every
  key type (the converted ones too) had at least --min_ok calls (default 1)
  answered and checked against numpy; so had each table column type as a
  key, and tables with several keys, with nulls and with return_columns; the
  soak's own tallies agree (per method, the calls made are the answered plus
  the unanswered ones); the server's counters were read (always when sortd
  was started here) and counted at least as many requests per method.

Exit status: 1 when any call was unexpected or wrong, the counters do not
add up, a method or key type had fewer than --min_ok checked answers, or
sortd (when started here) did not exit 0; also when the RSS did not return
within 10% of the baseline and --require_rss is given.
"""
import argparse
import collections
import heapq
import os
import re
import sys
import threading
import time
import traceback
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (os.path.join(HERE, "..", "client", "python"), os.path.join(HERE, "..", "tests", "e2e")):
    if os.path.abspath(_p) not in map(os.path.abspath, sys.path):
        sys.path.append(_p)

import grpc  # noqa: E402
import numpy as np  # noqa: E402

from sortd_client import Client, RequestError, SharedArray, SortdError  # noqa: E402
from sort_reference import reference_permutation, time_reference  # noqa: E402
from sortd_process import SortdProcess  # noqa: E402

# SortSession: table sessions (the server counts one request a session,
# at its end); the soak starts them only through SortTable calls.
METHODS = ("Sort", "SortPairs", "SortStream", "SortChunked", "SortTable", "TopK", "SortSession")
# The first six (sessions come from SortTable).
METHOD_WEIGHTS = (0.25, 0.16, 0.19, 0.19, 0.15, 0.06)
# TopK: one message each way, so its arrays stay well under the limit.
TOP_K_MAX_KEYS = 1 << 22
KEY_TYPES = ("uint32", "int32", "float32", "uint64", "int64", "float64", "bytes")
# Numeric Sort calls that go as a coded sort session instead of one message.
CODED_SESSION_FRACTION = 0.15
# Sorted by conversion (docs/api.md, "Types"): one message only, so Sort alone
# (Client.sort with return_indices) carries them here.
CONVERTED_TYPES = ("int8", "uint8", "int16", "uint16", "float16", "bool", "datetime64")
CONVERTED_FRACTION = 0.4   # of the Sort calls
CONVERTED_MAX_KEYS = 1 << 20
TIME_UNITS = ("ns", "ns", "us", "ms", "s", "D")
# SortTable: key column types ("str" = numpy U), columns that only travel along.
TABLE_TYPES = ("int32", "float32", "uint8", "int16", "datetime64", "bytes", "str")
TABLE_EXTRA_TYPES = TABLE_TYPES + ("uint64", "float64", "bool", "uint16")
TABLE_MAX_ROWS = 65536
TABLE_STRING_MAX_ROWS = 16384  # strings are Python objects (and sorted so here)
TABLE_FEATURES = ("several keys", "nulls", "return_columns")
# The server's key_type label of a table: its first key column as sorted.
SORTED_AS = {"int8": "uint32", "uint8": "uint32", "int16": "uint32", "uint16": "uint32",
             "float16": "uint32", "bool": "uint32", "datetime64": "uint64", "str": "bytes"}
MIB = 1 << 20
# Sizes: (probability, low, high) in keys, log-uniform within a bucket;
# clipped to --max_keys. Most requests are small, as in real traffic: the
# inline (<= 1024), batched (<= 16384), single-thread and parallel CPU paths.
SIZE_BUCKETS = ((0.02, 0, 0), (0.40, 1, 1024), (0.28, 1025, 16384), (0.20, 16385, 262144),
                (0.08, 262145, 1 << 20), (0.02, (1 << 20) + 1, 1 << 62))
BYTES_MAX_KEYS = 262144    # byte strings are Python objects: keep them smaller
STREAM_ITEM_MAX_KEYS = 262144
BIG_KEYS = 1 << 20         # calls above this many keys hold a slot of --big_slots


# --------------------------------------------------------------------------
# Reference order (docs/api.md, "Ordering")

def order_key(a):
    """uint64 keys whose ascending order is sortd's order of numeric `a`."""
    if a.dtype.kind in "ub":
        return a.astype(np.uint64)
    if a.dtype.kind == "i":
        return a.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
    bits = 8 * a.dtype.itemsize
    b = a.view("u%d" % a.dtype.itemsize).astype(np.uint64)
    sign = np.uint64(1 << (bits - 1))
    mask = np.uint64((1 << bits) - 1)
    # Negative: flip all bits (larger magnitude first); positive: set the
    # sign bit. Then -0.0 < +0.0, and every NaN is one key after +inf.
    k = np.where(b & sign, ~b & mask, b | sign)
    k[np.isnan(a)] = mask
    return k


def reference_perm(keys, descending):
    """Stable permutation that sorts `keys` (numpy array or list of bytes)."""
    if isinstance(keys, list):
        return np.array(sorted(range(len(keys)), key=keys.__getitem__, reverse=descending),
                        dtype=np.uint64)
    k = order_key(keys)
    if descending:
        k = np.uint64(0xFFFFFFFFFFFFFFFF) - k  # reverse of distinct keys, ties kept in order
    return np.argsort(k, kind="stable").astype(np.uint64)


def same_array(got, want):
    """Exact equality: numeric bit patterns (-0.0, NaN payloads, NaT) or bytes lists."""
    if isinstance(want, list):
        return list(got) == want
    if isinstance(got, np.ma.MaskedArray):
        return False  # a mask where none was sent
    got = np.asarray(got)
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if want.dtype.kind in "fMm":
        view = "u%d" % want.dtype.itemsize
        return np.array_equal(got.view(view), want.view(view))
    return np.array_equal(got, want)


def converted_perm(keys, descending, nulls):
    """The stable permutation of converted keys (numpy's order, NaT by nulls)."""
    if keys.dtype.kind == "M":
        perm = time_reference(keys, descending, nulls)
    else:
        perm = reference_permutation(keys, descending)
    return np.asarray(perm, dtype=np.int64).astype(np.uint64)


def column_rank(column, ascending, nulls):
    """Dense ranks of one table key column, in that key's order: equal values
    one rank; nulls (masked, or NaT) all one rank, before or after every
    value by `nulls` in both orders."""
    data = np.ma.getdata(column)
    null = np.ma.getmaskarray(column).copy()
    n = len(data)
    kind = data.dtype.kind
    if kind == "M":
        null |= np.isnat(data)
        k = data.view(np.int64)
    elif kind in "SO":
        k = np.empty(n, dtype=object)  # Python bytes: memcmp order
        k[:] = [bytes(x) for x in data.tolist()]
    elif kind == "U":
        k = data  # code-point order
    else:
        k = order_key(data)  # floats: -0.0 < +0.0, NaNs one key after +inf
    valid = ~null
    rank = np.full(n, -1 if nulls == "first" else n, dtype=np.int64)
    if valid.any():
        distinct, inverse = np.unique(k[valid], return_inverse=True)
        r = inverse.reshape(-1).astype(np.int64)
        rank[valid] = r if ascending else len(distinct) - 1 - r
    return rank


def table_reference(columns, by, ascending, nulls):
    """The stable lexicographic permutation (int64) of a table's rows."""
    n = len(columns[0])
    ranks = [column_rank(columns[c], a, nl) for c, a, nl in zip(by, ascending, nulls)]
    # np.lexsort: the last key is the most significant; the row number,
    # least significant, makes it stable whatever lexsort does with ties.
    return np.lexsort([np.arange(n)] + ranks[::-1]).astype(np.int64)


def take(arr, perm):
    if isinstance(arr, list):
        return [arr[i] for i in perm.tolist()]
    return arr[perm.astype(np.intp)]


# --------------------------------------------------------------------------
# Random requests

def float_specials(dtype):
    if dtype == np.float16:
        nans = np.array([0x7E00, 0xFE00, 0x7E01, 0xFC01], np.uint16).view(np.float16)
    elif dtype == np.float32:
        nans = np.array([0x7FC00000, 0xFFC00000, 0x7FC00123, 0xFF800001], np.uint32).view(np.float32)
    else:
        nans = np.array([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000123,
                         0xFFF0000000000001], np.uint64).view(np.float64)
    fin = np.finfo(dtype)
    tiny = np.array([fin.smallest_subnormal, -fin.smallest_subnormal, fin.max, -fin.max], dtype)
    return np.concatenate([nans, np.array([np.inf, -np.inf, 0.0, -0.0], dtype), tiny])


def random_keys(rng, kind, n, unit="ns"):
    if kind == "str":
        # numpy U strings (sent as UTF-8); no NUL, which numpy strips at the end.
        alphabet = ["a", "b", "Z", "\x01", "\x7f", "\xe4", "\xe9", "\u65e5", "\U0001F600"]
        lens = rng.integers(0, 5, n)
        picks = rng.integers(0, len(alphabet), int(lens.sum())).tolist()
        out, at = [], 0
        for m in lens.tolist():
            out.append("".join(alphabet[i] for i in picks[at:at + m]))
            at += m
        return np.array(out, dtype="U") if n else np.empty(0, "U1")
    if kind == "bool":
        return rng.random(n) < rng.uniform(0.1, 0.9)
    if kind == "datetime64":
        info = np.iinfo(np.int64)
        if rng.random() < 0.5:
            a = rng.integers(-8, 8, n) * 1_000_000
        else:
            a = rng.integers(info.min + 1, info.max, n, endpoint=True)
        if n >= 2:
            a[rng.integers(0, n, 2)] = [info.min + 1, info.max]
        if n and rng.random() < 0.7:  # NaT (the int64 minimum)
            a[rng.integers(0, n, max(1, n // 16))] = info.min
        return a.view("M8[%s]" % unit)
    if kind == "bytes":
        # Short strings over a small alphabet (many equal keys and prefixes),
        # with the bytes that trip signed comparisons (0x80, 0xff, 0x00).
        alphabet = np.frombuffer(b"\x00\x01ab\x7f\x80\xfe\xff", np.uint8)
        lens = rng.integers(0, 7 if rng.random() < 0.5 else 24, n)
        flat = alphabet[rng.integers(0, len(alphabet), int(lens.sum()))].tobytes()
        ends = np.cumsum(lens).tolist()
        starts = [0] + ends[:-1]
        return [flat[s:e] for s, e in zip(starts, ends)]
    dtype = np.dtype(kind)
    dup = rng.random() < 0.5
    if dtype.kind in "ui":
        info = np.iinfo(dtype)
        if dup:
            lo = 0 if dtype.kind == "u" else -8
            a = rng.integers(lo, 8, n).astype(dtype)
        else:
            a = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        if n >= 2:
            a[rng.integers(0, n, 2)] = [info.min, info.max]
        return a
    a = rng.standard_normal(n) * (4 if dup else 1e4 if dtype == np.float16 else 1e6)
    a = (np.round(a) if dup else a).astype(dtype)
    if n:
        specials = float_specials(dtype)
        count = max(1, n // 64)
        a[rng.integers(0, n, count)] = specials[rng.integers(0, len(specials), count)]
    return a


def random_size(rng, cap):
    r, acc = rng.random(), 0.0
    for p, lo, hi in SIZE_BUCKETS:
        acc += p
        if r < acc:
            break
    lo, hi = min(lo, cap), min(hi, cap)
    if hi <= lo:
        return int(hi)
    return int(min(hi, np.exp(rng.uniform(np.log(max(lo, 1)), np.log(hi + 1)))))


def loguniform(rng, lo, hi):
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


# --------------------------------------------------------------------------
# Hooks on the client's gRPC callables: which RPC really ran, how many
# stream items were handed to gRPC, and a handle to cancel the call.

class ClientCancelled(Exception):
    """A unary call the soak cancelled (grpc.FutureCancelledError)."""


class CallControl:
    """One logical call: the RPC it invoked and a cancel that may come first."""

    def __init__(self):
        self.lock = threading.Lock()
        self.call = None
        self.cancel_requested = False
        self.method = None
        self.items_sent = 0

    def attach(self, method, call):
        with self.lock:
            self.method, self.call = method, call
            if self.cancel_requested:
                call.cancel()

    def cancel(self):
        with self.lock:
            self.cancel_requested = True
            if self.call is not None:
                self.call.cancel()


_current = threading.local()


class UnaryHook:
    def __init__(self, inner, method):
        self.inner, self.method = inner, method

    def __call__(self, request, timeout=None):
        ctl = _current.control
        future = self.inner.future(request, timeout=timeout)
        ctl.attach(self.method, future)
        try:
            return future.result()
        except grpc.FutureCancelledError:
            raise ClientCancelled() from None


class StreamHook:
    def __init__(self, inner, method):
        self.inner, self.method = inner, method

    def __call__(self, requests, timeout=None):
        ctl = _current.control

        def counted():
            for message in requests:
                ctl.items_sent += 1
                yield message
        call = self.inner(counted(), timeout=timeout)
        ctl.attach(self.method, call)
        return call


def hooked_client(target, chunk_bytes):
    # No service config: no retries, so that each call is one server request.
    # No sort sessions (session_min_bytes=0): the client library sends numeric
    # sorts of 8 MiB and more through them, several RPCs that the server
    # counts under the session's methods, so a hooked SortPairs or Sort would
    # be answered without being counted as one (sessions have their own e2e
    # tests).
    client = Client(target, chunk_bytes=chunk_bytes, service_config=None, session_min_bytes=0)
    client._sort = UnaryHook(client._sort, "Sort")
    client._sort_pairs = UnaryHook(client._sort_pairs, "SortPairs")
    client._sort_table = UnaryHook(client._sort_table, "SortTable")
    client._top_k = UnaryHook(client._top_k, "TopK")
    client._sort_stream = StreamHook(client._sort_stream, "SortStream")
    client._sort_chunked = StreamHook(client._sort_chunked, "SortChunked")
    return client


class Canceller(threading.Thread):
    """Cancels calls at their time (one thread, a heap of deadlines)."""

    def __init__(self):
        super().__init__(daemon=True, name="soak-canceller")
        self.cv = threading.Condition()
        self.heap = []
        self.seq = 0
        self.stopped = False

    def schedule(self, delay, control):
        with self.cv:
            self.seq += 1
            heapq.heappush(self.heap, (time.monotonic() + delay, self.seq, control))
            self.cv.notify()

    def stop(self):
        with self.cv:
            self.stopped = True
            self.cv.notify()

    def run(self):
        with self.cv:
            while not self.stopped:
                if not self.heap:
                    self.cv.wait()
                    continue
                when = self.heap[0][0]
                now = time.monotonic()
                if when > now:
                    self.cv.wait(when - now)
                    continue
                control = heapq.heappop(self.heap)[2]
                control.cancel()


# --------------------------------------------------------------------------
# Statistics

class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.outcomes = collections.Counter()      # (method, outcome)
        self.codes = collections.Counter()         # (method, code) of unexpected errors
        self.answered = collections.Counter()      # method -> requests answered (items for streams)
        self.answered_ok = collections.Counter()
        self.unanswered = collections.Counter()    # given up: may or may not have reached the server
        self.unanswered_x = collections.Counter()  # ... of which cancelled or past a short deadline
        self.key_types = collections.Counter()
        self.ok_key_types = collections.Counter()  # key type -> calls answered OK and checked
        self.table_types = collections.Counter()     # table key column type -> tables
        self.ok_table_types = collections.Counter()  # ... answered OK and checked
        self.ok_table_features = collections.Counter()  # TABLE_FEATURES -> tables OK, checked
        # SortTable per server key_type label (SORTED_AS): as answered above
        self.table_answered = collections.Counter()
        self.table_unanswered = collections.Counter()
        self.keys = 0
        self.failures = []

    def fail(self, text):
        with self.lock:
            if len(self.failures) < 20:
                self.failures.append(text)


class Wrong(Exception):
    pass


def check(what, got, want):
    if not same_array(got, want):
        raise Wrong("%s differ from numpy's" % what)


def verify(keys, values, descending, want_indices, res, rid):
    perm = reference_perm(keys, descending)
    check("keys", res.keys, take(keys, perm))
    if values is not None:
        check("values", res.values, take(values, perm))
    if want_indices:
        check("indices", res.indices, perm)
    if res.request_id != rid:
        raise Wrong("request_id %r came back as %r" % (rid, res.request_id))


def verify_converted(keys, descending, nulls, res):
    """Client.sort(..., return_indices=True) of converted keys."""
    got_keys, got_indices = res
    perm = converted_perm(keys, descending, nulls)
    check("indices", got_indices, perm)
    check("keys", got_keys, take(keys, perm))


class Table:
    """A random SortTable request: the columns and keys as handed to
    Client.sort_table, and the same in plain form for the reference."""

    def __init__(self, rng, cap):
        nkeys = int(rng.integers(1, 5))
        key_types = [TABLE_TYPES[i] for i in rng.integers(0, len(TABLE_TYPES), nkeys)]
        extra = [TABLE_EXTRA_TYPES[i] for i in
                 rng.integers(0, len(TABLE_EXTRA_TYPES), int(rng.integers(0, 3)))]
        types = key_types + extra
        strings = any(t in ("bytes", "str") for t in types)
        self.rows = n = random_size(rng, min(cap, TABLE_STRING_MAX_ROWS if strings
                                             else TABLE_MAX_ROWS))
        place = rng.permutation(len(types))  # keys anywhere among the columns
        self.types = [None] * len(types)
        self.columns = [None] * len(types)
        for t, c in zip(types, place.tolist()):
            a = random_keys(rng, t, n)
            if t == "bytes":
                if rng.random() < 0.7:
                    obj = np.empty(n, dtype=object)
                    obj[:] = a
                    a = obj
                else:
                    a = np.array(a, dtype="S") if n else np.empty(0, "S1")
            if n and rng.random() < 0.5:
                a = np.ma.MaskedArray(a, mask=rng.random(n) < rng.uniform(0.0, 0.5))
            self.types[c], self.columns[c] = t, a
        self.by = place[:nkeys].tolist()
        if nkeys >= 2 and rng.random() < 0.1:
            self.by[-1] = self.by[0]  # one column twice (maybe in the other order)
        self.ascending = [bool(x) for x in rng.random(nkeys) < 0.5]
        self.nulls = ["first" if x else "last" for x in rng.random(nkeys) < 0.5]
        self.return_columns = bool(rng.random() < 0.3)
        # A third of the fixed-width tables go as a table session (parts
        # over 1-3 connections) instead of one SortTable message.
        self.fixed_width = not strings
        self.session = self.fixed_width and bool(rng.random() < 0.33)
        # A quarter of the other fixed-width tables lie in shared arrays
        # (system regions: columns by reference, reordered in place), on a
        # server that has regions on (the soak's own has).
        self.region = self.fixed_width and not self.session and bool(rng.random() < 0.25)
        self._handles = []
        self.names = ["c%d" % i for i in range(len(types))]
        # As handed to the client: a dict or a list; names or indices; a
        # scalar by/ascending/nulls where that says the same.
        self.columns_arg = (dict(zip(self.names, self.columns)) if rng.random() < 0.7
                            else list(self.columns))
        by = self.by if (isinstance(self.columns_arg, list) or rng.random() < 0.3) \
            else [self.names[c] for c in self.by]
        self.by_arg = by[0] if nkeys == 1 and rng.random() < 0.5 else by
        self.ascending_arg = (self.ascending[0] if len(set(self.ascending)) == 1
                              and rng.random() < 0.5 else self.ascending)
        self.nulls_arg = (self.nulls[0] if len(set(self.nulls)) == 1 and rng.random() < 0.5
                          else self.nulls)
        self.kind = self.types[self.by[0]]
        self.label = SORTED_AS.get(self.kind, self.kind)  # the server's key_type label
        self.features = [f for f, on in zip(TABLE_FEATURES, (
            len(self.by) > 1,
            any(np.ma.getmaskarray(self.columns[c]).any() or
                (self.types[c] == "datetime64" and np.isnat(np.ma.getdata(self.columns[c])).any())
                for c in self.by),
            self.return_columns)) if on]

    def call(self, client, rid, timeout):
        columns = self.columns_arg
        if self.region:
            columns = self.in_regions(client)
        return client.sort_table(columns, self.by_arg, self.ascending_arg,
                                 self.nulls_arg, return_columns=self.return_columns,
                                 request_id=rid, timeout=timeout,
                                 session=None if self.region else bool(self.session))

    def in_regions(self, client):
        """The columns copied into shared arrays (masks kept), as handed."""
        out = []
        for column in self.columns:
            data = np.ma.getdata(column)
            handle = SharedArray(client, len(data), data.dtype)
            self._handles.append(handle)
            handle.array[:] = data
            out.append(np.ma.MaskedArray(handle.array, mask=np.ma.getmaskarray(column))
                       if isinstance(column, np.ma.MaskedArray) else handle.array)
        if isinstance(self.columns_arg, dict):
            return dict(zip(self.names, out))
        return out

    def release(self):
        for handle in self._handles:
            handle.close()
        self._handles = []

    def verify(self, res):
        perm = table_reference(self.columns, self.by, self.ascending, self.nulls)
        if not self.return_columns:
            check("permutation", res, perm)
            return
        names = self.names if isinstance(self.columns_arg, dict) else \
            [str(i) for i in range(len(self.columns))]
        if list(res) != names:
            raise Wrong("columns %s came back as %s" % (names, list(res)))
        for name, column in zip(names, self.columns):
            got, mask = res[name], np.ma.getmaskarray(column)
            want = np.ma.getdata(column)[perm]
            if mask.any():
                if not isinstance(got, np.ma.MaskedArray):
                    raise Wrong("column %s came back without its nulls" % name)
                check("column %s's mask" % name, np.ma.getmaskarray(got), mask[perm])
                got = np.ma.getdata(got)
            check("column %s" % name, got, want)


class Soaker:
    def __init__(self, args, clients, stats, canceller, session_client=None):
        self.args, self.clients, self.stats, self.canceller = args, clients, stats, canceller
        # Plain sort sessions at every size, asking for coded keys (its own
        # channels: the cancel hooks do not reach them).
        self.session_client = session_client
        self.coded_sessions = 0
        self.big = threading.BoundedSemaphore(args.big_slots)
        self.converted_picks = collections.Counter()

    def worker(self, index, stop, seed):
        rng = np.random.default_rng(seed)
        client = self.clients[index % len(self.clients)]
        seq = 0
        while not stop.is_set():
            seq += 1
            try:
                self.one_call(client, rng, "soak-%d-%d-%d" % (seed, index, seq), stop)
            except Exception:  # a bug in the soak itself: report, keep going
                self.stats.fail("soak error: " + traceback.format_exc())
                with self.stats.lock:
                    self.stats.outcomes[("?", "unexpected")] += 1

    def random_array(self, rng, kind, cap):
        n = random_size(rng, min(cap, BYTES_MAX_KEYS if kind == "bytes" else cap))
        return random_keys(rng, kind, n), n

    def one_call(self, client, rng, rid, stop):
        args = self.args
        method = METHODS[rng.choice(len(METHOD_WEIGHTS), p=METHOD_WEIGHTS)]
        r = rng.random()
        mode = "cancel" if r < args.cancel_fraction else (
            "deadline" if r < args.cancel_fraction + args.deadline_fraction else "normal")
        timeout = loguniform(rng, 0.001, 0.5) if mode == "deadline" else args.call_timeout
        descending = bool(rng.random() < 0.5)
        control = CallControl()
        _current.control = control
        kind = KEY_TYPES[rng.integers(len(KEY_TYPES))]
        if method == "SortStream":
            self.stream_call(client, rng, rid, kind, descending, mode, timeout, control)
            return
        if method == "SortTable":
            self.table_call(client, rng, rid, mode, timeout, control)
            return
        if method == "TopK":
            self.top_k_call(client, rng, rid, kind, descending, mode, timeout, control)
            return
        if method == "Sort" and rng.random() < CONVERTED_FRACTION:
            self.converted_call(client, rng, rid, descending, mode, timeout, control)
            return
        if (method == "Sort" and kind != "bytes" and mode == "normal"
                and self.session_client is not None
                and (self.coded_sessions == 0 or rng.random() < CODED_SESSION_FRACTION)):
            self.coded_session_call(rng, rid, kind, descending)
            return
        keys, n = self.random_array(rng, kind, args.max_keys)
        values = None
        if method == "SortPairs" or (method == "SortChunked" and rng.random() < 0.5):
            vkind = KEY_TYPES[rng.integers(len(KEY_TYPES))]
            values = random_keys(rng, vkind, n)
        want_indices = method != "SortPairs" and bool(rng.random() < 0.5)
        big = n > BIG_KEYS
        if big:
            self.big.acquire()
            if stop.is_set():  # waited past the end of the phase: not made
                self.big.release()
                return
        try:
            if mode == "cancel":
                self.canceller.schedule(loguniform(rng, 0.0005, 0.3), control)
            outcome, code, err = self.run(lambda: client.sort_full(
                keys, values, descending, want_indices, request_id=rid,
                chunked=True if method == "SortChunked" else None, timeout=timeout),
                lambda res: verify(keys, values, descending, want_indices, res, rid), mode)
        finally:
            if big:
                self.big.release()
        invoked = control.method or method
        self.record(invoked, outcome, code, err, n, kind, rid, mode)
        self.unary_tally(invoked, outcome)

    def top_k_call(self, client, rng, rid, kind, descending, mode, timeout, control):
        """TopK (largest when descending) of an array, of the rows of a
        matrix or of ragged segments (empty ones too), values a third of the
        time; every segment's kept keys, positions and values checked
        against the first k of its reference sort."""
        keys, n = self.random_array(rng, kind, min(self.args.max_keys, TOP_K_MAX_KEYS))
        k = int(max(1, loguniform(rng, 1, 2 * n + 2)))
        values = None
        if rng.random() < 0.33:  # numeric values: rows reshape them
            values = random_keys(rng, KEY_TYPES[rng.integers(len(KEY_TYPES) - 1)], n)
        lengths = row_length = None
        shape = rng.random()
        if shape < 0.3 and n > 0:
            cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(1, 17))))
            lengths = np.diff(np.concatenate([[0], cuts, [n]])).astype(np.int64)
        elif shape < 0.5 and n > 0 and kind != "bytes":
            row_length = int(rng.integers(1, min(n, 4096) + 1))
            n -= n % row_length
            keys = keys[:n]
            values = None if values is None else values[:n]
        segments = (lengths.tolist() if lengths is not None
                    else [row_length] * (n // row_length) if row_length else [n])

        def call():
            shaped = (lambda a: a.reshape(-1, row_length)) if row_length else (lambda a: a)
            return client.topk_full(shaped(keys), k, largest=descending, return_indices=True,
                                    values=None if values is None else shaped(values),
                                    segment_lengths=lengths, request_id=rid, timeout=timeout)

        def verify_top_k(res):
            want_local, want_global, start = [], [], 0
            for length in segments:
                perm = reference_perm(keys[start:start + length], descending)[:k]
                want_local.append(perm)
                want_global.append(perm + np.uint64(start))
                start += length
            local = np.concatenate(want_local) if want_local else np.empty(0, np.uint64)
            where = np.concatenate(want_global) if want_global else np.empty(0, np.uint64)
            flat = (lambda a: a.reshape(-1)) if row_length else (lambda a: a)
            check("TopK indices", flat(res.indices), local)
            check("TopK keys", flat(res.keys), take(keys, where))
            if values is not None:
                check("TopK values", flat(res.values), take(values, where))
            if res.request_id != rid:
                raise Wrong("request_id %r came back as %r" % (rid, res.request_id))

        if mode == "cancel":
            self.canceller.schedule(loguniform(rng, 0.0005, 0.3), control)
        outcome, code, err = self.run(call, verify_top_k, mode)
        what = "%s top-%d of %d segments" % (kind, k, len(segments))
        self.record("TopK", outcome, code, err, n, what, rid, mode, key_type=False)
        self.unary_tally("TopK", outcome)

    def coded_session_call(self, rng, rid, kind, descending):
        """Sort through a plain session whose sorted keys come back coded."""
        with self.stats.lock:
            self.coded_sessions += 1
        keys, n = self.random_array(rng, kind, self.args.max_keys)
        while n == 0:
            # An empty array is under session_min_bytes=1: the client sends
            # it as a plain Sort, which the server counts as one.
            keys, n = self.random_array(rng, kind, self.args.max_keys)
        want_indices = bool(rng.random() < 0.5)
        outcome, code, err = self.run(lambda: self.session_client.sort_full(
            keys, None, descending, want_indices, request_id=rid, timeout=self.args.call_timeout),
            lambda res: verify(keys, None, descending, want_indices, res, rid), "normal")
        self.record("SortSession", outcome, code, err, n, "%s session (coded keys)" % kind, rid,
                    "normal", key_type=False)
        self.unary_tally("SortSession", outcome)

    def unary_tally(self, invoked, outcome):
        st = self.stats
        with st.lock:
            if outcome in ("ok", "late"):
                st.answered[invoked] += 1
                st.answered_ok[invoked] += 1
            else:
                st.unanswered[invoked] += 1
                if outcome in ("cancelled", "deadline"):
                    st.unanswered_x[invoked] += 1

    def converted_call(self, client, rng, rid, descending, mode, timeout, control):
        """Sort of a converted key type (one message), with the permutation."""
        # The type with the fewest checked answers, then the fewest calls (ties
        # at random): a short run covers all seven, a long one is uniform.
        with self.stats.lock:
            kind = min(CONVERTED_TYPES, key=lambda k: (
                self.stats.ok_key_types[k], self.converted_picks[k], rng.random()))
            self.converted_picks[kind] += 1
        n = random_size(rng, min(self.args.max_keys, CONVERTED_MAX_KEYS))
        keys = random_keys(rng, kind, n, unit=TIME_UNITS[rng.integers(len(TIME_UNITS))])
        nulls = "first" if rng.random() < 0.5 else "last"
        if mode == "cancel":
            self.canceller.schedule(loguniform(rng, 0.0005, 0.3), control)
        outcome, code, err = self.run(lambda: client.sort(
            keys, descending, return_indices=True, request_id=rid, timeout=timeout, nulls=nulls),
            lambda res: verify_converted(keys, descending, nulls, res), mode)
        invoked = control.method or "Sort"
        self.record(invoked, outcome, code, err, n, kind, rid, mode)
        self.unary_tally(invoked, outcome)

    def table_call(self, client, rng, rid, mode, timeout, control):
        table = Table(rng, self.args.max_keys)
        # Sessions run on their own channels, which the cancel hooks do not
        # reach: only calls in the normal mode become table sessions.
        # Until one has been answered, every such table is a session, so
        # that a short soak has some.
        with self.stats.lock:
            first = self.stats.outcomes[("SortSession", "ok")] == 0
        table.session = (table.session or (first and table.fixed_width)) and mode == "normal"
        method = "SortSession" if table.session else "SortTable"
        if mode == "cancel":
            self.canceller.schedule(loguniform(rng, 0.0005, 0.3), control)
        # Likewise a table in regions: until one has been answered, every
        # fixed-width table not going as a session (rare enough otherwise,
        # about 7% of tables, that a short soak could see none: CI did).
        with self.stats.lock:
            first_region = self.stats.ok_table_features["in regions"] == 0
        table.region = ((table.region or (first_region and table.fixed_width and mode == "normal"))
                        and self.args.table_regions and not table.session)
        try:
            outcome, code, err = self.run(lambda: table.call(client, rid, timeout), table.verify,
                                          mode)
        finally:
            table.release()
        what = "table%s of %s by %s" % (" session" if table.session
                                       else " in regions" if table.region else "", ",".join(table.types),
                                       ",".join("%s%s/%s" % (table.types[c], "" if a else " desc", nl)
                                                for c, a, nl in zip(table.by, table.ascending,
                                                                    table.nulls)))
        self.record(method, outcome, code, err, table.rows, what, rid, mode, key_type=False)
        self.unary_tally(method, outcome)
        st = self.stats
        with st.lock:
            key_kinds = set(table.types[c] for c in table.by)
            for k in key_kinds:
                st.table_types[k] += 1
            # (by the key_type label of SortTable requests; a session's is
            # its own)
            if table.session:
                pass
            elif outcome in ("ok", "late"):
                st.table_answered[table.label] += 1
            else:
                st.table_unanswered[table.label] += 1
            if outcome == "ok":
                for k in key_kinds:
                    st.ok_table_types[k] += 1
                for f in table.features:
                    st.ok_table_features[f] += 1
                if table.region:
                    st.ok_table_features["in regions"] += 1

    def stream_call(self, client, rng, rid, kind, descending, mode, timeout, control):
        want_indices = bool(rng.random() < 0.5)
        items = {}
        for i in range(int(rng.integers(2, 13))):
            k = kind if rng.random() < 0.5 else KEY_TYPES[rng.integers(len(KEY_TYPES))]
            keys, _ = self.random_array(rng, k, min(self.args.max_keys, STREAM_ITEM_MAX_KEYS))
            items["%s.%d" % (rid, i)] = (k, keys)
        answered = answered_ok = 0

        def run():
            nonlocal answered, answered_ok
            for item_id, result in client.sort_stream(
                    [(i, keys) for i, (_, keys) in items.items()], descending, want_indices,
                    raise_errors=False, timeout=timeout):
                answered += 1
                if isinstance(result, RequestError):
                    raise result  # an error response: the server answered it
                k, keys = items[item_id]
                got = result[0] if want_indices else result
                perm = reference_perm(keys, descending)
                check("keys of %s" % item_id, got, take(keys, perm))
                if want_indices:
                    check("indices of %s" % item_id, result[1], perm)
                answered_ok += 1
            if answered != len(items):
                raise Wrong("%d of %d stream requests answered" % (answered, len(items)))
        if mode == "cancel":
            self.canceller.schedule(loguniform(rng, 0.0005, 0.3), control)
        outcome, code, err = self.run(run, None, mode)
        n = sum(len(keys) for _, keys in items.values())
        self.record("SortStream", outcome, code, err, n, kind, rid, mode)
        st = self.stats
        with st.lock:
            st.answered["SortStream"] += answered
            st.answered_ok["SortStream"] += answered_ok
            sent = max(control.items_sent, answered)
            st.unanswered["SortStream"] += sent - answered
            if outcome in ("cancelled", "deadline"):
                st.unanswered_x["SortStream"] += sent - answered

    def run(self, call, verify_fn, mode):
        """Runs one call; (outcome, status code name or None, error text)."""
        try:
            res = call()
            if verify_fn is not None:
                verify_fn(res)
            return ("late" if mode != "normal" else "ok"), None, None
        except Wrong as e:
            return "wrong", None, str(e)
        except ClientCancelled:
            return ("cancelled" if mode == "cancel" else "unexpected"), "CANCELLED", "cancelled"
        except SortdError as e:
            code = e.code.name if isinstance(e.code, grpc.StatusCode) else str(e.code)
            if mode == "cancel" and code == "CANCELLED" and not isinstance(e, RequestError):
                return "cancelled", code, None
            if mode == "deadline" and code in ("DEADLINE_EXCEEDED", "CANCELLED") \
                    and not isinstance(e, RequestError):
                return "deadline", code, None
            return "unexpected", code, str(e)

    def record(self, method, outcome, code, err, n, kind, rid, mode, key_type=True):
        st = self.stats
        with st.lock:
            st.outcomes[(method, outcome)] += 1
            if key_type:
                st.key_types[kind] += 1
                if outcome == "ok":
                    st.ok_key_types[kind] += 1
            if outcome in ("ok", "late"):
                st.keys += n
            if outcome == "unexpected":
                st.codes[(method, code)] += 1
        if outcome in ("unexpected", "wrong"):
            st.fail("%s %s (%s, %d keys, mode %s): %s %s" % (
                method, rid, kind, n, mode, outcome, err))


# --------------------------------------------------------------------------
# Server observation

LABELS = re.compile(r'(\w+)="([^"]*)"')


def burst_phase(target, metrics_url, args, own_server):
    """Burst (docs/operations.md, "Admission"): --burst_clients clients each
    sort their own uint32 array at once, more than the server admits at
    once; every answer must be exact (sorted, and the same multiset: length,
    sums of keys and squares) and nothing refused. Returns failures."""
    limit = scrape_value(metrics_url, "sortd_inflight_bytes_limit") if metrics_url else None
    n = args.burst_keys if not limit else int(min(args.burst_keys, limit // 24))
    arrays = [np.random.default_rng(args.seed + 100 + i).integers(0, 2**32, n, dtype=np.uint32)
              for i in range(args.burst_clients)]
    results, errors = [None] * len(arrays), []
    most_waiting = [0.0]
    stop = threading.Event()

    def watch():
        while metrics_url and not stop.is_set():
            most_waiting[0] = max(most_waiting[0],
                                  scrape_value(metrics_url, "sortd_admission_waiting_requests") or 0)
            time.sleep(0.01)

    def run(i):
        try:
            with Client(target, timeout=args.call_timeout) as c:
                results[i] = c.sort(arrays[i])
        except Exception as e:  # reported as a failure
            errors.append("burst client %d: %s" % (i, str(e).splitlines()[0][:200]))

    t0 = time.time()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(arrays))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    seconds = time.time() - t0

    def fingerprint(a):
        w = a.astype(np.uint64)
        return len(a), int(np.sum(w, dtype=np.uint64)), int(np.sum(w * w, dtype=np.uint64))

    failures = list(errors)
    exact = 0
    for i, got in enumerate(results):
        if got is None:
            continue
        if fingerprint(got) == fingerprint(arrays[i]) and bool(np.all(got[1:] >= got[:-1])):
            exact += 1
        else:
            failures.append("burst client %d: wrong answer" % i)
    print("burst: %d clients x %d uint32 keys against a %s-byte limit: %d exact in %.1f s; "
          "at most %d waiting for admission" % (len(arrays), n, "%d" % limit if limit else "?",
                                                exact, seconds, most_waiting[0]), flush=True)
    if own_server and metrics_url and most_waiting[0] < 1:
        failures.append("burst: no request waited for admission (the phase tested no queue)")
    return failures


def scrape_value(url, name):
    """One unlabelled sample of a /metrics page, or None."""
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def scrape(url):
    return urllib.request.urlopen(url, timeout=10).read().decode()


def gauge(page, name):
    for line in page.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def request_counts(page):
    """{method: Counter(code -> count)} from sortd_requests_total, and the
    same by method and key type under the keys (method, key_type)."""
    out = collections.defaultdict(collections.Counter)
    for line in page.splitlines():
        if line.startswith("sortd_requests_total{"):
            labels = dict(LABELS.findall(line[:line.rindex("}")]))
            value = float(line.rsplit(" ", 1)[1])
            out[labels["method"]][labels["code"]] += value
            out[(labels["method"], labels.get("key_type", "?"))][labels["code"]] += value
    return out


class Server:
    """The server under test: RSS, in-flight gauge, counters."""

    def __init__(self, metrics_url, pid):
        self.metrics_url, self.pid = metrics_url, pid

    def rss_mib(self):
        if self.pid:
            try:
                with open("/proc/%d/status" % self.pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            return int(line.split()[1]) / 1024
            except OSError:
                return None
        if self.metrics_url:
            value = gauge(scrape(self.metrics_url), "process_resident_memory_bytes")
            return None if value is None else value / MIB
        return None

    def inflight(self):
        return gauge(scrape(self.metrics_url), "sortd_inflight_requests") if self.metrics_url else 0

    def wait_idle(self, timeout=120):
        """Waits for sortd_inflight_requests == 0; seconds taken (None: never)."""
        start = time.time()
        while time.time() - start < timeout:
            if self.inflight() == 0:
                return time.time() - start
            time.sleep(0.05)
        return None

    def watch_rss(self, limit, target=None):
        """Samples the RSS every 0.2 s for up to `limit` s; stops once it is
        <= target, or (no target reached) once it has not fallen by more than
        1% over the last 2 s. Returns [(seconds, MiB)]."""
        samples, start = [], time.time()
        while True:
            rss = self.rss_mib()
            if rss is None:
                return samples
            t = time.time() - start
            samples.append((t, rss))
            if target is not None and rss <= target:
                return samples
            window = [r for (s, r) in samples if s >= t - 2.0]
            if t >= 2.5 and max(window) - min(window) <= 0.01 * max(window):
                return samples
            if t >= limit:
                return samples
            time.sleep(0.2)

    def counts(self):
        """sortd_requests_total once it stops changing (the server records a
        call after admission has released it, so the last ones may lag)."""
        if not self.metrics_url:
            return None
        last = request_counts(scrape(self.metrics_url))
        for _ in range(50):
            time.sleep(0.2)
            now = request_counts(scrape(self.metrics_url))
            if now == last:
                return now
            last = now
        return last


# --------------------------------------------------------------------------

def run_phase(soaker, seconds, clients, seed, on_tick=None):
    stop = threading.Event()
    threads = [threading.Thread(target=soaker.worker, args=(i, stop, seed * 1000 + i),
                                name="soak-%d" % i, daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    end = time.time() + seconds
    while time.time() < end:
        if on_tick is not None:
            on_tick()
        time.sleep(min(0.5, max(0.0, end - time.time())))
    stop.set()
    stopped = time.time()
    for t in threads:
        t.join()
    return time.time() - stopped


def fmt_samples(samples):
    if not samples:
        return "n/a"
    return "%.0f MiB at +%.1f s" % (samples[-1][1], samples[-1][0])


def coverage(stats, min_ok, phase_calls):
    """What must have happened: calls in each phase, every method and key type
    answered and checked at least min_ok times, the soak's tallies agreeing
    with each other. Returns failures."""
    failures = []
    for phase, calls in phase_calls:
        if calls == 0:
            failures.append("no calls were made in the %s" % phase)
    for m in METHODS:
        made = sum(v for (mm, _), v in stats.outcomes.items() if mm == m)
        ok = stats.outcomes[(m, "ok")]
        if ok < min_ok:
            failures.append("%s: %d calls answered and checked (of %d made), fewer than "
                            "--min_ok=%d" % (m, ok, made, min_ok))
        if m == "SortStream":
            # answered counts the streams' requests: each stream answered OK
            # had at least two.
            if stats.answered_ok[m] < 2 * ok:
                failures.append("SortStream: %d requests answered OK on %d streams answered OK" % (
                    stats.answered_ok[m], ok))
        elif stats.answered[m] + stats.unanswered[m] != made:
            failures.append("%s: %d answered + %d unanswered != %d calls made (the soak's "
                            "tallies)" % (m, stats.answered[m], stats.unanswered[m], made))
    for kind in KEY_TYPES + CONVERTED_TYPES:
        if stats.ok_key_types[kind] < min_ok:
            failures.append("key type %s: %d calls answered and checked, fewer than --min_ok=%d" % (
                kind, stats.ok_key_types[kind], min_ok))
    for kind in TABLE_TYPES:
        if stats.ok_table_types[kind] < min_ok:
            failures.append("SortTable: %d tables with a %s key answered and checked, fewer than "
                            "--min_ok=%d" % (stats.ok_table_types[kind], kind, min_ok))
    for feature in TABLE_FEATURES:
        if stats.ok_table_features[feature] < min_ok:
            failures.append("SortTable: %d tables with %s answered and checked, fewer than "
                            "--min_ok=%d" % (stats.ok_table_features[feature], feature, min_ok))
    if stats.table_regions and stats.ok_table_features["in regions"] < min_ok:
        failures.append("SortTable: %d tables in regions answered and checked, fewer than "
                        "--min_ok=%d" % (stats.ok_table_features["in regions"], min_ok))
    if min_ok > 0 and stats.keys == 0:
        failures.append("no keys were sorted and checked")
    return failures


def reconcile(stats, before, after, min_ok=0):
    """Checks the counter increase per method; returns (rows, failures)."""
    rows, failures = [], []
    for m in METHODS:
        inc = collections.Counter({c: after.get(m, {}).get(c, 0) - before.get(m, {}).get(c, 0)
                                   for c in set(after.get(m, {})) | set(before.get(m, {}))})
        total = sum(inc.values())
        ok, canc = inc["OK"], inc["CANCELLED"] + inc["DEADLINE_EXCEEDED"]
        other = total - ok - canc
        answered, unanswered = stats.answered[m], stats.unanswered[m]
        x = stats.unanswered_x[m]
        unexpected = sum(v for (mm, _), v in stats.codes.items() if mm == m)
        problems = []
        if total < min_ok:
            problems.append("the server counted %d requests, fewer than --min_ok=%d" % (
                total, min_ok))
        if not answered <= total <= answered + unanswered:
            problems.append("total %d not in [%d, %d]" % (total, answered, answered + unanswered))
        if ok < stats.answered_ok[m]:
            problems.append("OK %d < %d answered OK" % (ok, stats.answered_ok[m]))
        if ok > stats.answered_ok[m] + unanswered:
            problems.append("OK %d > %d answered OK + %d unanswered" % (
                ok, stats.answered_ok[m], unanswered))
        if canc > x:
            problems.append("CANCELLED %d > %d cancelled/deadline" % (canc, x))
        if other > unexpected:
            problems.append("%d other codes %s, %d unexpected seen by the client" % (
                other, dict((c, v) for c, v in inc.items() if c not in (
                    "OK", "CANCELLED", "DEADLINE_EXCEEDED") and v), unexpected))
        rows.append((m, answered, unanswered, total, ok, canc, other,
                     "ok" if not problems else "MISMATCH"))
        failures += ["%s: %s" % (m, p) for p in problems]
    # SortTable by the server's key_type label (the first key as sorted).
    labels = set(stats.table_answered) | set(stats.table_unanswered) | set(
        k[1] for k in set(after) | set(before) if isinstance(k, tuple) and k[0] == "SortTable")
    for label in sorted(labels):
        key = ("SortTable", label)
        inc = collections.Counter({c: after.get(key, {}).get(c, 0) - before.get(key, {}).get(c, 0)
                                   for c in set(after.get(key, {})) | set(before.get(key, {}))})
        total, ok = sum(inc.values()), inc["OK"]
        answered, unanswered = stats.table_answered[label], stats.table_unanswered[label]
        if label == "none":
            # A call given up before its request arrived: the server never
            # saw its columns. Only the cancelled/deadline calls may be here.
            unanswered = stats.unanswered_x["SortTable"]
        problems = []
        if not answered <= total <= answered + unanswered:
            problems.append("total %d not in [%d, %d]" % (total, answered, answered + unanswered))
        ok_max = answered + (0 if label == "none" else unanswered)
        if not answered <= ok <= ok_max:
            problems.append("OK %d not in [%d, %d]" % (ok, answered, ok_max))
        rows.append(("  kt=" + label, answered, unanswered, total, ok,
                     inc["CANCELLED"] + inc["DEADLINE_EXCEEDED"],
                     total - ok - inc["CANCELLED"] - inc["DEADLINE_EXCEEDED"],
                     "ok" if not problems else "MISMATCH"))
        failures += ["SortTable key_type=%s: %s" % (label, p) for p in problems]
    total_x = sum(stats.unanswered_x.values())
    total_canc = sum(r[5] for r in rows if not r[0].startswith(" "))
    if total_x > 50 and total_canc == 0:
        failures.append("%d calls cancelled or past their deadline, none counted CANCELLED" % total_x)
    return rows, failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sortd", default=os.environ.get("SORTD_BIN"),
                   help="sortd binary to start (default $SORTD_BIN)")
    p.add_argument("--target", help="host:port of a running sortd (instead of --sortd)")
    p.add_argument("--metrics_url", help="its /metrics URL (with --target)")
    p.add_argument("--pid", type=int, help="its pid, to read its RSS (with --target, local)")
    p.add_argument("--duration", type=float, default=60, help="seconds of load")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds of warm-up load (default: duration/6, 2..10)")
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--channels", type=int, default=4, help="gRPC channels shared by the clients")
    p.add_argument("--max_keys", type=int, default=4 << 20)
    p.add_argument("--big_slots", type=int, default=2,
                   help="calls of more than 1 Mi keys at once (bounds the memory used)")
    p.add_argument("--cancel_fraction", type=float, default=0.05)
    p.add_argument("--deadline_fraction", type=float, default=0.05)
    p.add_argument("--call_timeout", type=float, default=120,
                   help="deadline of the other calls: past it, a call is unexpected")
    p.add_argument("--idle_wait", type=float, default=15,
                   help="seconds to watch the RSS fall once nothing is in flight")
    p.add_argument("--require_rss", action="store_true",
                   help="fail unless the RSS returns within 10%% of the post-warm-up level")
    p.add_argument("--table_regions", action=argparse.BooleanOptionalAction, default=None,
                   help="send a quarter of the fixed-width tables from shared arrays (system "
                        "regions; default: on for the soak's own sortd, which it starts with "
                        "--shared_memory=system, off with --target)")
    p.add_argument("--burst_clients", type=int, default=6,
                   help="after the load: this many clients each sort one large array at once "
                        "(0: no burst phase)")
    p.add_argument("--burst_keys", type=int, default=8 << 20,
                   help="uint32 keys per burst array, at most a 24th of the server's "
                        "--max_inflight_bytes (so that a few run at once and the rest queue)")
    p.add_argument("--inflight_bytes", type=int, default=256 << 20,
                   help="--max_inflight_bytes of the soak's own sortd (its load and burst "
                        "phases wait in the admission queue)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--min_ok", type=int, default=1,
                   help="calls answered and checked that each RPC and each key type must have "
                        "(0: none required)")
    args, extra = p.parse_known_args()
    extra = [f for f in extra if f != "--"]
    if args.warmup is None:
        args.warmup = min(10.0, max(2.0, args.duration / 6))
    if not args.target and not args.sortd:
        p.error("give --sortd (or SORTD_BIN) or --target")

    server_proc = None
    if args.target and args.table_regions is None:
        args.table_regions = False
    if args.target:
        target, metrics_url, pid = args.target, args.metrics_url, args.pid
        if not metrics_url:
            print("warning: no --metrics_url: in-flight and counters not checked")
    else:
        if not any(f.startswith("--key_encoding") for f in extra):
            extra.append("--key_encoding=always")  # the coded sessions coded on loopback
        if not any(f.startswith("--max_inflight_bytes") for f in extra):
            extra.append("--max_inflight_bytes=%d" % args.inflight_bytes)
        if not any(f.startswith("--shared_memory") for f in extra):
            extra.append("--shared_memory=system")
            if args.table_regions is None:
                args.table_regions = True
        server_proc = SortdProcess(args.sortd, *extra).start()
        target, metrics_url, pid = server_proc.target, server_proc.metrics_url, server_proc.proc.pid
    server = Server(metrics_url, pid)
    stats = Stats()
    stats.table_regions = bool(args.table_regions)
    canceller = Canceller()
    canceller.start()
    # Half the channels upload SortChunked in 64 KiB chunks (many messages).
    clients = [hooked_client(target, (2 << 20) if i % 2 == 0 else (64 << 10))
               for i in range(max(1, args.channels))]
    session_client = Client(target, service_config=None, session_min_bytes=1, compress=True)
    soaker = Soaker(args, clients, stats, canceller, session_client)
    failures = []
    rss = {}
    server_exit = None
    started = time.time()
    try:
        before = server.counts() if metrics_url else None
        print("soak: target %s, %d clients, max_keys %d, warm-up %.0f s, load %.0f s%s" % (
            target, args.clients, args.max_keys, args.warmup, args.duration,
            "" if server_proc is None else " (sortd pid %d started here)" % pid), flush=True)
        rss["start"] = server.rss_mib()
        run_phase(soaker, args.warmup, args.clients, args.seed)
        warm_calls = sum(stats.outcomes.values())
        warm_ok = sum(v for (_, o), v in stats.outcomes.items() if o == "ok")
        idle1 = server.wait_idle()
        if idle1 is None:
            failures.append("requests still in flight 120 s after the warm-up")
        warm = server.watch_rss(args.idle_wait)
        rss["warm"] = warm[-1][1] if warm else None
        print("warm-up: %d calls; idle after %.1f s; RSS %s" % (
            warm_calls, idle1 or -1, fmt_samples(warm)), flush=True)

        during = []

        def tick():
            v = server.rss_mib()
            if v is not None:
                during.append(v)
        t0 = time.time()
        keys0 = stats.keys
        tail = run_phase(soaker, args.duration, args.clients, args.seed + 1, tick)
        load_seconds = time.time() - t0
        load_calls = sum(stats.outcomes.values()) - warm_calls
        load_ok = sum(v for (_, o), v in stats.outcomes.items() if o == "ok") - warm_ok
        idle2 = server.wait_idle()
        if idle2 is None:
            failures.append("requests still in flight 120 s after the load")
        target_rss = rss["warm"] * 1.10 if rss.get("warm") else None
        after = server.watch_rss(args.idle_wait, target_rss)
        rss["after"] = after[-1][1] if after else None
        after_counts = server.counts() if metrics_url else None
        if args.burst_clients > 0:
            failures += burst_phase(target, metrics_url, args, own_server=server_proc is not None)
    finally:
        canceller.stop()
        for c in clients + [session_client]:
            c.close()
        if server_proc is not None:
            t = time.time()
            try:
                server_exit = (server_proc.terminate(timeout=60), time.time() - t)
            except Exception as e:  # did not exit
                server_exit = ("%s" % e, time.time() - t)
            log = server_proc.read_log()
            server_proc.__exit__(None, None, None)

    # ---- summary -------------------------------------------------------
    outcomes = ("ok", "late", "cancelled", "deadline", "unexpected", "wrong")
    print()
    print("Calls (client's view; SortStream counts streams; 'late' = cancelled or short deadline, "
          "answered anyway and checked)")
    print("%-12s %8s" % ("method", "calls") + "".join("%11s" % o for o in outcomes))
    for m in METHODS + ("?",):
        row = [stats.outcomes[(m, o)] for o in outcomes]
        if m == "?" and not sum(row):
            continue
        print("%-12s %8d" % (m, sum(row)) + "".join("%11d" % v for v in row))
    tot = [sum(stats.outcomes[(m, o)] for m in METHODS + ("?",)) for o in outcomes]
    print("%-12s %8d" % ("total", sum(tot)) + "".join("%11d" % v for v in tot))
    print("load phase: %d calls in %.1f s (the last %.1f s finishing calls in progress; "
          "%.0f calls/s), %.1f M keys sorted and checked (%.2f M keys/s); warm-up %d calls" % (
              load_calls, load_seconds, tail, load_calls / load_seconds,
              (stats.keys - keys0) / 1e6, (stats.keys - keys0) / 1e6 / load_seconds, warm_calls))
    print("key types (calls, of which answered OK and checked): " + ", ".join(
        "%s %d/%d" % (k, stats.key_types[k], stats.ok_key_types[k]) for k in KEY_TYPES))
    print("converted key types (Sort with indices): " + ", ".join(
        "%s %d/%d" % (k, stats.key_types[k], stats.ok_key_types[k]) for k in CONVERTED_TYPES))
    print("SortTable key column types (tables, of which answered OK and checked): " + ", ".join(
        "%s %d/%d" % (k, stats.table_types[k], stats.ok_table_types[k]) for k in TABLE_TYPES)
        + "; tables OK with " + ", ".join(
            "%s %d" % (f, stats.ok_table_features[f]) for f in TABLE_FEATURES + ("in regions",)))
    if args.min_ok > 0:
        phases = ((("warm-up", warm_calls),) if args.warmup > 0 else ()) + (("load phase", load_calls),)
        failures += coverage(stats, args.min_ok, phases)
        if load_ok == 0:
            failures.append("no call of the load phase was answered OK")
    unexpected, wrong = tot[outcomes.index("unexpected")], tot[outcomes.index("wrong")]
    if unexpected or wrong:
        failures.append("%d unexpected errors, %d wrong answers" % (unexpected, wrong))
        for (m, c), v in sorted(stats.codes.items(), key=str):
            print("  unexpected %s %s: %d" % (m, c, v))

    if after_counts is not None:
        rows, problems = reconcile(stats, before, after_counts, args.min_ok)
        print()
        print("Server counters (sortd_requests_total increase; SortStream per request on a stream; "
              "kt=: SortTable by key_type label)")
        print("%-12s %9s %11s %8s %8s %10s %7s  %s" % (
            "method", "answered", "unanswered", "counted", "OK", "CANCELLED", "other", "check"))
        for r in rows:
            print("%-12s %9d %11d %8d %8d %10d %7d  %s" % r)
        x = sum(stats.unanswered_x.values())
        rows = [r for r in rows if not r[0].startswith(" ")]  # per method only
        counted = sum(r[3] for r in rows)
        answered = sum(r[1] for r in rows)
        canc = sum(r[5] for r in rows)
        late_ok = sum(r[4] for r in rows) - sum(stats.answered_ok.values())
        print("cancelled/deadline requests: %d; the server counted %d CANCELLED, %d OK "
              "(finished before the cancellation reached it), %d never (gone before it saw them)" % (
                  x, canc, late_ok, sum(stats.unanswered.values()) - (counted - answered)))
        failures += problems
    else:
        print("\nServer counters: not checked (no metrics URL)")
        if server_proc is not None:
            failures.append("the server's counters were not read (sortd started here has no metrics URL)")

    print()
    during_txt = ("min %.0f / mean %.0f / max %.0f MiB over %d samples" % (
        min(during), sum(during) / len(during), max(during), len(during))) if during else "n/a"
    if rss.get("warm") and rss.get("after"):
        ratio = rss["after"] / rss["warm"]
        verdict = "returned within 10%" if ratio <= 1.10 else "NOT within 10%"
        print("RSS: start %.0f MiB; after warm-up (idle) %.0f MiB; during load %s; after load "
              "(idle) %s: %.2fx the warm-up level, %s" % (
                  rss["start"] or 0, rss["warm"], during_txt, fmt_samples(after), ratio, verdict))
        if ratio > 1.10 and args.require_rss:
            failures.append("RSS %.0f MiB after load, over 110%% of %.0f MiB after warm-up" % (
                rss["after"], rss["warm"]))
    else:
        print("RSS: not available (no --pid, and no process_resident_memory_bytes on /metrics)")
        if args.require_rss:
            failures.append("--require_rss without a way to read the RSS")

    if server_exit is not None:
        code, secs = server_exit
        print("sortd: SIGTERM -> exit %s after %.1f s" % (code, secs))
        if code != 0 or "drained" not in log:
            failures.append("sortd did not drain and exit 0 (exit %s)" % code)
    print("wall time %.0f s" % (time.time() - started))
    for f in stats.failures:
        print("FAIL: " + f.rstrip())
    for f in failures:
        print("FAIL: " + f)
    if server_exit is not None and (failures or stats.failures):
        print("--- sortd log (last 40 lines) ---")
        print("\n".join(log.splitlines()[-40:]))
    ok = not failures and not stats.failures
    print("soak: " + ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
