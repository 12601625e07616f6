// The radix sort's look at the keys' order before it counts digits
// (docs/architecture.md, "Presorted input"). KeyOrderKernel reads the keys
// once and ORs kOrder* bits into the plan's order word; input in or in
// reverse order is written to the output as it is read (copied, or
// reversed), so that such input costs one read and one write in all.
#ifndef SORTD_CORE_CUDA_RADIX_ORDER_KERNEL_CUH_
#define SORTD_CORE_CUDA_RADIX_ORDER_KERNEL_CUH_

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/cuda/radix_kernels.cuh"

namespace sortd::cuda {

// What KeyOrderKernel wrote besides the order bits (plan word [2]):
// kOrderCopied: some stretch was copied to the same positions;
// kOrderReversedOut: some stretch was written reversed;
// kOrderUnwritten: some stretch was written neither way (its order did not
// decide between the two yet, or writing was off). The output is complete
// exactly when the word holds one of the first two and not the third.
inline constexpr unsigned long long kOrderCopied = 16, kOrderReversedOut = 32, kOrderUnwritten = 64;
inline constexpr unsigned long long kOrderWritten = kOrderCopied | kOrderReversedOut | kOrderUnwritten;

// Where KeyOrderKernel may write while it reads. The host turns writing off
// where the output overlaps the input (the kernel would overwrite keys it
// has not read) or is not 16-byte aligned the same way (copies are stored
// as 16-byte vectors).
template <typename Word, typename Value>
struct OrderWrites {
  Word* keys_out = nullptr;
  const Value* values_in = nullptr;
  Value* values_out = nullptr;
  bool copy = false;             // stretches in order: to the same positions
  bool reverse = false;          // stretches in reverse order: reversed
  bool reverse_vectors = false;  // reversed 16-byte stores are aligned
};

// How a stretch may be written, from what is known of the whole input's
// order (`known`, the stretch's own bits included): known bits only grow,
// so a stretch copied while nothing above its successor had been seen
// belongs to input that is either in order in the end, or in neither order
// (then the sort overwrites the output). Reversal follows the host's rule
// for a stable reversal (no ties, or keys only without NaNs).
template <bool kPairs>
__device__ __forceinline__ unsigned int OrderWriteMode(unsigned int known, bool copy, bool reverse) {
  const bool descent = known & kOrderDescent, ascent = known & kOrderAscent;
  if (!descent && ascent) return copy ? kOrderCopied : kOrderUnwritten;
  if (descent && !ascent) {
    const bool reversible = !(known & kOrderTie) || (!kPairs && !(known & kOrderNan));
    return reverse && reversible ? kOrderReversedOut : kOrderUnwritten;
  }
  return kOrderUnwritten;  // ties only so far: either order may follow
}

// Where KeyOrderKernel counts descents (a key above its successor) and
// notes where each starts a run: while at most kMaxRunBreaks are counted,
// the input is that many + 1 sorted runs. Not counted (`counted` false)
// where runs are not merged: then kOrderManyRuns holds from the start.
struct RunBreaks {
  unsigned long long* count = nullptr;   // plan word [3]
  unsigned long long* starts = nullptr;  // plan words [4, 4 + kMaxRunBreaks)
  bool counted = false;
};

// The kOrder* bits of key `w` (encoded) against its successor `next`.
template <typename Word>
__device__ __forceinline__ unsigned int PairOrder(Word w, Word next) {
  return (w > next ? kOrderDescent : 0u) | (w < next ? kOrderAscent : 0u) | (w == next ? kOrderTie : 0u);
}

// Keys are read as 16-byte vectors: keys [head, head + nvec * kPer) where
// `head` (< kPer, chosen by the host) aligns them; the few keys before and
// after the vectors are one warp's scalar work. Warps run on their own:
// each takes chunks of 32 x kVecs vectors, grid-strided, and compares every
// key with its successor (in the vector, from the next lane by a shuffle,
// or loaded). Before its first chunk a warp probes 32 keys there: random
// input shows both bits, and many descents, at once, so there the
// kernel costs about one launch; and 32 samples spread over the input,
// which show a few sorted runs to be in neither order at once. A chunk
// with descents (rare but in random input, which stops at the probe)
// counts them with one atomic a warp and notes where they are
// (RunBreaks). Every kReadEvery chunks a warp reads
// the shared order word (its load goes out with the chunk's) and stops once
// the input is known to be neither ordered nor a few runs
// (SortsInFull); reading it on every chunk made every warp queue at one
// L2 address (H100, 2^26 ordered u32: 111 us, 95 us reading every 8th; a
// plain read of the same bytes takes 93 us). Only news goes to the shared
// word. Chunks with a vector after them (all but a warp's last, mostly)
// take a path without bounds checks; integer keys are encoded with one XOR
// (kFloat: the float map and the NaN check).
template <typename Word, typename Value, int kBlockThreads, int kVecs, bool kFloat>
__global__ void __launch_bounds__(kBlockThreads)
KeyOrderKernel(const Word* __restrict__ keys, size_t n, size_t head, KeyMasks<Word> masks,
               unsigned long long* order, OrderWrites<Word, Value> out, RunBreaks breaks) {
  constexpr int kPer = static_cast<int>(sizeof(uint4) / sizeof(Word));
  constexpr size_t kChunk = 32 * static_cast<size_t>(kVecs);  // vectors per warp and chunk
  constexpr unsigned int kReadEvery = 8;
  constexpr bool kPairs = !std::is_same_v<Value, NoValue>;
  constexpr unsigned int kFull = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  const size_t warp = (static_cast<size_t>(blockIdx.x) * kBlockThreads + threadIdx.x) / 32;
  const size_t warps = static_cast<size_t>(gridDim.x) * (kBlockThreads / 32);
  const size_t nvec = (n - head) / kPer;
  const size_t tail = head + nvec * kPer;  // first key after the vectors
  const uint4* vecs = reinterpret_cast<const uint4*>(keys + head);
  volatile unsigned long long* shared_word = order;
  // Warp-uniform: bits known to be in *order.
  unsigned int known = breaks.counted ? 0u : static_cast<unsigned int>(kOrderManyRuns);
  if (!breaks.counted && blockIdx.x == 0 && threadIdx.x == 0) atomicOr(order, kOrderManyRuns);
  const Word integer_mask = masks.sign ^ masks.flip;
  auto encode = [&](Word bits) {
    if constexpr (kFloat) {
      return masks.Encode(bits);
    } else {
      return bits ^ integer_mask;
    }
  };

  // Adds a stretch's bits (warp-reduced) and the word as read; publishes
  // news. True when the input is in neither order.
  auto settle = [&](unsigned int seen, unsigned int read) {
    seen = __reduce_or_sync(kFull, seen);
    read = __shfl_sync(kFull, read, 0);
    known |= read;
    if (lane == 0 && (seen & ~known) != 0) atomicOr(order, static_cast<unsigned long long>(seen));
    known |= seen;
    return SortsInFull(known);
  };
  // Counts the warp's descents (`mine` of them this lane's) and returns
  // where this lane notes its first (an index into breaks.starts), or
  // kMaxRunBreaks when they are not noted: too many in all (the bits then
  // say so, in `seen`), or already known to be too many.
  auto count_breaks = [&](unsigned int mine, unsigned int& seen) -> unsigned int {
    if (known & kOrderManyRuns) return kMaxRunBreaks;
    const unsigned int total = __reduce_add_sync(kFull, mine);
    if (total == 0) return kMaxRunBreaks;
    unsigned long long base = 0;
    if (lane == 0) base = atomicAdd(breaks.count, static_cast<unsigned long long>(total));
    base = __shfl_sync(kFull, base, 0);
    if (base + total > static_cast<unsigned long long>(kMaxRunBreaks)) {
      seen |= kOrderManyRuns;
      return kMaxRunBreaks;
    }
    unsigned int before = mine;  // inclusive prefix over the lanes, then exclusive
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const unsigned int other = __shfl_up_sync(kFull, before, offset);
      if (lane >= offset) before += other;
    }
    return static_cast<unsigned int>(base) + before - mine;
  };
  auto note_written = [&](unsigned int mode) {
    if (lane == 0 && (mode & ~known) != 0) atomicOr(order, static_cast<unsigned long long>(mode));
    known |= mode;
  };
  auto nan_bit = [&](Word bits) {
    if constexpr (kFloat) {
      return masks.canonical_nan && KeyCodec<Word>::IsNan(bits) ? static_cast<unsigned int>(kOrderNan) : 0u;
    } else {
      return 0u;
    }
  };
  // Writes key j (scalar) and its value under `mode`.
  auto write_one = [&](size_t j, Word bits, unsigned int mode) {
    const size_t to = mode == kOrderReversedOut ? n - 1 - j : j;
    out.keys_out[to] = bits;
    if constexpr (kPairs) out.values_out[to] = out.values_in[j];
  };

