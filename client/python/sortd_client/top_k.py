"""TopK requests and answers (docs/api.md, "Top-k"): the first k keys of a
stable sort, of a whole array, of every row of a 2-D array, or of every
segment of a 1-D array cut by lengths.

The request is serialized by hand (the keys' bytes are joined once, as for
Sort); the answer is proportional to k, read without copying its arrays.
"""

import collections

import numpy as np

from sortd.v1 import sort_pb2

from . import wire
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

    def __init__(self, keys, k, largest, values, segment_lengths, nulls):
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            raise TypeError("k must be an integer, got %r" % (k,))
        if k < 1:
            raise ValueError("k must be at least 1, got %d (a k past the length returns "
                             "every key, sorted)" % k)
        if nulls not in ("last", "first"):
            raise ValueError('nulls must be "last" or "first", got %r' % (nulls,))
        self.k = int(min(k, (1 << 64) - 1))
        self.order = sort_pb2.SORT_ORDER_DESCENDING if largest else sort_pb2.SORT_ORDER_ASCENDING
        self.nulls = (sort_pb2.NULL_PLACEMENT_FIRST if nulls == "first"
                      else sort_pb2.NULL_PLACEMENT_LAST)
        self.rows = None
        self.row_length = 0
        arr = keys if isinstance(keys, np.ndarray) else None
        if arr is not None and arr.ndim == 2:
            if segment_lengths is not None:
                raise ValueError("segment_lengths: for 1-D keys (2-D keys are cut into rows)")
            self.rows, self.row_length = arr.shape
            if self.row_length == 0 and self.rows > 0:
                raise ValueError("keys: rows of length 0")
            keys = np.ascontiguousarray(arr).reshape(-1)
            values = self._flat_values(values, arr.shape)
        self.keys = TypedInput(keys, "keys")
        self.values = None if values is None else TypedInput(values, "values")
        if self.values is not None and self.values.n != self.keys.n:
            raise ValueError("keys and values differ in length (%d vs %d)"
                             % (self.keys.n, self.values.n))
        self.lengths = None
        if segment_lengths is not None:
            lengths = np.asarray(segment_lengths)
            if lengths.ndim != 1 or (lengths.size and lengths.dtype.kind not in "iu"):
                raise TypeError("segment_lengths: a 1-D sequence of integers")
            if lengths.size and lengths.min() < 0:
                raise ValueError("segment_lengths: negative length %d" % lengths.min())
            lengths = lengths.astype(np.uint64)
            if int(lengths.sum(dtype=np.uint64)) != self.keys.n:
                raise ValueError("segment_lengths sum to %d but keys has %d"
                                 % (int(lengths.sum(dtype=np.uint64)), self.keys.n))
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

    def kept(self):
        return min(self.k, self.keys.n) if self.counts is None else int(self.counts.sum())

    def request(self, return_indices, request_id):
        """The serialized TopKRequest."""
        parts = (wire.len_field(1, self.keys.parts()) + wire.varint_field(2, self.k)
                 + wire.varint_field(3, self.order) + wire.varint_field(4, return_indices)
                 + wire.string_field(6, request_id) + wire.varint_field(7, self.nulls)
                 + wire.varint_field(8, self.row_length))
        if self.values is not None:
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


def _rows(flat, shape):
    return np.asarray(flat).reshape(shape)


def _check(what, got, want):
    if got != want:
        raise ProtocolError("%s: the server returned %d, expected %d" % (what, got, want))


def split_segments(array, counts):
    """One array per segment, views of `array`, by the kept counts."""
    if array is None:
        return None
    bounds = np.cumsum(counts.astype(np.int64))[:-1]
    if isinstance(array, list):
        out, start = [], 0
        for c in counts.astype(np.int64):
            out.append(array[start:start + c])
            start += c
        return out
    return np.split(array, bounds)
