"""Same-host regions (RegionService; docs/api.md, "Shared-memory regions").

A client on the server's host registers memory once (POSIX shared memory it
creates, or CUDA device memory through an IPC handle); a Sort or SortPairs
of an array inside such memory then names region, offset and count, and the
server sorts it where it lies: no payload crosses the socket. The server
must run with --shared_memory, and the target must reach one server on this
host (a unix:/path target or loopback).

This module keeps the client's own record of what it registered and where
that memory is in this process, so that Client.sort() can tell from an
array's address that it lies in a region (the region path), and builds the
region requests.
"""

import collections
import itertools
import os
import secrets
import threading
from multiprocessing import resource_tracker, shared_memory

import grpc
import numpy as np

from sortd.v1 import sort_pb2

from . import cuda_ipc
from .arrays import finish_indices, indices_from
from .errors import ProtocolError, SortdError
from .session import ELEMENT_TYPES

_PATH = "/sortd.v1.RegionService/"
_INDEX_DTYPE = np.dtype("<u8")
_names = itertools.count()

RegionInfo = collections.namedtuple(
    "RegionInfo", ["name", "kind", "byte_size", "shm_key", "device_id", "pinned"])
RegionInfo.__doc__ = """A registered region as ListRegions reports it; kind is
the RegionKind enum name ("REGION_KIND_SYSTEM" or "REGION_KIND_CUDA"),
device_id is -1 for system regions."""


def _default_name():
    # Unique across this host's clients: the pid, a counter and randomness.
    return "sortd-py-%d-%d-%s" % (os.getpid(), next(_names), secrets.token_hex(4))


class _Mapping:
    """The numpy arrays' base object. It holds the SharedMemory, so the
    mapping outlives the registration until the last view of it is gone
    (then SharedMemory's own finalizer unmaps it). Views hold no buffer
    export on shm.buf, so that finalizer never fails with BufferError."""

    def __init__(self, shm, shape, dtype):
        self.shm = shm
        view = np.frombuffer(shm.buf, np.uint8, count=1)
        address = view.ctypes.data
        del view  # the export on shm.buf ends here
        self.__array_interface__ = {"version": 3, "shape": shape, "typestr": dtype.str,
                                    "data": (address, False)}


class SharedArray:
    """POSIX shared memory created here, viewed as a numpy array, and
    registered with the client's server (RegisterSystemRegion).

        with SharedArray(client, 1 << 20, np.uint32) as shared:
            shared.array[:] = data
            client.sort(shared.array)  # sorted in place, nothing on the wire

    close() (or client.unregister_region(name), or client.close())
    unregisters it and unlinks the shared-memory object, exactly once; the
    memory stays mapped while numpy views of it live. Client.shared_array()
    returns just the array.
    """

    def __init__(self, client, shape_or_count, dtype, name=None, timeout=None, mode=0o600):
        shape = ((int(shape_or_count),) if np.isscalar(shape_or_count)
                 else tuple(int(d) for d in shape_or_count))
        dtype = np.dtype(dtype)
        self.name = name or _default_name()
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        # The object's name is this process's own, whatever the region's
        # name; SharedMemory registers it with multiprocessing's
        # resource_tracker, which unlinks it should this process die first.
        self._shm = shared_memory.SharedMemory(
            name="sortd-py-%d-%s" % (os.getpid(), secrets.token_hex(8)), create=True,
            size=max(self.nbytes, 1))
        self.shm_key = "/" + self._shm.name
        if mode != 0o600:
            # SharedMemory creates owner-only objects; fchmod is not
            # filtered by the umask (a server running as another user of
            # the object's group needs 0660, docs/deploy.md).
            try:
                os.fchmod(self._shm._fd, mode)
            except BaseException:
                self._shm.close()
                self._shm.unlink()
                raise
        self.array = np.asarray(_Mapping(self._shm, shape, dtype))
        self._regions = client._regions
        self._lock = threading.Lock()
        self._unlinked = False
        try:
            # An empty array has no memory to recognise it by: register the
            # 1-byte object, without a buffer to match arrays against.
            self.pinned = self._regions.register_system(
                self.name, self.shm_key, max(self.nbytes, 1),
                buffer=self.array if self.nbytes > 0 else None, owner=self, timeout=timeout)
        except BaseException:
            self._release()
            raise

    def close(self, timeout=None):
        """Unregisters (a region already gone is fine) and unlinks."""
        self._regions.forget(self.name, self, timeout)

    def _release(self):
        # Called once the region is unregistered: the shm name goes now, the
        # mapping with the last view (see _Mapping).
        with self._lock:
            if self._unlinked:
                return
            self._unlinked = True
        try:
            self._shm.unlink()  # also unregisters it from resource_tracker
        except FileNotFoundError:
            # Unlinked by someone else: only the tracker's entry is left.
            resource_tracker.unregister(self.shm_key, "shared_memory")
        self._shm = None
        self.array = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class CudaRegion:
    """A device allocation registered through CUDA IPC (RegisterCudaRegion);
    device_id is the server's ordinal of its GPU.

    The whole allocation holding the array is the region; the client keeps
    a reference to the array so that the allocation cannot be freed (and
    its addresses reused) while the server has it open.
    """

    def __init__(self, regions, name, device_id, base, byte_size, array):
        self.name, self.device_id, self.base, self.byte_size = name, device_id, base, byte_size
        self.array = array
        self._regions = regions

    def close(self, timeout=None):
        self._regions.forget(self.name, self, timeout)

    def _release(self):
        self.array = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# What this client registered: where the region's bytes are in this process.
