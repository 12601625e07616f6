"""dask on sortd: dask DataFrames and 1-D dask arrays sorted by a pool of
sortd replicas (docs/distributed.md).

- `partition_sort(df, by, ...)`: a pandas frame sorted by a sortd replica,
  for dask's own `ddf.sort_values(col, sort_function=partition_sort,
  sort_function_kwargs={"target": ...})` (dask's range shuffle, each
  partition sorted remotely).
- `sort_values(ddf, by, ascending=True, na_position="last", target=...)`:
  our own sample sort. Several key columns with their own directions,
  strings, nulls, every dtype `sortd_client.pandas` takes; skew-safe: rows
  are ordered by (key, input partition, row), so a key held by most rows
  spreads over many output partitions instead of landing on one.
- `sort(x, descending=False, return_indices=False, target=...)` and
  `argsort(...)` for 1-D dask arrays: a dask array in global order with
  known chunk sizes.
- `topk(x, k, largest=True, return_indices=False, target=...)`: the first k
  of a 1-D dask array's stable order: every chunk's own first k by a
  replica's TopK, then the first k of those candidates (docs/api.md,
  "Top-k"); no shuffle, k per chunk moved.

The sample sort, in three steps (each a dask task per partition):
1. every input partition draws a seeded random sample of its rows' keys,
   tagged (partition, row); the samples are gathered here (eagerly, as
   dask's own sort computes its quantiles) and weighted by partition size
   into npartitions - 1 splitters;
2. every input partition is cut into npartitions pieces by the splitters
   (frames: sorted by a replica, then cut where binary search finds each
   splitter; arrays: each row's destination computed with numpy, then a
   stable split);
3. every output partition concatenates its pieces in input order and has a
   replica sort them (stable): rows equal on every key stay in (input
   partition, row) order, the order a stable sort of the whole would give.
Arrays make one more eager pass, counting each output partition's rows, so
that the result's chunk sizes are known.

Each worker process holds one `Client` per target, made there on first use
(never pickled), which load-balances over every address the target resolves
to (`dns:///` of a headless Service, `ipv4:a:p,b:p`); a call that fails with
UNAVAILABLE (a replica that died mid-call) is made again, with backoff, and
goes to a live replica. Answers are deterministic (stable sorts, seeded
samples), so dask's own task retries are safe too. Partitions below
`local_rows` rows (and dask's meta calls on empty frames) are sorted here,
by pandas or numpy, in the same order.
"""
import functools
import os
import random
import threading
import time

import numpy as np

from . import pandas as _frames

# Partitions with fewer rows are sorted in the worker (a round trip costs
# more than pandas' or numpy's sort of them).
DEFAULT_LOCAL_ROWS = 1 << 14
# Samples drawn per output partition, over all input partitions: the
# splitters' error is about 1/sqrt of it (skew ~1.1x at 256).
SAMPLES_PER_OUTPUT = 256
# At most this many sampled rows in all (their keys are compared in Python).
MAX_SAMPLES = 1 << 18
# Calls that fail with UNAVAILABLE are made this many times in all.
ATTEMPTS = 6

_clients = {}
_clients_lock = threading.Lock()


def client_for(target, options=None):
    """This process's Client for target (options: Client keyword arguments),
    made on first use. A forked child makes its own."""
    from .client import Client

    key = (os.getpid(), target, tuple(sorted((options or {}).items())))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = Client(target, **(options or {}))
        return client


def remote(target, call, options=None, attempts=ATTEMPTS):
    """call(client) on target's Client, made again (jittered exponential
    backoff, 50 ms to 2 s) while it fails with UNAVAILABLE: a replica gone
    mid-call; the channel's round-robin then picks a live one."""
    import grpc

    from .errors import SortdError

    delay = 0.05
    for attempt in range(attempts):
        try:
            return call(client_for(target, options))
        except (SortdError, grpc.RpcError) as err:
            code = err.code if isinstance(err, SortdError) else err.code()
            if code != grpc.StatusCode.UNAVAILABLE or attempt + 1 == attempts:
                raise
        time.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(2 * delay, 2.0)


# ---------------------------------------------------------------- frames

