// GPU discovery through the CUDA runtime. A machine without a GPU or driver
// reports no devices (and the reason) instead of failing.
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "core/gpu_info.h"

namespace sortd {
namespace {

// Threads that fault a pinned block in (one per 64 MiB, at most this many).
constexpr size_t kFaultThreads = 16;

}  // namespace

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
  if (bytes == 0) return nullptr;
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return nullptr;
  // Huge pages: 512 times fewer pages to fault in and for the driver to
  // lock (a hint: where THP is off, 4 KiB pages still work, slower).
  madvise(memory, bytes, MADV_HUGEPAGE);
  // Faulting the pages in on several threads first leaves the driver only
  // the locking and mapping to do.
  char* bytes_at = static_cast<char*>(memory);
  const size_t threads = std::clamp<size_t>(bytes >> 26, 1, kFaultThreads);
  std::vector<std::thread> faulting;
  for (size_t t = 0; t < threads; ++t) {
    faulting.emplace_back([=] {
      const size_t begin = bytes / threads * t;
      const size_t end = t + 1 == threads ? bytes : bytes / threads * (t + 1);
      for (size_t at = begin; at < end; at += 4096) bytes_at[at] = 0;
    });
  }
  for (std::thread& t : faulting) t.join();
  if (cudaHostRegister(memory, bytes, cudaHostRegisterPortable) != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it for the caller's next call
    munmap(memory, bytes);
    return nullptr;
  }
  return memory;
}

void FreePinnedHost(void* memory, size_t bytes) {
  if (memory == nullptr) return;
  cudaHostUnregister(memory);
  cudaGetLastError();
  munmap(memory, bytes);
}

}  // namespace sortd
