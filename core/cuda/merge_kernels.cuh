// Merge sort kernels (merge path), generic over the key and its order:
//   BlockSortKernel  one tile of NT x VT keys per block: each thread sorts VT
//                    keys in registers (odd-even transposition, stable),
//                    then log2(NT) rounds merge the threads' runs in shared
//                    memory, each thread finding its split by a merge-path
//                    search and merging VT keys serially.
//   PartitionKernel  one merge-path search per output tile of a merge pass
//                    (global memory), so merge tiles load exactly their
//                    inputs; passes of few tiles search inside MergeKernel
//                    instead.
//   MergeKernel      one tile per block: loads its slices of the two runs
//                    into shared memory and merges them like a blocksort
//                    round.
// Values (4/8 bytes, or generated positions for argsort) do not travel
// through the merge networks: each key carries its tile-local position,
// and values are picked by it once the keys are placed: in merge passes
// from values loaded beside the keys (PairTileStorage), in the blocksort
// from the tile's values staged in shared memory (StoreTileStaged), where
// they fit; else gathered from global memory. Keys-only sorts skip that
// entirely.
//
// `Less` is a functor with `bool operator()(Key, Key)`; `Pad()` gives a key
// that no key is greater than: the last, partial tile is padded
// with it, and because padding sits after every real key and the network
// is stable, padding never moves in front of a real key.
#ifndef SORTD_CORE_CUDA_MERGE_KERNELS_CUH_
#define SORTD_CORE_CUDA_MERGE_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/cuda/dependent_launch.cuh"

