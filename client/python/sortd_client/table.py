"""Table sorts (SortTable): the request built from numpy columns, the answer
back as a permutation or as reordered columns.

Columns may be numpy arrays of any dtype the client carries
(arrays.SUPPORTED) or numpy masked arrays, whose mask becomes an Arrow
validity bitmap (a bit a row, least significant first, 1 = a value).
"""
import numpy as np

from sortd.v1 import sort_pb2

from . import wire
from .arrays import TypedInput, indices_from


# TypedArray case -> the ElementType of a table session's column.
ELEMENT_TYPE_OF = {
    "uint32": sort_pb2.ELEMENT_TYPE_UINT32, "int32": sort_pb2.ELEMENT_TYPE_INT32,
    "float32": sort_pb2.ELEMENT_TYPE_FLOAT32, "uint64": sort_pb2.ELEMENT_TYPE_UINT64,
    "int64": sort_pb2.ELEMENT_TYPE_INT64, "float64": sort_pb2.ELEMENT_TYPE_FLOAT64,
    "int8": sort_pb2.ELEMENT_TYPE_INT8, "uint8": sort_pb2.ELEMENT_TYPE_UINT8,
    "int16": sort_pb2.ELEMENT_TYPE_INT16, "uint16": sort_pb2.ELEMENT_TYPE_UINT16,
    "float16": sort_pb2.ELEMENT_TYPE_FLOAT16, "bfloat16": sort_pb2.ELEMENT_TYPE_BFLOAT16,
    "boolean": sort_pb2.ELEMENT_TYPE_BOOL, "datetime64": sort_pb2.ELEMENT_TYPE_DATETIME64,
    "timedelta64": sort_pb2.ELEMENT_TYPE_TIMEDELTA64,
}