  // The keys outside the vectors (fewer than 2 * kPer): warp 0, a key per
  // lane, after its chunks, so that what it has learnt of the order by
  // then decides how a lone key (no successor to compare with) is written.
  auto outside_keys = [&]() {
    if (warp != 0) return;
    const size_t outside = head + (n - tail);
    if (outside == 0) return;
    const bool mine = static_cast<size_t>(lane) < outside;
    const size_t j = static_cast<size_t>(lane) < head ? lane : tail + (lane - head);
    Word bits = 0;
    unsigned int seen = 0;
    if (mine) {
      bits = keys[j];
      seen = nan_bit(bits);
      if (j + 1 < n) seen |= PairOrder(encode(bits), encode(keys[j + 1]));
    }
    const unsigned int descents = (seen & kOrderDescent) ? 1u : 0u;
    const unsigned int slot = count_breaks(descents, seen);
    if (descents != 0 && slot < kMaxRunBreaks) breaks.starts[slot] = j + 1;
    const unsigned int read = lane == 0 ? static_cast<unsigned int>(*shared_word) : 0u;
    if (settle(seen, read)) return;
    const unsigned int mode = OrderWriteMode<kPairs>(known, out.copy, out.reverse);
    if (mine && mode != kOrderUnwritten) write_one(j, bits, mode);
    note_written(mode);
  };

