"""Exceptions raised by the sortd client."""

import grpc

# google.rpc.Code value -> grpc.StatusCode (they share the numbering).
_STATUS_BY_VALUE = {status.value[0]: status for status in grpc.StatusCode}


def status_from_int(value):
    """The grpc.StatusCode for a google.rpc.Code integer (UNKNOWN if unknown)."""
    return _STATUS_BY_VALUE.get(int(value), grpc.StatusCode.UNKNOWN)


class SortdError(Exception):
    """A failed RPC. `code` is a grpc.StatusCode, `details` the server's text."""

    def __init__(self, code, details):
        self.code = code
        self.details = details or ""
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        super().__init__("%s: %s" % (name, self.details))

    @property
    def message(self):
        return self.details

    @classmethod
    def from_rpc_error(cls, err):
        code = err.code() if callable(getattr(err, "code", None)) else None
        details = err.details() if callable(getattr(err, "details", None)) else None
        return cls(code or grpc.StatusCode.UNKNOWN, details or str(err))


class ProtocolError(SortdError):
    """The server's answer violated the sortd protocol (counts, types, order)."""

    def __init__(self, details):
        super().__init__(grpc.StatusCode.INTERNAL, "protocol error: " + details)


class RequestError(SortdError):
    """One request of a SortStream failed (the response had `error` set).

    `code` is the grpc.StatusCode, `rpc_code` the raw google.rpc.Code int.
    """

    def __init__(self, rpc_code, message, request_id):
        self.rpc_code = int(rpc_code)
        self.request_id = request_id
        super().__init__(status_from_int(rpc_code), message)

    def __str__(self):
        return "request %r: %s" % (self.request_id, super().__str__())