def _per_key(value, keys, what):
    """One value per key: a scalar repeated, or a sequence of len(keys)."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(keys):
            raise ValueError("%s: %d values for %d keys" % (what, len(value), len(keys)))
        return list(value)
    return [value] * len(keys)


class TableInput:
    """Named columns and the keys to sort them by, validated and encoded."""

    def __init__(self, columns, by, ascending=True, nulls="last"):
        if hasattr(columns, "keys") and hasattr(columns, "__getitem__"):
            self.names = [str(name) for name in columns.keys()]
            arrays = [columns[name] for name in columns.keys()]
        else:
            arrays = list(columns)
            self.names = [str(i) for i in range(len(arrays))]
        if not arrays:
            raise ValueError("columns: at least one column")
        keys = [by] if isinstance(by, (str, int, np.integer)) else list(by)
        if not keys:
            raise ValueError("by: at least one key column")
        self.by = []
        for key in keys:
            if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
                index = int(key)
                if not 0 <= index < len(arrays):
                    raise ValueError("by: column %d of %d" % (index, len(arrays)))
            elif str(key) in self.names:
                index = self.names.index(str(key))
            else:
                raise KeyError("by: no column %r (columns: %s)" % (key, ", ".join(self.names)))
            self.by.append(index)
        self.ascending = [bool(a) for a in _per_key(ascending, keys, "ascending")]
        self.nulls = _per_key(nulls, keys, "nulls")
        for n in self.nulls:
            if n not in ("last", "first"):
                raise ValueError('nulls must be "last" or "first", got %r' % (n,))
        self.columns = []
        self.masks = []
        self.sources = []  # the caller's arrays (a masked array's data)
        for name, array in zip(self.names, arrays):
            mask = None
            if isinstance(array, np.ma.MaskedArray):
                mask = np.ma.getmaskarray(array)
                array = np.ma.getdata(array)
            column = TypedInput(array, "column %r" % name)
            self.sources.append(array)
            self.columns.append(column)
            self.masks.append(mask if mask is not None and mask.any() else None)
        self.rows = self.columns[0].n
        for name, column in zip(self.names, self.columns):
            if column.n != self.rows:
                raise ValueError("column %r: %d rows, column %r has %d"
                                 % (name, column.n, self.names[0], self.rows))

    def region_slices(self, regions, writable):
        """{column index: RegionSlice} for the fixed-width columns whose
        elements lie in a system region of this client (read where they
        lie; `writable`: reordered there, so read-only arrays are refused)."""
        out = {}
        for c, (name, column) in enumerate(zip(self.names, self.columns)):
            if column.is_bytes:
                continue
            ref = regions.table_slice(column.data, ELEMENT_TYPE_OF[column.kind])
            if ref is None:
                continue
            if writable and not column.data.flags.writeable:
                raise ValueError("column %r: read-only, but return_columns reorders a column "
                                 "in a region where it lies" % name)
            out[c] = ref
        return out

    def request(self, return_columns, request_id, slices=None, indices_slice=None):
        """The SortTable message; columns in `slices` ({index:
        RegionSlice}) by reference, the permutation into `indices_slice`."""
        slices = slices or {}
        parts = []
        for c, (name, column, mask) in enumerate(zip(self.names, self.columns, self.masks)):
            inner = wire.string_field(1, name)
            if c not in slices:
                inner += wire.len_field(2, column.parts())
            if mask is not None:
                inner += wire.len_field(3, [np.packbits(~mask, bitorder="little").tobytes()])
            if c in slices:
                inner += wire.len_field(4, [slices[c].SerializeToString()])
                if column.time_unit:
                    inner += wire.varint_field(5, column.time_unit)
            parts += wire.len_field(1, inner)
        for index, ascending, nulls in zip(self.by, self.ascending, self.nulls):
            key = (wire.varint_field(1, index)
                   + wire.varint_field(2, sort_pb2.SORT_ORDER_ASCENDING if ascending
                                       else sort_pb2.SORT_ORDER_DESCENDING)
                   + wire.varint_field(3, sort_pb2.NULL_PLACEMENT_FIRST if nulls == "first"
                                       else sort_pb2.NULL_PLACEMENT_LAST))
            parts += wire.len_field(2, key)
        parts += wire.varint_field(3, return_columns) + wire.string_field(4, request_id)
        if indices_slice is not None:
            parts += wire.len_field(5, [indices_slice.SerializeToString()])
        return wire.join(parts)

    def fixed_width(self):
        """Whether every column is fixed width (a table session carries it)."""
        return not any(c.is_bytes for c in self.columns)

    def session_columns(self):
        """(name, ElementType, unit, wire data, bitmap or None) per column."""
        out = []
        for name, column, mask in zip(self.names, self.columns, self.masks):
            etype = ELEMENT_TYPE_OF[column.kind]
            bitmap = None
            if mask is not None:
                bitmap = np.packbits(~mask, bitorder="little")
            out.append((name, etype, column.time_unit, column.data, bitmap))
        return out

    def session_keys(self):
        return [sort_pb2.SortKey(
            column=index,
            order=sort_pb2.SORT_ORDER_ASCENDING if ascending else sort_pb2.SORT_ORDER_DESCENDING,
            nulls=sort_pb2.NULL_PLACEMENT_FIRST if nulls == "first" else sort_pb2.NULL_PLACEMENT_LAST)
            for index, ascending, nulls in zip(self.by, self.ascending, self.nulls)]

    def reordered_from_session(self, reordered):
        """{name: column in sorted row order} from a table session's arrays."""
        out = {}
        for name, column, mask, (data, bits) in zip(self.names, self.columns, self.masks,
                                                    reordered):
            values = column.finish([data])
            if mask is not None:
                valid = np.unpackbits(bits, bitorder="little", count=self.rows).astype(bool)
                values = np.ma.MaskedArray(values, mask=~valid)
            out[name] = values
        return out

    def size(self):
        """About the encoded request size (for the message limit)."""
        return sum(c.encoded_size() + (self.rows + 7) // 8 + 16 for c in self.columns)

    def permutation(self, response):
        indices = indices_from(response, 1, clear="columns") if response.indices else \
            np.empty(0, np.uint64)
        return np.asarray(indices, dtype=np.int64)

    def reordered(self, response, slices=None):
        """{name: column in sorted row order}; masked where null. Columns
        in `slices` were reordered where they lie: the caller's arrays."""
        slices = slices or {}
        out = {}
        for c, (name, column, mask, got) in enumerate(zip(self.names, self.columns, self.masks,
                                                          response.columns)):
            if c in slices:
                values = self.sources[c]
            else:
                values = column.finish([column.decode(got.values)])
            if mask is not None:
                valid = np.unpackbits(np.frombuffer(got.validity, np.uint8), bitorder="little",
                                      count=self.rows).astype(bool)
                values = np.ma.MaskedArray(values, mask=~valid)
            out[name] = values
        return out
