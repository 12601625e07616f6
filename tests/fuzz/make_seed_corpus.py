#!/usr/bin/python3
"""Writes the fuzzers' seed inputs (tests/fuzz/corpus/<fuzzer>/seed-*).

The checked-in corpus is these seeds merged (libFuzzer -merge=1, which
keeps one input per new coverage feature) with what `make fuzz` grew in
build-fuzz/fuzz-corpus; docs/hardening.md says how to refresh it.

Seeds are small, valid-looking inputs that reach every branch family
quickly: every key type and order, indices, pairs with every value type,
float specials, empty arrays, and the refusals (bad enums, length
mismatches, chunk streams out of order or mixing types). libFuzzer mutates
from them. Run with Debian's python3 and the shipped stubs:
  PYTHONPATH=client/python /usr/bin/python3 tests/fuzz/make_seed_corpus.py
"""
import hashlib
import os
import random
import struct

from sortd.v1 import sort_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
TYPES = ["uint32", "int32", "float32", "uint64", "int64", "float64", "bytes"]
SAMPLES = {
    "uint32": [3, 1, 4294967295, 0, 1, 7],
    "int32": [3, -1, -2147483648, 2147483647, -1, 0],
    "float32": [1.5, float("nan"), -0.0, 0.0, float("-inf"), -2.5, float("inf"), 1.5],
    "uint64": [3, 18446744073709551615, 0, 3, 1],
    "int64": [-9223372036854775808, 5, -1, 9223372036854775807, 5],
    "float64": [float("nan"), 2.0, -0.0, 0.0, -1e300, 2.0, float("-inf")],
    "bytes": [b"b", b"", b"ab", b"\xff", b"a", b"ab", b"\x00"],
}


def fill(array, type_name, values):
    getattr(array, type_name).values.extend(values)


