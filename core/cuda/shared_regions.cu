// Host and device memory that sortd does not own: shared-memory regions
// pinned for DMA, and device memory opened from another process's CUDA IPC
// handle (server/regions/regions.h registers them).
#include <cuda_runtime.h>

#include <cstring>
#include <mutex>

#include "core/cuda/transfer.cuh"
#include "core/gpu_info.h"

namespace sortd {
namespace {

std::string CudaText(const char* call, cudaError_t err) {
  return std::string(call) + ": " + cudaGetErrorString(err);
}

// cuMemGetAddressRange from the driver, found at run time so that sortd
// links only the runtime: the size of an IPC allocation is what bounds a
// region, not the size the client claims.
using GetAddressRange = int (*)(unsigned long long* base, size_t* size, unsigned long long ptr);

GetAddressRange AddressRangeFunction() {
  static GetAddressRange function = [] {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult result{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &found, 12000, cudaEnableDefault,
                                         &result) != cudaSuccess ||
        result != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return GetAddressRange{nullptr};
    }
    return reinterpret_cast<GetAddressRange>(found);
  }();
  return function;
}

// Runs `fn` with `device` current on this thread, restoring the previous one.
template <typename Fn>
cudaError_t OnDevice(int device, Fn fn) {
  int previous = 0;
  cudaError_t err = cudaGetDevice(&previous);
  if (err != cudaSuccess) return err;
  if (previous != device && (err = cudaSetDevice(device)) != cudaSuccess) return err;
  err = fn();
  if (previous != device) cudaSetDevice(previous);
  return err;
}

}  // namespace

bool PinHostRange(void* memory, size_t bytes, std::string* error) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    if (error != nullptr) *error = "no GPU";
    return false;
  }
  const cudaError_t err = cudaHostRegister(memory, bytes, cudaHostRegisterPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky
    if (error != nullptr) *error = CudaText("cudaHostRegister", err);
    return false;
  }
  return true;
}

void UnpinHostRange(void* memory) {
  cudaHostUnregister(memory);
  cudaGetLastError();
}

void* OpenCudaIpcMemory(const void* handle, int device, size_t* allocation_bytes,
                        std::string* error) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    cudaGetLastError();
    devices = 0;
  }
  if (device < 0 || device >= devices) {
    if (error != nullptr) {
      *error = "no GPU with ordinal " + std::to_string(device) + " (this server sees " +
               std::to_string(devices) + ")";
    }
    return nullptr;
  }
  cudaIpcMemHandle_t ipc{};
  std::memcpy(&ipc, handle, sizeof(ipc));
  void* memory = nullptr;
  size_t size = 0;
  const cudaError_t err = OnDevice(device, [&] {
    cudaError_t e = cudaIpcOpenMemHandle(&memory, ipc, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) return e;
    GetAddressRange range = AddressRangeFunction();
    unsigned long long base = 0;
    if (range == nullptr ||
        range(&base, &size, reinterpret_cast<unsigned long long>(memory)) != 0) {
      cudaIpcCloseMemHandle(memory);
      memory = nullptr;
      return cudaErrorInvalidValue;
    }
    return cudaSuccess;
  });
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (error != nullptr) {
      *error = memory == nullptr && err == cudaErrorInvalidValue
                   ? "cudaIpcOpenMemHandle: " + std::string(cudaGetErrorString(err)) +
                         " (or the allocation's size could not be read)"
                   : CudaText("cudaIpcOpenMemHandle", err);
    }
    return nullptr;
  }
  *allocation_bytes = size;
  return memory;
}

void CloseCudaIpcMemory(void* memory, int device) {
  if (memory == nullptr) return;
  OnDevice(device, [&] { return cudaIpcCloseMemHandle(memory); });
  cudaGetLastError();
}

bool IsDeviceMemory(const void* memory) {
  return cuda::MemoryKindOf(memory) == cuda::MemoryKind::kDevice;
}

bool CopyAnyMemory(void* dst, const void* src, size_t bytes, std::string* error) {
  if (bytes == 0) return true;
  if (!IsDeviceMemory(dst) && !IsDeviceMemory(src)) {
    std::memcpy(dst, src, bytes);
    return true;
  }
  const cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (error != nullptr) *error = CudaText("cudaMemcpy", err);
    return false;
  }
  return true;
}

}  // namespace sortd
