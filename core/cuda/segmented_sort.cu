// Segmented sort host side: plans the length bins from the host offsets,
// files segments into bins on the device, launches one kernel per bin that
// has segments, and sorts all segments longer than the largest bin
// together with the merge sort.
#include "core/cuda/segmented_sort.cuh"

#include <algorithm>
#include <vector>

#include "core/cuda/merge_sort.cuh"
#include "core/cuda/segment_bounds.h"
#include "core/cuda/segmented_kernels.cuh"

namespace sortd::cuda {
namespace {

using segmented::BinPlan;
using segmented::SegmentedParams;

constexpr size_t kAlign = 256;
size_t AlignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Launches one bin's kernel over the *count segments filed under `list`;
// at most `max_count` of them (the grid covers that many).
using LaunchFn = cudaError_t (*)(const void* params, const uint32_t* list, const uint32_t* count,
                                 uint32_t max_count, cudaStream_t stream);

struct Bin {
  uint32_t max_len;
  LaunchFn launch;
};

template <typename Word, int kThreads, int kItems, int kGroup>
cudaError_t LaunchBin(const void* params, const uint32_t* list, const uint32_t* count,
                      uint32_t max_count, cudaStream_t stream) {
  constexpr size_t smem = segmented::BinSmemBytes<Word, kThreads, kItems, kGroup>();
  auto kernel = segmented::SegmentedBinKernel<Word, kThreads, kItems, kGroup>;
  if constexpr (smem > 48 * 1024) {
    // Opt in to large dynamic shared memory (per device, so every time:
    // a host-side attribute write).
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    if (err != cudaSuccess) return err;
  }
  // One group per segment the bin may hold (groups past the count the
  // binning kernel filed exit at once).
  constexpr int kGroups = kThreads / kGroup;
  const int blocks = static_cast<int>(
      std::max<uint64_t>(1, (static_cast<uint64_t>(max_count) + kGroups - 1) / kGroups));
  kernel<<<blocks, kThreads, smem, stream>>>(*static_cast<const SegmentedParams<Word>*>(params),
                                             list, count, max_count);
  return cudaGetLastError();
}

// Bins by increasing length. Warp bins: one segment per group of 8 (up to
// 64 keys), 16 (128) or 32 threads (256), 8 keys per thread (4 up to 32):
// more of the network's stages stay within a thread, which cost about half
// a shuffle stage's instructions (H100, 65536 x 64: u64 keys 1.07x ->
// 1.31x CUB, u32 1.5x -> 1.65x; 131072 x 32 u32 1.8x -> 2.5x; one
// segment per warp before). Block bins: one segment per block. Sizes
// measured on the H200, the groups on the H100 (docs/benchmarks.md,
// "Segmented sort").
template <typename Word>
std::vector<Bin> BinsFor() {
  std::vector<Bin> bins = {
      {32, &LaunchBin<Word, 256, 4, 8>},
      {64, &LaunchBin<Word, 256, 8, 8>},
      {128, &LaunchBin<Word, 256, 8, 16>},
      {256, &LaunchBin<Word, 256, 8, 32>},
      {512, &LaunchBin<Word, 128, 4, 128>},
      {1024, &LaunchBin<Word, 256, 4, 256>},
      {2048, &LaunchBin<Word, 256, 8, 256>},
      {4096, &LaunchBin<Word, 256, 16, 256>},
      {8192, &LaunchBin<Word, 512, 16, 512>},
  };
  // Longer segments go to the merge sort (SegmentedMergeSort): a 16384-key
  // block bin (512 x 32, a 105-stage network) ran at 0.49x CUB on 1024
  // segments of 16384 keys.
  return bins;
}

// Longer segments go to the merge sort by default. Measured on the H200
// (docs/benchmarks.md, "Segmented sort"): the merge sort's 4864-key
// (u32) / 2816-key (u64) blocksort tiles beat the 4096/8192-key bitonic
// block bins once segments fill most of a tile.
constexpr uint32_t kDefaultLargestBin = 2048;

template <typename Word>
const std::vector<Bin>& Bins() {
  static const std::vector<Bin> bins = BinsFor<Word>();
  return bins;
}

// The merge sort's view of the segments longer than the largest bin.
SegmentedMergeProblem LargeProblem(const SegmentedSortProblem& p,
                                   const std::vector<uint32_t>& begins,
                                   const std::vector<uint32_t>& ends) {
  SegmentedMergeProblem m;
  m.key_type = p.key_type;
  m.descending = p.descending;
  m.num_segments = static_cast<int>(begins.size());
  m.h_begins = begins.data();
  m.h_ends = ends.data();
  m.d_keys_in = p.d_keys_in;
  m.d_keys_out = p.d_keys_out;
  m.value_bytes = p.value_bytes;
  m.d_values_in = p.d_values_in;
  m.d_values_out = p.d_values_out;
  m.d_indices_out = p.d_indices_out;
  return m;
}

template <typename Word>
cudaError_t SortSegmented(void* d_temp, size_t& temp_bytes, const SegmentedSortProblem& p,
                          cudaStream_t stream, SegmentedSortStats* stats) {
  const std::vector<Bin>& bins = Bins<Word>();
  int num_bins = 0;  // the bins in use: up to the largest allowed
  while (num_bins < static_cast<int>(bins.size()) &&
         bins[num_bins].max_len <= (p.largest_bin_items != 0 ? p.largest_bin_items
                                                              : kDefaultLargestBin)) {
    ++num_bins;
  }
  // Upper bounds of the segments per bin (exact when the host scans).
  std::vector<uint32_t> counts(num_bins, 0);
  std::vector<uint32_t> large_begins, large_ends;
  auto bin_of = [&](uint32_t len) {
    int b = 0;
    while (b < num_bins && len > bins[b].max_len) ++b;
    return b;
  };
  bool filed_on_host = false;
  uint32_t shortest = p.min_segment_items, longest = p.max_segment_items;
  if (longest == 0 && p.h_offsets != nullptr && p.num_segments > 0) {
    // No bounds given: find them first (core/cuda/segment_bounds.h: a
    // vectorised pass, several times faster than filing each segment).
    // When every segment falls in one bin, they are that bin's exact count
    // and the filing pass is skipped; otherwise the segments are filed one
    // by one below.
    SegmentLengthBounds(p.h_offsets, p.num_segments, &shortest, &longest);
    if (bin_of(shortest) != bin_of(longest)) longest = 0;
  }
  if (longest > 0 && num_bins > 0 && longest <= bins[num_bins - 1].max_len) {
    // Bounds known: every bin that may hold a segment gets the whole count
    // as its bound; no host pass files the segments.
    for (int b = bin_of(shortest); b <= bin_of(longest); ++b) {
      counts[b] = static_cast<uint32_t>(p.num_segments);
    }
  } else {
    filed_on_host = true;
    if (p.num_segments > 0 && p.h_offsets == nullptr) return cudaErrorInvalidValue;
    for (int s = 0; s < p.num_segments; ++s) {
      const uint32_t begin = p.h_offsets[s];
      const uint32_t len = p.h_offsets[s + 1] - begin;
      const int b = bin_of(len);
      if (b < num_bins) {
        ++counts[b];
      } else {
        large_begins.push_back(begin);
        large_ends.push_back(begin + len);
      }
    }
  }
  // Large segments: all at once through the merge sort (tiles aligned to
  // segments, merge passes within segments).
  size_t merge_temp = 0;
  if (!large_begins.empty()) {
    const cudaError_t err =
        SegmentedMergeSort(nullptr, merge_temp, LargeProblem(p, large_begins, large_ends), stream);
    if (err != cudaSuccess) return err;
  }
  const size_t cursors_at = 0;
  const size_t list_at = cursors_at + AlignUp(sizeof(uint32_t) * segmented::kMaxBins);
  uint64_t list_entries = 1;
  for (uint32_t c : counts) list_entries += c;
  const size_t merge_at = list_at + AlignUp(sizeof(uint32_t) * list_entries);
  const size_t needed = merge_at + AlignUp(merge_temp);
  if (d_temp == nullptr) {
    temp_bytes = needed;
    return cudaSuccess;
  }
  if (temp_bytes < needed) return cudaErrorInvalidValue;
  if (stats != nullptr) *stats = SegmentedSortStats{};
  if (p.num_segments == 0) return cudaSuccess;

  char* temp = static_cast<char*>(d_temp);
  auto* cursors = reinterpret_cast<uint32_t*>(temp + cursors_at);
  auto* list = reinterpret_cast<uint32_t*>(temp + list_at);
  // Each bin's ids start at the sum of the bounds before it (the bounds
  // may exceed the segment count in all: the list has room for that).
  BinPlan plan;
  plan.bins = num_bins;
  uint32_t base = 0;
  for (int b = 0; b < num_bins; ++b) {
    plan.max_len[b] = bins[b].max_len;
    plan.base[b] = base;
    plan.capacity[b] = counts[b];
    base += counts[b];
  }
  const Word flip = p.descending ? ~Word{0} : Word{0};
  SegmentedParams<Word> params;
  params.offsets = p.d_offsets;
  params.keys_in = static_cast<const Word*>(p.d_keys_in);
  params.keys_out = static_cast<Word*>(p.d_keys_out);
  params.masks = KeyMasks<Word>::For(ClassOf(p.key_type), flip, /*nans_present=*/true);
  params.value_bytes = p.value_bytes;
  params.values_in = p.d_values_in;
  params.values_out = p.d_values_out;
  params.indices_out = p.d_indices_out;

  int launches = 0;
  if (base > 0) {
    cudaError_t err = cudaMemsetAsync(cursors, 0, sizeof(uint32_t) * segmented::kMaxBins, stream);
    if (err != cudaSuccess) return err;
    segmented::BinSegmentsKernel<<<(p.num_segments + 255) / 256, 256, 0, stream>>>(
        p.d_offsets, p.num_segments, plan, cursors, list);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    ++launches;
    for (int b = 0; b < num_bins; ++b) {
      if (counts[b] == 0) continue;
      err = bins[b].launch(&params, list + plan.base[b], cursors + b, counts[b], stream);
      if (err != cudaSuccess) return err;
      ++launches;
    }
  }

  if (!large_begins.empty()) {
    SegmentedMergeProblem merge = LargeProblem(p, large_begins, large_ends);
    size_t bytes = merge_temp;
    cudaError_t err = SegmentedMergeSort(temp + merge_at, bytes, merge, stream);
    if (err != cudaSuccess) return err;
    ++launches;  // (several: blocksort, partition + merge per pass)
  }
  if (stats != nullptr) {
    stats->launches = launches;
    stats->large_segments = static_cast<int>(large_begins.size());
    stats->filed_on_host = filed_on_host;
  }
  return cudaSuccess;
}

}  // namespace

size_t SegmentedBlockCapacity(RadixKeyType key_type) {
  (void)key_type;  // the same for both key widths
  return kDefaultLargestBin;
}

cudaError_t SegmentedSort(void* d_temp_storage, size_t& temp_storage_bytes,
                          const SegmentedSortProblem& problem, cudaStream_t stream,
                          SegmentedSortStats* stats) {
  if (problem.num_segments < 0 ||
      (problem.value_bytes != 0 && problem.value_bytes != 4 && problem.value_bytes != 8)) {
    return cudaErrorInvalidValue;
  }
  if (RadixKeyBytes(problem.key_type) == 4) {
    return SortSegmented<uint32_t>(d_temp_storage, temp_storage_bytes, problem, stream, stats);
  }
  return SortSegmented<uint64_t>(d_temp_storage, temp_storage_bytes, problem, stream, stats);
}

}  // namespace sortd::cuda
