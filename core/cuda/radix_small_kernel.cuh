// The radix sort of an array that fits one block (up to kSmallSortMaxItems
// keys): one launch, no temp storage, no host round trip. A library call on
// a few keys is otherwise launch- and latency-bound: the OneSweep path
// zeroes its counters, counts, reads the plan back to the host and launches
// a pass per digit, several times CUB's one launch (issue #19).
#ifndef SORTD_CORE_CUDA_RADIX_SMALL_KERNEL_CUH_
#define SORTD_CORE_CUDA_RADIX_SMALL_KERNEL_CUH_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/cuda/radix_kernels.cuh"
#include "core/cuda/radix_transform.cuh"
#include "core/cuda/radix_tuning.cuh"

namespace sortd::cuda {

// The largest array of the single launch: 256 threads x 16 keys (8-byte
// keys: 44 KiB of static shared memory).
inline constexpr size_t kSmallSortMaxItems = 4096;

template <typename Word>
struct SmallSortArgs {
  const Word* keys_in = nullptr;
  Word* keys_out = nullptr;
  const void* values_in = nullptr;  // value_bytes each (0, 4 or 8)
  void* values_out = nullptr;
  int value_bytes = 0;
  unsigned int n = 0;               // <= the tile
  // Float keys: every NaN encodes to one word (they keep input order) and
  // the output takes the original bits from the input.
  KeyMasks<Word> masks;
  bool skip_trivial_passes = true;
};

// Sorts a.n <= kThreads * kItems keys (and their values) in one
// block. Each pass is OneSweep's tile ranking without the look-back: warp w
// holds positions [w * 32 * kItems, (w + 1) * 32 * kItems) warp-striped,
// lanes with the same digit find each other (each ORs its bit into its
// warp's shared word of the digit and reads the group back, as
// RankMatch::kAtomicOr), per-warp digit counters give stable ranks, one
// scan over (digit, warp) gives every key its place, and the keys with
// their input positions move through shared memory. (Eight ballots per key,
// MatchDigit, were 55% of the kernel's instructions; match.any measured
// slower still: docs/benchmarks-history.md, "The single launch's peer groups by
// shared match words".)
// Positions past n are padding with the largest word: stable ranks keep
// them behind every real key, pass after pass. A pass whose digit is
// the same for every real key is skipped (nothing moves). At the end the
// values (and, for floats, the original bits: NaN payloads) are gathered by
// input position; every thread reads before any writes, so the output may
// alias the input.
template <typename Word, int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads)
SmallRadixSortKernel(const SmallSortArgs<Word> a) {
  static_assert(kThreads >= kRadixBins && kThreads % 32 == 0, "a thread per digit in the scan");
  constexpr int kWarps = kThreads / 32;
  constexpr int kTile = kThreads * kItems;
  constexpr int kPasses = sizeof(Word) * 8 / kRadixBits;
  static_assert(kTile <= 65536, "positions are 16-bit");
  // The tile's keys between passes; during a pass's ranking, each warp's
  // match words (one per digit) instead.
  constexpr size_t kMatchBytes = sizeof(unsigned int) * kWarps * kRadixBins;
  constexpr size_t kKeysBytes = sizeof(Word) * kTile;
  __shared__ __align__(16) unsigned char s_keys_or_match[kKeysBytes > kMatchBytes ? kKeysBytes : kMatchBytes];
  Word* const s_keys = reinterpret_cast<Word*>(s_keys_or_match);
  auto s_match = reinterpret_cast<unsigned int(*)[kRadixBins]>(s_keys_or_match);
  __shared__ uint16_t s_position[kTile];
  __shared__ uint16_t s_offsets[kWarps][kRadixBins];  // counts, then each warp's place per digit
  __shared__ unsigned int s_scan[kWarps];

  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const unsigned int lanes_below = (1u << lane) - 1;
  const unsigned int warp_base = static_cast<unsigned int>(warp) * 32 * kItems + lane;
  const unsigned int n = a.n;
  Word key[kItems];
  uint16_t position[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const unsigned int j = warp_base + i * 32;
    key[i] = j < n ? a.masks.Encode(a.keys_in[j]) : ~Word{0};
    position[i] = static_cast<uint16_t>(j);
  }
  const Word first = a.masks.Encode(a.keys_in[0]);

  for (int pass = 0; pass < kPasses; ++pass) {
    const int shift = pass * kRadixBits;
    auto digit_of = [&](Word w) { return static_cast<unsigned int>(w >> shift) & (kRadixBins - 1); };
    if (a.skip_trivial_passes) {
      bool differs = false;
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        differs |= warp_base + i * 32 < n && digit_of(key[i]) != digit_of(first);
      }
      if (!__syncthreads_or(differs)) continue;
    }
    for (int b = lane; b < kRadixBins; b += 32) {
      s_offsets[warp][b] = 0;
      s_match[warp][b] = 0;
    }
    __syncwarp();
    // Stable ranks within the warp: item by item, lanes in order. The
    // group's highest lane moves the digit's counter on and clears its
    // match word, once every lane has read both. Padding (the item's
    // highest lanes from position n, digit kRadixBins - 1) joins its group
    // without the atomic: a warp of padding alone would put 32 lanes on one
    // word (H100, 32 u64 keys: 21.5 us a call without this, 19.6-20.2 with).
    // Warps without padding (every warp of a full tile) skip the padding
    // rule's arithmetic: a loop of its own (the branch is warp-uniform).
    uint16_t rank[kItems];
    auto rank_items = [&](auto padded) {
#pragma unroll
      for (int i = 0; i < kItems; ++i) {
        const unsigned int digit = digit_of(key[i]);
        unsigned int padding = 0;
        if constexpr (decltype(padded)::value) {
          const unsigned int item_start = warp_base - lane + i * 32;
          const unsigned int real_lanes = n > item_start ? min(n - item_start, 32u) : 0u;
          padding = real_lanes == 32 ? 0u : 0xffffffffu << real_lanes;
        }
        if (!((padding >> lane) & 1u)) atomicOr(&s_match[warp][digit], 1u << lane);
        __syncwarp();
        const unsigned int peers = s_match[warp][digit] | (digit == kRadixBins - 1 ? padding : 0u);
        const unsigned int before = s_offsets[warp][digit];
        rank[i] = static_cast<uint16_t>(before + __popc(peers & lanes_below));
        __syncwarp();
        if (lane == 31 - __clz(peers)) {
          s_offsets[warp][digit] = static_cast<uint16_t>(before + __popc(peers));
          s_match[warp][digit] = 0;
        }
        __syncwarp();
      }
    };
    if (warp_base - lane + 32 * kItems <= n) {
      rank_items(std::false_type{});
    } else {
      rank_items(std::true_type{});
    }
    __syncthreads();
    // Thread d < kRadixBins: where digit d starts, and each warp's place
    // within it.
    const int d = threadIdx.x;
    unsigned int total = 0;
    if (d < kRadixBins) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const unsigned int count = s_offsets[w][d];
        s_offsets[w][d] = static_cast<uint16_t>(total);
        total += count;
      }
    }
    const unsigned int digit_start = BlockExclusiveSum<kThreads>(total, s_scan);
    if (d < kRadixBins) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) s_offsets[w][d] = static_cast<uint16_t>(s_offsets[w][d] + digit_start);
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const unsigned int place = s_offsets[warp][digit_of(key[i])] + rank[i];
      s_keys[place] = key[i];
      s_position[place] = position[i];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      key[i] = s_keys[warp_base + i * 32];
      position[i] = s_position[warp_base + i * 32];
    }
    __syncthreads();  // the next pass rewrites s_offsets, s_match (over s_keys) and s_scan
  }

  // Gather, then write (the output may be the input).
  Word out_key[kItems];
  uint64_t out_value[kItems];
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const unsigned int j = warp_base + i * 32;
    if (j < n) {
      out_key[i] = a.masks.canonical_nan ? a.keys_in[position[i]] : a.masks.Decode(key[i]);
      if (a.value_bytes == 4) {
        out_value[i] = static_cast<const uint32_t*>(a.values_in)[position[i]];
      } else if (a.value_bytes == 8) {
        out_value[i] = static_cast<const uint64_t*>(a.values_in)[position[i]];
      }
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const unsigned int j = warp_base + i * 32;
    if (j < n) {
      a.keys_out[j] = out_key[i];
      if (a.value_bytes == 4) {
        static_cast<uint32_t*>(a.values_out)[j] = static_cast<uint32_t>(out_value[i]);
      } else if (a.value_bytes == 8) {
        static_cast<uint64_t*>(a.values_out)[j] = out_value[i];
      }
    }
  }
}

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_SMALL_KERNEL_CUH_