namespace sortd::cuda::merge {

// Stands in for the value type of keys-only sorts.
struct NoValue {};

__device__ __forceinline__ size_t MinSize(size_t a, size_t b) { return a < b ? a : b; }

// Merge-path search: how many of the first `diag` outputs of the stable
// merge of a[0, a_count) and b[0, b_count) come from a (a wins ties).
template <typename Index, typename Key, typename Less>
__device__ __forceinline__ Index MergePath(const Key* a, Index a_count, const Key* b,
                                           Index b_count, Index diag, const Less& less) {
  Index begin = diag > b_count ? diag - b_count : 0;
  Index end = diag < a_count ? diag : a_count;
  while (begin < end) {
    const Index mid = begin + (end - begin) / 2;
    if (!less(b[diag - 1 - mid], a[mid])) {
      begin = mid + 1;
    } else {
      end = mid;
    }
  }
  return begin;
}

// Merges VT outputs from keys[a, a_end) and keys[b, b_end) (both in shared
// memory) into registers; src[i] is the shared-memory slot output i came
// from. The next candidate is loaded without a bounds check: a range's end
// is at most NV and the storage has NV + 1 slots, and an exhausted range's
// candidate is never taken.
template <int VT, typename Key, typename Less>
__device__ __forceinline__ void SerialMerge(const Key* keys, int a, int a_end, int b, int b_end,
                                            Key (&out)[VT], int (&src)[VT], const Less& less) {
  Key ka = keys[a];
  Key kb = keys[b];
#pragma unroll
  for (int i = 0; i < VT; ++i) {
    const bool take_b = b < b_end && (a >= a_end || less(kb, ka));
    out[i] = take_b ? kb : ka;
    src[i] = take_b ? b : a;
    if (take_b) {
      kb = keys[++b];
    } else {
      ka = keys[++a];
    }
  }
}

// Outputs [diag, diag + VT) of the stable merge of keys[a0, a0 + a_count)
// and keys[b0, b0 + b_count) (shared memory) into registers, src[i] being
// the slot output i came from; outputs past a_count + b_count are
// unspecified. (Splitting the VT outputs into 2 or 3 independent
// search+merge chains to overlap their load latencies was measured slower
// on the H200: the kernels are bound by instruction issue, not latency.)
template <int VT, typename Key, typename Less>
__device__ __forceinline__ void MergeOutputs(const Key* keys, int a0, int a_count, int b0,
                                             int b_count, int diag, Key (&out)[VT],
                                             int (&src)[VT], const Less& less) {
  const int split = MergePath<int>(keys + a0, a_count, keys + b0, b_count, diag, less);
  SerialMerge<VT>(keys, a0 + split, a0 + a_count, b0 + diag - split, b0 + b_count, out, src,
                  less);
}

// Shared memory of a block: NV keys plus one (a merge may look at slot NV
// when a thread's range is empty) and the tile-local positions.
template <typename Key, int NV>
struct alignas(16) TileStorage {
  Key keys[NV + 1];
  uint16_t positions[NV];
};

// What each kernel does to keys on the way in and out (numeric keys are
// sorted as order-preserving words: encoded where they enter, the
// blocksort, and decoded where they leave for the last time). Merge passes
// never encode: merged runs are encoded by their own kernel first.
template <typename Less>
struct KeyIo {
  using Key = typename Less::Key;
  bool encode = false;
  bool decode = false;
  Less less;
};

// Calls body(std::true_type) or body(std::false_type): a flag that is the
// same for the whole block becomes a compile-time constant inside, so the
// per-key loops do not test it (with the encode/decode and partial-tile
// tests per key, the merge kernel issued ~30% more instructions than
// CUB's; the kernels are bound by instruction issue).
template <typename Body>
__device__ __forceinline__ void Uniform(bool flag, Body body) {
  if (flag) {
    body(std::true_type{});
  } else {
    body(std::false_type{});
  }
}

// Calls store(j, decode) for the tile's outputs j in [0, count), in
// coalesced order (thread t takes t, t + NT, ...); `decode` is
// std::true_type where io says the keys leave decoded. Full tiles test no
// bounds.
template <int NT, int VT, typename Less, typename Store>
__device__ __forceinline__ void ForEachTileOutput(int count, const KeyIo<Less>& io, Store store) {
  Uniform(io.decode, [&](auto decode) {
    Uniform(count == NT * VT, [&](auto full) {
#pragma unroll
      for (int i = 0; i < VT; ++i) {
        const int j = i * NT + threadIdx.x;
        if (decltype(full)::value || j < count) store(j, decode);
      }
    });
  });
}

// Writes the tile's sorted keys (registers, thread-contiguous) and their
// values to global memory, coalesced through shared memory.
// value_of(slot) returns the value for the key that came from `slot`.
template <int NT, int VT, typename Less, typename Value, typename ValueOf>
__device__ __forceinline__ void StoreTile(TileStorage<typename Less::Key, NT * VT>& s,
                                          const typename Less::Key (&keys)[VT],
                                          const int (&slots)[VT], int count,
                                          typename Less::Key* keys_out, Value* values_out,
                                          const KeyIo<Less>& io, ValueOf value_of) {
  __syncthreads();
#pragma unroll
  for (int i = 0; i < VT; ++i) {
    s.keys[threadIdx.x * VT + i] = keys[i];
    if constexpr (!std::is_same_v<Value, NoValue>) {
      s.positions[threadIdx.x * VT + i] = static_cast<uint16_t>(slots[i]);
    }
  }
  __syncthreads();
  ForEachTileOutput<NT, VT>(count, io, [&](int j, auto decode) {
    typename Less::Key k = s.keys[j];
    if constexpr (decltype(decode)::value) k = io.less.Decode(k);
    keys_out[j] = k;
    if constexpr (!std::is_same_v<Value, NoValue>) values_out[j] = value_of(s.positions[j]);
  });
}

// Whether a tile's values fit its storage (which then stages them).
template <typename Key, typename Value, int NV>
constexpr bool ValuesFitTile() {
  return sizeof(Value) * NV <= sizeof(TileStorage<Key, NV>);
}

// Picks each thread's outputs' values (thread-contiguous outputs
// threadIdx.x * VT + i) by their slots from `values` (shared memory).
// Outputs past count (padding) have unspecified slots: not read.
template <int NT, int VT, typename Value>
__device__ __forceinline__ void PickBySlot(const Value* values, const int (&slots)[VT], int count,
                                           Value (&picked)[VT]) {
  Uniform(count == NT * VT, [&](auto full) {
#pragma unroll
    for (int i = 0; i < VT; ++i) {
      if (decltype(full)::value || static_cast<int>(threadIdx.x) * VT + i < count) picked[i] = values[slots[i]];
    }
  });
}

// Stores outputs [0, count) of a tile held thread-contiguous in shared
// memory, coalesced: keys (kKeys; decoded where io says) and/or values
// (kValues).
template <int NT, int VT, bool kKeys, bool kValues, typename Less, typename Value>
__device__ __forceinline__ void StoreSharedTile(const typename Less::Key* keys, const Value* values, int count,
                                                typename Less::Key* keys_out, Value* values_out,
                                                const KeyIo<Less>& io) {
  ForEachTileOutput<NT, VT>(count, io, [&](int j, auto decode) {
    if constexpr (kKeys) {
      typename Less::Key k = keys[j];
      if constexpr (decltype(decode)::value) k = io.less.Decode(k);
      keys_out[j] = k;
    }
    if constexpr (kValues) values_out[j] = values[j];
  });
}

// StoreTile for pairs whose values are loaded (not generated), staged
// through shared memory: the tile's input values are read coalesced
// (value_at(p) for input slot p < count), each thread picks its outputs'
// values by slot, then the keys and the values leave coalesced (one after
// the other: the values reuse the keys' storage). Without it each output
// read its value from global memory at its slot: a gather that in the
// blocksort touches a sector per key.
template <int NT, int VT, typename Less, typename Value, typename ValueAt>
__device__ __forceinline__ void StoreTileStaged(TileStorage<typename Less::Key, NT * VT>& s,
                                                const typename Less::Key (&keys)[VT],
                                                const int (&slots)[VT], int count,
                                                typename Less::Key* keys_out, Value* values_out,
                                                const KeyIo<Less>& io, ValueAt value_at) {
  constexpr int NV = NT * VT;
  static_assert(ValuesFitTile<typename Less::Key, Value, NV>(), "values must fit the tile storage");
  Value* staged = reinterpret_cast<Value*>(&s);
  __syncthreads();  // the merge's reads of the keys are done
  Uniform(count == NV, [&](auto full) {
#pragma unroll
    for (int i = 0; i < VT; ++i) {
      const int j = i * NT + threadIdx.x;
      if (decltype(full)::value || j < count) staged[j] = value_at(j);
    }
  });
  __syncthreads();
  Value v[VT];
  PickBySlot<NT, VT>(staged, slots, count, v);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < VT; ++i) s.keys[threadIdx.x * VT + i] = keys[i];
  __syncthreads();
  StoreSharedTile<NT, VT, true, false>(s.keys, staged, count, keys_out, values_out, io);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < VT; ++i) staged[threadIdx.x * VT + i] = v[i];
  __syncthreads();
  StoreSharedTile<NT, VT, false, true>(s.keys, staged, count, keys_out, values_out, io);
}

