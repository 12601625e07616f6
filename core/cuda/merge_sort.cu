// Merge sort host side: key orders (numeric words, byte strings), tile
// sizes, temp-storage layout, and the pass schedule (blocksort, then
// partition + merge per pass, ping-ponging so that the last pass writes
// the caller's buffer).
#include "core/cuda/merge_sort.cuh"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/cuda/dependent_launch.cuh"
#include "core/cuda/merge_kernels.cuh"
#include "core/cuda/merge_kway.h"
#include "core/cuda/merge_kway_kernels.cuh"
#include "core/cuda/radix_transform.cuh"

namespace sortd::cuda {
namespace {

using merge::KeyIo;
using merge::NoValue;
using merge::PassGeometry;
using merge::RunPair;

constexpr size_t kAlign = 256;
size_t AlignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// The two calls of every entry point (CUB's convention) in one place: with
// d_temp null, reports `total` in temp_bytes and returns null with *err =
// cudaSuccess (the caller returns it); with temp_bytes short of `total`,
// null and cudaErrorInvalidValue; else the storage's aligned base.
char* TempBase(void* d_temp, size_t& temp_bytes, size_t total, cudaError_t* err) {
  *err = cudaSuccess;
  if (d_temp == nullptr) {
    temp_bytes = total;
    return nullptr;
  }
  if (temp_bytes < total) {
    *err = cudaErrorInvalidValue;
    return nullptr;
  }
  return reinterpret_cast<char*>(AlignUp(reinterpret_cast<uintptr_t>(d_temp)));
}

// Numeric keys are sorted as order-preserving words (the radix core's
// bijective map, without folding NaNs: decoding restores every bit). Floats
// compare NaNs as equal and last (first when descending) on top of it.
template <typename Word, bool kFloat>
struct NumericLess {
  using Key = Word;
  KeyMasks<Word> masks;

  // The order of a problem's key type and direction (NaNs handled by
  // Canonical, not by the masks).
  static NumericLess For(RadixKeyType key_type, bool descending) {
    NumericLess less;
    less.masks = KeyMasks<Word>::For(ClassOf(key_type), descending ? ~Word{0} : Word{0}, false);
    return less;
  }

  static constexpr Word kPosInf = KeyCodec<Word>::kSign | KeyCodec<Word>::kExponent;  // ordered +inf

  __device__ __forceinline__ Word Encode(Word k) const { return masks.Encode(k); }
  __device__ __forceinline__ Word Decode(Word k) const { return masks.Decode(k); }
  // NaNs (above +inf or below -inf in ascending ordered words) fold to the
  // largest word; ~kPosInf is ordered -inf.
  __device__ __forceinline__ Word Canonical(Word k) const {
    const Word ascending = k ^ masks.flip;
    const bool nan = ascending > kPosInf || ascending < static_cast<Word>(~kPosInf);
    return nan ? static_cast<Word>(~masks.flip) : k;
  }
  __device__ __forceinline__ bool operator()(Word a, Word b) const {
    if constexpr (kFloat) {
      return Canonical(a) < Canonical(b);
    } else {
      return a < b;
    }
  }
  // No word is greater: all ones, except for descending floats where all
  // ones is a NaN (NaNs come first); there ordered -inf is the largest.
  __device__ __forceinline__ Word Pad() const {
    return kFloat && masks.flip != 0 ? kPosInf : static_cast<Word>(~Word{0});
  }
};

// A string's first 8 bytes (big-endian, zero padded) and its index.
struct StringKey {
  uint64_t prefix;
  uint32_t index;
  uint32_t unused;
};

constexpr uint32_t kPadIndex = 0xffffffffu;

struct BytesLess {
  using Key = StringKey;
  const uint8_t* bytes;
  const uint64_t* offsets;
  bool descending;

  __device__ __forceinline__ StringKey Encode(StringKey k) const { return k; }
  __device__ __forceinline__ StringKey Decode(StringKey k) const { return k; }
  __device__ __forceinline__ StringKey Pad() const { return {~uint64_t{0}, kPadIndex, 0}; }

  // Bytes 8.. then lengths (the prefixes were equal).
  __device__ int CompareTail(uint32_t a, uint32_t b) const {
    const uint64_t a_begin = offsets[a], a_len = offsets[a + 1] - a_begin;
    const uint64_t b_begin = offsets[b], b_len = offsets[b + 1] - b_begin;
    const uint64_t n = a_len < b_len ? a_len : b_len;
    for (uint64_t i = 8; i < n; ++i) {
      const uint8_t x = bytes[a_begin + i];
      const uint8_t y = bytes[b_begin + i];
      if (x != y) return x < y ? -1 : 1;
    }
    return a_len < b_len ? -1 : (a_len > b_len ? 1 : 0);
  }
  __device__ __forceinline__ bool operator()(const StringKey& a, const StringKey& b) const {
    if (a.index == kPadIndex) return false;
    if (b.index == kPadIndex) return true;
    if (a.prefix != b.prefix) return (a.prefix < b.prefix) != descending;
    const int c = CompareTail(a.index, b.index);
    return descending ? c > 0 : c < 0;
  }
};

__global__ void MakeStringKeys(const uint8_t* bytes, const uint64_t* offsets, size_t n,
                               StringKey* keys) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint64_t begin = offsets[i];
  const uint64_t len = offsets[i + 1] - begin;
  uint64_t prefix = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) prefix = (prefix << 8) | (j < len ? bytes[begin + j] : 0);
  keys[i] = {prefix, static_cast<uint32_t>(i), 0};
}

__global__ void TakeIndices(const StringKey* keys, size_t n, uint32_t* indices) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) indices[i] = keys[i].index;
}

