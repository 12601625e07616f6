// GPU selection (core/cuda/select/top_k.cuh) against our own full radix
// sort of the same device array (keys only, and keys with positions), in
// one process: the issue #53 shapes (one array of 2^26 keys, k = 10..1000;
// 65536 rows of 1024 scores, k = 10 and 100). Every timed answer is checked
// on the device against the sort's first k (positions bit for bit). Each
// time is a whole call, synchronised (TopK synchronises its stream), the
// median of --repeats after warm-up. torch.topk on the same shapes:
// bench/gpu_top_k_torch.py.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "bench/gpu_bench_util.cuh"
#include "core/cuda/radix_sort.cuh"
#include "core/cuda/segmented_sort.cuh"
#include "core/cuda/select/top_k.cuh"

namespace {

using sortd::cuda::RadixKeyType;

// Uniform floats in [0, 1) from random words.
__global__ void WordsToUnitFloats(uint32_t* words, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float f;
    const uint32_t bits = (words[i] >> 9) | 0x3f800000u;
    memcpy(&f, &bits, 4);
    f -= 1.0f;
    memcpy(&words[i], &f, 4);
  }
}

template <typename F>
double MedianMs(int repeats, F&& f) {
  for (int i = 0; i < 3; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

struct Case {
  const char* name;
  RadixKeyType type;
  size_t n;
  size_t row_length;  // 0: one array
  uint64_t k;
  bool descending;
};

struct Row {
  std::string name;
  double topk_ms, sort_ms, argsort_ms;
  std::string path;
  unsigned long long mismatches;
};

Row RunCase(const Case& c, int repeats, cudaStream_t stream) {
  const size_t key_bytes = sortd::cuda::RadixKeyBytes(c.type);
  const size_t n = c.n;
  void *keys, *sorted, *pos_in, *pos_out, *positions, *sort_temp = nullptr, *topk_temp = nullptr;
  CHECK(cudaMalloc(&keys, n * key_bytes));
  CHECK(cudaMalloc(&sorted, n * key_bytes));
  CHECK(cudaMalloc(&pos_in, n * 4));
  CHECK(cudaMalloc(&pos_out, n * 4));
  FillRandom<<<1024, 256, 0, stream>>>(static_cast<uint32_t*>(keys), n * key_bytes / 4, 0x5eed + n);
  if (c.type == RadixKeyType::kFloat32) WordsToUnitFloats<<<1024, 256, 0, stream>>>(static_cast<uint32_t*>(keys), n);
  Iota<<<1024, 256, 0, stream>>>(static_cast<uint32_t*>(pos_in), c.row_length ? c.row_length : n);
  const size_t segments = c.row_length ? n / c.row_length : 1;
  const size_t kept = segments * std::min<uint64_t>(c.k, c.row_length ? c.row_length : n);
  CHECK(cudaMalloc(&positions, kept * 4));

  // The selection.
  sortd::cuda::TopKProblem p;
  p.key_type = c.type;
  p.descending = c.descending;
  p.d_keys = keys;
  p.num_items = n;
  p.row_length = c.row_length;
  p.k = c.k;
  p.d_positions = static_cast<uint32_t*>(positions);
  size_t topk_bytes = 0;
  CHECK(sortd::cuda::TopKTempBytes(p, &topk_bytes));
  CHECK(cudaMalloc(&topk_temp, topk_bytes));
  sortd::cuda::TopKStats stats;
  const double topk_ms = MedianMs(repeats, [&] {
    stats = {};
    CHECK(sortd::cuda::TopK(topk_temp, topk_bytes, p, stream, &stats));
  });

  // The full sorts: keys only, and keys with positions (the reference).
  double sort_ms = 0, argsort_ms = 0;
  unsigned long long bad = 0;
  if (c.row_length == 0) {
    sortd::cuda::RadixSortProblem s;
    s.key_type = c.type;
    s.num_items = n;
    s.descending = c.descending;
    s.d_keys_in = keys;
    s.d_keys_out = sorted;
    size_t bytes = 0, pair_bytes = 0;
    CHECK(sortd::cuda::RadixSort(nullptr, bytes, s, nullptr));
    sortd::cuda::RadixSortProblem sp = s;
    sp.value_bytes = 4;
    sp.d_values_in = pos_in;
    sp.d_values_out = pos_out;
    CHECK(sortd::cuda::RadixSort(nullptr, pair_bytes, sp, nullptr));
    CHECK(cudaMalloc(&sort_temp, std::max(bytes, pair_bytes)));
    sort_ms = MedianMs(repeats, [&] {
      size_t b = bytes;
      CHECK(sortd::cuda::RadixSort(sort_temp, b, s, stream));
      CHECK(cudaStreamSynchronize(stream));
    });
    argsort_ms = MedianMs(repeats, [&] {
      size_t b = pair_bytes;
      CHECK(sortd::cuda::RadixSort(sort_temp, b, sp, stream));
      CHECK(cudaStreamSynchronize(stream));
    });
    bad = Mismatches(positions, pos_out, kept * 4, stream);
  } else {
    // Rows: the segmented sort's positions, the first k of each row.
    std::vector<uint32_t> offsets(segments + 1);
    for (size_t r = 0; r <= segments; ++r) offsets[r] = static_cast<uint32_t>(r * c.row_length);
    void* d_offsets;
    CHECK(cudaMalloc(&d_offsets, offsets.size() * 4));
    CHECK(cudaMemcpy(d_offsets, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice));
    sortd::cuda::SegmentedSortProblem s;
    s.key_type = c.type;
    s.descending = c.descending;
    s.num_segments = static_cast<int>(segments);
    s.h_offsets = offsets.data();
    s.d_offsets = static_cast<const uint32_t*>(d_offsets);
    s.min_segment_items = s.max_segment_items = static_cast<uint32_t>(c.row_length);
    s.d_keys_in = keys;
    s.d_keys_out = sorted;
    s.d_indices_out = static_cast<uint32_t*>(pos_out);
    size_t bytes = 0;
    CHECK(sortd::cuda::SegmentedSort(nullptr, bytes, s, nullptr));
    CHECK(cudaMalloc(&sort_temp, std::max<size_t>(bytes, 1)));
    argsort_ms = MedianMs(repeats, [&] {
      size_t b = bytes;
      CHECK(sortd::cuda::SegmentedSort(sort_temp, b, s, stream));
      CHECK(cudaStreamSynchronize(stream));
    });
    // Compare row by row: kept k of each row against the row's first k.
    std::vector<uint32_t> got(kept), want(n);
    CHECK(cudaMemcpy(got.data(), positions, kept * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(want.data(), pos_out, n * 4, cudaMemcpyDeviceToHost));
    const size_t keep = std::min<uint64_t>(c.k, c.row_length);
    for (size_t r = 0; r < segments; ++r) {
      for (size_t i = 0; i < keep; ++i) bad += got[r * keep + i] != want[r * c.row_length + i];
    }
    CHECK(cudaFree(d_offsets));
  }
  std::string path = stats.row_launches ? "rows" : stats.sorted_segments ? "sort" : "guess";
  if (stats.guesses_failed) path += " (exact)";
  for (void* ptr : {keys, sorted, pos_in, pos_out, positions, sort_temp, topk_temp}) CHECK(cudaFree(ptr));
  return Row{c.name, topk_ms, sort_ms, argsort_ms, path, bad};
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 20, only = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--repeats=", 10) == 0) repeats = std::atoi(argv[i] + 10);
    if (std::strncmp(argv[i], "--only=", 7) == 0) only = std::atoi(argv[i] + 7);  // a case's index
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Case cases[] = {
      {"u32 2^26 k=10", RadixKeyType::kUint32, size_t{1} << 26, 0, 10, false},
      {"u32 2^26 k=100", RadixKeyType::kUint32, size_t{1} << 26, 0, 100, false},
      {"u32 2^26 k=100 desc", RadixKeyType::kUint32, size_t{1} << 26, 0, 100, true},
      {"u32 2^26 k=1000", RadixKeyType::kUint32, size_t{1} << 26, 0, 1000, false},
      {"f32 2^26 k=100 desc", RadixKeyType::kFloat32, size_t{1} << 26, 0, 100, true},
      {"u64 2^25 k=100", RadixKeyType::kUint64, size_t{1} << 25, 0, 100, false},
      {"f32 65536x1024 k=10 desc", RadixKeyType::kFloat32, size_t{1} << 26, 1024, 10, true},
      {"f32 65536x1024 k=100 desc", RadixKeyType::kFloat32, size_t{1} << 26, 1024, 100, true},
      {"f32 16384x4096 k=100 desc", RadixKeyType::kFloat32, size_t{1} << 26, 4096, 100, true},
  };
  std::vector<Row> rows;
  for (int i = 0; i < static_cast<int>(std::size(cases)); ++i) {
    if (only < 0 || only == i) rows.push_back(RunCase(cases[i], repeats, stream));
  }
  int device = 0;
  cudaDeviceProp prop;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("\nGPU top-k vs our full sort, %s, median of %d calls (ms, synchronised)\n", prop.name, repeats);
  std::printf("%-28s %10s %10s %10s %9s %9s  %-14s %s\n", "case", "topk", "sort", "argsort", "sort/tk",
              "args/tk", "path", "mismatches");
  for (const Row& r : rows) {
    std::printf("%-28s %10.3f %10.3f %10.3f %9.1f %9.1f  %-14s %llu\n", r.name.c_str(), r.topk_ms,
                r.sort_ms, r.argsort_ms, r.sort_ms / r.topk_ms, r.argsort_ms / r.topk_ms, r.path.c_str(),
                r.mismatches);
  }
  return 0;
}