// A merge tile's shared memory when its values fit beside its keys (48
// KiB of static shared memory): they are loaded with the keys, so their
// reads overlap the keys' and the merge, and picked by slot from here.
template <typename Key, typename Value, int NV>
struct alignas(16) PairTileStorage {
  Key keys[NV + 1];
  Value values[NV];
};

// 4-byte values only (H100: u32/u32 and u64/u32 pairs faster, the string
// argsort's positions the same); 8-byte values would cut resident blocks
// (u64/u64: 45 KiB a block) and stay on the staged path, unmeasured.
template <typename Key, typename Value, int NV>
constexpr bool ValuesBesideKeys() {
  return !std::is_same_v<Value, NoValue> && sizeof(Value) <= 4 &&
         sizeof(PairTileStorage<Key, Value, NV>) <= 48 * 1024;
}

// StoreTile for a PairTileStorage tile: each thread picks its outputs'
// values by slot, then keys and values leave coalesced.
template <int NT, int VT, typename Less, typename Value>
__device__ __forceinline__ void StorePairTile(PairTileStorage<typename Less::Key, Value, NT * VT>& s,
                                              const typename Less::Key (&keys)[VT], const int (&slots)[VT],
                                              int count, typename Less::Key* keys_out, Value* values_out,
                                              const KeyIo<Less>& io) {
  Value v[VT];
  PickBySlot<NT, VT>(s.values, slots, count, v);
  __syncthreads();
#pragma unroll
  for (int i = 0; i < VT; ++i) {
    s.keys[threadIdx.x * VT + i] = keys[i];
    s.values[threadIdx.x * VT + i] = v[i];
  }
  __syncthreads();
  StoreSharedTile<NT, VT, true, true>(s.keys, s.values, count, keys_out, values_out, io);
}

