// GPU merge sort benchmarks, in one process:
//  1. ours vs cub::DeviceMergeSort (u32 keys 2^20..2^26, u64 keys,
//     u32/u32 pairs and u64/u32 pairs at 2^24, u32/u32 pairs at 2^26):
//     CUDA events around the call, warm-up, median
//     of repeats; outputs compared with CUB's on the GPU.
//  2. argsort of u32 keys, merge sort vs our radix core (both producing
//     32-bit positions), 2^10..2^22, host-timed call+sync (the radix core
//     syncs once to skip passes): where merge wins, if anywhere.
//  3. byte strings (bench/random_strings.h: 8..64 random bytes), 1 Mi and
//     16 Mi: argsort on the GPU from device-resident strings (CUDA events),
//     verified on the host (sorted, stable, a permutation). The CPU
//     engine's rate on the same inputs comes from sortd_cpu_bench
//     (bytes/engine_st).
//   sortd_gpu_merge_bench [--repeats=7] [--max_log2=26] [--strings=1]
//   sortd_gpu_merge_bench --argsort_only [--max_log2=21]   section 2 alone
//  4. --runs: MergeSortedRuns of 4, 5 and 8 sorted runs (run r holds r,
//     r + k, r + 2k, ...: every merge step switches runs), u32 keys, u64
//     keys and u32/u32 pairs, 2^24..max_log2 keys: the library's choice
//     (the k-way round where merge_kway.h takes it) against pairwise
//     passes forced (kway_min_items = SIZE_MAX), CUDA events; every output
//     checked (key i is i).
//   sortd_gpu_merge_bench --profile=24 [--pairs]   one u32 keys (u32/u32
//                                         pairs) sort each (ours, CUB) at
//                                         2^24, for a profiler (ncu)
//   sortd_gpu_merge_bench --runs [--max_log2=27]   section 4 alone
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <cub/device/device_merge_sort.cuh>

#include "bench/gpu_bench_util.cuh"
#include "bench/random_strings.h"
#include "core/cuda/merge_sort.cuh"
#include "core/cuda/radix_sort.cuh"

