// Shared by the GPU kernel benchmarks: CUDA error check, random fill, iota,
// output comparison on the device, and medians of host-timed runs.
#ifndef SORTD_BENCH_GPU_BENCH_UTIL_CUH_
#define SORTD_BENCH_GPU_BENCH_UTIL_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

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

__global__ void Iota(uint32_t* out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    out[i] = static_cast<uint32_t>(i);
  }
}

// The words (bytes / 4) where a and b differ.
inline unsigned long long Mismatches(const void* a, const void* b, size_t bytes,
                                     cudaStream_t stream) {
  unsigned long long* count;
  CHECK(cudaMalloc(&count, 8));
  CHECK(cudaMemsetAsync(count, 0, 8, stream));
  CountMismatches<<<1024, 256, 0, stream>>>(static_cast<const uint32_t*>(a),
                                            static_cast<const uint32_t*>(b), bytes / 4, count);
  unsigned long long bad = 0;
  CHECK(cudaMemcpyAsync(&bad, count, 8, cudaMemcpyDeviceToHost, stream));
  CHECK(cudaStreamSynchronize(stream));
  cudaFree(count);
  return bad;
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of fn() + stream sync on the host clock, after a warm-up.
template <typename Fn>
double HostTime(Fn fn, int repeats, cudaStream_t stream) {
  fn();
  CHECK(cudaStreamSynchronize(stream));
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    CHECK(cudaStreamSynchronize(stream));
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return Median(t);
}

#endif  // SORTD_BENCH_GPU_BENCH_UTIL_CUH_
