// GPU discovery through the CUDA runtime. A machine without a GPU or driver
// reports no devices (and the reason) instead of failing.
#include <cuda_runtime.h>

#include "core/gpu_info.h"

namespace sortd {

bool CudaBuilt() { return true; }

std::vector<GpuDevice> ListGpus(std::string* error) {
  if (error != nullptr) error->clear();
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    if (error != nullptr) {
      *error = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    }
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return {};
  }
  std::vector<GpuDevice> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    err = cudaGetDeviceProperties(&prop, i);
    if (err != cudaSuccess) {
      if (error != nullptr) {
        *error = std::string("cudaGetDeviceProperties: ") + cudaGetErrorString(err);
      }
      continue;
    }
    GpuDevice d;
    d.ordinal = i;
    d.name = prop.name;
    d.memory_bytes = prop.totalGlobalMem;
    d.multiprocessors = prop.multiProcessorCount;
    d.compute_major = prop.major;
    d.compute_minor = prop.minor;
    devices.push_back(d);
  }
  return devices;
}

void* AllocatePinnedHost(size_t bytes) {
  void* memory = nullptr;
  if (cudaHostAlloc(&memory, bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it for the caller's next call
    return nullptr;
  }
  return memory;
}

void FreePinnedHost(void* memory) {
  if (memory != nullptr) cudaFreeHost(memory);
}

}  // namespace sortd
