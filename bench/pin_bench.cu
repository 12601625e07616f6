// Pinning host memory, ways compared: cudaHostAlloc (what the pool used
// first), plain anonymous memory registered with cudaHostRegister, and the
// pool's way (core/gpu_info.h AllocatePinnedHost: transparent huge pages
// faulted in by several threads, then registered). For each: the time to
// pin, to free, and the host-to-device copy rate from the block afterwards
// (the DMA must not suffer). Usage: sortd_pin_bench [MiB ...] (default 1024
// 4096); results in docs/benchmarks.md, "Pinning host memory".
#include <cuda_runtime.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/gpu_info.h"

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// GB/s of one host-to-device copy of the block (after a warm-up copy).
double CopyRate(const void* host, void* device, size_t bytes) {
  cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);
  const auto start = Clock::now();
  cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);
  return static_cast<double>(bytes) / 1e6 / MsSince(start);
}

void Row(const char* way, size_t mib, double pin_ms, double free_ms, double rate) {
  std::printf("%-34s %6zu MiB  pin %8.1f ms  free %7.1f ms  H2D %5.1f GB/s\n", way, mib, pin_ms,
              free_ms, rate);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes_mib;
  for (int i = 1; i < argc; ++i) sizes_mib.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes_mib.empty()) sizes_mib = {1024, 4096};
  cudaFree(nullptr);  // create the context outside the timings
  for (size_t mib : sizes_mib) {
    const size_t bytes = mib << 20;
    void* device = nullptr;
    if (cudaMalloc(&device, bytes) != cudaSuccess) {
      std::fprintf(stderr, "cudaMalloc %zu MiB failed\n", mib);
      return 1;
    }
    for (int rep = 0; rep < 2; ++rep) {
      {
        void* host = nullptr;
        auto start = Clock::now();
        if (cudaHostAlloc(&host, bytes, cudaHostAllocPortable) != cudaSuccess) return 1;
        const double pin = MsSince(start);
        const double rate = CopyRate(host, device, bytes);
        start = Clock::now();
        cudaFreeHost(host);
        Row("cudaHostAlloc", mib, pin, MsSince(start), rate);
      }
      {
        auto start = Clock::now();
        void* host = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (host == MAP_FAILED || cudaHostRegister(host, bytes, cudaHostRegisterPortable) != cudaSuccess) {
          return 1;
        }
        const double pin = MsSince(start);
        const double rate = CopyRate(host, device, bytes);
        start = Clock::now();
        cudaHostUnregister(host);
        munmap(host, bytes);
        Row("mmap + cudaHostRegister", mib, pin, MsSince(start), rate);
      }
      {
        auto start = Clock::now();
        void* host = sortd::AllocatePinnedHost(bytes);
        if (host == nullptr) return 1;
        const double pin = MsSince(start);
        const double rate = CopyRate(host, device, bytes);
        start = Clock::now();
        sortd::FreePinnedHost(host, bytes);
        Row("AllocatePinnedHost (THP, faulted)", mib, pin, MsSince(start), rate);
      }
    }
    cudaFree(device);
  }
  return 0;
}
