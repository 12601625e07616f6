"""TopK requests and answers (docs/api.md, "Top-k"): the first k keys of a
stable sort, of a whole array, of every row of a 2-D array, or of every
segment of a 1-D array cut by lengths.

The request is serialized by hand (the keys' bytes are joined once, as for
Sort); the answer is proportional to k, read without copying its arrays.
"""

import collections
import concurrent.futures
import copy

import numpy as np

from sortd.v1 import sort_pb2

from . import cuda_ipc, wire
from .arrays import INDEX_DTYPE, TypedInput, finish_indices, view_payload
from .errors import ProtocolError
from .responses import read_response

# TopKResponse's fields: keys 1, indices 2, values 3, request_id 5, engine 6.
TOPK_RESPONSE = {"arrays": (1, 3), "indices": 2, "request_id": 5, "engine": 6}

TopKResult = collections.namedtuple(
    "TopKResult", ["keys", "indices", "values", "counts", "request_id", "engine"])
TopKResult.__doc__ = """Everything a TopK returns. keys (and indices, values
when asked for) hold every segment's kept keys in turn, each segment's in
sorted order; for a 2-D input they are 2-D, one row per input row. counts:
how many each segment kept (min(k, its length)), None for one array.
indices are positions within the segment (the row)."""


class TopKInput:
    """A validated TopK call: keys, k, the segments, and their sizes."""

    def __init__(self, keys, k, largest, values, segment_lengths, nulls, regions=None):
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            raise TypeError("k must be an integer, got %r" % (k,))
        if k < 1:
            raise ValueError("k must be at least 1, got %d (a k past the length returns "
                             "every key, sorted)" % k)
        if nulls not in ("last", "first"):
            raise ValueError('nulls must be "last" or "first", got %r' % (nulls,))
        self.k = int(min(k, (1 << 64) - 1))
        self.largest = bool(largest)
        self.nulls_name = nulls
        self.order = sort_pb2.SORT_ORDER_DESCENDING if largest else sort_pb2.SORT_ORDER_ASCENDING
        self.nulls = (sort_pb2.NULL_PLACEMENT_FIRST if nulls == "first"
                      else sort_pb2.NULL_PLACEMENT_LAST)
        self.rows = None
        self.row_length = 0
        # RegionSlices when the arrays lie in this client's regions.
        self.keys_slice = self.values_slice = None
        self.device = False  # the keys are a device array in a CUDA region
        if _on_device(keys):
            keys, values = self._by_device_reference(regions, keys, values, segment_lengths)
        arr = keys if isinstance(keys, np.ndarray) else None
        if arr is not None and arr.ndim == 2:
            if segment_lengths is not None:
                raise ValueError("segment_lengths: for 1-D keys (2-D keys are cut into rows)")
            self.rows, self.row_length = arr.shape
            if self.row_length == 0 and self.rows > 0:
                raise ValueError("keys: rows of length 0")
            keys = np.ascontiguousarray(arr).reshape(-1)
            values = self._flat_values(values, arr.shape)
        # The 1-D arrays as given (rows flattened), for pieces of them.
        self.flat_keys, self.flat_values = keys, values
        self.keys = TypedInput(keys, "keys")
        self.values = None if values is None else TypedInput(values, "values")
        # Device arrays: their element counts (the inputs above are empty
        # arrays of their types, which decode the answer).
        self.n = self.keys.n if self.keys_slice is None else self.keys_slice.count
        n_values = (None if values is None else self.values.n if self.keys_slice is None
                    else self.values_slice.count)
        if values is not None and n_values != self.n:
            raise ValueError("keys and values differ in length (%d vs %d)" % (self.n, n_values))
        self.lengths = None
        if segment_lengths is not None:
            lengths = np.asarray(segment_lengths)
            if lengths.ndim != 1 or (lengths.size and lengths.dtype.kind not in "iu"):
                raise TypeError("segment_lengths: a 1-D sequence of integers")
            if lengths.size and lengths.min() < 0:
                raise ValueError("segment_lengths: negative length %d" % lengths.min())
            lengths = lengths.astype(np.uint64)
            if int(lengths.sum(dtype=np.uint64)) != self.n:
                raise ValueError("segment_lengths sum to %d but keys has %d"
                                 % (int(lengths.sum(dtype=np.uint64)), self.n))
            self.lengths = lengths
        if self.rows is not None:
            self.counts = np.full(self.rows, min(self.k, self.row_length), dtype=np.uint64)
        elif self.lengths is not None:
            self.counts = np.minimum(self.lengths, np.uint64(self.k))
        else:
            self.counts = None

    @staticmethod
    def _flat_values(values, shape):
        if values is None:
            return None
        v = np.asarray(values)
        if v.shape != shape:
            raise ValueError("values: shape %s, keys %s" % (v.shape, shape))
        return np.ascontiguousarray(v).reshape(-1)

    def _by_device_reference(self, regions, keys, values, segment_lengths):
        """Device keys (and values): region slices of this client's CUDA
        regions, selected on the server's GPU where they lie. 2-D keys are
        rows. Returns empty host arrays of their types (for the answer)."""
        if regions is None:
            raise ValueError("keys: a device array needs a Client with CUDA regions")
        _, _, _, shape = cuda_ipc.flat_interface(keys, "keys")
        if len(shape) == 2:
            if segment_lengths is not None:
                raise ValueError("segment_lengths: for 1-D keys (2-D keys are cut into rows)")
            self.rows, self.row_length = shape
            if self.row_length == 0 and self.rows > 0:
                raise ValueError("keys: rows of length 0")
        elif len(shape) != 1:
            raise ValueError("keys: 1-D or 2-D, got shape %s" % (shape,))
        key_ref = regions.locate_device(keys, "keys")
        self.keys_slice = key_ref.slice
        self.device = True
        host_values = None
        if values is not None:
            if not _on_device(values):
                raise ValueError("values: must be a device array in a CUDA region when the "
                                 "keys are (the server gathers them on the GPU)")
            _, _, _, vshape = cuda_ipc.flat_interface(values, "values")
            if vshape != shape:
                raise ValueError("values: shape %s, keys %s" % (vshape, shape))
            value_ref = regions.locate_device(values, "values")
            self.values_slice = value_ref.slice
            host_values = np.empty(0, value_ref.dtype)
        return np.empty(0, key_ref.dtype), host_values

    def by_reference(self, regions):
        """Sends the arrays as region slices when keys (and values, if any)
        lie in system regions of this client (regions.locate), read where
        they lie; else they travel in the message. Whether they do (device
        arrays always do: their slices were found when the call was made)."""
        if self.keys_slice is not None:
            return True
        keys = regions.locate(self.flat_keys, "keys", strict=False)
        values = (None if self.flat_values is None
                  else regions.locate(self.flat_values, "values", strict=False))
        if keys is None or keys.cuda or (self.flat_values is not None and
                                         (values is None or values.cuda)):
            return False
        self.keys_slice = keys.slice
        self.values_slice = None if values is None else values.slice
        return True

    def has_strings(self):
        return self.keys.is_bytes or (self.values is not None and self.values.is_bytes)

    def request_bytes(self):
        """About the serialized request's size (the arrays exactly)."""
        if self.keys_slice is not None:
            return 256 + (0 if self.lengths is None else 10 * len(self.lengths))
        segments = 0 if self.lengths is None else 10 * len(self.lengths)
        values = 0 if self.values is None else self.values.encoded_size()
        return self.keys.encoded_size() + values + segments + 64

    def on_device(self):
        return self.device

    def answer_bytes(self):
        """About the serialized answer's size (keys, indices, values)."""
        back = self.keys.wire_dtype.itemsize + 8 + (
            0 if self.values is None else self.values.wire_dtype.itemsize)
        return self.kept() * back + 64

    def piece(self, start, stop, lengths=None):
        """The same call over keys [start, stop): rows when 2-D (start and
        stop on row boundaries), else one array or the given segments."""
        if self.on_device():
            return self._device_piece(start, stop, lengths)
        keys = self.flat_keys[start:stop]
        values = None if self.flat_values is None else self.flat_values[start:stop]
        if self.rows is not None:
            keys = keys.reshape(-1, self.row_length)
            values = None if values is None else values.reshape(-1, self.row_length)
        return TopKInput(keys, self.k, self.largest, values, lengths, self.nulls_name)

    def _device_piece(self, start, stop, lengths):
        """piece() of device arrays: the same call over sub-slices."""
        piece = copy.copy(self)
        for name in ("keys_slice", "values_slice"):
            ref = getattr(self, name)
            if ref is not None:
                width = (self.keys if name == "keys_slice" else self.values).wire_dtype.itemsize
                setattr(piece, name, sort_pb2.RegionSlice(
                    region=ref.region, offset=ref.offset + start * width, count=stop - start,
                    type=ref.type))
        piece.n = stop - start
        if self.rows is not None:
            piece.rows = piece.n // self.row_length
            piece.counts = np.full(piece.rows, min(self.k, self.row_length), dtype=np.uint64)
        elif lengths is not None:
            piece.lengths = np.asarray(lengths, dtype=np.uint64)
            piece.counts = np.minimum(piece.lengths, np.uint64(self.k))
        return piece

    def kept(self):
        return min(self.k, self.n) if self.counts is None else int(self.counts.sum())

    def request(self, return_indices, request_id):
        """The serialized TopKRequest."""
        keys = (wire.len_field(10, [self.keys_slice.SerializeToString()])
                if self.keys_slice is not None else wire.len_field(1, self.keys.parts()))
        parts = (keys + wire.varint_field(2, self.k)
                 + wire.varint_field(3, self.order) + wire.varint_field(4, return_indices)
                 + wire.string_field(6, request_id) + wire.varint_field(7, self.nulls)
                 + wire.varint_field(8, self.row_length))
        if self.values_slice is not None:
            parts += wire.len_field(11, [self.values_slice.SerializeToString()])
        elif self.values is not None:
            parts += wire.len_field(5, self.values.parts())
        if self.lengths is not None and self.lengths.size:
            packed = b"".join(wire.varint(int(x)) for x in self.lengths)
            parts += wire.len_field(9, [packed])
        return wire.join(parts)

    def result(self, serialized, return_indices, engine_name):
        """The TopKResult of a serialized TopKResponse (engine_name: the
        enum value's name)."""
        resp = read_response(serialized, TOPK_RESPONSE)
        kept = self.kept()
        keys = self.keys.finish([self.keys.decode_serialized(resp.arrays[0])])
        _check("keys", len(keys), kept)
        values = indices = None
        if self.values is not None:
            values = self.values.finish([self.values.decode_serialized(resp.arrays[1])])
            _check("values", len(values), kept)
        if return_indices:
            indices = finish_indices([view_payload(resp.indices, INDEX_DTYPE)])
            _check("indices", len(indices), kept)
        if self.rows is not None:
            shape = (self.rows, min(self.k, self.row_length))
            keys = _rows(keys, shape)
            values = None if values is None else _rows(values, shape)
            indices = None if indices is None else indices.reshape(shape)
        return TopKResult(keys, indices, values, self.counts, resp.request_id,
                          engine_name(resp.engine))