  // One chunk from vector v0; kWhole: the chunk and the vector after it
  // are all in the vectors (no bounds checks). True when the input is in
  // neither order.
  auto chunk = [&](size_t v0, unsigned int read, auto whole_tag) {
    constexpr bool kWhole = decltype(whole_tag)::value;
    auto in_vectors = [&](size_t v) { return kWhole || v < nvec; };
    Word k[kVecs][kPer];
    Word loaded_next[kVecs];  // successors that no shuffle can bring
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const size_t v = v0 + static_cast<size_t>(i) * 32 + lane;
      uint4 data = make_uint4(0, 0, 0, 0);
      if (in_vectors(v)) data = vecs[v];
      std::memcpy(k[i], &data, sizeof(data));
      // Lane 31's last vector, and the last vector of all, take their
      // successor from memory (the next chunk, or the keys after the vectors).
      const size_t q = head + (v + 1) * kPer;
      const bool next_row_load = lane == 31 && i == kVecs - 1;
      const bool load = kWhole ? next_row_load
                               : v < nvec && (v + 1 >= nvec || next_row_load) && q < n;
      loaded_next[i] = load ? keys[q] : Word{0};
    }
    unsigned int seen = 0;
    unsigned int descents = 0;
    bool ascent = false, tie = false;
    Word successor[kVecs];       // of each vector's last key (encoded)
    unsigned int with_next = 0;  // bit i: vector i's last key has a successor
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const size_t v = v0 + static_cast<size_t>(i) * 32 + lane;
      const bool valid = in_vectors(v);
      Word e[kPer];
#pragma unroll
      for (int t = 0; t < kPer; ++t) {
        e[t] = encode(k[i][t]);
        seen |= valid ? nan_bit(k[i][t]) : 0u;
      }
#pragma unroll
      for (int t = 0; t + 1 < kPer; ++t) {
        descents += valid && e[t] > e[t + 1];
        ascent |= valid && e[t] < e[t + 1];
        tie |= valid && e[t] == e[t + 1];
      }
      // The successor of this vector's last key: the next lane's first key,
      // lane 0's first key of the next vector row, or loaded.
      const Word from_next_lane = __shfl_down_sync(kFull, e[0], 1);
      Word from_next_row = 0;
      if (i + 1 < kVecs) from_next_row = __shfl_sync(kFull, encode(k[i + 1][0]), 0);
      const size_t q = head + (v + 1) * kPer;
      const bool loaded = (!kWhole && v + 1 >= nvec) || (lane == 31 && i == kVecs - 1);
      const Word next = loaded ? encode(loaded_next[i]) : lane < 31 ? from_next_lane : from_next_row;
      const bool has_next = kWhole || (v < nvec && q < n);
      descents += has_next && e[kPer - 1] > next;
      ascent |= has_next && e[kPer - 1] < next;
      tie |= has_next && e[kPer - 1] == next;
      successor[i] = next;
      with_next |= has_next ? 1u << i : 0u;
    }
    seen |= (descents != 0 ? static_cast<unsigned int>(kOrderDescent) : 0u) |
            (ascent ? static_cast<unsigned int>(kOrderAscent) : 0u) |
            (tie ? static_cast<unsigned int>(kOrderTie) : 0u);
    // Descents: counted, and where they are noted (the lanes that have
    // some look at their keys again).
    unsigned int slot = count_breaks(descents, seen);
    if (descents != 0 && slot < kMaxRunBreaks) {
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        const size_t j0 = head + (v0 + static_cast<size_t>(i) * 32 + lane) * kPer;
#pragma unroll
        for (int t = 0; t < kPer; ++t) {
          const bool pair = t + 1 < kPer ? in_vectors(v0 + static_cast<size_t>(i) * 32 + lane)
                                         : ((with_next >> i) & 1u) != 0;
          const Word next = t + 1 < kPer ? encode(k[i][t + 1]) : successor[i];
          if (pair && encode(k[i][t]) > next) {
            breaks.starts[slot++] = j0 + t + 1;
          }
        }
      }
    }
    if (settle(seen, read)) return true;
    const unsigned int mode = OrderWriteMode<kPairs>(known, out.copy, out.reverse);
    if (mode == kOrderCopied) {
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        const size_t v = v0 + static_cast<size_t>(i) * 32 + lane;
        if (!in_vectors(v)) continue;
        uint4 data;
        std::memcpy(&data, k[i], sizeof(data));
        reinterpret_cast<uint4*>(out.keys_out + head)[v] = data;
        if constexpr (kPairs) {
#pragma unroll
          for (int t = 0; t < kPer; ++t) out.values_out[head + v * kPer + t] = out.values_in[head + v * kPer + t];
        }
      }
    } else if (mode == kOrderReversedOut) {
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        const size_t v = v0 + static_cast<size_t>(i) * 32 + lane;
        if (!in_vectors(v)) continue;
        // Keys [j0, j0 + kPer) land reversed at [n - j0 - kPer, n - j0).
        const size_t j0 = head + v * kPer;
        const size_t to = n - j0 - kPer;
        if (out.reverse_vectors) {
          Word r[kPer];
#pragma unroll
          for (int t = 0; t < kPer; ++t) r[t] = k[i][kPer - 1 - t];
          uint4 data;
          std::memcpy(&data, r, sizeof(data));
          *reinterpret_cast<uint4*>(out.keys_out + to) = data;
        } else {
#pragma unroll
          for (int t = 0; t < kPer; ++t) out.keys_out[to + t] = k[i][kPer - 1 - t];
        }
        if constexpr (kPairs) {
#pragma unroll
          for (int t = 0; t < kPer; ++t) out.values_out[to + t] = out.values_in[j0 + kPer - 1 - t];
        }
      }
    }
    note_written(mode);
    return false;
  };

  const size_t first = warp * kChunk;
  if (first >= nvec) {
    outside_keys();
    return;
  }
  {  // The probe: the first 32 keys of this warp's first chunk.
    const size_t j = head + first * kPer + lane;
    const bool mine = j < n;  // the probe may run past the vectors: real keys all the same
    const Word bits = mine ? keys[j] : Word{0};
    const Word w = encode(bits);
    Word next = __shfl_down_sync(kFull, w, 1);
    if (lane == 31 && j + 1 < n) next = encode(keys[j + 1]);
    unsigned int seen = mine ? (nan_bit(bits) | (j + 1 < n ? PairOrder(w, next) : 0u)) : 0u;
    // Four descents in 32 keys: runs too short to be worth merging (random
    // input shows about 16). Fewer are counted by the chunks that hold them.
    if (__popc(__ballot_sync(kFull, seen & kOrderDescent)) >= 4) seen |= kOrderManyRuns;
    // Samples spread over the whole input (lane i: key i * (n - 1) / 31):
    // two out of order prove a descent (ascent) somewhere between them, so
    // input of a few sorted runs is known to be in neither order before
    // any warp reaches a run's end, and no warp copies stretches that the
    // merge then overwrites (8 runs of 2^23 u32 keys: about a third of the
    // input was copied). Equal samples prove nothing: no tie is inferred.
    if (n >= 2) {
      const Word sample = encode(keys[static_cast<size_t>(lane) * (n - 1) / 31]);
      const Word next_sample = __shfl_down_sync(kFull, sample, 1);
      if (lane < 31) {
        seen |= (sample > next_sample ? static_cast<unsigned int>(kOrderDescent) : 0u) |
                (sample < next_sample ? static_cast<unsigned int>(kOrderAscent) : 0u);
      }
    }
    const unsigned int read = lane == 0 ? static_cast<unsigned int>(*shared_word) : 0u;
    if (settle(seen, read)) return;
  }

  unsigned int chunks_done = 0;
  for (size_t v0 = first; v0 < nvec; v0 += warps * kChunk, ++chunks_done) {
    // The word is read as the chunk's loads go out, so its latency hides.
    const bool read_word = lane == 0 && chunks_done % kReadEvery == kReadEvery - 1;
    const unsigned int read = read_word ? static_cast<unsigned int>(*shared_word) : 0u;
    const bool neither = v0 + kChunk < nvec ? chunk(v0, read, std::true_type{})
                                            : chunk(v0, read, std::false_type{});
    if (neither) return;
  }
  outside_keys();
}

}  // namespace sortd::cuda

#endif  // SORTD_CORE_CUDA_RADIX_ORDER_KERNEL_CUH_