_Local = collections.namedtuple("_Local", ["name", "device", "address", "size", "owner", "keep"])
# An array located in a region: the RegionSlice to send and the object.
_Ref = collections.namedtuple("_Ref", ["slice", "obj", "dtype", "count", "cuda"])


def _rpc(call, request, timeout):
    try:
        return call(request, timeout=timeout)
    except grpc.RpcError as err:
        raise SortdError.from_rpc_error(err) from None


# Statuses after which a registration may have happened on the server
# although the client did not hear back.
_OUTCOME_UNKNOWN = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED,
                    grpc.StatusCode.UNAVAILABLE)


class Regions:
    """RegionService calls and the client's registry of its regions
    (thread-safe). Client methods delegate here."""

    def __init__(self, channel):
        def stub(method, request, response):
            return channel.unary_unary(_PATH + method,
                                       request_serializer=request.SerializeToString,
                                       response_deserializer=response.FromString)
        self._register_system = stub("RegisterSystemRegion", sort_pb2.RegisterSystemRegionRequest,
                                     sort_pb2.RegisterSystemRegionResponse)
        self._register_cuda = stub("RegisterCudaRegion", sort_pb2.RegisterCudaRegionRequest,
                                   sort_pb2.RegisterCudaRegionResponse)
        self._unregister = stub("UnregisterRegion", sort_pb2.UnregisterRegionRequest,
                                sort_pb2.UnregisterRegionResponse)
        self._list = stub("ListRegions", sort_pb2.ListRegionsRequest,
                          sort_pb2.ListRegionsResponse)
        self._lock = threading.Lock()
        self._local = {}  # name -> _Local

    # ---- registration ----------------------------------------------------
    def register_system(self, name, shm_key, byte_size, offset=0, buffer=None, owner=None,
                        timeout=None):
        """RegisterSystemRegion; returns whether the server pinned it.

        buffer: this process's own mapping of those bytes (a numpy array or
        any writable buffer, at least byte_size bytes); with it, sorts of
        arrays inside it take the region path. The client holds a view of it
        while registered, so it cannot be unmapped under a sort.
        """
        keep = None
        if buffer is not None:
            keep = buffer if isinstance(buffer, np.ndarray) else np.frombuffer(buffer, np.uint8)
            if not keep.flags.c_contiguous:
                raise ValueError("buffer: must be contiguous memory")
            if keep.nbytes < byte_size:
                raise ValueError("buffer: %d bytes, the region has %d" % (keep.nbytes, byte_size))
        resp = self._register(self._register_system, sort_pb2.RegisterSystemRegionRequest(
            name=name, shm_key=shm_key, offset=offset, byte_size=byte_size), timeout)
        if keep is not None:
            with self._lock:
                self._local[name] = _Local(name, -1, keep.ctypes.data, byte_size, owner, keep)
        return resp.pinned

    def register_cuda(self, array, name=None, device_id=None, timeout=None):
        """Registers the device allocation holding `array` (an object with
        __cuda_array_interface__); returns its CudaRegion. An allocation this
        client registered already is not registered again: its region is
        returned. device_id: the server's ordinal of the GPU, where it
        numbers its GPUs otherwise than this process (CUDA_VISIBLE_DEVICES);
        default: this process's ordinal."""
        pointer, count, _, _ = cuda_ipc.flat_interface(array)  # any C-contiguous shape
        if count == 0:
            raise ValueError("an empty device array has no allocation to register")
        device, base, size = cuda_ipc.allocation(pointer)
        with self._lock:
            for local in self._local.values():
                if local.device == device and local.address == base:
                    if name is not None and name != local.name:
                        raise ValueError("this allocation is registered already, as %r"
                                         % local.name)
                    return local.owner
        handle = cuda_ipc.ipc_handle(device, base)
        name = name or _default_name()
        server_device = device if device_id is None else int(device_id)
        self._register(self._register_cuda, sort_pb2.RegisterCudaRegionRequest(
            name=name, raw_handle=handle, device_id=server_device, byte_size=size), timeout)
        region = CudaRegion(self, name, server_device, base, size, array)
        with self._lock:
            self._local[name] = _Local(name, device, base, size, region, array)
        return region

    def _register(self, call, request, timeout):
        """A registration; when its outcome is unknown (deadline, cancel,
        connection lost) the server may still complete it, so the name is
        unregistered, best effort, before the error is raised: the caller
        is about to free the memory behind it."""
        try:
            return _rpc(call, request, timeout)
        except SortdError as err:
            if err.code in _OUTCOME_UNKNOWN:
                try:
                    _rpc(self._unregister, sort_pb2.UnregisterRegionRequest(name=request.name),
                         timeout)
                except SortdError:
                    pass
            raise

    def unregister(self, name, timeout=None):
        """UnregisterRegion, and the client's own part of it released (a
        SharedArray's object unlinked). A name the server no longer knows
        but this client does is released without error."""
        try:
            _rpc(self._unregister, sort_pb2.UnregisterRegionRequest(name=name), timeout)
        except SortdError as err:
            with self._lock:
                known = name in self._local
            if err.code != grpc.StatusCode.NOT_FOUND or not known:
                raise
        self._drop(name, None)

    def forget(self, name, owner, timeout=None):
        """For close(): unregister best effort, then release regardless."""
        with self._lock:
            local = self._local.get(name)
        if local is not None and local.owner is owner:
            try:
                _rpc(self._unregister, sort_pb2.UnregisterRegionRequest(name=name), timeout)
            except SortdError:
                pass  # gone already, or the server is: nothing more to undo there
        self._drop(name, owner)
        owner._release()

    def _drop(self, name, owner):
        with self._lock:
            local = self._local.get(name)
            if local is None or (owner is not None and local.owner is not owner):
                return
            del self._local[name]
        if local.owner is not None:
            local.owner._release()

    def list(self, timeout=None):
        resp = _rpc(self._list, sort_pb2.ListRegionsRequest(), timeout)
        return [RegionInfo(r.name, sort_pb2.RegionKind.Name(r.kind), r.byte_size, r.shm_key,
                           r.device_id, r.pinned) for r in resp.regions]

    def close(self, timeout=None):
        """Unregisters and releases everything this client registered."""
        with self._lock:
            registered = list(self._local.values())
        for local in registered:
            if local.owner is not None:
                self.forget(local.name, local.owner, timeout)
            else:
                try:
                    self.unregister(local.name, timeout)
                except SortdError:
                    self._drop(local.name, None)

    # ---- locating arrays -------------------------------------------------
    def name_of(self, obj):
        """The name of this client's region holding obj, or None."""
        ref = self.locate(obj, "array", strict=False)
        return ref.slice.region if ref is not None and ref.slice is not None else None

    def locate(self, obj, what, strict=True):
        """A _Ref when obj's memory lies in a region this client registered.

        numpy arrays that do not (or cannot: not 1-D contiguous writable
        little-endian numbers) give None, for the message path; device
        arrays have no other path, so with strict they raise ValueError.
        """
        if isinstance(obj, np.ndarray):
            if (obj.ndim != 1 or not obj.flags.c_contiguous or not obj.flags.writeable
                    or obj.dtype not in ELEMENT_TYPES):
                return None
            address, count, dtype, device = obj.ctypes.data, obj.shape[0], obj.dtype, -1
        else:
            try:
                obj.__cuda_array_interface__
            except AttributeError:
                return None
            address, count, dtype = cuda_ipc.interface(obj, what)
            if dtype not in ELEMENT_TYPES:
                raise TypeError("%s: unsupported dtype %s for a region sort" % (what, dtype))
            if count == 0:  # nothing to sort; it may have no address at all
                return _Ref(None, obj, dtype, 0, True)
            device = cuda_ipc.pointer_device(address)
        local = self._holding(address, count * dtype.itemsize, device)
        if local is not None:
            rs = sort_pb2.RegionSlice(region=local.name, offset=address - local.address,
                                      count=count, type=ELEMENT_TYPES[dtype])
            return _Ref(rs, obj, dtype, count, device >= 0)
        if device >= 0 and strict:
            raise ValueError("%s: a device array must lie in a CUDA region this client "
                             "registered (Client.register_cuda_array)" % what)
        return None

    def locate_device(self, obj, what):
        """The _Ref of a C-contiguous device array of any dimension (rows of
        a TopK) in a CUDA region this client registered, its producer's
        work waited for (the server reads it from another process);
        ValueError when it lies in none."""
        address, count, dtype, _ = cuda_ipc.flat_interface(obj, what)
        if dtype not in ELEMENT_TYPES:
            raise TypeError("%s: unsupported dtype %s for a region request" % (what, dtype))
        if count == 0:
            raise ValueError("%s: an empty device array names no memory; send a numpy array"
                             % what)
        device = cuda_ipc.pointer_device(address)
        local = self._holding(address, count * dtype.itemsize, device)
        if local is None:
            raise ValueError("%s: a device array must lie in a CUDA region this client "
                             "registered (Client.register_cuda_array)" % what)
        cuda_ipc.synchronize(obj)
        rs = sort_pb2.RegionSlice(region=local.name, offset=address - local.address,
                                  count=count, type=ELEMENT_TYPES[dtype])
        return _Ref(rs, obj, dtype, count, True)

    def table_slice(self, data, element_type):
        """The RegionSlice of a table column's elements (a 1-D contiguous
        host array of any fixed-width dtype: its wire view) when they lie in
        a system region this client registered, else None. Device arrays
        raise ValueError: a table's columns lie in host memory."""
        if not isinstance(data, np.ndarray):
            try:
                data.__cuda_array_interface__
            except AttributeError:
                return None
            raise ValueError("a table's columns lie in host memory (system regions); device "
                             "arrays sort as arrays (Client.sort)")
        if data.ndim != 1 or not data.flags.c_contiguous:
            return None
        local = self._holding(data.ctypes.data, data.nbytes, -1)
        if local is None:
            return None
        return sort_pb2.RegionSlice(region=local.name, offset=data.ctypes.data - local.address,
                                    count=data.shape[0], type=element_type)

    def _holding(self, address, size, device):
        """This client's region holding [address, address + size) on
        `device` (-1: host memory), or None."""
        with self._lock:
            for local in self._local.values():
                if (local.device == device and local.address <= address
                        and address + size <= local.address + local.size):
                    return local
        return None

    def plan(self, keys, values, out, values_out, indices_out, return_indices):
        """The region refs of a sort ({role: _Ref}), or None for the message
        path. Raises ValueError for a mix of region and other arrays."""
        k = self.locate(keys, "keys")
        v = self.locate(values, "values") if values is not None else None
        if k is None and v is None:
            if any(x is not None for x in (out, values_out, indices_out)):
                raise ValueError("out=, values_out= and indices_out= are for arrays in "
                                 "registered regions (sorted in place by default)")
            return None
        if values is not None and (k is None or v is None):
            raise ValueError("keys and values must both lie in registered regions (or "
                             "neither; chunked=False sorts copies through messages)")
        refs = {"keys": k}
        if v is not None:
            if return_indices:
                raise ValueError("return_indices with values: SortPairs has no indices")
            if v.count != k.count:
                raise ValueError("keys and values differ in length (%d vs %d)"
                                 % (k.count, v.count))
            refs["values"] = v
        for role, obj, like in (("keys_out", out, k), ("values_out", values_out, v),
                                ("indices", indices_out, None)):
            if obj is None:
                continue
            if role == "values_out" and v is None:
                raise ValueError("values_out= needs values")
            if role == "indices" and not return_indices:
                raise ValueError("indices_out= needs return_indices=True")
            ref = self.locate(obj, role)
            if ref is None:
                raise ValueError("%s must lie in a region this client registered" % role)
            dtype = like.dtype if like is not None else _INDEX_DTYPE
            if ref.dtype != dtype or ref.count != k.count:
                raise ValueError("%s: %d elements of %s, expected %d of %s" % (
                    role, ref.count, ref.dtype, k.count, dtype))
            refs[role] = ref
        return refs

    # ---- sorting ---------------------------------------------------------
    def sort(self, refs, sort_call, pairs_call, order, return_indices, request_id, deadline):
        """Runs a planned region sort; (keys, values, indices, request_id,
        engine number). Keys and values are the caller's objects, now sorted
        (the outputs where given); indices a uint64 array from the response
        or the caller's indices_out."""
        k = refs["keys"]
        pairs = "values" in refs
        if any(r.cuda for r in refs.values()):
            if k.count == 0:  # nothing to sort, and no address to name
                indices = (refs["indices"].obj if "indices" in refs
                           else np.empty(0, np.uint64) if return_indices else None)
                return (refs.get("keys_out", k).obj,
                        refs.get("values_out", refs.get("values", k)).obj if pairs else None,
                        indices, request_id, 0)
            # The server reads from another process: the producer's work
            # must be complete.
            for ref in refs.values():
                if ref.cuda:
                    cuda_ipc.synchronize(ref.obj)
        if pairs:
            request = sort_pb2.SortPairsRequest(order=order, request_id=request_id)
            for role, field in (("keys", "keys_region"), ("values", "values_region"),
                                ("keys_out", "keys_out_region"),
                                ("values_out", "values_out_region")):
                if role in refs:
                    getattr(request, field).CopyFrom(refs[role].slice)
            resp = _rpc(pairs_call, request.SerializeToString(), deadline)
        else:
            request = sort_pb2.SortRequest(order=order, return_indices=return_indices,
                                           request_id=request_id)
            request.keys_region.CopyFrom(k.slice)
            if "keys_out" in refs:
                request.keys_out_region.CopyFrom(refs["keys_out"].slice)
            if "indices" in refs:
                request.indices_region.CopyFrom(refs["indices"].slice)
            resp = _rpc(sort_call, request.SerializeToString(), deadline)
        indices = None
        if return_indices:
            if "indices" in refs:
                indices = refs["indices"].obj
            else:
                indices = finish_indices([indices_from(resp, 2, clear="keys")])
                if len(indices) != k.count:
                    raise ProtocolError("indices: got %d elements, expected %d"
                                        % (len(indices), k.count))
        values = refs.get("values_out", refs.get("values")) if pairs else None
        return (refs.get("keys_out", k).obj, values.obj if values is not None else None,
                indices, resp.request_id, resp.engine)