namespace {

using sortd::cuda::RadixKeyType;

struct LessOp {
  template <typename T>
  __device__ bool operator()(const T& a, const T& b) const { return a < b; }
};

// Median seconds of fn() on `stream`, by CUDA events.
template <typename Fn>
double EventTime(Fn fn, int repeats, cudaStream_t stream) {
  fn();
  CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<double> t;
  for (int r = 0; r < repeats; ++r) {
    CHECK(cudaEventRecord(start, stream));
    fn();
    CHECK(cudaEventRecord(stop, stream));
    CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    t.push_back(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return Median(t);
}

struct CubRow {
  std::string name;
  size_t n;
  double ours, cub;  // Gkeys/s
  bool match;
};

template <typename Key, bool kPairs>
CubRow VsCub(const char* name, size_t n, int repeats, cudaStream_t stream) {
  Key *keys, *ours_out, *cub_out;
  uint32_t *values, *ours_values, *cub_values;
  CHECK(cudaMalloc(&keys, n * sizeof(Key)));
  CHECK(cudaMalloc(&ours_out, n * sizeof(Key)));
  CHECK(cudaMalloc(&cub_out, n * sizeof(Key)));
  CHECK(cudaMalloc(&values, n * 4));
  CHECK(cudaMalloc(&ours_values, n * 4));
  CHECK(cudaMalloc(&cub_values, n * 4));
  FillRandom<<<1024, 256, 0, stream>>>(reinterpret_cast<uint32_t*>(keys), n * sizeof(Key) / 4, 7);
  Iota<<<1024, 256, 0, stream>>>(values, n);

  sortd::cuda::MergeSortProblem p;
  p.key_type = sizeof(Key) == 4 ? RadixKeyType::kUint32 : RadixKeyType::kUint64;
  p.num_items = n;
  p.d_keys_in = keys;
  p.d_keys_out = ours_out;
  if (kPairs) {
    p.value_bytes = 4;
    p.d_values_in = values;
    p.d_values_out = ours_values;
  }
  size_t ours_bytes = 0;
  CHECK(sortd::cuda::MergeSort(nullptr, ours_bytes, p, stream));
  void* ours_temp;
  CHECK(cudaMalloc(&ours_temp, ours_bytes));
  // CUB sorts in place: copy the input first, in both timings alike.
  auto cub_sort = [&](void* temp, size_t& bytes) {
    if constexpr (kPairs) {
      return cub::DeviceMergeSort::SortPairsCopy(temp, bytes, keys, values, cub_out, cub_values,
                                                 static_cast<int64_t>(n), LessOp{}, stream);
    } else {
      return cub::DeviceMergeSort::SortKeysCopy(temp, bytes, keys, cub_out,
                                                static_cast<int64_t>(n), LessOp{}, stream);
    }
  };
  size_t cub_bytes = 0;
  CHECK(cub_sort(nullptr, cub_bytes));
  void* cub_temp;
  CHECK(cudaMalloc(&cub_temp, cub_bytes));

  CubRow row{name, n, 0, 0, false};
  row.ours = n / EventTime([&] { CHECK(sortd::cuda::MergeSort(ours_temp, ours_bytes, p, stream)); },
                           repeats, stream) / 1e9;
  row.cub = n / EventTime([&] { CHECK(cub_sort(cub_temp, cub_bytes)); }, repeats, stream) / 1e9;
  row.match = Mismatches(ours_out, cub_out, n * sizeof(Key), stream) == 0 &&
              (!kPairs || Mismatches(ours_values, cub_values, n * 4, stream) == 0);
  for (void* ptr : {(void*)keys, (void*)ours_out, (void*)cub_out, (void*)values,
                    (void*)ours_values, (void*)cub_values, ours_temp, cub_temp}) {
    cudaFree(ptr);
  }
  return row;
}

struct ArgsortRow {
  size_t n;
  double merge, radix;  // Gkeys/s
  bool match;
};

ArgsortRow ArgsortVsRadix(size_t n, int repeats, cudaStream_t stream) {
  uint32_t *keys, *merge_keys, *radix_keys, *iota, *merge_idx, *radix_idx;
  for (uint32_t** b : {&keys, &merge_keys, &radix_keys, &iota, &merge_idx, &radix_idx}) {
    CHECK(cudaMalloc(b, n * 4));
  }
  FillRandom<<<1024, 256, 0, stream>>>(keys, n, 11);
  Iota<<<1024, 256, 0, stream>>>(iota, n);
  sortd::cuda::MergeSortProblem m;
  m.num_items = n;
  m.d_keys_in = keys;
  m.d_keys_out = merge_keys;
  m.d_indices_out = merge_idx;
  sortd::cuda::RadixSortProblem r;
  r.num_items = n;
  r.d_keys_in = keys;
  r.d_keys_out = radix_keys;
  r.value_bytes = 4;
  r.d_values_in = iota;
  r.d_values_out = radix_idx;
  size_t m_bytes = 0, r_bytes = 0;
  CHECK(sortd::cuda::MergeSort(nullptr, m_bytes, m, stream));
  CHECK(sortd::cuda::RadixSort(nullptr, r_bytes, r, stream));
  void *m_temp, *r_temp;
  CHECK(cudaMalloc(&m_temp, m_bytes));
  CHECK(cudaMalloc(&r_temp, r_bytes));
  ArgsortRow row{n, 0, 0, false};
  row.merge = n / HostTime([&] { CHECK(sortd::cuda::MergeSort(m_temp, m_bytes, m, stream)); },
                           repeats, stream) / 1e9;
  row.radix = n / HostTime([&] { CHECK(sortd::cuda::RadixSort(r_temp, r_bytes, r, stream)); },
                           repeats, stream) / 1e9;
  row.match = Mismatches(merge_idx, radix_idx, n * 4, stream) == 0;
  for (void* ptr : {(void*)keys, (void*)merge_keys, (void*)radix_keys, (void*)iota,
                    (void*)merge_idx, (void*)radix_idx, m_temp, r_temp}) {
    cudaFree(ptr);
  }
  return row;
}

struct StringRow {
  size_t n;
  double mkeys_per_s;
  bool verified;
};

// Sorted (memcmp order, shorter first), stable, and a permutation.
bool VerifyStrings(const sortd::bench::PackedStrings& s, const std::vector<uint32_t>& idx) {
  const size_t n = s.size();
  std::vector<char> seen(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (idx[i] >= n || seen[idx[i]]) return false;
    seen[idx[i]] = 1;
    if (i == 0) continue;
    const uint32_t a = idx[i - 1], b = idx[i];
    const size_t la = s.offsets[a + 1] - s.offsets[a], lb = s.offsets[b + 1] - s.offsets[b];
    const int c = std::memcmp(s.bytes.data() + s.offsets[a], s.bytes.data() + s.offsets[b],
                              std::min(la, lb));
    const int order = c != 0 ? c : (la < lb ? -1 : (la > lb ? 1 : 0));
    if (order > 0 || (order == 0 && a > b)) return false;
  }
  return true;
}

StringRow Strings(size_t n, int repeats, cudaStream_t stream) {
  const sortd::bench::PackedStrings s = sortd::bench::RandomStrings(n, 8, 64, 0x57a1);
  uint8_t* bytes;
  uint64_t* offsets;
  uint32_t* idx;
  CHECK(cudaMalloc(&bytes, s.bytes.size()));
  CHECK(cudaMalloc(&offsets, s.offsets.size() * 8));
  CHECK(cudaMalloc(&idx, n * 4));
  CHECK(cudaMemcpy(bytes, s.bytes.data(), s.bytes.size(), cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(offsets, s.offsets.data(), s.offsets.size() * 8, cudaMemcpyHostToDevice));
  sortd::cuda::BytesArgsortProblem p;
  p.num_items = n;
  p.d_bytes = bytes;
  p.d_offsets = offsets;
  p.d_indices_out = idx;
  size_t temp_bytes = 0;
  CHECK(sortd::cuda::ArgsortBytes(nullptr, temp_bytes, p, stream));
  void* temp;
  CHECK(cudaMalloc(&temp, temp_bytes));
  StringRow row{n, 0, false};
  row.mkeys_per_s =
      n / EventTime([&] { CHECK(sortd::cuda::ArgsortBytes(temp, temp_bytes, p, stream)); },
                    repeats, stream) / 1e6;
  std::vector<uint32_t> host(n);
  CHECK(cudaMemcpy(host.data(), idx, n * 4, cudaMemcpyDeviceToHost));
  row.verified = VerifyStrings(s, host);
  for (void* ptr : {(void*)bytes, (void*)offsets, (void*)idx, temp}) cudaFree(ptr);
  return row;
}

// Section 4: run r of k holds r, r + k, r + 2k, ... over its first
// run_len = n / k keys; the last run's tail (n % k keys) continues above
// them all, so the merged output is 0 .. n - 1. Values are 3 x the key.
template <typename Key>
__global__ void FillRuns(Key* keys, uint32_t* values, size_t n, size_t run_len, int runs) {
  const size_t interleaved = run_len * runs;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const Key key = static_cast<Key>(i < interleaved ? (i % run_len) * runs + i / run_len : i);
    keys[i] = key;
    if (values != nullptr) values[i] = static_cast<uint32_t>(key) * 3u;
  }
}

template <typename Key>
__global__ void CountNotIota(const Key* keys, const uint32_t* values, size_t n, unsigned long long* bad) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    if (keys[i] != static_cast<Key>(i) || (values != nullptr && values[i] != static_cast<uint32_t>(i) * 3u)) {
      atomicAdd(bad, 1ull);
    }
  }
}

struct RunsRow {
  std::string name;
  int log2n, runs;
  double chosen_us, pairwise_us;
  bool verified;
};

template <typename Key, bool kPairs>
RunsRow MergeRuns(const char* name, int log2n, int runs, int repeats, cudaStream_t stream) {
  const size_t n = size_t{1} << log2n;
  const size_t run_len = n / runs;
  Key *keys, *out;
  uint32_t *values = nullptr, *values_out = nullptr;
  unsigned long long* bad;
  CHECK(cudaMalloc(&keys, n * sizeof(Key)));
  CHECK(cudaMalloc(&out, n * sizeof(Key)));
  CHECK(cudaMalloc(&bad, 8));
  if (kPairs) {
    CHECK(cudaMalloc(&values, n * 4));
    CHECK(cudaMalloc(&values_out, n * 4));
  }
  std::vector<size_t> offsets(runs + 1);
  for (int r = 0; r < runs; ++r) offsets[r] = r * run_len;
  offsets[runs] = n;
  sortd::cuda::MergeRunsProblem p;
  p.key_type = sizeof(Key) == 4 ? RadixKeyType::kUint32 : RadixKeyType::kUint64;
  p.num_runs = runs;
  p.h_run_offsets = offsets.data();
  p.d_keys_in = keys;
  p.d_keys_out = out;
  if (kPairs) {
    p.value_bytes = 4;
    p.d_values_in = values;
    p.d_values_out = values_out;
  }
  RunsRow row{name, log2n, runs, 0, 0, true};
  for (bool pairwise : {false, true}) {
    p.kway_min_items = pairwise ? std::numeric_limits<size_t>::max() : 0;
    size_t bytes = 0;
    CHECK(sortd::cuda::MergeSortedRuns(nullptr, bytes, p, stream));
    void* temp;
    CHECK(cudaMalloc(&temp, bytes));
    FillRuns<<<1024, 256, 0, stream>>>(keys, values, n, run_len, runs);
    CHECK(cudaMemsetAsync(out, 0, n * sizeof(Key), stream));
    const double t =
        EventTime([&] { CHECK(sortd::cuda::MergeSortedRuns(temp, bytes, p, stream)); }, repeats, stream);
    (pairwise ? row.pairwise_us : row.chosen_us) = t * 1e6;
    CHECK(cudaMemsetAsync(bad, 0, 8, stream));
    CountNotIota<<<1024, 256, 0, stream>>>(out, values_out, n, bad);
    unsigned long long h = 0;
    CHECK(cudaMemcpyAsync(&h, bad, 8, cudaMemcpyDeviceToHost, stream));
    CHECK(cudaStreamSynchronize(stream));
    row.verified = row.verified && h == 0;
    CHECK(cudaFree(temp));
  }
  CHECK(cudaFree(keys));
  CHECK(cudaFree(out));
  CHECK(cudaFree(bad));
  if (kPairs) {
    CHECK(cudaFree(values));
    CHECK(cudaFree(values_out));
  }
  return row;
}

int RunsSection(int max_log2, int repeats, cudaStream_t stream) {
  std::vector<RunsRow> rows;
  for (int lg = 24; lg <= max_log2; ++lg) {
    for (int runs : {4, 5, 8}) {
      rows.push_back(MergeRuns<uint32_t, false>("u32 keys", lg, runs, repeats, stream));
      rows.push_back(MergeRuns<uint64_t, false>("u64 keys", lg, runs, repeats, stream));
      rows.push_back(MergeRuns<uint32_t, true>("u32/u32 pairs", lg, runs, repeats, stream));
    }
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("\nGPU: %s (%d SMs), median of %d after warm-up\n", prop.name, prop.multiProcessorCount, repeats);
  std::printf("MergeSortedRuns, us: the library's choice vs pairwise passes forced\n");
  std::printf("%-14s %5s %5s %10s %10s %7s %9s\n", "case", "n", "runs", "chosen", "pairwise", "ratio", "verified");
  bool ok = true;
  for (const RunsRow& r : rows) {
    std::printf("%-14s 2^%-3d %5d %10.1f %10.1f %6.2fx %9s\n", r.name.c_str(), r.log2n, r.runs, r.chosen_us,
                r.pairwise_us, r.pairwise_us / r.chosen_us, r.verified ? "yes" : "NO");
    ok = ok && r.verified;
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 7, max_log2 = 26;
  bool strings = true;
  int profile_log2 = 0;
  bool profile_pairs = false;
  bool runs_only = false;     // only section 4
  bool argsort_only = false;  // only section 2 (the --gpu_merge_argsort_max_keys crossover)
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--argsort_only") == 0) argsort_only = true;
    if (std::strncmp(argv[i], "--profile=", 10) == 0) profile_log2 = std::atoi(argv[i] + 10);
    if (std::strcmp(argv[i], "--pairs") == 0) profile_pairs = true;
    if (std::strncmp(argv[i], "--repeats=", 10) == 0) repeats = std::atoi(argv[i] + 10);
    if (std::strncmp(argv[i], "--max_log2=", 11) == 0) max_log2 = std::atoi(argv[i] + 11);
    if (std::strncmp(argv[i], "--strings=", 10) == 0) strings = std::atoi(argv[i] + 10) != 0;
    if (std::strcmp(argv[i], "--runs") == 0) runs_only = true;
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (runs_only) return RunsSection(max_log2, repeats, stream);
  if (profile_log2 > 0) {
    const CubRow r = profile_pairs ? VsCub<uint32_t, true>("u32/u32 pairs", size_t{1} << profile_log2, 1, stream)
                                   : VsCub<uint32_t, false>("u32 keys", size_t{1} << profile_log2, 1, stream);
    std::printf("profile run: %s 2^%d, outputs match: %s\n", r.name.c_str(), profile_log2,
                r.match ? "yes" : "NO");
    return r.match ? 0 : 1;
  }
  std::vector<CubRow> cub_rows;
  if (!argsort_only) {
    for (int lg = 20; lg <= max_log2; ++lg) {
      cub_rows.push_back(VsCub<uint32_t, false>("u32 keys", size_t{1} << lg, repeats, stream));
    }
    const size_t mid = size_t{1} << std::min(24, max_log2);
    cub_rows.push_back(VsCub<uint64_t, false>("u64 keys", mid, repeats, stream));
    cub_rows.push_back(VsCub<uint32_t, true>("u32/u32 pairs", mid, repeats, stream));
    if (max_log2 >= 26) cub_rows.push_back(VsCub<uint32_t, true>("u32/u32 pairs", size_t{1} << 26, repeats, stream));
    cub_rows.push_back(VsCub<uint64_t, true>("u64/u32 pairs", mid, repeats, stream));
    std::fprintf(stderr, "vs CUB done\n");
  }
  std::vector<ArgsortRow> argsort_rows;
  for (int lg = 10; lg <= std::min(22, max_log2); ++lg) {
    argsort_rows.push_back(ArgsortVsRadix(size_t{1} << lg, repeats, stream));
    // Half steps where the crossover lies (--gpu_merge_argsort_max_keys).
    if (lg >= 17 && lg < std::min(22, max_log2)) {
      argsort_rows.push_back(ArgsortVsRadix(size_t{3} << (lg - 1), repeats, stream));
    }
  }
  std::fprintf(stderr, "argsort done\n");
  std::vector<StringRow> string_rows;
  if (strings && !argsort_only) {
    for (size_t n : {size_t{1} << 20, size_t{1} << 24}) string_rows.push_back(Strings(n, repeats, stream));
  }

  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::printf("\nGPU: %s (%d SMs), CUDA runtime %d, median of %d after warm-up\n", prop.name,
              prop.multiProcessorCount, runtime, repeats);
  std::printf("merge sort vs cub::DeviceMergeSort (CUDA events)\n");
  std::printf("%-14s %10s %10s %10s %7s %6s\n", "case", "n", "ours G/s", "CUB G/s", "ratio",
              "match");
  for (const CubRow& r : cub_rows) {
    std::printf("%-14s %10zu %10.2f %10.2f %6.2fx %6s\n", r.name.c_str(), r.n, r.ours, r.cub,
                r.ours / r.cub, r.match ? "yes" : "NO");
  }
  std::printf("u32 argsort: merge vs radix (host-timed call+sync)\n");
  std::printf("%10s %10s %10s %7s %6s\n", "n", "merge G/s", "radix G/s", "m/r", "match");
  for (const ArgsortRow& r : argsort_rows) {
    std::printf("%10zu %10.3f %10.3f %6.2fx %6s\n", r.n, r.merge, r.radix, r.merge / r.radix,
                r.match ? "yes" : "NO");
  }
  if (!string_rows.empty()) std::printf("byte strings 8..64 B, argsort (CUDA events)\n");
  for (const StringRow& r : string_rows) {
    std::printf("%10zu strings %10.1f Mkeys/s  verified %s\n", r.n, r.mkeys_per_s,
                r.verified ? "yes" : "NO");
  }
  return 0;
}