def _sorted_permutation(frame, keys, directions, na_position, target, local_rows, options):
    """int64 positions of frame's rows in sortd's stable table order."""
    if len(frame) < max(local_rows, 1) or target is None:
        order = frame[keys].reset_index(drop=True).sort_values(
            keys, ascending=directions, na_position=na_position, kind="stable")
        return np.asarray(order.index, dtype=np.int64)
    return remote(target, lambda client: _frames.sort_permutation(
        frame, keys, directions, na_position, client=client), options)


def partition_sort(df, by, ascending=True, na_position="last", target=None,
                   local_rows=DEFAULT_LOCAL_ROWS, client_options=None, **ignored):
    """df.sort_values(by, ascending, na_position, kind="stable"), sorted by a
    sortd replica of `target` (below local_rows rows, and without a target,
    by pandas here). A sort_function for dask's own sort_values; other
    keywords dask passes are ignored."""
    keys, directions = _frames.keys_and_directions(by, ascending, na_position)
    perm = _sorted_permutation(df, keys, directions, na_position, target, local_rows,
                               client_options)
    return _frames._take(df, perm)


@functools.total_ordering
class _Descending:
    """A value that compares in reverse."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return self.value == other.value

    def __lt__(self, other):
        return other.value < self.value


class _RowKeys:
    """Rows' sort keys as Python tuples whose order is sortd's table order
    (that of sortd_client.pandas.sort_values): per key column a null marker
    placed by na_position, then the value, reversed for descending keys.
    Numeric columns are converted once (numpy); string columns a row at a
    time (only sampled and binary-searched rows are read)."""

    def __init__(self, frame, keys, directions, na_position):
        import pandas as pd

        self._null = (2,) if na_position == "last" else (0,)
        self._columns = []
        for key, ascending in zip(keys, directions):
            series = frame[key]
            # object, "string" and pandas 3's default "str": read by row.
            if series.dtype == object or isinstance(series.dtype, pd.StringDtype):
                self._columns.append((series, None, ascending))
                continue
            values, mask = _frames._key_column(series)
            if values.dtype.kind in "mM":
                values = values.view(np.int64)
                nat = values == np.iinfo(np.int64).min
                mask = nat if mask is None else mask | nat
            self._columns.append((values, mask, ascending))

    def key(self, row):
        import pandas as pd

        out = []
        for values, mask, ascending in self._columns:
            if mask is None and not isinstance(values, np.ndarray):
                value = values.iat[row]
                if pd.isna(value):
                    out.append(self._null)
                    continue
                if isinstance(value, str):
                    value = value.encode("utf-8", "surrogatepass")
            elif mask is not None and mask[row]:
                out.append(self._null)
                continue
            else:
                value = values[row]
                value = value.item() if isinstance(value, np.generic) else value
            out.append((1, value if ascending else _Descending(value)))
        return tuple(out)


def _sample_count(partitions, outputs):
    """Rows sampled from each input partition (at most)."""
    per_partition = -(-SAMPLES_PER_OUTPUT * outputs // max(partitions, 1))
    per_partition = max(per_partition, 4 * outputs, 64)
    return max(1, min(per_partition, MAX_SAMPLES // max(partitions, 1)))


def _sample_rows(n, count, seed, index):
    rng = np.random.default_rng([seed, index])
    if n <= count:
        return np.arange(n)
    return np.sort(rng.choice(n, size=count, replace=False))


def _frame_sample(frame, index, keys, directions, na_position, count, seed):
    """(rows, [(key, index, row), ...]) of a sample of frame's rows."""
    n = len(frame)
    rows = _sample_rows(n, count, seed, index)
    # Only the sampled rows' keys are converted.
    reader = _RowKeys(frame.iloc[rows], keys, directions, na_position)
    return n, [reader.key(j) + (index, int(r)) for j, r in enumerate(rows)]


def _splitters(samples, outputs):
    """outputs - 1 splitters from (rows, sample) pairs: each sampled row
    stands for rows / len(sample) rows of its partition; splitter j is the
    first sampled key at which the weight below reaches j / outputs of all.
    Output p receives the keys in [splitter p-1, splitter p)."""
    total = sum(n for n, _ in samples)
    weighted = sorted(((key, n / len(sample)) for n, sample in samples if sample for key in sample),
                      key=lambda kw: kw[0])
    out = []
    below = 0.0
    for key, weight in weighted:
        below += weight
        while len(out) < outputs - 1 and below >= (len(out) + 1) * total / outputs:
            out.append(key)
    # Rounding left one short, or there are no rows (then () compares
    # with nothing: every piece is empty).
    while len(out) < outputs - 1:
        out.append(weighted[-1][0] if weighted else ())
    return out


