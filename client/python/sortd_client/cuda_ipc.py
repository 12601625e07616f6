"""CUDA IPC handles for device arrays, through ctypes (no CuPy/PyTorch needed).

A device array (anything with `__cuda_array_interface__`: CuPy, PyTorch,
Numba) is shared with sortd by exporting its whole allocation with
cudaIpcGetMemHandle: a handle always names an allocation's first byte, so
the region is the allocation (cuMemGetAddressRange, from the driver) and the
array is at `pointer - base` in it. Libraries load on first use only: this
module imports where no CUDA exists and raises CudaError when used there.

The runtime is $SORTD_CUDART_LIB, else ctypes.util.find_library("cudart"),
else /usr/local/cuda/lib64/libcudart.so*; the driver is libcuda.so.1.
"""

import contextlib
import ctypes
import ctypes.util
import glob
import os
import threading

import numpy as np

IPC_HANDLE_BYTES = 64
_MEMORY_TYPE_DEVICE = 2  # cudaMemoryTypeDevice


class CudaError(RuntimeError):
    """CUDA is missing here, or a CUDA call on a device array failed."""


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]


class _PointerAttributes(ctypes.Structure):
    # cudaPointerAttributes (CUDA 11+); `reserved` covers the fields newer
    # runtimes append, so that no runtime writes past this struct.
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int),
                ("device_pointer", ctypes.c_void_p), ("host_pointer", ctypes.c_void_p),
                ("reserved", ctypes.c_long * 16)]


_lock = threading.Lock()
_libs = {}  # "cudart" / "cuda" -> CDLL, or the CudaError that loading raised


def _runtime_candidates():
    named = os.environ.get("SORTD_CUDART_LIB")
    if named:
        return [named]
    found = ctypes.util.find_library("cudart")
    # Newest version first ("libcudart.so.13" sorts after "libcudart.so.12").
    return ([found] if found else []) + sorted(
        glob.glob("/usr/local/cuda/lib64/libcudart.so*"), reverse=True)


def _load(which):
    with _lock:
        lib = _libs.get(which)
        if lib is None:
            names = _runtime_candidates() if which == "cudart" else ["libcuda.so.1"]
            errors = []
            for name in names:
                try:
                    lib = ctypes.CDLL(name)
                    break
                except OSError as err:
                    errors.append(str(err))
            else:
                lib = CudaError("CUDA %s library not found (tried %s%s)" % (
                    "runtime" if which == "cudart" else "driver",
                    ", ".join(names) or "nothing: no libcudart on the search path",
                    "; " + "; ".join(errors) if errors else "")
                    + ("; set SORTD_CUDART_LIB to libcudart.so's path" if which == "cudart"
                       else ""))
            _libs[which] = lib
    if isinstance(lib, CudaError):
        raise lib
    return lib


def cudart():
    """The CUDA runtime library (ctypes.CDLL); CudaError where there is none."""
    return _load("cudart")


def check(code, call):
    """Raises CudaError for a cudaError_t other than cudaSuccess."""
    if code != 0:
        rt = cudart()
        rt.cudaGetErrorString.restype = ctypes.c_char_p
        text = rt.cudaGetErrorString(ctypes.c_int(code)) or b"unknown error"
        raise CudaError("%s: %s (cudaError_t %d)" % (call, text.decode(errors="replace"), code))


@contextlib.contextmanager
def on_device(device):
    """`device` current on this thread (its primary context made current,
    as the driver calls need), the previous device restored after."""
    rt = cudart()
    previous = ctypes.c_int(0)
    check(rt.cudaGetDevice(ctypes.byref(previous)), "cudaGetDevice")
    if previous.value != device:
        check(rt.cudaSetDevice(ctypes.c_int(device)), "cudaSetDevice(%d)" % device)
    try:
        check(rt.cudaFree(ctypes.c_void_p(0)), "cudaFree(0)")  # initializes the context
        yield
    finally:
        if previous.value != device:
            rt.cudaSetDevice(previous)


def interface(obj, what="array"):
    """(pointer, element count, numpy dtype) of a 1-D contiguous device array."""
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        raise TypeError("%s has no __cuda_array_interface__" % what) from None
    shape = tuple(cai["shape"])
    dtype = np.dtype(cai["typestr"])
    if len(shape) != 1:
        raise ValueError("%s must be one-dimensional, got shape %s" % (what, shape))
    strides = cai.get("strides")
    if strides is not None and shape[0] > 1 and tuple(strides) != (dtype.itemsize,):
        raise ValueError("%s must be contiguous, got strides %s" % (what, strides))
    pointer, readonly = cai["data"]
    if readonly:
        raise ValueError("%s is read-only; a region sort writes it" % what)
    return int(pointer or 0), shape[0], dtype


def flat_interface(obj, what="array"):
    """(pointer, element count, numpy dtype, shape) of a C-contiguous
    device array of any dimension (read only: a selection reads it)."""
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        raise TypeError("%s has no __cuda_array_interface__" % what) from None
    shape = tuple(int(x) for x in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    if strides is not None:
        want, step = [], dtype.itemsize
        for extent in reversed(shape):
            want.append(step)
            step *= extent
        if any(extent > 1 and got != expected
               for extent, got, expected in zip(shape, strides, reversed(want))):
            raise ValueError("%s must be C-contiguous, got strides %s" % (what, strides))
    count = 1
    for extent in shape:
        count *= extent
    return int(cai["data"][0] or 0), count, dtype, shape


def synchronize(obj):
    """Waits for the work that produces obj (its interface's stream, else
    the whole device) before another process (the server) reads it."""
    cai = obj.__cuda_array_interface__
    rt = cudart()
    stream = cai.get("stream")
    with on_device(pointer_device(int(cai["data"][0] or 0))):
        if stream is not None:  # 1, 2: the legacy / per-thread default streams
            check(rt.cudaStreamSynchronize(ctypes.c_void_p(int(stream))),
                  "cudaStreamSynchronize")
        else:
            check(rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")


def pointer_device(pointer):
    """The CUDA ordinal of the GPU holding device memory at `pointer`."""
    rt = cudart()
    attrs = _PointerAttributes()
    check(rt.cudaPointerGetAttributes(ctypes.byref(attrs), ctypes.c_void_p(pointer)),
          "cudaPointerGetAttributes")
    if attrs.type != _MEMORY_TYPE_DEVICE:
        raise CudaError("pointer 0x%x is not device memory from cudaMalloc (cudaMemoryType %d): "
                        "CUDA IPC shares only that" % (pointer, attrs.type))
    return attrs.device


def allocation(pointer):
    """(device, base, size) of the cudaMalloc allocation holding `pointer`."""
    device = pointer_device(pointer)
    driver = _load("cuda")
    base, size = ctypes.c_uint64(0), ctypes.c_size_t(0)
    with on_device(device):
        code = driver.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size),
                                              ctypes.c_uint64(pointer))
    if code != 0:
        raise CudaError("cuMemGetAddressRange(0x%x): CUresult %d" % (pointer, code))
    return device, base.value, size.value


def ipc_handle(device, base):
    """The 64-byte cudaIpcMemHandle_t of the allocation starting at `base`."""
    handle = _IpcHandle()
    with on_device(device):
        check(cudart().cudaIpcGetMemHandle(ctypes.byref(handle), ctypes.c_void_p(base)),
              "cudaIpcGetMemHandle")
    return bytes(handle.reserved)