// A segment of a segmented merge sort: keys [begin, end), cut into tiles
// of the tile size from `begin` (the last one partial); its tiles are
// first_tile .. first_tile + ceil((end - begin) / tile) - 1 in every
// kernel, the blocksort and each merge pass alike (a pass merges pairs of
// runs inside the segment, so a segment has the same tiles in each).
struct SegmentSpan {
  uint32_t first_tile, begin, end, unused;
};

// The segment holding `tile` (the last one whose first_tile <= tile).
__device__ __forceinline__ SegmentSpan FindSegment(const SegmentSpan* segments,
                                                   int num_segments, uint32_t tile) {
  int lo = 0, hi = num_segments - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (segments[mid].first_tile <= tile) lo = mid; else hi = mid - 1;
  }
  return segments[lo];
}

// values_in == nullptr with a 32-bit Value generates positions (argsort):
// the value of key i is its index in the whole input. segments == nullptr:
// tile b is keys [b * NV, min((b + 1) * NV, num_items)); else the tile b
// of the segment that holds it.
template <int NT, int VT, typename Less, typename Value>
__global__ void __launch_bounds__(NT)
    BlockSortKernel(const typename Less::Key* keys_in, typename Less::Key* keys_out,
                    const Value* values_in, Value* values_out, size_t num_items,
                    const SegmentSpan* segments, int num_segments, KeyIo<Less> io) {
  using Key = typename Less::Key;
  constexpr int NV = NT * VT;
  __shared__ TileStorage<Key, NV> s;
  const Less& less = io.less;
  size_t tile_begin = static_cast<size_t>(blockIdx.x) * NV;
  size_t end = num_items;
  if (segments != nullptr) {
    const SegmentSpan seg = FindSegment(segments, num_segments, blockIdx.x);
    tile_begin = seg.begin + static_cast<size_t>(blockIdx.x - seg.first_tile) * NV;
    end = seg.end;
  }
  const int count = static_cast<int>(end - tile_begin < NV ? end - tile_begin : NV);

  // Coalesced load, then each thread takes VT consecutive keys.
  Uniform(io.encode, [&](auto encode) {
    Uniform(count == NV, [&](auto full) {
#pragma unroll
      for (int i = 0; i < VT; ++i) {
        const int j = i * NT + threadIdx.x;
        Key k = less.Pad();
        if (decltype(full)::value || j < count) {
          k = keys_in[tile_begin + j];
          if constexpr (decltype(encode)::value) k = less.Encode(k);
        }
        s.keys[j] = k;
      }
    });
  });
  __syncthreads();
  Key k[VT];
  int pos[VT];
#pragma unroll
  for (int i = 0; i < VT; ++i) {
    k[i] = s.keys[threadIdx.x * VT + i];
    pos[i] = threadIdx.x * VT + i;
  }

  // Odd-even transposition: VT rounds sort VT keys; swapping only on a
  // strict "less" keeps equal keys in order.
#pragma unroll
  for (int round = 0; round < VT; ++round) {
#pragma unroll
    for (int i = round & 1; i + 1 < VT; i += 2) {
      if (less(k[i + 1], k[i])) {
        const Key tk = k[i];
        k[i] = k[i + 1];
        k[i + 1] = tk;
        const int tp = pos[i];
        pos[i] = pos[i + 1];
        pos[i + 1] = tp;
      }
    }
  }

  // Merge rounds: groups of `coop` threads merge two runs of coop/2 * VT.
  // Keys-only sorts need no positions.
  constexpr bool kTrackPositions = !std::is_same_v<Value, NoValue>;
  int slot[VT];
#pragma unroll 1
  for (int coop = 2; coop <= NT; coop *= 2) {
    __syncthreads();
#pragma unroll
    for (int i = 0; i < VT; ++i) {
      s.keys[threadIdx.x * VT + i] = k[i];
      if constexpr (kTrackPositions) {
        s.positions[threadIdx.x * VT + i] = static_cast<uint16_t>(pos[i]);
      }
    }
    __syncthreads();
    const int half = coop / 2 * VT;
    const int a_begin = (threadIdx.x / coop) * coop * VT;
    const int b_begin = a_begin + half;
    const int diag = (threadIdx.x % coop) * VT;
    MergeOutputs<VT>(s.keys, a_begin, half, b_begin, half, diag, k, slot, less);
    if constexpr (kTrackPositions) {
#pragma unroll
      for (int i = 0; i < VT; ++i) pos[i] = s.positions[slot[i]];
    }
  }

  if constexpr (std::is_same_v<Value, NoValue>) {
    StoreTile<NT, VT, Less, Value>(s, k, pos, count, keys_out + tile_begin, values_out, io,
                                   [](int) { return NoValue{}; });
  } else if (values_in == nullptr) {  // argsort: positions generated
    StoreTile<NT, VT, Less, Value>(s, k, pos, count, keys_out + tile_begin, values_out + tile_begin, io,
                                   [&](int p) { return static_cast<Value>(tile_begin + p); });
  } else if constexpr (ValuesFitTile<Key, Value, NV>()) {
    const Value* in = values_in + tile_begin;
    StoreTileStaged<NT, VT, Less, Value>(s, k, pos, count, keys_out + tile_begin, values_out + tile_begin,
                                         io, [&](int p) { return in[p]; });
  } else {
    const Value* in = values_in + tile_begin;
    StoreTile<NT, VT, Less, Value>(s, k, pos, count, keys_out + tile_begin, values_out + tile_begin, io,
                                   [&](int p) { return in[p]; });
  }
}

