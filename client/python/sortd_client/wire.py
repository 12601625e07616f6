"""Minimal protobuf wire-format helpers.

Only what the client needs to build large messages without element-wise
copies and to locate packed fields inside serialized messages. Messages are
represented while being built as lists of "parts": bytes objects or
C-contiguous numpy arrays, joined once at the end with b"".join().
"""

WIRE_VARINT = 0
WIRE_I64 = 1
WIRE_LEN = 2
WIRE_I32 = 5


def varint(value):
    """Encodes a non-negative integer as a base-128 varint."""
    if value < 0:
        raise ValueError("varint of a negative number")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field, wire_type):
    return varint((field << 3) | wire_type)


def nbytes(parts):
    """Total encoded size of a list of parts."""
    return sum(p.nbytes if hasattr(p, "nbytes") else len(p) for p in parts)


def len_field(field, parts):
    """A length-delimited field (sub-message, bytes, packed) around parts."""
    return [tag(field, WIRE_LEN) + varint(nbytes(parts))] + list(parts)


def varint_field(field, value):
    """A varint field (enum, bool, uint64); omitted when 0 (proto3)."""
    value = int(value)
    return [tag(field, WIRE_VARINT) + varint(value)] if value else []


def string_field(field, text):
    """A string field; omitted when empty (proto3)."""
    data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
    return len_field(field, [data]) if data else []


def join(parts):
    return b"".join(parts)


def read_varint(buf, pos):
    """Decodes a varint at buf[pos]; returns (value, new_pos)."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def iter_fields(buf):
    """Yields (field, wire_type, value) for the top-level fields of buf.

    value is an int for VARINT, a memoryview slice for LEN, I32 and I64.
    Runs in O(number of fields), not O(number of packed elements).
    """
    view = memoryview(buf)
    pos, end = 0, len(view)
    while pos < end:
        key, pos = read_varint(view, pos)
        field, wire_type = key >> 3, key & 7
        if wire_type == WIRE_VARINT:
            value, pos = read_varint(view, pos)
        elif wire_type == WIRE_LEN:
            size, pos = read_varint(view, pos)
            value = view[pos:pos + size]
            pos += size
        elif wire_type == WIRE_I64:
            value = view[pos:pos + 8]
            pos += 8
        elif wire_type == WIRE_I32:
            value = view[pos:pos + 4]
            pos += 4
        else:
            raise ValueError("unsupported wire type %d" % wire_type)
        if pos > end:
            raise ValueError("truncated field %d" % field)
        yield field, wire_type, value


def packed_payload(buf, field):
    """The packed payload of repeated fixed-width `field` in serialized buf.

    Returns a memoryview (zero-copy when the field is one record, which is
    how protobuf serializes packed fields) or bytes when it was split.
    """
    chunks = []
    for f, wire_type, value in iter_fields(buf):
        if f != field:
            continue
        if wire_type != WIRE_LEN:
            raise ValueError("field %d is not packed" % field)
        chunks.append(value)
    if not chunks:
        return memoryview(b"")
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)