template <typename Less>
__global__ void EncodeKeys(const typename Less::Key* in, size_t n, typename Less::Key* out,
                           Less less) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = less.Encode(in[i]);
}

// Tile shapes: NT threads x VT keys (VT odd: thread-contiguous shared
// memory reads without bank conflicts); larger keys take fewer per thread.
// 4-byte keys, VT 13/15/17/19/21 on the H200 (u32 keys 2^24 and 2^26,
// Gkeys/s): 19.8/20.0, 20.2/20.7, 21.0/21.4, 21.4/22.0, 19.6/20.9. (Before
// the per-key encode/decode/partial-tile tests left the loops, issue-bound
// kernels made 13 the best; SORTD_MERGE_VT4 overrides it for sweeps.)
#ifndef SORTD_MERGE_VT4
#define SORTD_MERGE_VT4 19
#endif
template <typename Key>
struct TileShape {
  static constexpr int kThreads = 256;
  static constexpr int kItems = sizeof(Key) <= 4 ? SORTD_MERGE_VT4 : (sizeof(Key) <= 8 ? 11 : 7);
  static constexpr int kTileItems = kThreads * kItems;
};

int Log2Ceil(size_t x) {
  int p = 0;
  while ((size_t{1} << p) < x) ++p;
  return p;
}