class _Splitters:
    """The splitters, as one opaque task argument (dask does not look
    inside it for keys)."""

    def __init__(self, keys):
        self.keys = keys

    def __len__(self):
        return len(self.keys)


def _split_frame(frame, index, splitters, keys, directions, na_position, target, local_rows,
                 options):
    """frame's rows sorted and cut into len(splitters) + 1 pieces: piece p
    holds the rows whose (key, index, row) lies in [splitter p-1, splitter p)."""
    perm = _sorted_permutation(frame, keys, directions, na_position, target, local_rows, options)
    reader = _RowKeys(frame, keys, directions, na_position)

    def key_at(j):
        row = int(perm[j])
        return reader.key(row) + (index, row)

    def first_not_below(splitter, lo):
        # bisect_left over the sorted rows (bisect's key= needs Python 3.10).
        hi = len(perm)
        while lo < hi:
            mid = (lo + hi) // 2
            if key_at(mid) < splitter:
                lo = mid + 1
            else:
                hi = mid
        return lo

    cuts = [0]
    for splitter in splitters.keys:
        cuts.append(first_not_below(splitter, cuts[-1]))
    cuts.append(len(perm))
    ordered = _frames._take(frame, perm)
    return [ordered.iloc[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def _merge_frame(pieces, meta, keys, directions, na_position, target, local_rows, options):
    """One output partition: its pieces, in input order, sorted (stable)."""
    import pandas as pd

    pieces = [piece for piece in pieces if len(piece)]
    if not pieces:
        return meta
    frame = pieces[0] if len(pieces) == 1 else pd.concat(pieces)
    perm = _sorted_permutation(frame, keys, directions, na_position, target, local_rows, options)
    return _frames._take(frame, perm)


def sort_values(ddf, by, ascending=True, na_position="last", target=None, npartitions=None,
                local_rows=DEFAULT_LOCAL_ROWS, client_options=None, seed=0):
    """ddf sorted by the columns `by` (a name or a list, most significant
    first; ascending one bool or one per key; na_position "last" or
    "first"), as pandas' stable sort_values of the whole frame would order
    it, in npartitions partitions (default: ddf's) of about equal rows, each
    sorted by a replica of `target`. Divisions are unknown (the index keeps
    the rows' own labels, as pandas' sort_values does). The splitters are
    computed now (one pass over ddf); the rest is lazy."""
    import dask
    import dask.dataframe as dd

    keys, directions = _frames.keys_and_directions(by, ascending, na_position)
    for key in keys:
        if key not in ddf.columns:
            raise KeyError(key)
    parts = ddf.to_delayed()
    outputs = int(npartitions or len(parts))
    if outputs < 1:
        raise ValueError("npartitions must be at least 1, got %r" % (npartitions,))
    count = _sample_count(len(parts), outputs)
    sample = functools.partial(_frame_sample, keys=keys, directions=directions,
                               na_position=na_position, count=count, seed=seed)
    samples = dask.compute(*[dask.delayed(sample, pure=True)(part, i)
                             for i, part in enumerate(parts)])
    splitters = _Splitters(_splitters(samples, outputs))
    common = dict(keys=keys, directions=directions, na_position=na_position, target=target,
                  local_rows=local_rows, options=client_options)
    split = dask.delayed(functools.partial(_split_frame, **common), pure=True)
    pieces = [split(part, i, splitters) for i, part in enumerate(parts)]
    merge = dask.delayed(functools.partial(_merge_frame, **common), pure=True)
    outs = [merge([pieces[i][p] for i in range(len(parts))], ddf._meta) for p in range(outputs)]
    return dd.from_delayed(outs, meta=ddf._meta, verify_meta=False)


# ---------------------------------------------------------------- arrays

_SIGN64 = np.uint64(1 << 63)
_ROW_BITS = 40


def _order_bits(values, descending, nulls="last"):
    """uint64 keys whose ascending order is sortd's order of `values`
    (docs/api.md, "Order"): floats by their order-preserving bits, every NaN
    last (first when descending: the exact reverse); datetimes and
    timedeltas with NaT placed by `nulls` in either direction."""
    kind = values.dtype.kind
    if kind in "bu":
        bits = values.astype(np.uint64)
    elif kind == "i":
        bits = values.astype(np.int64).view(np.uint64) ^ _SIGN64
    elif kind == "f":
        as64 = values.astype(np.float64)
        raw = as64.view(np.uint64)
        bits = np.where(raw >> np.uint64(63) == 1, ~raw, raw | _SIGN64)
        bits[np.isnan(as64)] = np.uint64(0xFFFFFFFFFFFFFFFF)
    elif kind in "mM":
        ints = values.view(np.int64)
        nat = ints == np.iinfo(np.int64).min
        bits = ints.view(np.uint64) ^ _SIGN64
        if descending:
            bits = ~bits
        # A value of int64 max (year 2262) ties with a NaT placed last.
        bits[nat] = np.uint64(0xFFFFFFFFFFFFFFFF) if nulls == "last" else np.uint64(0)
        return bits
    else:
        raise TypeError("sortd_client.dask.sort: dtype %s is not a numeric, boolean, datetime64 "
                        "or timedelta64 array" % values.dtype)
    return ~bits if descending else bits


def _array_sample(chunk, index, descending, nulls, count, seed):
    """(rows, bits, row numbers) of a sample of the chunk."""
    chunk = np.asarray(chunk)
    rows = _sample_rows(len(chunk), count, seed, index)
    return len(chunk), _order_bits(chunk[rows], descending, nulls), rows


def _array_splitters(samples, outputs):
    """(bits, tags) of outputs - 1 splitters, tag = partition << 40 | row,
    sorted by (bits, tag); as _splitters."""
    total = sum(n for n, _, _ in samples)
    bits = np.concatenate([b for _, b, _ in samples] + [np.zeros(0, np.uint64)])
    tags = np.concatenate([(np.uint64(i) << np.uint64(_ROW_BITS)) | r.astype(np.uint64)
                           for i, (_, _, r) in enumerate(samples)] + [np.zeros(0, np.uint64)])
    weights = np.concatenate([np.full(len(b), n / len(b)) for n, b, _ in samples if len(b)]
                             + [np.zeros(0)])
    if not len(bits):
        # No rows: every piece is empty, whatever the splitters.
        return np.zeros(outputs - 1, np.uint64), np.zeros(outputs - 1, np.uint64)
    order = np.lexsort((tags, bits))
    below = np.cumsum(weights[order])
    wanted = np.arange(1, outputs) * (total / outputs)
    picks = np.minimum(np.searchsorted(below, wanted, "left"), len(order) - 1)
    return bits[order][picks], tags[order][picks]


def _destinations(bits, index, splitter_bits, splitter_tags):
    """Output partition of each row: the number of splitters <= (bits,
    index, row)."""
    dest = np.searchsorted(splitter_bits, bits, "left")
    upper = np.searchsorted(splitter_bits, bits, "right")
    tied = np.nonzero(upper > dest)[0]
    if tied.size:
        # Rows whose bits equal some splitters': ordered among those by tag.
        tags = (np.uint64(index) << np.uint64(_ROW_BITS)) | tied.astype(np.uint64)
        groups = dest[tied]
        order = np.argsort(groups, kind="stable")
        starts = np.flatnonzero(np.r_[True, groups[order][1:] != groups[order][:-1]])
        for a, b in zip(starts, np.r_[starts[1:], len(order)]):
            rows = order[a:b]
            lo = int(groups[rows[0]])
            hi = int(upper[tied[rows[0]]])
            dest[tied[rows]] = lo + np.searchsorted(splitter_tags[lo:hi], tags[rows], "right")
    return dest


def _array_counts(chunk, index, descending, nulls, splitter_bits, splitter_tags):
    bits = _order_bits(np.asarray(chunk), descending, nulls)
    dest = _destinations(bits, index, splitter_bits, splitter_tags)
    return np.bincount(dest, minlength=len(splitter_bits) + 1)


def _split_array(chunk, index, offset, descending, nulls, splitter_bits, splitter_tags):
    """The chunk's (values, global positions) cut into pieces by
    destination, each in the chunk's own order."""
    chunk = np.asarray(chunk)
    dest = _destinations(_order_bits(chunk, descending, nulls), index, splitter_bits,
                         splitter_tags)
    outputs = len(splitter_bits) + 1
    order = np.argsort(dest.astype(np.uint16 if outputs <= 1 << 16 else np.uint32), kind="stable")
    cuts = np.searchsorted(dest[order], np.arange(outputs + 1), "left")
    positions = order.astype(np.int64) + offset
    values = chunk[order]
    return [(values[a:b], positions[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]


def _merge_array(pieces, dtype, descending, nulls, target, local_rows, options):
    """One output chunk: (sorted values, their global positions)."""
    values = np.concatenate([v for v, _ in pieces] + [np.zeros(0, dtype)])
    positions = np.concatenate([p for _, p in pieces] + [np.zeros(0, np.int64)])
    if len(values) < max(local_rows, 1) or target is None:
        perm = np.argsort(_order_bits(values, descending, nulls), kind="stable")
        return values[perm], positions[perm]
    keys, perm = remote(target, lambda client: client.sort(
        values, descending=descending, return_indices=True, nulls=nulls), options)
    return keys, positions[perm.astype(np.int64, copy=False)]


def _sorted_array(x, descending, return_indices, target, npartitions, local_rows,
                  client_options, seed, nulls):
    import dask
    import dask.array as da

    if x.ndim != 1:
        raise ValueError("sortd_client.dask.sort: a 1-D dask array, not %d-D" % x.ndim)
    _order_bits(np.zeros(0, x.dtype), descending, nulls)  # refuses other dtypes now
    if nulls not in ("last", "first"):
        raise ValueError("nulls must be 'last' or 'first', got %r" % (nulls,))
    chunks = x.to_delayed().ravel().tolist()
    outputs = int(npartitions or len(chunks))
    if outputs < 1:
        raise ValueError("npartitions must be at least 1, got %r" % (npartitions,))
    count = _sample_count(len(chunks), outputs)
    sample = functools.partial(_array_sample, descending=descending, nulls=nulls, count=count,
                               seed=seed)
    samples = dask.compute(*[dask.delayed(sample, pure=True)(c, i) for i, c in enumerate(chunks)])
    if any(n >= 1 << _ROW_BITS for n, _, _ in samples):
        raise ValueError("sortd_client.dask.sort: chunks of at most 2^40 elements")
    sb, st = _array_splitters(samples, outputs)
    counts = dask.compute(*[dask.delayed(_array_counts, pure=True)(c, i, descending, nulls, sb, st)
                            for i, c in enumerate(chunks)])
    sizes = np.sum(np.vstack(counts), axis=0) if counts else np.zeros(outputs, np.int64)
    offsets = np.cumsum([0] + [n for n, _, _ in samples])
    split = dask.delayed(_split_array, pure=True)
    pieces = [split(c, i, int(offsets[i]), descending, nulls, sb, st)
              for i, c in enumerate(chunks)]
    merge = dask.delayed(functools.partial(_merge_array, dtype=x.dtype, descending=descending,
                                           nulls=nulls, target=target, local_rows=local_rows,
                                           options=client_options), pure=True)
    outs = [merge([pieces[i][p] for i in range(len(chunks))]) for p in range(outputs)]
    keys = da.concatenate([da.from_delayed(o[0], shape=(int(n),), dtype=x.dtype)
                           for o, n in zip(outs, sizes)]) if outputs else x[:0]
    if not return_indices:
        return keys
    indices = da.concatenate([da.from_delayed(o[1], shape=(int(n),), dtype=np.int64)
                              for o, n in zip(outs, sizes)])
    return keys, indices


def sort(x, descending=False, return_indices=False, target=None, npartitions=None,
         local_rows=DEFAULT_LOCAL_ROWS, client_options=None, seed=0, nulls="last"):
    """A 1-D dask array sorted in sortd's order (numpy's, with -0.0 before
    +0.0; descending: the exact reverse, stable among equals), in
    npartitions chunks (default: x's) of about equal size, known; with
    return_indices also the int64 positions in x (numpy's stable argsort).
    Numeric, boolean, datetime64 and timedelta64 arrays (NaT placed by
    nulls). Two passes over x happen now (samples, then chunk sizes)."""
    return _sorted_array(x, descending, return_indices, target, npartitions, local_rows,
                         client_options, seed, nulls)


def argsort(x, descending=False, target=None, npartitions=None, local_rows=DEFAULT_LOCAL_ROWS,
            client_options=None, seed=0, nulls="last"):
    """The int64 positions that sort x (a stable argsort), as sort's."""
    return _sorted_array(x, descending, True, target, npartitions, local_rows, client_options,
                         seed, nulls)[1]


# ---------------------------------------------------------------- top-k

def _first_k(values, positions, k, largest, nulls, target, local_rows, options):
    """The first k of values in sortd's order (stable): (keys, positions)."""
    if len(values) < max(local_rows, 1) or target is None:
        perm = np.argsort(_order_bits(values, largest, nulls), kind="stable")[:k]
        return values[perm], positions[perm]
    keys, perm = remote(target, lambda client: client.topk(
        values, k, largest=largest, nulls=nulls), options)
    return keys, positions[perm.astype(np.int64, copy=False)]


def _chunk_top_k(chunk, offset, k, largest, nulls, target, local_rows, options):
    chunk = np.asarray(chunk)
    positions = np.arange(offset, offset + len(chunk), dtype=np.int64)
    return _first_k(chunk, positions, k, largest, nulls, target, local_rows, options)


def _merge_top_k(candidates, dtype, k, largest, nulls, target, local_rows, options):
    # Candidates in chunk order, each chunk's in its sorted order: among
    # equal keys the stable selection keeps the earliest global positions.
    values = np.concatenate([v for v, _ in candidates] + [np.zeros(0, dtype)])
    positions = np.concatenate([p for _, p in candidates] + [np.zeros(0, np.int64)])
    return _first_k(values, positions, k, largest, nulls, target, local_rows, options)


def topk(x, k, largest=True, return_indices=False, target=None, local_rows=DEFAULT_LOCAL_ROWS,
         client_options=None, nulls="last"):
    """The k largest (largest=False: smallest) elements of a 1-D dask array
    in sorted order, stable (among equals the earliest positions), as a dask
    array of min(k, len(x)) elements; with return_indices also their int64
    positions in x. Each chunk's first k comes from a replica's TopK (chunks
    under local_rows elements: numpy here), then the first k of the
    candidates. The dtypes of sort(); x's chunk sizes must be known."""
    import dask
    import dask.array as da

    if x.ndim != 1:
        raise ValueError("sortd_client.dask.topk: a 1-D dask array, not %d-D" % x.ndim)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError("k must be an integer of at least 1, got %r" % (k,))
    if nulls not in ("last", "first"):
        raise ValueError("nulls must be 'last' or 'first', got %r" % (nulls,))
    _order_bits(np.zeros(0, x.dtype), largest, nulls)  # refuses other dtypes now
    sizes = x.chunks[0]
    if any(np.isnan(n) for n in sizes):
        raise ValueError("sortd_client.dask.topk: x's chunk sizes are unknown "
                         "(x.compute_chunk_sizes() first)")
    k = int(k)
    offsets = np.cumsum([0] + list(sizes))
    chunk = dask.delayed(functools.partial(
        _chunk_top_k, k=k, largest=largest, nulls=nulls, target=target, local_rows=local_rows,
        options=client_options), pure=True)
    candidates = [chunk(c, int(offsets[i])) for i, c in enumerate(x.to_delayed().ravel())]
    merged = dask.delayed(functools.partial(
        _merge_top_k, dtype=x.dtype, k=k, largest=largest, nulls=nulls, target=target,
        local_rows=local_rows, options=client_options), pure=True)(candidates)
    kept = int(min(k, offsets[-1]))
    keys = da.from_delayed(merged[0], shape=(kept,), dtype=x.dtype)
    if not return_indices:
        return keys
    return keys, da.from_delayed(merged[1], shape=(kept,), dtype=np.int64)