def write(fuzzer, data):
    folder = os.path.join(HERE, "corpus", fuzzer)
    os.makedirs(folder, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def request_seeds():
    for t in TYPES:
        for order in (0, 1):
            for indices in (False, True):
                r = sort_pb2.SortRequest(order=order, return_indices=indices, request_id="r-" + t)
                fill(r.keys, t, SAMPLES[t])
                write("request", b"\x00" + r.SerializeToString())
        empty = sort_pb2.SortRequest()
        getattr(empty.keys, t).SetInParent()
        write("request", b"\x00" + empty.SerializeToString())
        for v in TYPES:
            p = sort_pb2.SortPairsRequest(order=1, request_id="p")
            fill(p.keys, t, SAMPLES[t][:5])
            fill(p.values, v, SAMPLES[v][:5])
            write("request", b"\x01" + p.SerializeToString())
    # Refusals: no keys, unknown order, pairs of unequal length, no values.
    write("request", b"\x00")
    bad_order = sort_pb2.SortRequest()
    fill(bad_order.keys, "uint32", [2, 1])
    write("request", b"\x00" + bad_order.SerializeToString() + b"\x10\x07")
    short = sort_pb2.SortPairsRequest()
    fill(short.keys, "int64", [1, 2, 3])
    fill(short.values, "int64", [1, 2])
    write("request", b"\x01" + short.SerializeToString())
    no_values = sort_pb2.SortPairsRequest()
    fill(no_values.keys, "float32", [1.0])
    write("request", b"\x01" + no_values.SerializeToString())


# Types sorted by conversion: packed 8/16-bit elements and bool, times
# with NaT and a unit, both null placements (field 8 of SortRequest).
CONVERTED = {
    "int8": struct.pack("<6b", 3, -1, -128, 127, -1, 0),
    "uint8": bytes([3, 1, 255, 0, 1, 7]),
    "int16": struct.pack("<5h", 3, -32768, 32767, -1, 3),
    "uint16": struct.pack("<5H", 3, 65535, 0, 3, 1),
    # +0, -0, NaN, -NaN with a payload, +inf, -inf, 1.0
    "float16": struct.pack("<7H", 0x0000, 0x8000, 0x7E00, 0xFE01, 0x7C00, 0xFC00, 0x3C00),
    "bfloat16": struct.pack("<7H", 0x0000, 0x8000, 0x7FC0, 0xFFC1, 0x7F80, 0xFF80, 0x3F80),
    "boolean": bytes([1, 0, 1, 1, 0]),
}
NAT = -9223372036854775808


def converted_seeds():
    for t, data in CONVERTED.items():
        for order in (0, 1):
            r = sort_pb2.SortRequest(order=order, return_indices=order == 1)
            getattr(r.keys, t).values = data
            write("request", b"\x00" + r.SerializeToString())
        p = sort_pb2.SortPairsRequest(order=1)
        getattr(p.keys, t).values = data[:4]
        fill(p.values, "uint32", [1, 2, 3, 4][:len(data[:4]) // (1 if t in ("int8", "uint8", "boolean") else 2)])
        write("request", b"\x01" + p.SerializeToString())
        odd = sort_pb2.SortRequest()
        getattr(odd.keys, t).values = data[:3]
        write("request", b"\x00" + odd.SerializeToString())
    for t in ("datetime64", "timedelta64"):
        for order in (0, 1):
            for nulls in (0, 1):
                r = sort_pb2.SortRequest(order=order, return_indices=True, nulls=nulls)
                getattr(r.keys, t).values.extend([5, NAT, -1, 9223372036854775807, NAT, 5, NAT + 1])
                getattr(r.keys, t).unit = sort_pb2.TIME_UNIT_NANOSECOND
                write("request", b"\x00" + r.SerializeToString())
        no_unit = sort_pb2.SortRequest()
        getattr(no_unit.keys, t).values.extend([1, 2])
        write("request", b"\x00" + no_unit.SerializeToString())
        p = sort_pb2.SortPairsRequest(nulls=1)
        fill(p.keys, "int32", [2, 1, 2])
        getattr(p.values, t).values.extend([NAT, 1, 2])
        getattr(p.values, t).unit = sort_pb2.TIME_UNIT_DAY
        write("request", b"\x01" + p.SerializeToString())


def table_seeds():
    """SortTable (byte 0 = 0x80): key columns of several types, nulls by
    bitmap and NaT, orders and placements, return_columns; and refusals."""
    def table(return_columns=False):
        t = sort_pb2.SortTableRequest(return_columns=return_columns, request_id="t")
        a = t.columns.add(name="a")
        a.values.int32.values.extend([2, -1, 2, 0, -1, 7])
        a.validity = bytes([0b101101])
        b = t.columns.add(name="b")
        b.values.float32.values.extend([1.5, float("nan"), -0.0, 0.0, 1.5, float("-inf")])
        c = t.columns.add(name="c")
        c.values.bytes.values.extend([b"x", b"", b"x", b"ab", b"\xff", b"x"])
        d = t.columns.add(name="d")
        d.values.datetime64.values.extend([5, NAT, 5, -1, NAT, 5])
        d.values.datetime64.unit = sort_pb2.TIME_UNIT_SECOND
        e = t.columns.add(name="e")
        e.values.int16.values = struct.pack("<6h", 3, 3, -2, 3, 0, -2)
        return t
    for keys in ([(0, 0, 0)], [(0, 1, 1), (1, 0, 0)], [(2, 0, 0), (3, 1, 1), (4, 1, 0)],
                 [(3, 0, 1), (0, 1, 0), (2, 1, 1), (1, 0, 1)]):
        for return_columns in (False, True):
            t = table(return_columns)
            for column, order, nulls in keys:
                t.by.add(column=column, order=order, nulls=nulls)
            write("request", b"\x80" + t.SerializeToString())
    short = table()
    short.columns[1].values.float32.values.append(1.0)
    short.by.add(column=0)
    write("request", b"\x80" + short.SerializeToString())
    past = table()
    past.by.add(column=9)
    write("request", b"\x80" + past.SerializeToString())
    write("request", b"\x80" + table().SerializeToString())  # no keys


def top_k_seeds():
    """TopK: every core type, both orders, k inside and past the length,
    values, rows and ragged segments (empty ones too), a narrow and a time
    type with NaT first, and the refusals (k 0, both segmentations, rows
    that do not divide, lengths summing wrong, values of another length)."""
    for t in TYPES:
        for order in (0, 1):
            for k in (1, 3, 100):
                r = sort_pb2.TopKRequest(k=k, order=order, return_indices=True, request_id="k")
                fill(r.keys, t, SAMPLES[t])
                write("request", b"\x81" + r.SerializeToString())
        r = sort_pb2.TopKRequest(k=2, row_length=2)
        fill(r.keys, t, SAMPLES[t][:4])
        fill(r.values, "float64", [1.0, 2.0, 3.0, 4.0])
        write("request", b"\x81" + r.SerializeToString())
        r = sort_pb2.TopKRequest(k=2, order=1, return_indices=True, segment_lengths=[0, 3, 0, 2, 0])
        fill(r.keys, t, SAMPLES[t][:5])
        write("request", b"\x81" + r.SerializeToString())
    narrow = sort_pb2.TopKRequest(k=3, return_indices=True)
    narrow.keys.int16.values = struct.pack("<5h", 3, -1, 3, -32768, 0)
    write("request", b"\x81" + narrow.SerializeToString())
    times = sort_pb2.TopKRequest(k=2, nulls=1, segment_lengths=[2, 2])
    times.keys.datetime64.values.extend([5, -9223372036854775808, 3, 3])
    times.keys.datetime64.unit = 10
    write("request", b"\x81" + times.SerializeToString())
    for bad in (dict(k=0), dict(k=1, row_length=2, segment_lengths=[5]), dict(k=1, row_length=2),
                dict(k=1, segment_lengths=[1, 1]), dict(k=1, segment_lengths=[2, 2**64 - 1])):
        r = sort_pb2.TopKRequest(**bad)
        fill(r.keys, "int32", [1, 2, 3, 4, 5])
        write("request", b"\x81" + r.SerializeToString())
    short = sort_pb2.TopKRequest(k=1)
    fill(short.keys, "int32", [1, 2, 3])
    fill(short.values, "int32", [1, 2])
    write("request", b"\x81" + short.SerializeToString())
    write("request", b"\x81" + sort_pb2.TopKRequest(k=1).SerializeToString())  # no keys


def table_region_seeds():
    """SortTable with columns in the fuzzer's region "fuzz" (values,
    bitmaps, the permutation; in place with return_columns) and the
    refusals (values beside values_region, counts off, a bitmap of the
    wrong type, overlaps, a time column without a unit, an unknown region)."""
    def ref(slice_, offset, count, type_, region="fuzz"):
        slice_.region, slice_.offset, slice_.count, slice_.type = region, offset, count, type_

    def table(return_columns, rows=16):
        t = sort_pb2.SortTableRequest(return_columns=return_columns, request_id="shm-t")
        a = t.columns.add(name="a")
        ref(a.values_region, 0, rows, sort_pb2.ELEMENT_TYPE_INT16)
        ref(a.validity_region, 256, (rows + 7) // 8, sort_pb2.ELEMENT_TYPE_UINT8)
        b = t.columns.add(name="b")
        ref(b.values_region, 512, rows, sort_pb2.ELEMENT_TYPE_DATETIME64)
        b.unit = sort_pb2.TIME_UNIT_SECOND
        c = t.columns.add(name="c")
        c.values.float32.values.extend([0.5 * i for i in range(rows)])
        c.validity = bytes([0b10110111] * ((rows + 7) // 8))
        t.by.add(column=0, order=1, nulls=1)
        t.by.add(column=1)
        t.by.add(column=2, order=1)
        return t

    for return_columns in (False, True):
        t = table(return_columns)
        write("request", b"\x80" + t.SerializeToString())
        ref(t.indices_region, 4096, 16, sort_pb2.ELEMENT_TYPE_UINT64)
        write("request", b"\x80" + t.SerializeToString())
    bad = []
    t = table(True); t.columns[0].values.int16.values = b"\0\0"; bad.append(t)
    t = table(True); t.columns[1].values_region.count = 15; bad.append(t)
    t = table(True); t.columns[0].validity_region.type = sort_pb2.ELEMENT_TYPE_UINT32; bad.append(t)
    t = table(True); t.columns[1].unit = 0; bad.append(t)
    t = table(True); t.columns[1].values_region.region = "nope"; bad.append(t)
    t = table(True); t.columns[1].values_region.region = "fuzz2"; t.columns[1].values_region.offset = 0
    bad.append(t)
    t = table(False); ref(t.indices_region, 0, 16, sort_pb2.ELEMENT_TYPE_UINT64); bad.append(t)
    for t in bad:
        write("request", b"\x80" + t.SerializeToString())


def region_seeds():
    """Region references against the fuzzer's 64 KiB region "fuzz" (and
    "fuzz2", the same memory under another name): in place, out of place,
    indices into the region, pairs, and the refusals (unknown region,
    misaligned, out of bounds, overlapping through the other name)."""
    def ref(slice_, region="fuzz", offset=0, count=16, type_=1):
        slice_.region, slice_.offset, slice_.count, slice_.type = region, offset, count, type_

    for type_ in range(1, 7):
        r = sort_pb2.SortRequest(order=type_ % 2, request_id="shm")
        ref(r.keys_region, type_=type_)
        write("request", b"\x00" + r.SerializeToString())
        ref(r.keys_out_region, offset=4096, type_=type_)
        r.return_indices = True
        ref(r.indices_region, offset=8192, type_=4)
        write("request", b"\x00" + r.SerializeToString())
        p = sort_pb2.SortPairsRequest(order=1)
        ref(p.keys_region, type_=type_)
        ref(p.values_region, offset=1024, type_=7 - type_)
        write("request", b"\x01" + p.SerializeToString())
        ref(p.keys_out_region, offset=2048, type_=type_)
        ref(p.values_out_region, region="fuzz2", offset=4096, type_=7 - type_)
        write("request", b"\x01" + p.SerializeToString())
    for type_ in range(1, 7):  # TopK of keys (and values) in the region
        t = sort_pb2.TopKRequest(k=5, order=type_ % 2, return_indices=True, row_length=8)
        ref(t.keys_region, type_=type_)
        write("request", b"\x81" + t.SerializeToString())
        ref(t.values_region, region="fuzz2", offset=512, type_=7 - type_)
        write("request", b"\x81" + t.SerializeToString())
    for region, offset, count in (("nope", 0, 4), ("fuzz", 2, 4), ("fuzz", 0, 1 << 62)):
        t = sort_pb2.TopKRequest(k=2)
        ref(t.keys_region, region=region, offset=offset, count=count)
        write("request", b"\x81" + t.SerializeToString())
    for region, offset, count in (("nope", 0, 4), ("fuzz", 2, 4), ("fuzz", 65532, 2),
                                  ("fuzz", 0, 1 << 62)):
        r = sort_pb2.SortRequest()
        ref(r.keys_region, region=region, offset=offset, count=count)
        write("request", b"\x00" + r.SerializeToString())
    r = sort_pb2.SortRequest()
    ref(r.keys_region)
    ref(r.keys_out_region, region="fuzz2", offset=4)
    write("request", b"\x00" + r.SerializeToString())


def framed(config, messages):
    out = bytes([config])
    for m in messages:
        raw = m.SerializeToString()
        out += struct.pack("<H", len(raw)) + raw
    return out


def header(total=0, order=0, indices=False, with_values=False):
    m = sort_pb2.SortChunkedRequest()
    m.header.SetInParent()
    m.header.total_keys = total
    m.header.order = order
    m.header.return_indices = indices
    m.header.with_values = with_values
    return m


def chunk(key_type, keys, value_type=None, values=()):
    m = sort_pb2.SortChunkedRequest()
    fill(m.chunk.keys, key_type, keys)
    if value_type:
        fill(m.chunk.values, value_type, values)
    return m


def chunked_seeds():
    for t in TYPES:
        keys = SAMPLES[t]
        half = len(keys) // 2
        for config in (2, 7):
            # Announced and exact, in two chunks; unannounced; pairs.
            write("chunked", framed(config, [header(len(keys)), chunk(t, keys[:half]),
                                             chunk(t, keys[half:])]))
            write("chunked", framed(config, [header(0, 1, True), chunk(t, keys)]))
            write("chunked", framed(config, [header(len(keys), 0, False, True),
                                             chunk(t, keys, "uint64", range(len(keys)))]))
        # Announced more than sent; more sent than announced.
        write("chunked", framed(1, [header(len(keys) + 3), chunk(t, keys)]))
        write("chunked", framed(1, [header(1), chunk(t, keys)]))
    # Out of order and mixed: chunk first, second header, types changing,
    # values missing or unexpected, a huge announcement, a tiny limit.
    write("chunked", framed(1, [chunk("uint32", [1])]))
    write("chunked", framed(1, [header(2), chunk("uint32", [1]), header(2)]))
    write("chunked", framed(1, [header(0), chunk("uint32", [1]), chunk("int64", [2])]))
    write("chunked", framed(1, [header(2, 0, False, True), chunk("uint32", [1], "bytes", [b"x"]),
                                chunk("uint32", [2], "float64", [1.0])]))
    write("chunked", framed(1, [header(1, 0, False, True), chunk("uint32", [1])]))
    write("chunked", framed(1, [header(1), chunk("uint32", [1], "uint32", [1])]))
    write("chunked", framed(1, [header(1 << 40), chunk("uint64", [3, 1, 2])]))
    write("chunked", framed(0, [header(100), chunk("uint64", list(range(100)))]))
    write("chunked", framed(0, [header(0), chunk("bytes", [b"x" * 200])]))


def cpu_seeds():
    for type_index, t in enumerate(TYPES):
        if t == "bytes":
            body = b"".join(bytes([len(s)]) + s for s in SAMPLES[t])
        else:
            fmt = {"uint32": "I", "int32": "i", "float32": "f", "uint64": "Q", "int64": "q",
                   "float64": "d"}[t]
            body = struct.pack("<%d%s" % (len(SAMPLES[t]), fmt), *SAMPLES[t]) * 6
        for flags in (0, 1, 2, 3, 4, 6, 8, 10, 11, 14):
            write("cpu_engine", bytes([type_index, flags, 3]) + bytes([5, 9, 0]) + body)


def session_record(array, offset, body, slices=0):
    """A built part (flag bit 0 clear): array, offset, then the body."""
    data = bytes([array, offset]) + body
    return bytes([slices << 1, len(data) & 0xFF, len(data) >> 8]) + data


def raw_record(data, slices=0):
    return bytes([1 | (slices << 1), len(data) & 0xFF, len(data) >> 8]) + data


def session_seeds():
    widths = [4, 4, 4, 8, 8, 8]
    for key_index in range(6):
        for value_pick in (6, 0, 3):  # no values, 4-byte, 8-byte values
            n = 6
            kw = widths[key_index]
            keys = bytes(range(1, 1 + n * kw))[::-1]
            for order_bits in (0, 64, 128, 192):
                head = bytes([key_index + 6 * value_pick, n | order_bits])
                records = session_record(1, 3, keys[3 * kw:], slices=order_bits >> 6 & 3)
                records += session_record(1, 0, keys[:3 * kw])
                if value_pick != 6:
                    vw = widths[value_pick]
                    records += session_record(2, 0, bytes(range(n * vw)))
                write("session", head + records)
    # Overlaps, a gap, partial elements, past the end, bytes that are no part.
    head = bytes([0 + 6 * 6, 8])
    write("session", head + session_record(1, 0, b"\x01" * 16) + session_record(1, 2, b"\x02" * 8))
    write("session", head + session_record(1, 0, b"\x01" * 12) + session_record(1, 5, b"\x02" * 12))
    write("session", head + session_record(1, 0, b"\x01" * 7) + session_record(1, 7, b"\x02" * 8))
    write("session", head + raw_record(b"\x0a\x01x\x10\x01\x7a\x04abcd", 2) + raw_record(b"\xff\xff"))
    write("session", head + raw_record(b"\x10\x01\x18\x02\x7a\x04abcd\x08\x01"))


def table_session_seeds():
    """Table sessions (byte 0 >= 0xF0): every column type, bitmaps, keys in
    both orders and placements, whole and split parts; a bool byte of 2."""
    widths = [4, 4, 4, 8, 8, 8, 1, 1, 2, 2, 2, 2, 1, 8, 8]
    n = 9
    for t in range(15):
        for variant in range(3):
            cols = [t | (16 if variant else 0), (t + 5) % 15]
            keys = [0 | (16 * (variant & 1)) | (32 if variant == 2 else 0), 1]
            head = bytes([0xF0, n | (64 if variant == 1 else 0), len(cols) - 1]) + bytes(cols)
            head += bytes([len(keys) - 1]) + bytes(keys)
            records = b""
            for c, ct in enumerate(cols):
                w = widths[ct & 15]
                body = bytes((7 * i + 3 * c) % 5 if (ct & 15) != 12 else i % 2 for i in range(n * w))
                # array 4 (COLUMN) of column c: selector 4 + 6 * c; split in two parts
                records += session_record(4 + 6 * c, 0, body[:4 * w], slices=variant)
                records += session_record(4 + 6 * c, 4, body[4 * w:])
                if ct & 16:
                    records += session_record(5 + 6 * c, 0, bytes([0b10110111, 0b1]))
            write("session", head + records)
    # A bool byte of 2, a missing bitmap, a column past the table, a part of
    # the keys array (not a table's).
    head = bytes([0xF1, 4, 0, 12 | 16, 0, 0])
    write("session", head + session_record(4, 0, bytes([1, 2, 0, 1])) + session_record(5, 0, b"\x0f"))
    write("session", head + session_record(4, 0, bytes([1, 0, 0, 1])))
    write("session", head + session_record(4 + 6 * 3, 0, bytes([1, 0, 0, 1])) + session_record(1, 0, b"\x01" * 4))
    # without_permutation (byte 1, bit 7) with return_columns: one bare
    # column of every type (sorted as keys alone where it may be), float32
    # and float64 with NaNs of several payloads and signed zeros among them.
    specials = {2: [struct.pack("<f", x) for x in (1.5, -0.0, 0.0)] + [b"\x01\x00\xc0\x7f", b"\x02\x00\xc0\xff"],
                5: [struct.pack("<d", x) for x in (1.5, -0.0, 0.0)] + [b"\x01" + b"\x00" * 5 + b"\xf8\x7f",
                                                                    b"\x03" + b"\x00" * 5 + b"\xf8\xff"]}
    for t in range(15):
        for descending in (0, 16):
            w = widths[t]
            if t in specials:
                body = b"".join(specials[t][(3 * i) % 5] for i in range(n))
            else:
                body = bytes((7 * i) % 5 if t != 12 else i % 2 for i in range(n * w))
            head = bytes([0xF0, n | 64 | 128, 0, t, 0, descending])
            write("session", head + session_record(4, 0, body))


def blocks_seeds():
    """blocks_fuzzer: round trips (mode 1) of sorted and unsorted keys of
    each width and kind, some damaged; and hostile bodies (mode 0): a
    hand-made valid block and damaged copies of it."""
    rng = random.Random(11)
    for width in (4, 8):
        for kind in range(3):
            for desc in (0, 8):
                coding = (1 if width == 8 else 0) | (kind << 1) | desc
                keys = b"".join(rng.getrandbits(8 * width).to_bytes(width, "little")
                                for _ in range(700))
                for sort, flip in ((2, 0), (2, 0x10), (0, 0x01)):
                    write("blocks", bytes([coding, 1 | sort, 77, flip]) + keys)
    # Mode 0: one StreamVByte block of the keys 5, 6, 8, 8 (gaps 0, 1, 2, 0).
    header = bytes([1, 4, 0, 0]) + (4).to_bytes(4, "little") + (5).to_bytes(4, "little") \
        + bytes(4) + (5).to_bytes(8, "little") + (27).to_bytes(8, "little")
    block = header + bytes([0]) + bytes([0, 1, 2, 0])
    for body in (block, block[:-1], block + b"\x00", block[:8] + b"\xff" + block[9:]):
        write("blocks", bytes([0, 0, 4, 0, 0]) + body)


if __name__ == "__main__":
    request_seeds()
    converted_seeds()
    table_seeds()
    top_k_seeds()
    region_seeds()
    table_region_seeds()
    chunked_seeds()
    cpu_seeds()
    session_seeds()
    table_session_seeds()
    blocks_seeds()
    for fuzzer in ("request", "chunked", "cpu_engine", "session"):
        print(fuzzer, len(os.listdir(os.path.join(HERE, "corpus", fuzzer))), "seeds")