// Where a merge pass's tile t lies: the pair of runs it merges
// (a = [pair_begin, a_end), b = [a_end, b_end)) and its output diagonals
// [diag_begin, diag_end) relative to pair_begin.
struct TileSpan {
  size_t pair_begin, a_end, b_end, diag_begin, diag_end;
};

// A pair of runs merged by a pass over runs of arbitrary lengths; its
// tiles are first_tile .. (next pair's first_tile - 1).
struct RunPair {
  size_t begin, mid, end;
  uint32_t first_tile;
  uint32_t pad;
};

// Pass geometry: either uniform runs of 2^log2_run_tiles tiles (so tiles
// never straddle pairs, and a tile finds its pair by shifts: every thread
// of every merge block computes this) or an explicit list of pairs.
struct PassGeometry {
  size_t num_items = 0;
  int log2_run_tiles = 0;          // uniform mode
  const RunPair* pairs = nullptr;  // list mode (log2_run_tiles ignored)
  int num_pairs = 0;
  // Segmented mode: uniform runs inside each segment (a segment of fewer
  // than 2 runs is one pair with an empty second run: copied).
  const SegmentSpan* segments = nullptr;
  int num_segments = 0;
  int tile_items = 0;

  __device__ __forceinline__ TileSpan Span(uint32_t tile) const {
    TileSpan t;
    if (pairs == nullptr) {
      size_t base = 0, end = num_items;
      if (segments != nullptr) {
        const SegmentSpan seg = FindSegment(segments, num_segments, tile);
        base = seg.begin;
        end = seg.end;
        tile -= seg.first_tile;
      }
      const size_t width = static_cast<size_t>(tile_items) << log2_run_tiles;
      const uint32_t pair = tile >> (log2_run_tiles + 1);
      t.pair_begin = base + static_cast<size_t>(pair) * 2 * width;
      t.a_end = MinSize(t.pair_begin + width, end);
      t.b_end = MinSize(t.pair_begin + 2 * width, end);
      t.diag_begin = static_cast<size_t>(tile - (pair << (log2_run_tiles + 1))) * tile_items;
    } else {
      int lo = 0, hi = num_pairs - 1;  // last pair with first_tile <= tile
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (pairs[mid].first_tile <= tile) lo = mid; else hi = mid - 1;
      }
      const RunPair& p = pairs[lo];
      t.pair_begin = p.begin;
      t.a_end = p.mid;
      t.b_end = p.end;
      t.diag_begin = static_cast<size_t>(tile - p.first_tile) * tile_items;
    }
    t.diag_end = MinSize(t.diag_begin + tile_items, t.b_end - t.pair_begin);
    return t;
  }
};

