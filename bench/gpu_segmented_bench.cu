// Segmented sort vs cub::DeviceSegmentedSort in the same process. Both are
// timed on the host clock from the call to the end of a stream
// synchronisation (our API plans bins from host offsets, so host time
// counts), after warm-up, median of repeats, on fresh random keys. Outputs
// are compared on the GPU for every case (pairs against CUB's stable sort,
// values = input positions). Prints a table of Gkeys/s and ratios last.
//   sortd_gpu_segmented_bench [--repeats=9] [--only=SUBSTRING]
// --only runs the cases whose "name segments x len" contains SUBSTRING
// (e.g. --only="u32 keys 1024 x 16384", for nsys/ncu); --bins_upto=N sends
// only segments longer than N to the merge sort (bins vs merge sweeps);
// --no_bounds gives our call no segment-length bounds (it plans from the
// offsets alone, as a library caller without them would).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cub/device/device_segmented_sort.cuh>

#include "bench/gpu_bench_util.cuh"
#include "core/cuda/segmented_sort.cuh"

namespace {

struct Case {
  const char* name;
  int key_bytes;
  bool pairs;
  int segments;
  int length;
};

struct Result {
  Case c;
  double ours, cub;
  double ours_call_us;  // host time of our call alone (planning, launches), no sync
  bool match;
};

template <typename Key>
Result Run(const Case& c, int repeats, uint32_t bins_upto, bool bounds, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(c.segments) * c.length;
  std::vector<uint32_t> offsets(c.segments + 1);
  for (int s = 0; s <= c.segments; ++s) offsets[s] = static_cast<uint32_t>(s) * c.length;
  Key *keys, *ours_out, *cub_out;
  uint32_t *values, *ours_values, *cub_values, *d_offsets;
  CHECK(cudaMalloc(&keys, n * sizeof(Key)));
  CHECK(cudaMalloc(&ours_out, n * sizeof(Key)));
  CHECK(cudaMalloc(&cub_out, n * sizeof(Key)));
  CHECK(cudaMalloc(&values, n * 4));
  CHECK(cudaMalloc(&ours_values, n * 4));
  CHECK(cudaMalloc(&cub_values, n * 4));
  CHECK(cudaMalloc(&d_offsets, offsets.size() * 4));
  CHECK(cudaMemcpy(d_offsets, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
  FillRandom<<<1024, 256, 0, stream>>>(reinterpret_cast<uint32_t*>(keys), n * sizeof(Key) / 4, 42);
  Iota<<<1024, 256, 0, stream>>>(values, n);

  sortd::cuda::SegmentedSortProblem p;
  p.key_type = sizeof(Key) == 4 ? sortd::cuda::RadixKeyType::kUint32 : sortd::cuda::RadixKeyType::kUint64;
  p.num_segments = c.segments;
  p.h_offsets = offsets.data();
  p.d_offsets = d_offsets;
  if (bounds) p.min_segment_items = p.max_segment_items = static_cast<uint32_t>(c.length);
  p.d_keys_in = keys;
  p.d_keys_out = ours_out;
  p.value_bytes = c.pairs ? 4 : 0;
  p.d_values_in = c.pairs ? values : nullptr;
  p.d_values_out = c.pairs ? ours_values : nullptr;
  p.largest_bin_items = bins_upto;
  size_t ours_bytes = 0;
  CHECK(sortd::cuda::SegmentedSort(nullptr, ours_bytes, p, stream));
  void* ours_temp;
  CHECK(cudaMalloc(&ours_temp, ours_bytes));

  size_t cub_bytes = 0;
  auto cub_sort = [&](void* temp, size_t& bytes) {
    if (c.pairs) {
      return cub::DeviceSegmentedSort::StableSortPairs(temp, bytes, keys, cub_out, values, cub_values,
                                                       static_cast<int>(n), c.segments, d_offsets,
                                                       d_offsets + 1, stream);
    }
    return cub::DeviceSegmentedSort::SortKeys(temp, bytes, keys, cub_out, static_cast<int>(n),
                                              c.segments, d_offsets, d_offsets + 1, stream);
  };
  CHECK(cub_sort(nullptr, cub_bytes));
  void* cub_temp;
  CHECK(cudaMalloc(&cub_temp, cub_bytes));

  Result r{c, 0, 0, 0, false};
  r.ours = n / HostTime([&] { CHECK(sortd::cuda::SegmentedSort(ours_temp, ours_bytes, p, stream)); },
                    repeats, stream) / 1e9;
  {
    std::vector<double> t;
    for (int i = 0; i < repeats; ++i) {
      const auto start = std::chrono::steady_clock::now();
      CHECK(sortd::cuda::SegmentedSort(ours_temp, ours_bytes, p, stream));
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      CHECK(cudaStreamSynchronize(stream));
    }
    r.ours_call_us = Median(t) * 1e6;
  }
  r.cub = n / HostTime([&] { CHECK(cub_sort(cub_temp, cub_bytes)); }, repeats, stream) / 1e9;

  r.match = Mismatches(ours_out, cub_out, n * sizeof(Key), stream) == 0 &&
            (!c.pairs || Mismatches(ours_values, cub_values, n * 4, stream) == 0);
  for (void* ptr : {(void*)keys, (void*)ours_out, (void*)cub_out, (void*)values, (void*)ours_values,
                    (void*)cub_values, (void*)d_offsets, ours_temp, cub_temp}) {
    cudaFree(ptr);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 9;
  std::string only;
  uint32_t bins_upto = 0;
  bool bounds = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--repeats=", 10) == 0) repeats = std::atoi(argv[i] + 10);
    if (std::strncmp(argv[i], "--only=", 7) == 0) only = argv[i] + 7;
    if (std::strncmp(argv[i], "--bins_upto=", 12) == 0) bins_upto = std::atoi(argv[i] + 12);
    if (std::strcmp(argv[i], "--no_bounds") == 0) bounds = false;
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Case cases[] = {
      {"u32 keys", 4, false, 65536, 64},    {"u32 keys", 4, false, 16384, 1024},
      {"u32 keys", 4, false, 1024, 16384},  {"u32 keys", 4, false, 4096, 256},
      {"u32 keys", 4, false, 1024, 4096},   {"u32 keys", 4, false, 2048, 8192},
      {"u32 keys", 4, false, 256, 65536},   {"u32/u32 pairs", 4, true, 65536, 64},
      {"u32/u32 pairs", 4, true, 16384, 1024}, {"u32/u32 pairs", 4, true, 1024, 16384},
      {"u64 keys", 8, false, 65536, 64},    {"u64 keys", 8, false, 16384, 1024},
      {"u64 keys", 8, false, 1024, 16384},  {"u64 keys", 8, false, 2048, 8192},
      {"u64 keys", 8, false, 4096, 4096},   {"u32 keys", 4, false, 8192, 2048},
      {"u32 keys", 4, false, 6144, 3000},   {"u32 keys", 4, false, 131072, 32},
      {"u64 keys", 8, false, 131072, 32},   {"u32 keys", 4, false, 32768, 128},
      {"u64 keys", 8, false, 32768, 128},
  };
  std::vector<Result> results;
  for (const Case& c : cases) {
    const std::string label =
        std::string(c.name) + " " + std::to_string(c.segments) + " x " + std::to_string(c.length);
    if (label.find(only) == std::string::npos) continue;
    results.push_back(c.key_bytes == 4 ? Run<uint32_t>(c, repeats, bins_upto, bounds, stream)
                                       : Run<uint64_t>(c, repeats, bins_upto, bounds, stream));
    std::fprintf(stderr, "%s %dx%d done\n", c.name, c.segments, c.length);
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  std::printf("\nGPU: %s (%d SMs), CUDA runtime %d, host-timed call+sync, median of %d after warm-up, %s\n",
              prop.name, prop.multiProcessorCount, runtime, repeats,
              bounds ? "our call given the length bounds" : "our call without length bounds");
  std::printf("%-14s %16s %10s %10s %7s %6s %8s\n", "case", "segments x len", "ours G/s",
              "CUB G/s", "ratio", "match", "call us");
  for (const Result& r : results) {
    char shape[32];
    std::snprintf(shape, sizeof(shape), "%d x %d", r.c.segments, r.c.length);
    std::printf("%-14s %16s %10.2f %10.2f %6.2fx %6s %8.0f\n", r.c.name, shape, r.ours, r.cub,
                r.ours / r.cub, r.match ? "yes" : "NO", r.ours_call_us);
  }
  return 0;
}