unsigned GridFor(size_t n, int threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// Lanes per merge-path search of the partition kernel, by tiles in the
// pass: few tiles leave the GPU waiting on each search's dependent loads
// (more lanes, fewer rounds), many tiles make the probes' DRAM traffic the
// cost (fewer lanes). Measured on the H200 (u32 keys, 3328-key tiles,
// fixed 32 / 8 / 4 lanes): 315 tiles 10.8 / 9.7 / 8.4 Gkeys/s, 1260 tiles
// 18.4 / 17.5 / 16.0, 5042 tiles 19.0 / 19.8 / 19.3, 20165 tiles
// 18.4 / 19.6 / 20.0; one lane (a plain binary search) was slowest at all
// sizes but the largest.
// Launched as a dependent of the kernel before it (dependent_launch.cuh).
template <typename Key, typename Less>
cudaError_t LaunchPartition(const Key* keys, const PassGeometry& g, uint32_t tiles, Less less,
                            size_t* splits, cudaStream_t stream) {
  constexpr int kThreads = merge::kPartitionThreads;
  if (tiles <= 2048) {
    return LaunchDependent(merge::PartitionKernel<Less, 32>, GridFor(tiles, kThreads / 32), kThreads, 0, stream,
                           true, keys, g, tiles, less, splits);
  } else if (tiles <= 8192) {
    return LaunchDependent(merge::PartitionKernel<Less, 8>, GridFor(tiles, kThreads / 8), kThreads, 0, stream,
                           true, keys, g, tiles, less, splits);
  }
  return LaunchDependent(merge::PartitionKernel<Less, 4>, GridFor(tiles, kThreads / 4), kThreads, 0, stream, true,
                         keys, g, tiles, less, splits);
}

// Buffers of one sort or merge: the caller's input and output, and a
// scratch copy of each; values may be NoValue (all null).
template <typename Key, typename Value>
struct Buffers {
  const Key* keys_in;
  Key* keys_out;
  Key* keys_tmp;
  const Value* values_in;
  Value* values_out;
  Value* values_tmp;
  size_t* splits;
};

// Merge passes from (src = out or tmp, or `first_keys` for the first pass
// where given) until one run is left, decoding in the last; `geometry(pass)`
// describes each pass, `tiles(pass)` its tiles.
template <typename Key, typename Value, typename Less, typename GeometryFn>
cudaError_t MergePasses(const Buffers<Key, Value>& b, bool src_is_out, const Value* first_values,
                        int passes, bool decode_last, Less less, GeometryFn geometry,
                        cudaStream_t stream, const Key* first_keys = nullptr) {
  using Shape = TileShape<Key>;
  const Value* values_src = first_values;
  for (int pass = 0; pass < passes; ++pass) {
    const Key* src = pass == 0 && first_keys != nullptr ? first_keys : src_is_out ? b.keys_out : b.keys_tmp;
    Key* dst = src_is_out ? b.keys_tmp : b.keys_out;
    Value* values_dst = src_is_out ? b.values_tmp : b.values_out;
    uint32_t tiles = 0;
    const PassGeometry g = geometry(pass, &tiles);
    if (tiles > 0) {
      // Passes of at most kMergeFusedSplitsMaxTiles tiles search their
      // splits inside the merge kernel (two warps of each block, no splits
      // array) instead of in a PartitionKernel launch before it: the
      // searches' dependent loads then overlap other blocks' merging, and a
      // launch goes. With more tiles the fused searches' probes (two full
      // warps per tile) cost more memory traffic than the latency they
      // hide. H100, u32 keys vs cub::DeviceMergeSort: 2^20 keys (216 tiles)
      // 1.00-1.02x -> 1.28-1.29x, 2^21 1.24x, 2^22 (863) 0.98x -> 1.08x,
      // but 2^23 (1725) 0.96-0.97x, 2^24 (3450) 0.99x -> 0.94x and 2^26
      // 0.97x -> 0.87x when fused.
      const bool fused = tiles <= kMergeFusedSplitsMaxTiles;
      cudaError_t err = fused ? cudaSuccess : LaunchPartition(src, g, tiles, less, b.splits, stream);
      if (err != cudaSuccess) return err;
      // A dependent launch (dependent_launch.cuh): its blocks may start in
      // the last wave of the kernel before (merge sort +3-8% at 2^22-2^24
      // keys on the H100).
      const KeyIo<Less> io{false, decode_last && pass == passes - 1, less};
      const size_t* splits = fused ? nullptr : b.splits;
      err = LaunchDependent(merge::MergeKernel<Shape::kThreads, Shape::kItems, Less, Value>, tiles, Shape::kThreads,
                            0, stream, true, src, dst, values_src, values_dst, g, splits, io);
      if (err != cudaSuccess) return err;
    }
    values_src = values_dst;
    src_is_out = !src_is_out;
  }
  return cudaSuccess;
}

// A full sort: blocksort into the buffer that makes the last pass land in
// keys_out, then uniform passes of doubling width.
template <typename Key, typename Value, typename Less>
cudaError_t SortWithBuffers(const Buffers<Key, Value>& b, size_t n, Less less, bool encoded,
                            cudaStream_t stream) {
  using Shape = TileShape<Key>;
  if (n == 0) return cudaSuccess;
  const size_t tiles = (n + Shape::kTileItems - 1) / Shape::kTileItems;
  const int passes = Log2Ceil(tiles);
  const bool into_out = passes % 2 == 0;
  KeyIo<Less> io{encoded, encoded && passes == 0, less};
  merge::BlockSortKernel<Shape::kThreads, Shape::kItems, Less, Value>
      <<<static_cast<unsigned>(tiles), Shape::kThreads, 0, stream>>>(
          b.keys_in, into_out ? b.keys_out : b.keys_tmp, b.values_in,
          into_out ? b.values_out : b.values_tmp, n, nullptr, 0, io);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const Value* first_values = into_out ? b.values_out : b.values_tmp;
  return MergePasses(b, into_out, first_values, passes, encoded, less,
                     [&](int pass, uint32_t* num_tiles) {
                       PassGeometry g;
                       g.num_items = n;
                       g.log2_run_tiles = pass;
                       g.tile_items = Shape::kTileItems;
                       *num_tiles = static_cast<uint32_t>(tiles);
                       return g;
                     },
                     stream);
}

// Carves temp storage: key scratch, value scratch, splits, and `extra`
// bytes. Returns false (sizing) when d_temp is null.
struct TempLayout {
  size_t keys_tmp = 0, values_tmp = 0, splits = 0, extra = 0, total = 0;
  TempLayout(size_t key_bytes, size_t value_bytes, size_t splits_count, size_t extra_bytes) {
    values_tmp = keys_tmp + AlignUp(key_bytes);
    splits = values_tmp + AlignUp(value_bytes);
    extra = splits + AlignUp(splits_count * sizeof(size_t));
    total = extra + AlignUp(extra_bytes) + kAlign;
  }

  // The caller's arrays plus the temp buffers carved from `base` (d_temp
  // aligned up).
  template <typename Key, typename Value>
  Buffers<Key, Value> BuffersAt(char* base, const Key* keys_in, Key* keys_out,
                                const Value* values_in, Value* values_out) const {
    constexpr bool kHasValues = !std::is_same_v<Value, NoValue>;
    return {keys_in,   keys_out,   reinterpret_cast<Key*>(base + keys_tmp),
            values_in, values_out, kHasValues ? reinterpret_cast<Value*>(base + values_tmp) : nullptr,
            reinterpret_cast<size_t*>(base + splits)};
  }
};

template <typename Word, bool kFloat, typename Value>
cudaError_t SortNumericTyped(void* d_temp, size_t& temp_bytes, const MergeSortProblem& p,
                             const Value* values_in, Value* values_out, cudaStream_t stream) {
  using Less = NumericLess<Word, kFloat>;
  using Shape = TileShape<Word>;
  const size_t n = p.num_items;
  const size_t tiles = (n + Shape::kTileItems - 1) / Shape::kTileItems;
  const size_t value_size = std::is_same_v<Value, NoValue> ? 0 : sizeof(Value);
  const TempLayout layout(n * sizeof(Word), n * value_size, tiles + 1, 0);
  cudaError_t err;
  char* base = TempBase(d_temp, temp_bytes, layout.total, &err);
  if (base == nullptr) return err;
  const Less less = Less::For(p.key_type, p.descending);
  const Buffers<Word, Value> b = layout.BuffersAt(base, static_cast<const Word*>(p.d_keys_in),
                                                  static_cast<Word*>(p.d_keys_out), values_in, values_out);
  return SortWithBuffers(b, n, less, true, stream);
}

template <typename Word, bool kFloat>
cudaError_t SortNumericValues(void* d_temp, size_t& temp_bytes, const MergeSortProblem& p,
                              cudaStream_t stream) {
  if (p.d_indices_out != nullptr) {  // argsort: generated 32-bit positions
    return SortNumericTyped<Word, kFloat, uint32_t>(d_temp, temp_bytes, p, nullptr,
                                                    p.d_indices_out, stream);
  }
  switch (p.value_bytes) {
    case 0:
      return SortNumericTyped<Word, kFloat, NoValue>(d_temp, temp_bytes, p, nullptr, nullptr,
                                                     stream);
    case 4:
      return SortNumericTyped<Word, kFloat, uint32_t>(
          d_temp, temp_bytes, p, static_cast<const uint32_t*>(p.d_values_in),
          static_cast<uint32_t*>(p.d_values_out), stream);
    case 8:
      return SortNumericTyped<Word, kFloat, uint64_t>(
          d_temp, temp_bytes, p, static_cast<const uint64_t*>(p.d_values_in),
          static_cast<uint64_t*>(p.d_values_out), stream);
    default:
      return cudaErrorInvalidValue;
  }
}

// The pass plan of a runs merge: per pass, the pairs with tiles (empty
// pairs dropped), all passes' lists back to back.
struct RunsPlan {
  std::vector<RunPair> pairs;
  std::vector<size_t> pass_begin;  // index into pairs, passes + 1 entries
  std::vector<uint32_t> pass_tiles;
  size_t max_tiles = 0;
};

RunsPlan PlanRuns(const size_t* offsets, int num_runs, int tile_items) {
  RunsPlan plan;
  std::vector<size_t> runs(offsets, offsets + num_runs + 1);
  plan.pass_begin.push_back(0);
  while (runs.size() > 2) {
    std::vector<size_t> next;
    uint32_t tiles = 0;
    const size_t count = runs.size() - 1;
    for (size_t r = 0; r < count; r += 2) {
      const size_t begin = runs[r];
      const size_t mid = runs[r + 1];
      const size_t end = r + 2 <= count ? runs[r + 2] : mid;
      next.push_back(begin);
      if (end > begin) {
        plan.pairs.push_back({begin, mid, end, tiles, 0});
        tiles += static_cast<uint32_t>((end - begin + tile_items - 1) / tile_items);
      }
    }
    next.push_back(runs.back());
    runs.swap(next);
    plan.pass_begin.push_back(plan.pairs.size());
    plan.pass_tiles.push_back(tiles);
    plan.max_tiles = std::max<size_t>(plan.max_tiles, tiles);
  }
  return plan;
}

// Temp storage enough for two-way rounds over num_items keys in at most
// max_runs runs, whatever their lengths.
size_t TwoWayRunsTempBound(size_t key_bytes, size_t num_items, int value_bytes, int max_runs) {
  const size_t tile_items = key_bytes == 4 ? TileShape<uint32_t>::kTileItems : TileShape<uint64_t>::kTileItems;
  const size_t runs = static_cast<size_t>(std::max(max_runs, 1));
  // A pass's tiles: its pairs' lengths rounded up, at most one tile more
  // per run; pairs over all passes: at most one per run and pass level.
  const size_t max_tiles = num_items / tile_items + 2 * runs + 1;
  const size_t max_pairs = 2 * runs + 64;
  return TempLayout(num_items * key_bytes, num_items * static_cast<size_t>(value_bytes), max_tiles + 1,
                    max_pairs * sizeof(RunPair))
      .total;
}

// The k-way round's tile: NT threads of VT elements (VT odd, as
// TileShape's), by element bytes: 4-byte keys, or 8 (8-byte keys, 4-byte
// keys with 4-byte values). H200, u32 / u64 keys in 8 runs of 2^26 keys in
// all, us (VT/NT for 4-byte elements, NT for 8-byte ones): 15/512/256 508
// / -, 19/416/160 537 / 738, 23/352/128 480 / 726, 31/256/- 538 / -.
// Blocks an SM held by capping registers: left to itself the compiler took
// 52 registers for 4-byte keys (3 blocks; the u32 merge above 557 us
// against 476-488 at 40) and 80-84 for 8-byte ones (6 blocks; u64 788 us
// against 726-732 at 72).
template <size_t kElementBytes>
struct KWayShape {
  static constexpr int kThreads = kElementBytes <= 4 ? 352 : 128;
  static constexpr int kItems = 23;
  static constexpr int kMinBlocks = kElementBytes <= 4 ? 4 : 7;
  static constexpr int kCapacity = merge::KWayTileCapacity(kThreads, kItems);
};

// Whether a merge of these widths may take the k-way round: keys only, or
// 4-byte keys with 4-byte values (an 8-byte element).
constexpr bool KWayWidths(size_t key_bytes, size_t value_bytes) {
  return value_bytes == 0 || (key_bytes == 4 && value_bytes == 4);
}

int KWayCapacity(size_t element_bytes) {
  return element_bytes <= 4 ? KWayShape<4>::kCapacity : KWayShape<8>::kCapacity;
}

// The sample stride S (a power of two) and splitter spacing q of a k-way
// round of k runs with tiles of `capacity` keys: a block's slices hold at
// most (q + k) S - k keys (merge_kway_kernels.cuh), q S on average. S is
// the largest that leaves q >= 3k (average tiles at least 3/4 full): the
// fewer samples, the cheaper their merge.
struct KWaySpacing {
  int stride_log2 = 0;
  uint32_t q = 0;
};

KWaySpacing SpacingFor(int k, int capacity) {
  KWaySpacing sp;
  while ((size_t{2} << sp.stride_log2) * static_cast<size_t>(4 * k) <= static_cast<size_t>(capacity + k)) {
    ++sp.stride_log2;
  }
  sp.q = static_cast<uint32_t>((capacity + k) >> sp.stride_log2) - static_cast<uint32_t>(k);
  return sp;
}

// A k-way round's plan, made on the host from the run offsets.
struct KWayPlan {
  merge::KWayRuns runs{};
  uint32_t num_samples = 0;
  uint32_t q = 0;
  uint32_t buckets = 0;
};

// Whether `p` merges in one k-way round (merge_kway.h): widths
// KWayWidths allows, kMergeKWayMinRuns..kMergeKWayMaxRuns non-empty runs,
// from kway_min_items keys, positions below 2^32.
template <typename Word>
bool PlanKWay(const MergeRunsProblem& p, KWayPlan* plan) {
  const size_t n = p.h_run_offsets[p.num_runs];
  const size_t element_bytes = sizeof(Word) + static_cast<size_t>(p.value_bytes);
  const size_t min_items =
      p.kway_min_items != 0 ? p.kway_min_items : element_bytes <= 4 ? kMergeKWayMinItems4 : kMergeKWayMinItems8;
  if (!KWayWidths(sizeof(Word), static_cast<size_t>(p.value_bytes)) || n < min_items ||
      n >= (size_t{1} << 32)) {
    return false;
  }
  int k = 0;
  for (int r = 0; r < p.num_runs; ++r) {
    if (p.h_run_offsets[r + 1] == p.h_run_offsets[r]) continue;
    if (k == kMergeKWayMaxRuns) return false;
    plan->runs.begin[k++] = static_cast<uint32_t>(p.h_run_offsets[r]);
  }
  if (k < kMergeKWayMinRuns) return false;
  const KWaySpacing sp = SpacingFor(k, KWayCapacity(element_bytes));
  plan->runs.num_runs = k;
  plan->runs.stride_log2 = sp.stride_log2;
  plan->q = sp.q;
  for (int r = k; r <= kMergeKWayMaxRuns; ++r) plan->runs.begin[r] = static_cast<uint32_t>(n);
  uint32_t samples = 0;
  for (int r = 0; r <= kMergeKWayMaxRuns; ++r) {
    plan->runs.sample_begin[r] = samples;
    if (r < k) {
      const uint32_t len = plan->runs.begin[r + 1] - plan->runs.begin[r];
      samples += ((len - 1) >> sp.stride_log2) + 1;
    }
  }
  plan->num_samples = samples;
  plan->buckets = (samples + sp.q - 1) / sp.q;
  return true;
}

// Temp storage of a k-way round, in order: the encoded keys (unless the
// keys are their own words), the samples (keys, positions), the merged
// samples, the splits, and the samples' merge's own storage.
struct KWayLayout {
  size_t encoded = 0, sample_keys = 0, sample_pos = 0, merged_keys = 0, merged_pos = 0, splits = 0, inner = 0,
         total = 0;
  KWayLayout(size_t n_encoded, size_t samples, size_t buckets, int k, size_t key_bytes, size_t inner_bytes) {
    size_t at = 0;
    auto take = [&](size_t bytes) {
      const size_t here = at;
      at += AlignUp(bytes);
      return here;
    };
    encoded = take(n_encoded * key_bytes);
    sample_keys = take(samples * key_bytes);
    sample_pos = take(samples * sizeof(uint32_t));
    merged_keys = take(samples * key_bytes);
    merged_pos = take(samples * sizeof(uint32_t));
    splits = take((buckets + 1) * static_cast<size_t>(k) * sizeof(uint32_t));
    inner = take(inner_bytes);
    total = at + kAlign;  // base aligned up inside
  }
};

template <typename Word, bool kFloat, typename Value>
cudaError_t MergeRunsTyped(void* d_temp, size_t& temp_bytes, const MergeRunsProblem& p,
                           cudaStream_t stream, bool words_encoded = false);

// Unsigned keys merged ascending are their own ordered words: merges read
// them where they are, without an encode pass.
template <bool kFloat>
bool KeysAreWords(const MergeRunsProblem& p) {
  return !kFloat && ClassOf(p.key_type) == KeyClass::kUnsigned && !p.descending;
}

// One k-way round (merge_kway_kernels.cuh): encode (unless the keys are
// their own words), sample, merge the samples (two-way rounds over words
// already encoded), find the splits, merge.
template <typename Word, bool kFloat, typename Value>
cudaError_t MergeRunsKWay(void* d_temp, size_t& temp_bytes, const MergeRunsProblem& p, const KWayPlan& plan,
                          cudaStream_t stream) {
  using Less = NumericLess<Word, kFloat>;
  using Shape = KWayShape<sizeof(typename merge::KWayElement<Less, Value>::Type)>;
  const size_t n = p.h_run_offsets[p.num_runs];
  const int k = plan.runs.num_runs;
  const bool identity = KeysAreWords<kFloat>(p);
  std::vector<size_t> sample_offsets(static_cast<size_t>(k) + 1);
  for (int r = 0; r <= k; ++r) sample_offsets[r] = plan.runs.sample_begin[r];
  MergeRunsProblem samples;
  samples.key_type = p.key_type;
  samples.descending = p.descending;
  samples.num_runs = k;
  samples.h_run_offsets = sample_offsets.data();
  samples.value_bytes = 4;
  size_t inner_bytes = 0;
  cudaError_t err = MergeRunsTyped<Word, kFloat, uint32_t>(nullptr, inner_bytes, samples, stream, true);
  if (err != cudaSuccess) return err;
  const KWayLayout layout(identity ? 0 : n, plan.num_samples, plan.buckets, k, sizeof(Word), inner_bytes);
  char* base = TempBase(d_temp, temp_bytes, layout.total, &err);
  if (base == nullptr) return err;
  const Less less = Less::For(p.key_type, p.descending);
  const Word* words = static_cast<const Word*>(p.d_keys_in);
  if (!identity) {
    Word* encoded = reinterpret_cast<Word*>(base + layout.encoded);
    EncodeKeys<<<GridFor(n, 256), 256, 0, stream>>>(words, n, encoded, less);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    words = encoded;
  }
  Word* sample_keys = reinterpret_cast<Word*>(base + layout.sample_keys);
  Word* merged_keys = reinterpret_cast<Word*>(base + layout.merged_keys);
  uint32_t* sample_pos = reinterpret_cast<uint32_t*>(base + layout.sample_pos);
  uint32_t* merged_pos = reinterpret_cast<uint32_t*>(base + layout.merged_pos);
  uint32_t* splits = reinterpret_cast<uint32_t*>(base + layout.splits);
  merge::SampleRunsKernel<<<GridFor(plan.num_samples, 256), 256, 0, stream>>>(words, plan.runs, sample_keys,
                                                                             sample_pos, plan.num_samples);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  samples.d_keys_in = sample_keys;
  samples.d_keys_out = merged_keys;
  samples.d_values_in = sample_pos;
  samples.d_values_out = merged_pos;
  err = MergeRunsTyped<Word, kFloat, uint32_t>(base + layout.inner, inner_bytes, samples, stream, true);
  if (err != cudaSuccess) return err;
  const size_t searches = (size_t{plan.buckets} + 1) * static_cast<size_t>(k);
  merge::RunSplitsKernel<<<GridFor(searches, 256), 256, 0, stream>>>(
      words, sample_keys, merged_keys, merged_pos, plan.runs, plan.buckets, plan.q, less, splits);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  const KeyIo<Less> io{false, !identity, less};
  merge::KWayMergeKernel<Shape::kThreads, Shape::kItems, Shape::kMinBlocks, Less, Value>
      <<<plan.buckets, Shape::kThreads, 0, stream>>>(words, static_cast<Word*>(p.d_keys_out),
                                                     static_cast<const Value*>(p.d_values_in),
                                                     static_cast<Value*>(p.d_values_out), plan.runs, splits, io);
  return cudaGetLastError();
}

// words_encoded: the keys are the order's words already (the k-way
// round's samples): no encoding on the way in or decoding on the way out,
// and always two-way rounds.
template <typename Word, bool kFloat, typename Value>
cudaError_t MergeRunsTyped(void* d_temp, size_t& temp_bytes, const MergeRunsProblem& p,
                           cudaStream_t stream, bool words_encoded) {
  using Less = NumericLess<Word, kFloat>;
  using Shape = TileShape<Word>;
  if constexpr (std::is_same_v<Value, NoValue> || (sizeof(Word) == 4 && sizeof(Value) == 4)) {
    if (KWayPlan kway; !words_encoded && PlanKWay<Word>(p, &kway)) {
      return MergeRunsKWay<Word, kFloat, Value>(d_temp, temp_bytes, p, kway, stream);
    }
  }
  const size_t n = p.h_run_offsets[p.num_runs];
  const size_t value_size = std::is_same_v<Value, NoValue> ? 0 : sizeof(Value);
  const RunsPlan plan = PlanRuns(p.h_run_offsets, p.num_runs, Shape::kTileItems);
  const int passes = static_cast<int>(plan.pass_tiles.size());
  const TempLayout layout(n * sizeof(Word), n * value_size, plan.max_tiles + 1,
                          plan.pairs.size() * sizeof(RunPair));
  cudaError_t err;
  char* base = TempBase(d_temp, temp_bytes, layout.total, &err);
  if (base == nullptr) return err;
  const Word* keys_in = static_cast<const Word*>(p.d_keys_in);
  Word* keys_out = static_cast<Word*>(p.d_keys_out);
  const Value* values_in = static_cast<const Value*>(p.d_values_in);
  Value* values_out = static_cast<Value*>(p.d_values_out);
  if (n == 0) return cudaSuccess;
  if (passes == 0) {  // one run: already merged
    err = cudaMemcpyAsync(keys_out, keys_in, n * sizeof(Word), cudaMemcpyDeviceToDevice, stream);
    if (err == cudaSuccess && value_size != 0) {
      err = cudaMemcpyAsync(values_out, values_in, n * value_size, cudaMemcpyDeviceToDevice,
                            stream);
    }
    return err;
  }
  RunPair* d_pairs = reinterpret_cast<RunPair*>(base + layout.extra);
  // Pageable source: the runtime copies it to staging before returning.
  err = cudaMemcpyAsync(d_pairs, plan.pairs.data(), plan.pairs.size() * sizeof(RunPair),
                        cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) return err;
  const Less less = Less::For(p.key_type, p.descending);
  const Buffers<Word, Value> b = layout.BuffersAt(base, keys_in, keys_out, values_in, values_out);
  // Encode into the buffer the pass parity needs (odd: tmp, so that the
  // last pass writes out); the first pass reads the caller's values.
  // Keys that are their own words: the first pass reads them where they
  // are (one read and write of the keys fewer).
  const bool encoded_in_out = passes % 2 == 0;
  const bool identity = words_encoded || KeysAreWords<kFloat>(p);
  if (!identity) {
    EncodeKeys<<<GridFor(n, 256), 256, 0, stream>>>(keys_in, n,
                                                    encoded_in_out ? keys_out : b.keys_tmp, less);
    err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return MergePasses(b, encoded_in_out, values_in, passes, !identity, less,
                     [&](int pass, uint32_t* num_tiles) {
                       PassGeometry g;
                       g.num_items = n;
                       g.pairs = d_pairs + plan.pass_begin[pass];
                       g.num_pairs = static_cast<int>(plan.pass_begin[pass + 1] -
                                                      plan.pass_begin[pass]);
                       g.tile_items = Shape::kTileItems;
                       *num_tiles = plan.pass_tiles[pass];
                       return g;
                     },
                     stream, identity ? keys_in : nullptr);
}

template <typename Word, bool kFloat>
cudaError_t MergeRunsValues(void* d_temp, size_t& temp_bytes, const MergeRunsProblem& p,
                            cudaStream_t stream) {
  switch (p.value_bytes) {
    case 0: return MergeRunsTyped<Word, kFloat, NoValue>(d_temp, temp_bytes, p, stream);
    case 4: return MergeRunsTyped<Word, kFloat, uint32_t>(d_temp, temp_bytes, p, stream);
    case 8: return MergeRunsTyped<Word, kFloat, uint64_t>(d_temp, temp_bytes, p, stream);
    default: return cudaErrorInvalidValue;
  }
}

// The plan of a segmented merge sort: one descriptor per non-empty
// segment (its tiles, the same in every kernel) and the passes the longest
// segment needs. O(segments) on the host and in the upload: a plan of
// explicit run pairs per pass cost 260-640 us of host time for 1024
// segments of 16384 keys, twice the GPU time.
struct SegmentsPlan {
  std::vector<merge::SegmentSpan> segments;
  uint32_t tiles = 0;
  int passes = 0;
  size_t extent = 0;  // one past the last key of any segment
};

SegmentsPlan PlanSegments(const SegmentedMergeProblem& p, int tile_items) {
  SegmentsPlan plan;
  plan.segments.reserve(static_cast<size_t>(p.num_segments));
  for (int s = 0; s < p.num_segments; ++s) {
    const uint32_t begin = p.h_begins[s], end = p.h_ends[s];
    if (end <= begin) continue;
    const uint32_t tiles = (end - begin + tile_items - 1) / tile_items;
    plan.segments.push_back({plan.tiles, begin, end, 0});
    plan.tiles += tiles;
    plan.passes = std::max(plan.passes, Log2Ceil(tiles));
    plan.extent = std::max<size_t>(plan.extent, end);
  }
  return plan;
}

// Value: NoValue (keys only), the caller's 4/8-byte values, or uint32_t
// generated positions (indices wanted; values, if any, gathered after).
template <typename Word, bool kFloat, typename Value>
cudaError_t SegmentedTyped(void* d_temp, size_t& temp_bytes, const SegmentedMergeProblem& p,
                           bool positions, cudaStream_t stream) {
  using Less = NumericLess<Word, kFloat>;
  using Shape = TileShape<Word>;
  const SegmentsPlan plan = PlanSegments(p, Shape::kTileItems);
  const size_t n = plan.extent;
  // Sized for the widest value scratch this problem can need with or
  // without positions, so that sizing does not depend on d_indices_out
  // (callers carve the output arrays after sizing).
  const size_t scratch_value_size =
      std::max<size_t>(static_cast<size_t>(p.value_bytes), sizeof(uint32_t));
  const size_t segments_bytes = plan.segments.size() * sizeof(merge::SegmentSpan);
  const TempLayout layout(n * sizeof(Word), n * scratch_value_size, size_t{plan.tiles} + 1,
                          segments_bytes);
  cudaError_t err;
  char* base = TempBase(d_temp, temp_bytes, layout.total, &err);
  if (base == nullptr) return err;
  if (plan.segments.empty()) return cudaSuccess;
  auto* d_segments = reinterpret_cast<merge::SegmentSpan*>(base + layout.extra);
  // Pageable source: the runtime stages it before returning.
  err = cudaMemcpyAsync(d_segments, plan.segments.data(), segments_bytes, cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) return err;
  const int num_segments = static_cast<int>(plan.segments.size());

  const Less less = Less::For(p.key_type, p.descending);
  const Value* values_in = positions ? nullptr : static_cast<const Value*>(p.d_values_in);
  Value* values_out =
      positions ? reinterpret_cast<Value*>(p.d_indices_out) : static_cast<Value*>(p.d_values_out);
  const Buffers<Word, Value> b = layout.BuffersAt(base, static_cast<const Word*>(p.d_keys_in),
                                                  static_cast<Word*>(p.d_keys_out), values_in, values_out);
  const bool into_out = plan.passes % 2 == 0;
  KeyIo<Less> io{true, plan.passes == 0, less};
  merge::BlockSortKernel<Shape::kThreads, Shape::kItems, Less, Value>
      <<<plan.tiles, Shape::kThreads, 0, stream>>>(
          b.keys_in, into_out ? b.keys_out : b.keys_tmp, b.values_in,
          into_out ? b.values_out : b.values_tmp, n, d_segments, num_segments, io);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;
  err = MergePasses(b, into_out, into_out ? b.values_out : b.values_tmp, plan.passes, true, less,
                    [&](int pass, uint32_t* num_tiles) {
                      PassGeometry g;
                      g.num_items = n;
                      g.log2_run_tiles = pass;
                      g.segments = d_segments;
                      g.num_segments = num_segments;
                      g.tile_items = Shape::kTileItems;
                      *num_tiles = plan.tiles;
                      return g;
                    },
                    stream);
  if (err != cudaSuccess || !positions) return err;
  if (p.value_bytes == 8) {
    merge::FinishSegmentTilesKernel<uint64_t><<<plan.tiles, 256, 0, stream>>>(
        d_segments, num_segments, Shape::kTileItems, p.d_indices_out,
        static_cast<const uint64_t*>(p.d_values_in), static_cast<uint64_t*>(p.d_values_out));
  } else {
    merge::FinishSegmentTilesKernel<uint32_t><<<plan.tiles, 256, 0, stream>>>(
        d_segments, num_segments, Shape::kTileItems, p.d_indices_out,
        static_cast<const uint32_t*>(p.d_values_in),
        p.value_bytes == 4 ? static_cast<uint32_t*>(p.d_values_out) : nullptr);
  }
  return cudaGetLastError();
}

template <typename Word, bool kFloat>
cudaError_t SegmentedValues(void* d_temp, size_t& temp_bytes, const SegmentedMergeProblem& p,
                            cudaStream_t stream) {
  if (p.d_indices_out != nullptr) {
    return SegmentedTyped<Word, kFloat, uint32_t>(d_temp, temp_bytes, p, true, stream);
  }
  switch (p.value_bytes) {
    case 0: return SegmentedTyped<Word, kFloat, NoValue>(d_temp, temp_bytes, p, false, stream);
    case 4: return SegmentedTyped<Word, kFloat, uint32_t>(d_temp, temp_bytes, p, false, stream);
    case 8: return SegmentedTyped<Word, kFloat, uint64_t>(d_temp, temp_bytes, p, false, stream);
    default: return cudaErrorInvalidValue;
  }
}

// Calls fn(Word{}, std::bool_constant<kFloat>{}) for the sort word of a
// numeric key type: every entry point instantiates the same six cases.
template <typename Fn>
cudaError_t ByKeyWord(RadixKeyType type, Fn fn) {
  switch (type) {
    case RadixKeyType::kUint32:
    case RadixKeyType::kInt32: return fn(uint32_t{}, std::false_type{});
    case RadixKeyType::kFloat32: return fn(uint32_t{}, std::true_type{});
    case RadixKeyType::kUint64:
    case RadixKeyType::kInt64: return fn(uint64_t{}, std::false_type{});
    case RadixKeyType::kFloat64: return fn(uint64_t{}, std::true_type{});
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t SegmentedMergeSort(void* d_temp_storage, size_t& temp_storage_bytes,
                               const SegmentedMergeProblem& problem, cudaStream_t stream) {
  if (problem.num_segments < 0 ||
      (problem.num_segments > 0 && (problem.h_begins == nullptr || problem.h_ends == nullptr)) ||
      (problem.value_bytes != 0 && problem.value_bytes != 4 && problem.value_bytes != 8)) {
    return cudaErrorInvalidValue;
  }
  return ByKeyWord(problem.key_type, [&](auto word, auto is_float) {
    return SegmentedValues<decltype(word), decltype(is_float)::value>(d_temp_storage, temp_storage_bytes,
                                                          problem, stream);
  });
}

size_t MergeSortTileItems(int key_bytes) {
  if (key_bytes <= 4) return TileShape<uint32_t>::kTileItems;
  if (key_bytes <= 8) return TileShape<uint64_t>::kTileItems;
  return TileShape<StringKey>::kTileItems;
}

cudaError_t MergeSort(void* d_temp_storage, size_t& temp_storage_bytes,
                      const MergeSortProblem& problem, cudaStream_t stream) {
  if (problem.d_indices_out != nullptr &&
      (problem.value_bytes != 0 || problem.num_items >= (uint64_t{1} << 32))) {
    return cudaErrorInvalidValue;
  }
  return ByKeyWord(problem.key_type, [&](auto word, auto is_float) {
    return SortNumericValues<decltype(word), decltype(is_float)::value>(d_temp_storage, temp_storage_bytes,
                                                          problem, stream);
  });
}

size_t MergeSortedRunsTempBound(RadixKeyType key_type, size_t num_items, int value_bytes, int max_runs) {
  const size_t key_bytes = RadixKeyBytes(key_type);
  size_t bound = TwoWayRunsTempBound(key_bytes, num_items, value_bytes, max_runs);
  if (!KWayWidths(key_bytes, static_cast<size_t>(value_bytes)) || num_items >= (size_t{1} << 32)) return bound;
  // A k-way round of k non-empty runs (whatever kway_min_items says): at
  // most n / S + k samples.
  for (int k = kMergeKWayMinRuns; k <= std::min(max_runs, kMergeKWayMaxRuns); ++k) {
    const KWaySpacing sp = SpacingFor(k, KWayCapacity(key_bytes + static_cast<size_t>(value_bytes)));
    const size_t samples = (num_items >> sp.stride_log2) + static_cast<size_t>(k);
    const size_t buckets = samples / sp.q + 1;
    const size_t inner = TwoWayRunsTempBound(key_bytes, samples, 4, k);
    bound = std::max(bound, KWayLayout(num_items, samples, buckets, k, key_bytes, inner).total);
  }
  return bound;
}

cudaError_t MergeSortedRuns(void* d_temp_storage, size_t& temp_storage_bytes,
                            const MergeRunsProblem& problem, cudaStream_t stream) {
  if (problem.num_runs < 1 || problem.h_run_offsets == nullptr) return cudaErrorInvalidValue;
  return ByKeyWord(problem.key_type, [&](auto word, auto is_float) {
    return MergeRunsValues<decltype(word), decltype(is_float)::value>(d_temp_storage, temp_storage_bytes,
                                                          problem, stream);
  });
}

cudaError_t ArgsortBytes(void* d_temp_storage, size_t& temp_storage_bytes,
                         const BytesArgsortProblem& problem, cudaStream_t stream) {
  using Shape = TileShape<StringKey>;
  const size_t n = problem.num_items;
  if (n >= kPadIndex) return cudaErrorInvalidValue;
  const size_t tiles = (n + Shape::kTileItems - 1) / Shape::kTileItems;
  // The keys live in temp storage: the first scratch buffer doubles as the
  // blocksort's input (a block reads its whole tile before writing it).
  const TempLayout layout(n * sizeof(StringKey), 0, tiles + 1, n * sizeof(StringKey));
  cudaError_t err;
  char* base = TempBase(d_temp_storage, temp_storage_bytes, layout.total, &err);
  if (base == nullptr) return err;
  if (n == 0) return cudaSuccess;
  StringKey* keys_a = reinterpret_cast<StringKey*>(base + layout.keys_tmp);
  StringKey* keys_b = reinterpret_cast<StringKey*>(base + layout.extra);
  MakeStringKeys<<<GridFor(n, 256), 256, 0, stream>>>(problem.d_bytes, problem.d_offsets, n,
                                                      keys_a);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  const BytesLess less{problem.d_bytes, problem.d_offsets, problem.descending};
  Buffers<StringKey, NoValue> b{keys_a, keys_b, keys_a, nullptr, nullptr, nullptr,
                                reinterpret_cast<size_t*>(base + layout.splits)};
  err = SortWithBuffers(b, n, less, false, stream);
  if (err != cudaSuccess) return err;
  TakeIndices<<<GridFor(n, 256), 256, 0, stream>>>(keys_b, n, problem.d_indices_out);
  return cudaGetLastError();
}

}  // namespace sortd::cuda
