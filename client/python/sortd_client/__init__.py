"""Python client for sortd, the gRPC array-sorting service.

Needs the generated stubs (`sortd.v1.sort_pb2`) on PYTHONPATH: they are
built into <build>/python by the CMake target sortd_python_stubs.
"""

from .client import Client, SortResult, DEFAULT_CHUNK_BYTES, DEFAULT_SERVICE_CONFIG, HEADROOM
from .cuda_ipc import CudaError
from .errors import ProtocolError, RequestError, SortdError
from .regions import CudaRegion, RegionInfo, SharedArray
from .top_k import TopKResult

__all__ = ["Client", "SortResult", "TopKResult", "SortdError", "RequestError", "ProtocolError",
           "SharedArray", "CudaRegion", "RegionInfo", "CudaError",
           "DEFAULT_CHUNK_BYTES", "DEFAULT_SERVICE_CONFIG", "HEADROOM"]
