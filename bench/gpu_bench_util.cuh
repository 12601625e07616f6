// Shared by the GPU kernel benchmarks: CUDA error check, random fill and
// output comparison on the device.
#ifndef SORTD_BENCH_GPU_BENCH_UTIL_CUH_
#define SORTD_BENCH_GPU_BENCH_UTIL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    cudaError_t e = (call);                                                               \
    if (e != cudaSuccess) {                                                               \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

// words random 32-bit words (splitmix64 of the index and seed), masked.
__global__ void FillRandom(uint32_t* out, size_t words, uint64_t seed, uint32_t mask = ~0u) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31; x *= 0xBF58476D1CE4E5B9ull; x ^= x >> 27; x *= 0x94D049BB133111EBull; x ^= x >> 33;
    out[i] = static_cast<uint32_t>(x) & mask;
  }
}

// Adds to *count the words where a and b differ.
__global__ void CountMismatches(const uint32_t* a, const uint32_t* b, size_t words,
                                unsigned long long* count) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x) {
    if (a[i] != b[i]) atomicAdd(count, 1ull);
  }
}

#endif  // SORTD_BENCH_GPU_BENCH_UTIL_CUH_
