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
# Sorted by conversion on the server (docs/api.md, "Types"): 8/16-bit
# numbers and bool packed in one bytes field, the same wire form as a packed
# field; datetime64/timedelta64 as sfixed64 values plus their unit.
_CONVERTED = {
    ("i", 1): ("int8", 8, np.dtype("i1")),
    ("u", 1): ("uint8", 9, np.dtype("u1")),
    ("i", 2): ("int16", 10, np.dtype("<i2")),
    ("u", 2): ("uint16", 11, np.dtype("<u2")),
    ("f", 2): ("float16", 12, np.dtype("<f2")),
    ("b", 1): ("boolean", 14, np.dtype("u1")),
    ("M", 8): ("datetime64", 15, np.dtype("<i8")),
    ("m", 8): ("timedelta64", 16, np.dtype("<i8")),
}
# numpy's unit codes -> sortd.v1.TimeUnit
_TIME_UNITS = {"Y": 1, "M": 2, "W": 3, "D": 4, "h": 5, "m": 6, "s": 7, "ms": 8, "us": 9,
               "ns": 10, "ps": 11, "fs": 12, "as": 13}
_BYTES_FIELD = 7
_INDEX_DTYPE = np.dtype("<u8")
SUPPORTED = ("uint32, int32, float32, uint64, int64, float64, int8, uint8, int16, uint16, "
             "float16, bfloat16, bool, datetime64, timedelta64, bytes (S or object) or str (U)")


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
        self.converted = False  # sorted by conversion on the server
        self.time_unit = 0
        self.text_dtype = None  # numpy U: sent as UTF-8 byte strings
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
        elif arr.dtype.kind == "U":
            # UTF-8's byte order is code-point order, numpy's order of U.
            self._init_bytes([x.encode("utf-8") for x in arr.tolist()], "text")
            self.text_dtype = arr.dtype
        else:
            key = (arr.dtype.kind, arr.dtype.itemsize)
            if arr.dtype.name == "bfloat16":  # ml_dtypes' bfloat16 (numpy has none)
                spec = ("bfloat16", 13, np.dtype("<u2"))
            else:
                spec = _NUMERIC.get(key) or _CONVERTED.get(key)
            if spec is None:
                raise TypeError("unsupported %s dtype %s (use %s)" % (what, arr.dtype, SUPPORTED))
            self.kind, self.field, self.wire_dtype = spec
            self.converted = key not in _NUMERIC
            if arr.dtype.kind in "Mm":
                unit, count = np.datetime_data(arr.dtype)
                if count != 1 or unit not in _TIME_UNITS:
                    raise TypeError("%s: %s has a unit sortd does not carry (use a plain unit "
                                    "such as [ns], [us], [s], [D])" % (what, arr.dtype))
                self.time_unit = _TIME_UNITS[unit]
            if self.converted:
                # The elements' own bytes, little-endian: a view, no copy.
                native = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
                self.data = native.view(self.wire_dtype)
                self.native_dtype = arr.dtype.newbyteorder("=")
            else:
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
            if self.time_unit:
                inner += 1 + len(wire.varint(self.time_unit))
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
            inner += wire.varint_field(2, self.time_unit)
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
        wrapper = getattr(msg, which)
        if self.time_unit and wrapper.unit != self.time_unit:
            raise ProtocolError("%s came back in time unit %d, sent %d"
                                % (self.what, wrapper.unit, self.time_unit))
        # Field 1 only: packed_payload skips the unit (field 2).
        return decode_packed(wrapper.SerializeToString(), 1, self.wire_dtype)

    def decode_serialized(self, typed_array):
        """decode() of a serialized TypedArray (a memoryview of a unary
        response, or None when the response had none), without parsing it
        into a message first: the six core types are viewed in place, so the
        result costs one copy (finish()) instead of three."""
        if typed_array is None:
            return [] if self.is_bytes else np.empty(0, self.wire_dtype)
        if self.is_bytes or self.converted:
            return self.decode(sort_pb2.TypedArray.FromString(bytes(typed_array)))
        chosen = None
        for field, wire_type, value in wire.iter_fields(typed_array):
            if wire_type != wire.WIRE_LEN:
                raise ProtocolError("%s: TypedArray field %d is not a message" % (self.what, field))
            chosen = (field, value)  # a oneof: the last one set wins
        if chosen is None:
            return np.empty(0, self.wire_dtype)
        if chosen[0] != self.field:
            got = sort_pb2.TypedArray.DESCRIPTOR.fields_by_number.get(chosen[0])
            raise ProtocolError("%s came back as %s, sent %s" % (
                self.what, got.name if got else "field %d" % chosen[0], self.kind))
        return decode_packed(chosen[1], 1, self.wire_dtype)

    def finish(self, pieces):
        """Joins decoded pieces into a writable result of the input's style."""
        if not self.is_bytes:
            if not pieces:
                return np.empty(0, self.native_dtype)
            # One writable piece (a session's whole array) is the result as
            # it is; views of a message (read-only) are copied out of it.
            joined = (pieces[0] if len(pieces) == 1 and pieces[0].flags.writeable
                      else np.concatenate(pieces))
            if self.converted:
                # Back to the caller's dtype from its little-endian bytes.
                return joined.view(self.native_dtype.newbyteorder("<")).astype(
                    self.native_dtype, copy=False)
            return joined.astype(self.native_dtype, copy=False)
        items = pieces[0] if len(pieces) == 1 else [x for p in pieces for x in p]
        if self.container == "text":
            return np.array([x.decode("utf-8") for x in items], dtype=self.text_dtype)
        if self.container == "list":
            return items
        if self.container == "object":
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return out
        return np.array(items, dtype=self.container)


def decode_packed(serialized, field, dtype):
    """np.frombuffer view of packed fixed-width `field` in a serialized message."""
    return view_payload(wire.packed_payload(serialized, field), dtype, "packed field %d" % field)


def view_payload(payload, dtype, what="the indices"):
    """np.frombuffer view of a packed payload of fixed-width elements."""
    if len(payload) % dtype.itemsize:
        raise ProtocolError("%s has a partial element" % what)
    return np.frombuffer(payload, dtype=dtype)


INDEX_DTYPE = np.dtype("<u8")


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