// splits[t] = the a index (absolute) where tile t's output begins;
// num_tiles + 1 entries are not needed: a tile's end is the next tile's
// begin within its pair, or a_end at the pair's end.
//
// G lanes per tile: a one-thread binary search is a chain of ~log2(run)
// dependent global loads (12 us per pass at 2^24 keys on the H200, a sixth
// of the sort), so the lanes probe G evenly spaced points of the remaining
// range at once and a ballot keeps the gap between the last "a first" and
// the first "b first" probe, shrinking it (G + 1)-fold per round. Each
// probe costs a DRAM sector, so more lanes trade bandwidth for latency:
// the host picks G by the number of tiles (PartitionLanes).
constexpr int kPartitionThreads = 128;

// The first index in [lo, hi) where the monotone predicate `holds` is
// false (hi when it holds throughout), found by a group of G lanes: each
// round probes G evenly spaced points of the remaining range at once and a
// ballot keeps the gap between the last true and the first false probe,
// shrinking it (G + 1)-fold; the last G or fewer candidates are probed
// together.
template <int G, typename Holds>
__device__ __forceinline__ size_t FirstFalse(size_t lo, size_t hi, unsigned lane, unsigned group,
                                             const Holds& holds) {
  while (hi - lo > G) {
    const size_t len = hi - lo;
    const size_t probe = lo + (lane + 1) * len / (G + 1);  // in [lo, hi)
    const int c = __popc(__ballot_sync(group, holds(probe)));  // monotone: lanes 0..c-1
    const size_t new_lo = c > 0 ? lo + static_cast<size_t>(c) * len / (G + 1) + 1 : lo;
    const size_t new_hi = c < static_cast<int>(G) ? lo + static_cast<size_t>(c + 1) * len / (G + 1) : hi;
    lo = new_lo;
    hi = new_hi;
  }
  const bool in_range = lo + lane < hi;
  return lo + __popc(__ballot_sync(group, in_range && holds(lo + lane)));
}

