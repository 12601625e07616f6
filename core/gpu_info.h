// What GPUs this process can use. Implemented by core/cuda/device_query.cu
// when CUDA is built, and by gpu_info_none.cc (no GPUs) otherwise.
#ifndef SORTD_CORE_GPU_INFO_H_
#define SORTD_CORE_GPU_INFO_H_

#include <cstddef>
#include <string>
#include <vector>

namespace sortd {

struct GpuDevice {
  int ordinal = 0;
  std::string name;
  size_t memory_bytes = 0;
  int multiprocessors = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

// Whether this binary was built with the CUDA engine.
bool CudaBuilt();

// The visible GPUs; empty when none is present, the driver is missing, or
// CUDA was not built. `error` (optional) receives the CUDA error text when
// the query itself failed.
std::vector<GpuDevice> ListGpus(std::string* error = nullptr);

// Page-locked host memory that every GPU reads and writes by DMA; null when
// CUDA is not built or pinning failed. Anonymous memory on transparent huge
// pages, faulted in by several threads, then registered (cudaHostRegister,
// portable): 45-60 ms per GiB on the H100 host where cudaHostAlloc took
// 455-670 ms (docs/benchmarks.md, "Pinning host memory"). Release with
// FreePinnedHost and the same size.
void* AllocatePinnedHost(size_t bytes);
void FreePinnedHost(void* memory, size_t bytes);

// Page-locks memory mapped elsewhere (a shared-memory region) so that every
// GPU reads and writes it by DMA (cudaHostRegister, portable). False, with
// the reason in *error, when CUDA is not built, no GPU is present, or the
// driver refused; the memory stays usable, only slower to move.
bool PinHostRange(void* memory, size_t bytes, std::string* error = nullptr);
void UnpinHostRange(void* memory);

// Opens device memory that another process exported with
// cudaIpcGetMemHandle (`handle`: the 64-byte cudaIpcMemHandle_t) on GPU
// `device`. Returns the device address of the allocation's start and its
// size in *allocation_bytes, or null with the reason in *error.
inline constexpr size_t kCudaIpcHandleBytes = 64;
void* OpenCudaIpcMemory(const void* handle, int device, size_t* allocation_bytes,
                        std::string* error);
void CloseCudaIpcMemory(void* memory, int device);

// Whether `memory` is device memory (or managed memory) of some GPU: the
// CPU must not touch it. False without CUDA.
bool IsDeviceMemory(const void* memory);

// Copies between any mix of host and device memory (cudaMemcpy with
// unified addressing; a plain memcpy without CUDA). False on an error.
bool CopyAnyMemory(void* dst, const void* src, size_t bytes, std::string* error = nullptr);

}  // namespace sortd

#endif  // SORTD_CORE_GPU_INFO_H_