def _on_device(array):
    """Whether `array` is a device array (CuPy, PyTorch, ...), not numpy."""
    return not isinstance(array, np.ndarray) and hasattr(array, "__cuda_array_interface__")


def _rows(flat, shape):
    return np.asarray(flat).reshape(shape)


def _check(what, got, want):
    if got != want:
        raise ProtocolError("%s: the server returned %d, expected %d" % (what, got, want))


def split_segments(array, counts):
    """One array per segment, views of `array`, by the kept counts."""
    if array is None:
        return None
    if counts.size == 0:
        return []
    bounds = np.cumsum(counts.astype(np.int64))[:-1]
    if isinstance(array, list):
        out, start = [], 0
        for c in counts.astype(np.int64):
            out.append(array[start:start + c])
            start += c
        return out
    return np.split(array, bounds)


# Requests over this many bytes go as pieces of about it, PARALLEL_PIECES
# in flight at once: measured on the dev VM (loopback, 2^24 float32 keys,
# k = 100), one 64 MiB message took 231 ms, pieces of 32 / 16 / 8 / 4 MiB
# 147 / 120 / 88 / 107 ms (bench/top_k_e2e.py --max_message_bytes).
PIECE_BYTES = 8 << 20
PARALLEL_PIECES = 4
# Bytes of a request or answer besides its arrays (tags, lengths, k, ids).
_OVERHEAD = 4096 + 256