// The split of `span`'s pair at output diagonal `diag` (absolute a
// index), found by a group of G lanes (`group`: their mask; `lane` < G).
// grid != 0 (the tile size; diag a multiple of it): first a coarse search
// among a's indices that are multiples of `grid`, whose partners in b
// (diag - 1 - i) are then at one less than multiples of it too: every
// tile's coarse probes of a pair land on the same few thousand keys,
// which stay in L2, and only the last rounds, within one grid step, go to
// DRAM (the probes of a search spread over whole runs were the
// partition's cost: a sector of DRAM traffic each).
template <int G, typename Less>
__device__ __forceinline__ size_t SearchSplit(const typename Less::Key* keys, const TileSpan& span,
                                              size_t diag, const Less& less, unsigned lane,
                                              unsigned group, size_t grid = 0) {
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "G: a power of two up to a warp");
  const typename Less::Key* a = keys + span.pair_begin;
  const typename Less::Key* b = keys + span.a_end;
  const size_t a_count = span.a_end - span.pair_begin;
  const size_t b_count = span.b_end - span.a_end;
  // The answer lies in [lo, hi]; a_first(i) holds exactly for i < answer.
  size_t lo = diag > b_count ? diag - b_count : 0;
  size_t hi = diag < a_count ? diag : a_count;
  auto a_first = [&](size_t i) { return !less(b[diag - 1 - i], a[i]); };
  if (grid != 0 && hi - lo > grid) {
    // The grid indices j with j * grid in [lo, hi): the first where
    // a_first fails bounds the answer to one grid step.
    const size_t first = (lo + grid - 1) / grid, last = (hi + grid - 1) / grid;
    const size_t fails_at =
        FirstFalse<G>(first, last, lane, group, [&](size_t j) { return a_first(j * grid); });
    if (fails_at > first) lo = (fails_at - 1) * grid + 1;
    if (fails_at < last) hi = fails_at * grid;
  }
  return span.pair_begin + FirstFalse<G>(lo, hi, lane, group, a_first);
}

template <typename Less, int G>
__global__ void __launch_bounds__(kPartitionThreads)
    PartitionKernel(const typename Less::Key* keys, PassGeometry g, uint32_t num_tiles, Less less,
                    size_t* splits) {
  WaitForPriorGrid();  // launched as a dependent of the pass before
  const uint32_t t = (blockIdx.x * kPartitionThreads + threadIdx.x) / G;
  const unsigned lane = threadIdx.x % G;
  const unsigned group = G == 32 ? 0xffffffffu : ((1u << G) - 1) << (threadIdx.x % 32 / G * G);
  if (t >= num_tiles) return;  // whole groups: num_tiles counts groups
  const TileSpan span = g.Span(t);
  const size_t split = SearchSplit<G>(keys, span, span.diag_begin, less, lane, group,
                                      static_cast<size_t>(g.tile_items));
  if (lane == 0) splits[t] = split;
}

// splits == nullptr: the merge kernel searches its own tile's splits (two
// warps, one per end; kFusedSplitLanes lanes each) instead of reading a
// PartitionKernel's (the host picks by tiles per pass: merge_sort.cu).
inline constexpr int kFusedSplitLanes = 32;

