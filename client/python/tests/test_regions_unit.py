"""Region support of sortd_client without a server: the CUDA path imports
everywhere and fails clearly only when used, device-array checks, and the
region path leaves arrays outside regions to the message path.
(tests/e2e/test_regions.py runs all of it against the real sortd.)

Run from the repository root:
  PYTHONPATH=<build>/python:client/python \
      /usr/bin/python3 -m unittest discover -s client/python/tests
"""

import os
import unittest
from unittest import mock

import numpy as np

from sortd_client import Client, CudaError
from sortd_client import cuda_ipc


class FakeDeviceArray:
    def __init__(self, shape=(4,), typestr="<u4", strides=None, readonly=False):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (0x7f0000000000, readonly),
                                         "strides": strides, "version": 3}


class CudaIpcTest(unittest.TestCase):
    def test_a_missing_runtime_raises_cuda_error_only_when_used(self):
        with mock.patch.dict(os.environ, {"SORTD_CUDART_LIB": "/nonexistent/libcudart.so"}), \
                mock.patch.dict(cuda_ipc._libs, clear=True):
            with self.assertRaisesRegex(CudaError, "SORTD_CUDART_LIB"):
                cuda_ipc.cudart()
            client = Client("127.0.0.1:1")
            try:
                with self.assertRaises(CudaError):
                    client.register_cuda_array(FakeDeviceArray())
                with self.assertRaises(CudaError):
                    client.sort(FakeDeviceArray())
                # Host arrays never touch CUDA.
                self.assertIsNone(client.region_of(np.zeros(4, np.uint32)))
            finally:
                client.close()

    def test_device_arrays_must_be_1d_contiguous_and_writable(self):
        with self.assertRaisesRegex(ValueError, "one-dimensional"):
            cuda_ipc.interface(FakeDeviceArray(shape=(2, 2)))
        with self.assertRaisesRegex(ValueError, "contiguous"):
            cuda_ipc.interface(FakeDeviceArray(strides=(8,)))
        with self.assertRaisesRegex(ValueError, "read-only"):
            cuda_ipc.interface(FakeDeviceArray(readonly=True))
        pointer, count, dtype = cuda_ipc.interface(FakeDeviceArray(strides=(4,)))
        self.assertEqual((pointer, count, dtype), (0x7f0000000000, 4, np.dtype("<u4")))


class RegionPathTest(unittest.TestCase):
    def test_outputs_need_region_arrays(self):
        with Client("127.0.0.1:1") as client:
            keys = np.arange(4, dtype=np.uint32)
            with self.assertRaisesRegex(ValueError, "registered regions"):
                client.sort(keys, out=np.empty(4, np.uint32))
            with self.assertRaisesRegex(ValueError, "chunked=None"):
                client.sort(keys, chunked=True, out=np.empty(4, np.uint32))


if __name__ == "__main__":
    unittest.main()


class RegistrationOutcomeTest(unittest.TestCase):
    """A registration whose answer never came may still have happened on
    the server: the client unregisters the name before giving up."""

    def test_an_unknown_outcome_is_unregistered_and_a_refusal_is_not(self):
        import grpc
        from sortd_client import regions as regions_module

        class Failed(grpc.RpcError):
            def __init__(self, code):
                self._code = code

            def code(self):
                return self._code

            def details(self):
                return "injected"

        unregistered = []
        with Client("127.0.0.1:1") as client:
            registry = client._regions
            registry._unregister = lambda request, timeout=None: unregistered.append(request.name)
            for code, undone in ((grpc.StatusCode.DEADLINE_EXCEEDED, True),
                                 (grpc.StatusCode.UNAVAILABLE, True),
                                 (grpc.StatusCode.ALREADY_EXISTS, False)):
                def refuse(request, timeout=None, code=code):
                    raise Failed(code)
                registry._register_system = refuse
                unregistered.clear()
                with self.assertRaises(regions_module.SortdError):
                    registry.register_system("r", "/x", 4096)
                self.assertEqual(unregistered, ["r"] if undone else [], code)