def split_call(call, budget, one, piece_bytes=PIECE_BYTES):
    """A call whose request is over piece_bytes, as several TopK calls of
    about that much each (several in flight at once: the uploads overlap
    each other and the server's selections), none of whose requests or
    answers is over `budget` (one message): rows or segments grouped into
    pieces, each answered as it stands; or one array cut into pieces whose
    first k are candidates, the first k of which (the pieces' answers
    concatenated in order, so equal keys keep the earliest positions) is
    the answer. one(piece, return_indices) makes one call. Fixed-width
    arrays only."""
    if call.has_strings():
        raise ValueError("TopK of byte strings travels in one message: the request is about "
                         "%d bytes, over this client's %d (max_message_bytes)"
                         % (call.request_bytes(), budget))
    width = call.keys.wire_dtype.itemsize
    vwidth = 0 if call.values is None else call.values.wire_dtype.itemsize
    # Device arrays travel by reference: only the answers are cut, each
    # piece as large as one message allows.
    device = call.on_device()
    per = 0 if device else width + vwidth  # request bytes a key
    back = width + 8 + vwidth     # answer bytes a kept key
    # Room for the arrays: the fields around them take less than this.
    room = budget - _OVERHEAD
    piece_room = room if device else max(min(piece_bytes, budget) - _OVERHEAD, 1)
    if call.rows is not None:
        kept = min(call.k, call.row_length)
        row_cost = max(call.row_length * per, kept * back)
        if row_cost > room:
            raise ValueError("one row of %d keys is more than one message (%d bytes)"
                             % (call.row_length, budget))
        rows_per = max(piece_room // row_cost, 1)
        bounds = [(r * call.row_length, min(r + rows_per, call.rows) * call.row_length)
                  for r in range(0, call.rows, rows_per)]
        return _joined(_map(one, [call.piece(a, b) for a, b in bounds], True), call)
    if call.lengths is not None:
        groups, start, size, group = [], 0, 0, []
        for length in call.lengths.tolist():
            cost = max(length * per, min(call.k, length) * back) + 20  # and its count, length
            if cost > room:
                raise ValueError("a segment of %d keys is more than one message (%d bytes)"
                                 % (length, budget))
            if size + cost > piece_room and group:
                groups.append((start, group))
                start, size, group = start + sum(group), 0, []
            group.append(length)
            size += cost
        groups.append((start, group))
        pieces = [call.piece(a, a + sum(g), g) for a, g in groups]
        return _joined(_map(one, pieces, True), call)
    if call.kept() * back > room:
        raise ValueError("the answer, %d keys with their indices, is more than one message "
                         "(%d bytes, max_message_bytes): ask for a smaller k, or sort()"
                         % (call.kept(), budget))
    if device:  # one array's answer fits one message (checked above)
        return one(call, True)
    # Pieces of at least 2k keys, so that every round of candidates is at
    # most half the keys before it (k keys with indices fit one message,
    # so 2k keys do too).
    step = min(room // per, max(piece_room // per, 2 * call.k))
    if call.keys.n <= step:
        return one(call, True)  # one piece: it fits one message as it is
    bounds = [(a, min(a + step, call.keys.n)) for a in range(0, call.keys.n, step)]
    parts = _map(one, [call.piece(a, b) for a, b in bounds], True)
    cand_keys = _concat([p.keys for p in parts])
    cand_pos = np.concatenate([p.indices.astype(np.uint64) + np.uint64(a)
                               for p, (a, _) in zip(parts, bounds)])
    cand_values = None if call.values is None else _concat([p.values for p in parts])
    # Two pieces or more of at least 2k keys each: fewer candidates than
    # keys, so the rounds end; the last goes as one message if it fits.
    final_call = TopKInput(cand_keys, call.k, call.largest, cand_values, None, call.nulls_name)
    final = (one(final_call, True) if final_call.request_bytes() <= budget
             else split_call(final_call, budget, one, piece_bytes))
    return TopKResult(final.keys, cand_pos[final.indices.astype(np.intp)], final.values, None,
                      final.request_id, final.engine)


def _map(one, pieces, return_indices):
    with concurrent.futures.ThreadPoolExecutor(min(PARALLEL_PIECES, len(pieces))) as pool:
        return list(pool.map(lambda piece: one(piece, return_indices), pieces))


def _concat(arrays):
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _joined(parts, call):
    """The answers of consecutive pieces of rows or segments as one."""
    values = None if call.values is None else _concat([p.values for p in parts])
    return TopKResult(_concat([p.keys for p in parts]), _concat([p.indices for p in parts]),
                      values, call.counts, parts[0].request_id, parts[0].engine)
