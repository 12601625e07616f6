"""Unary responses read from their serialized bytes.

Sort and SortPairs answers are mostly one packed array. Parsed as protobuf
messages, that array is copied into the message, copied again to be viewed
as numpy (arrays.TypedInput.decode re-serializes the wrapper) and once more
into the writable result, each copy into fresh pages. Read from the bytes
grpcio hands over, the arrays are memoryviews of those bytes and only the
result is a copy (TypedInput.decode_serialized).
"""

import collections

from . import wire
from .errors import ProtocolError

# The top-level fields of a serialized unary response: the TypedArray
# fields (memoryviews; None where absent), the packed indices (a memoryview
# or b""), request_id and engine.
RawResponse = collections.namedtuple(
    "RawResponse", ["arrays", "indices", "request_id", "engine"])

SORT_RESPONSE = {"arrays": (1,), "indices": 2, "request_id": 3, "engine": 4}
SORT_PAIRS_RESPONSE = {"arrays": (1, 2), "indices": None, "request_id": 3, "engine": 4}


def read_response(serialized, layout):
    """Splits a serialized SortResponse or SortPairsResponse (layout: one of
    the tables above) into a RawResponse, without copying the arrays."""
    arrays = {f: None for f in layout["arrays"]}
    indices, request_id, engine = [], b"", 0
    try:
        for field, wire_type, value in wire.iter_fields(serialized):
            if field in arrays and wire_type == wire.WIRE_LEN:
                arrays[field] = value  # one per response (the server's)
            elif field == layout["indices"] and wire_type == wire.WIRE_LEN:
                indices.append(value)
            elif field == layout["request_id"] and wire_type == wire.WIRE_LEN:
                request_id = bytes(value)
            elif field == layout["engine"] and wire_type == wire.WIRE_VARINT:
                engine = value
    except ValueError as err:
        raise ProtocolError("the response does not parse: %s" % err) from None
    if not indices:
        indices = memoryview(b"")
    elif len(indices) == 1:
        indices = indices[0]
    else:
        indices = b"".join(indices)
    return RawResponse([arrays[f] for f in layout["arrays"]], indices,
                       request_id.decode("utf-8", errors="replace"), engine)
