"""Conversion between user arrays and sortd TypedArray messages.

Encoding never touches elements one by one for numbers: a packed wrapper
message (e.g. Uint32Array) is `0x0a varint(len) <little-endian payload>`, so
the payload is the numpy buffer itself. Decoding re-serializes the parsed
wrapper message (one memcpy in the C++/upb protobuf runtime), skips the
tag/length header and views the payload with np.frombuffer.
"""

import numpy as np

from sortd.v1 import sort_pb2

from . import wire
from .errors import ProtocolError

# (numpy kind, itemsize) -> (TypedArray oneof name, field number, wire dtype)
_NUMERIC = {
    ("u", 4): ("uint32", 1, np.dtype("<u4")),
    ("i", 4): ("int32", 2, np.dtype("<i4")),
    ("f", 4): ("float32", 3, np.dtype("<f4")),
    ("u", 8): ("uint64", 4, np.dtype("<u8")),
    ("i", 8): ("int64", 5, np.dtype("<i8")),
    ("f", 8): ("float64", 6, np.dtype("<f8")),
}
_BYTES_FIELD = 7
_INDEX_DTYPE = np.dtype("<u8")


def _ld_size(inner):
    """Encoded size of a length-delimited field (field number < 16)."""
    return 1 + len(wire.varint(inner)) + inner


def _to_bytes(x):
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    raise TypeError("byte-string arrays must hold bytes, got %s" % type(x).__name__)


def _bytes_list(seq):
    items = list(seq)
    if not all(type(x) is bytes for x in items):
        items = [_to_bytes(x) for x in items]
    return items


class TypedInput:
    """One user array (keys or values), validated and ready to encode.

    Numbers: a 1-D numpy array of uint32/int32/float32/uint64/int64/float64
    (any byte order or stride; lists are converted with np.asarray).
    Byte strings: a list/tuple of bytes, or a numpy array of dtype object
    (holding bytes) or 'S'. Results come back in the same container style.
    """

    def __init__(self, obj, what="keys"):
        self.what = what
        self._sizes = None
        if isinstance(obj, (list, tuple)) and obj and isinstance(
                obj[0], (bytes, bytearray, memoryview)):
            self._init_bytes(_bytes_list(obj), "list")
            return
        arr = obj if isinstance(obj, np.ndarray) else np.asarray(obj)
        if arr.ndim != 1:
            raise ValueError("%s must be one-dimensional, got shape %s" % (what, arr.shape))
        if arr.dtype.kind == "S":
            self._init_bytes(arr.tolist(), arr.dtype)
        elif arr.dtype.kind == "O":
            self._init_bytes(_bytes_list(arr.tolist()), "object")
        else:
            spec = _NUMERIC.get((arr.dtype.kind, arr.dtype.itemsize))
            if spec is None:
                raise TypeError(
                    "unsupported %s dtype %s (use uint32, int32, float32, uint64, "
                    "int64, float64 or bytes)" % (what, arr.dtype))
            self.kind, self.field, self.wire_dtype = spec
            self.data = np.ascontiguousarray(arr, dtype=self.wire_dtype)
            self.native_dtype = self.wire_dtype.newbyteorder("=")
            self.container = None
            self.n = self.data.shape[0]

    def _init_bytes(self, items, container):
        self.kind, self.field, self.wire_dtype = "bytes", _BYTES_FIELD, None
        self.data = items
        self.container = container
        self.n = len(items)

    @property
    def is_bytes(self):
        return self.kind == "bytes"

    # ---- sizes -------------------------------------------------------
    def element_sizes(self):
        """Encoded bytes per element: an int (numbers) or an int64 array."""
        if not self.is_bytes:
            return self.wire_dtype.itemsize
        if self._sizes is None:
            lens = np.fromiter(map(len, self.data), dtype=np.int64, count=self.n)
            varint_len = 1 + sum((lens >= (1 << s)).astype(np.int64) for s in (7, 14, 21, 28, 35))
            self._sizes = 1 + varint_len + lens
        return self._sizes

    def encoded_size(self):
        """Exact size of the encoded TypedArray message (whole array)."""
        sizes = self.element_sizes()
        if self.is_bytes:
            inner = int(sizes.sum())
        else:
            inner = _ld_size(self.n * sizes) if self.n else 0
        return _ld_size(inner)

    # ---- encoding ----------------------------------------------------
    def parts(self, start=0, stop=None):
        """Wire parts of the TypedArray message for elements [start, stop)."""
        stop = self.n if stop is None else stop
        if self.is_bytes:
            inner = [sort_pb2.BytesArray(values=self.data[start:stop]).SerializeToString()]
        else:
            payload = self.data[start:stop]
            inner = wire.len_field(1, [payload]) if payload.size else []
        return wire.len_field(self.field, inner)

    # ---- decoding ----------------------------------------------------
    def decode(self, msg):
        """A piece of the result from a TypedArray message.

        Numbers: a read-only little-endian view; bytes: a list. Pass the
        pieces to finish() to get the user-facing result.
        """
        which = msg.WhichOneof("array")
        if which is None:  # nothing set: an empty array
            return [] if self.is_bytes else np.empty(0, self.wire_dtype)
        if which != self.kind:
            raise ProtocolError("%s came back as %s, sent %s" % (self.what, which, self.kind))
        if self.is_bytes:
            return list(msg.bytes.values)
        return decode_packed(getattr(msg, which).SerializeToString(), 1, self.wire_dtype)

    def finish(self, pieces):
        """Joins decoded pieces into a writable result of the input's style."""
        if not self.is_bytes:
            if not pieces:
                return np.empty(0, self.native_dtype)
            return np.concatenate(pieces).astype(self.native_dtype, copy=False)
        items = pieces[0] if len(pieces) == 1 else [x for p in pieces for x in p]
        if self.container == "list":
            return items
        if self.container == "object":
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return out
        return np.array(items, dtype=self.container)


def decode_packed(serialized, field, dtype):
    """np.frombuffer view of packed fixed-width `field` in a serialized message."""
    payload = wire.packed_payload(serialized, field)
    if len(payload) % dtype.itemsize:
        raise ProtocolError("packed field %d has a partial element" % field)
    return np.frombuffer(payload, dtype=dtype)


def indices_from(msg, field, clear):
    """The repeated fixed64 `field` of msg as a uint64 view.

    `clear` names a (large, already decoded) field of msg to drop first so
    that re-serializing msg copies only the indices.
    """
    if not len(getattr(msg, msg.DESCRIPTOR.fields_by_number[field].name)):
        return np.empty(0, _INDEX_DTYPE)
    msg.ClearField(clear)
    return decode_packed(msg.SerializeToString(), field, _INDEX_DTYPE)


def finish_indices(pieces):
    if not pieces:
        return np.empty(0, np.uint64)
    return np.concatenate(pieces).astype(np.uint64, copy=False)
