"""Sort sessions through the C++ client (libsortd_client_c.so, ctypes).

grpcio moves a session's parts with four copies each and holds the GIL
while it does: about a third of the C++ client's rate. When the C library
is present (named by $SORTD_CLIENT_LIB, shipped in the installed package as
sortd_client/_native/, built beside the stubs in <build>/python, or in the
library path), the Client hands sessions to it: numpy buffers go by pointer, the GIL is released for the whole call
(ctypes does), and the result lands in the preallocated numpy arrays. The
protocol and the server's answers are the same; docs/api.md, "Sort
sessions".
"""

import ctypes
import os
import threading

import numpy as np

from sortd.v1 import sort_pb2

from .errors import SortdError, status_from_int
from .session import ELEMENT_TYPES

ABI_VERSION = 3
_INDEX_DTYPE = np.dtype("<u8")


class _Options(ctypes.Structure):
    _fields_ = [("target", ctypes.c_char_p),
                ("connections", ctypes.c_int),
                ("part_bytes", ctypes.c_uint64),
                ("max_message_bytes", ctypes.c_int),
                ("tls_root_certs_file", ctypes.c_char_p),
                ("tls_client_cert_file", ctypes.c_char_p),
                ("tls_client_key_file", ctypes.c_char_p),
                ("no_busy_retry", ctypes.c_int)]


_PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64,
                             ctypes.c_uint64)
_PHASES = ("upload", "sort", "download")


class _SessionSort(ctypes.Structure):
    _fields_ = [("key_type", ctypes.c_int),
                ("count", ctypes.c_uint64),
                ("keys", ctypes.c_void_p),
                ("keys_out", ctypes.c_void_p),
                ("value_type", ctypes.c_int),
                ("values", ctypes.c_void_p),
                ("values_out", ctypes.c_void_p),
                ("indices_out", ctypes.c_void_p),
                ("descending", ctypes.c_int),
                ("transfer_only", ctypes.c_int),
                ("connections", ctypes.c_int),
                ("timeout_seconds", ctypes.c_double),
                ("progress", _PROGRESS),
                ("progress_user", ctypes.c_void_p),
                ("request_id", ctypes.c_char_p),
                ("compress_keys", ctypes.c_int)]


_lock = threading.Lock()
_loaded = None  # (library or None, why not)


def _candidates():
    named = os.environ.get("SORTD_CLIENT_LIB")
    if named:
        return [named]
    # Shipped in the package (client/python/setup.py), then a build tree's.
    paths = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "_native",
                          "libsortd_client_c.so")]
    try:  # beside the generated stubs (<build>/python)
        from sortd.v1 import sort_pb2
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
            sort_pb2.__file__))))
        paths.append(os.path.join(root, "libsortd_client_c.so"))
    except ImportError:
        pass
    paths.append("libsortd_client_c.so")  # the dynamic loader's search path
    return paths


def load():
    """The C library, or None (with the reason in load_error())."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded[0]
        why = "libsortd_client_c.so not found"
        for path in _candidates():
            if os.sep in path and not os.path.exists(path):
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as err:
                why = str(err)
                continue
            lib.sortd_client_abi_version.restype = ctypes.c_int
            if lib.sortd_client_abi_version() != ABI_VERSION:
                why = "%s: ABI %d, want %d" % (path, lib.sortd_client_abi_version(),
                                                ABI_VERSION)
                continue
            lib.sortd_client_open.restype = ctypes.c_void_p
            lib.sortd_client_open.argtypes = [ctypes.POINTER(_Options), ctypes.c_char_p,
                                              ctypes.c_size_t]
            lib.sortd_client_sort_session.restype = ctypes.c_int
            lib.sortd_client_sort_session.argtypes = [
                ctypes.c_void_p, ctypes.POINTER(_SessionSort), ctypes.POINTER(ctypes.c_int),
                ctypes.c_char_p, ctypes.c_size_t]
            lib.sortd_client_close.restype = None
            lib.sortd_client_close.argtypes = [ctypes.c_void_p]
            _loaded = (lib, path)
            return lib
        _loaded = (None, why)
        return None


def load_error():
    load()
    return None if _loaded[0] is not None else _loaded[1]


def _pointer(array):
    return None if array is None else array.ctypes.data


class NativeSessions:
    """Sort sessions over one C++ client (its connections are reused)."""

    def __init__(self, lib, target, max_message_bytes, part_bytes, connections,
                 retry_busy=True):
        self._lib = lib
        options = _Options(target=target.encode(), connections=int(connections or 0),
                           part_bytes=int(part_bytes), max_message_bytes=int(max_message_bytes),
                           no_busy_retry=0 if retry_busy else 1)
        error = ctypes.create_string_buffer(1024)
        self._handle = lib.sortd_client_open(ctypes.byref(options), error, len(error))
        if not self._handle:
            raise SortdError(status_from_int(3), error.value.decode(errors="replace"))

    def close(self):
        if self._handle:
            self._lib.sortd_client_close(self._handle)
            self._handle = None

    def sort(self, k, v, order, return_indices, request_id, deadline, connections=None,
             progress=None, transfer_only=False, compress=None):
        """(keys_out, values_out, indices_out, engine), as SessionTransport.sort."""
        n = k.n
        keys_out = np.empty(n, k.wire_dtype)
        values_out = np.empty(n, v.wire_dtype) if v is not None else None
        indices_out = np.empty(n, _INDEX_DTYPE) if return_indices else None
        callback = _PROGRESS()
        if progress is not None:
            def report(_user, phase, done, total):
                try:
                    progress(_PHASES[phase], done, total)
                except Exception:  # noqa: BLE001 - never unwind through C++
                    pass
            callback = _PROGRESS(report)
        request = _SessionSort(
            key_type=ELEMENT_TYPES[k.wire_dtype], count=n, keys=_pointer(k.data),
            keys_out=_pointer(keys_out),
            value_type=ELEMENT_TYPES[v.wire_dtype] if v is not None else 0,
            values=_pointer(v.data) if v is not None else None,
            values_out=_pointer(values_out), indices_out=_pointer(indices_out),
            descending=int(order == sort_pb2.SORT_ORDER_DESCENDING),
            transfer_only=int(bool(transfer_only)),
            connections=int(connections or 0),
            timeout_seconds=float(deadline) if deadline is not None else 0.0,
            progress=callback, progress_user=None, request_id=request_id.encode(),
            compress_keys={None: 0, True: 1, False: 2}[compress])
        engine = ctypes.c_int(0)
        error = ctypes.create_string_buffer(4096)
        code = self._lib.sortd_client_sort_session(self._handle, ctypes.byref(request),
                                                   ctypes.byref(engine), error, len(error))
        if code != 0:
            raise SortdError(status_from_int(code), error.value.decode(errors="replace"))
        if values_out is not None:
            values_out = values_out.astype(v.native_dtype, copy=False)
        return (keys_out.astype(k.native_dtype, copy=False), values_out, indices_out,
                engine.value)