template <int NT, int VT, typename Less, typename Value>
__global__ void __launch_bounds__(NT)
    MergeKernel(const typename Less::Key* keys_in, typename Less::Key* keys_out,
                const Value* values_in, Value* values_out, PassGeometry g,
                const size_t* splits, KeyIo<Less> io) {
  using Key = typename Less::Key;
  constexpr int NV = NT * VT;
  static_assert(NT >= 64, "two warps search the tile's splits");
  constexpr bool kValuesBeside = ValuesBesideKeys<Key, Value, NV>();
  using Storage = std::conditional_t<kValuesBeside, PairTileStorage<Key, Value, NV>, TileStorage<Key, NV>>;
  __shared__ Storage s;
  WaitForPriorGrid();  // launched as a dependent of its partition or the pass before
  const Less& less = io.less;
  const uint32_t tile = blockIdx.x;
  const TileSpan span = g.Span(tile);
  const size_t pair_count = span.b_end - span.pair_begin;
  size_t a0, a1;
  if (splits != nullptr) {
    a0 = splits[tile];
    a1 = span.diag_end == pair_count ? span.a_end : splits[tile + 1];
  } else {
    // Warp 0 finds where the tile's output begins, warp 1 where it ends
    // (the next tile's begin, searched again there: the probes meet in L2).
    __shared__ size_t s_split[2];
    constexpr int G = kFusedSplitLanes;
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % G;
    if (warp < 2) {
      const size_t diag = warp == 0 ? span.diag_begin : span.diag_end;
      const size_t split = warp == 1 && span.diag_end == pair_count
                               ? span.a_end
                               : SearchSplit<G>(keys_in, span, diag, less, lane, 0xffffffffu);
      if (lane == 0) s_split[warp] = split;
    }
    __syncthreads();
    a0 = s_split[0];
    a1 = s_split[1];
  }
  const size_t b0 = span.a_end + (span.diag_begin - (a0 - span.pair_begin));
  const size_t b1 = span.a_end + (span.diag_end - (a1 - span.pair_begin));
  const int a_count = static_cast<int>(a1 - a0);
  const int count = static_cast<int>(a_count + (b1 - b0));

  Uniform(count == NV, [&](auto full) {
#pragma unroll
    for (int i = 0; i < VT; ++i) {
      const int j = i * NT + threadIdx.x;
      if (decltype(full)::value || j < count) {
        s.keys[j] = j < a_count ? keys_in[a0 + j] : keys_in[b0 + (j - a_count)];
        if constexpr (kValuesBeside) s.values[j] = j < a_count ? values_in[a0 + j] : values_in[b0 + (j - a_count)];
      }
    }
  });
  __syncthreads();
  const int diag = min(static_cast<int>(threadIdx.x) * VT, count);
  Key k[VT];
  int slot[VT];
  MergeOutputs<VT>(s.keys, 0, a_count, a_count, count - a_count, diag, k, slot,
                                 less);

  const size_t out_begin = span.pair_begin + span.diag_begin;
  if constexpr (kValuesBeside) {
    StorePairTile<NT, VT, Less, Value>(s, k, slot, count, keys_out + out_begin, values_out + out_begin, io);
  } else if constexpr (std::is_same_v<Value, NoValue>) {
    StoreTile<NT, VT, Less, Value>(s, k, slot, count, keys_out + out_begin, values_out, io,
                                   [](int) { return NoValue{}; });
  } else {
    auto value_at = [&](int p) { return p < a_count ? values_in[a0 + p] : values_in[b0 + (p - a_count)]; };
    if constexpr (ValuesFitTile<Key, Value, NV>()) {
      StoreTileStaged<NT, VT, Less, Value>(s, k, slot, count, keys_out + out_begin, values_out + out_begin,
                                           io, value_at);
    } else {
      StoreTile<NT, VT, Less, Value>(s, k, slot, count, keys_out + out_begin, values_out + out_begin, io,
                                     value_at);
    }
  }
}

// After a segmented argsort (positions absolute, in `positions`): values
// gathered by position (when values_out is set) and positions made local
// to their segment. One block per tile of the segments (the sorted output
// of a segment occupies the segment's own range).
template <typename Value>
__global__ void FinishSegmentTilesKernel(const SegmentSpan* segments, int num_segments,
                                         int tile_items, uint32_t* positions,
                                         const Value* values_in, Value* values_out) {
  const SegmentSpan seg = FindSegment(segments, num_segments, blockIdx.x);
  const uint32_t begin = seg.begin + (blockIdx.x - seg.first_tile) * tile_items;
  const uint32_t end = min(begin + static_cast<uint32_t>(tile_items), seg.end);
  for (uint32_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const uint32_t pos = positions[i];
    if (values_out != nullptr) values_out[i] = values_in[pos];
    positions[i] = pos - seg.begin;
  }
}

}  // namespace sortd::cuda::merge

#endif  // SORTD_CORE_CUDA_MERGE_KERNELS_CUH_
