// The kernels of the GPU selection (core/cuda/select/top_k.cuh says which
// path runs which). Every kernel works on order words (KeyMasks::Encode,
// with every NaN one word) and breaks ties by position, so each answer is
// the k smallest (word, position) pairs: the stable sort's first k.
#ifndef SORTD_CORE_CUDA_SELECT_TOP_K_KERNELS_CUH_
#define SORTD_CORE_CUDA_SELECT_TOP_K_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include <cub/block/block_scan.cuh>

#include "core/cuda/radix_transform.cuh"

namespace sortd::cuda::select {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;

// Where the kept keys go: positions (within the segment), and optionally
// the keys as they were and the values, gathered by position.
template <typename Word>
struct KeptOut {
  const Word* keys = nullptr;
  uint32_t* positions = nullptr;
  Word* keys_out = nullptr;
  int value_bytes = 0;
  const void* values = nullptr;
  void* values_out = nullptr;

  __device__ __forceinline__ void Put(size_t segment_begin, size_t at, uint32_t position) const {
    positions[at] = position;
    const size_t from = segment_begin + position;
    if (keys_out != nullptr) keys_out[at] = keys[from];
    if (value_bytes == 4) {
      static_cast<uint32_t*>(values_out)[at] = static_cast<const uint32_t*>(values)[from];
    } else if (value_bytes == 8) {
      static_cast<uint64_t*>(values_out)[at] = static_cast<const uint64_t*>(values)[from];
    }
  }
};

// The digit holding rank `need` (1-based) in a 256-bin histogram, found by
// the first warp: the bin, how many lie in the bins below, and its count.
struct BucketFound {
  uint32_t bin, below, count;
};

__device__ __forceinline__ void FindBucket(const uint32_t* hist, uint32_t need, BucketFound* found) {
  const int lane = threadIdx.x;
  uint32_t c[kBins / 32];
  uint32_t sum = 0;
#pragma unroll
  for (int i = 0; i < kBins / 32; ++i) {
    c[i] = hist[lane * (kBins / 32) + i];
    sum += c[i];
  }
  uint32_t inclusive = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t v = __shfl_up_sync(kFullMask, inclusive, o);
    if (lane >= o) inclusive += v;
  }
  const uint32_t exclusive = inclusive - sum;
  if (exclusive < need && need <= inclusive) {
    uint32_t acc = exclusive;
#pragma unroll
    for (int i = 0; i < kBins / 32; ++i) {
      if (acc + c[i] >= need) {
        found->bin = lane * (kBins / 32) + i;
        found->below = acc;
        found->count = c[i];
        break;
      }
      acc += c[i];
    }
  }
}

// A (word, position) prefix narrowed digit by digit, most significant
// first: the word's digits, then kPosDigits of the position's.
template <typename Word>
struct Prefix {
  Word word = 0, word_mask = 0;
  uint32_t pos = 0, pos_mask = 0;

  __device__ __forceinline__ bool Matches(Word w, uint32_t p) const {
    return (w & word_mask) == word && (p & pos_mask) == pos;
  }
  // (w, p) restricted to the digits fixed so far is below the prefix.
  __device__ __forceinline__ bool Below(Word w, uint32_t p) const {
    const Word mw = w & word_mask;
    return mw < word || (mw == word && (p & pos_mask) < pos);
  }
  __device__ __forceinline__ static uint32_t Digit(int d, Word w, uint32_t p) {
    constexpr int kWordDigits = sizeof(Word);
    return d < kWordDigits ? static_cast<uint32_t>(w >> (8 * (kWordDigits - 1 - d))) & 255u
                           : (p >> (8 * (3 - (d - kWordDigits)))) & 255u;
  }
  __device__ __forceinline__ void Fix(int d, uint32_t bin) {
    constexpr int kWordDigits = sizeof(Word);
    if (d < kWordDigits) {
      const int shift = 8 * (kWordDigits - 1 - d);
      word |= static_cast<Word>(bin) << shift;
      word_mask |= static_cast<Word>(255) << shift;
    } else {
      const int shift = 8 * (3 - (d - kWordDigits));
      pos |= bin << shift;
      pos_mask |= 255u << shift;
    }
  }
};

// One block narrows rank `need` (1-based, <= count) among `count` items
// (get(i, &word, &pos)) digit by digit until the digit's bucket is all
// taken; returns how many of the bucket's items are taken (then every
// item Below the prefix and that many Matching it are the `need` first).
// With kPosDigits = 4 every (word, position) is distinct and the bucket is
// always all taken at the end; with 0 the prefix ends at the rank's word.
template <typename Word, int kPosDigits, int kThreads, typename Get>
__device__ uint32_t BlockSelect(Get get, uint32_t count, uint32_t need, uint32_t* hist,
                                BucketFound* found, Prefix<Word>* prefix) {
  constexpr int kDigits = static_cast<int>(sizeof(Word)) + kPosDigits;
  const int t = threadIdx.x;
  // The word digits every item shares are fixed without a pass: such
  // items (candidates below a threshold, floats of one range) would all
  // count into one bin, an atomic a key on one address.
  __shared__ unsigned long long all_and, all_or;
  if (t == 0) all_and = ~0ull, all_or = 0;
  __syncthreads();
  unsigned long long mine_and = ~0ull, mine_or = 0;
  for (uint32_t i = t; i < count; i += kThreads) {
    Word w;
    uint32_t p;
    get(i, &w, &p);
    mine_and &= w;
    mine_or |= w;
  }
  atomicAnd(&all_and, mine_and);
  atomicOr(&all_or, mine_or);
  __syncthreads();
  const unsigned long long varying = all_and ^ all_or;
  for (int d = 0; d < kDigits; ++d) {
    if (d < static_cast<int>(sizeof(Word))) {
      const int shift = 8 * (static_cast<int>(sizeof(Word)) - 1 - d);
      if (((varying >> shift) & 255u) == 0) {
        prefix->Fix(d, static_cast<uint32_t>(all_and >> shift) & 255u);
        continue;
      }
    }
    for (int i = t; i < kBins; i += kThreads) hist[i] = 0;
    __syncthreads();
    for (uint32_t i = t; i < count; i += kThreads) {
      Word w;
      uint32_t p;
      get(i, &w, &p);
      if (prefix->Matches(w, p)) atomicAdd(&hist[Prefix<Word>::Digit(d, w, p)], 1u);
    }
    __syncthreads();
    if (t < 32) FindBucket(hist, need, found);
    __syncthreads();
    const BucketFound f = *found;
    need -= f.below;
    prefix->Fix(d, f.bin);
    if (f.count == need) break;
  }
  return need;
}

// ---- rows: a segment of up to kThreads * kItems keys a block ---------

template <typename Word>
struct RowArgs {
  const Word* keys = nullptr;
  KeyMasks<Word> masks;
  size_t row_length = 0;              // > 0: uniform rows
  const uint64_t* offsets = nullptr;  // else segments' offsets
  const uint64_t* out_offsets = nullptr;
  uint64_t k = 0;
  KeptOut<Word> out;
};

// Dynamic shared memory: min(k, capacity) kept words, then as many 16-bit
// positions, each array padded to 16 bytes (the ranking loop's loads are
// vectorised past the last word).
template <typename Word>
__host__ __device__ constexpr size_t RowKeptWordBytes(size_t keep) {
  return (keep * sizeof(Word) + 31) / 16 * 16;
}
template <typename Word>
constexpr size_t RowSharedBytes(size_t keep) {
  return RowKeptWordBytes<Word>(keep) + (keep * 2 + 31) / 16 * 16;
}
template <typename Word, int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads) RowTopKKernel(RowArgs<Word> a) {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ uint32_t hist[kBins];
  __shared__ BucketFound found;
  extern __shared__ __align__(16) unsigned char kept_storage[];

  const size_t segment = blockIdx.x;
  size_t begin, length, out_at;
  if (a.row_length > 0) {
    begin = segment * a.row_length;
    length = a.row_length;
    out_at = segment * (a.k < length ? a.k : length);
  } else {
    begin = a.offsets[segment];
    length = a.offsets[segment + 1] - begin;
    out_at = a.out_offsets[segment];
  }
  // Longer segments take the other paths; empty ones keep nothing.
  if (length > static_cast<size_t>(kThreads) * kItems || length == 0) return;
  const uint32_t keep = static_cast<uint32_t>(a.k < length ? a.k : length);
  Word* kept_words = reinterpret_cast<Word*>(kept_storage);
  uint16_t* kept_pos = reinterpret_cast<uint16_t*>(kept_storage + RowKeptWordBytes<Word>(keep));

  // Blocked: thread t holds positions t * kItems + j (so that a scan over
  // threads ranks ties in position order). Past the end: the largest word,
  // which with its larger position is never among the first `keep`.
  const int t = threadIdx.x;
  Word w[kItems];
  const Word* mine = a.keys + begin + static_cast<size_t>(t) * kItems;
  if ((static_cast<size_t>(t) + 1) * kItems <= length && reinterpret_cast<uintptr_t>(mine) % 16 == 0) {
    // A whole share, aligned: 16-byte loads.
    constexpr int kPer = 16 / sizeof(Word);
#pragma unroll
    for (int j = 0; j < kItems; j += kPer) {
      if constexpr (sizeof(Word) == 4) {
        const uint4 v = *reinterpret_cast<const uint4*>(mine + j);
        w[j] = v.x, w[j + 1] = v.y, w[j + 2] = v.z, w[j + 3] = v.w;
      } else {
        const ulonglong2 v = *reinterpret_cast<const ulonglong2*>(mine + j);
        w[j] = v.x, w[j + 1] = v.y;
      }
    }
#pragma unroll
    for (int j = 0; j < kItems; ++j) w[j] = a.masks.Encode(w[j]);
  } else {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      const size_t p = static_cast<size_t>(t) * kItems + j;
      w[j] = p < length ? a.masks.Encode(a.keys[begin + p]) : ~Word{0};
    }
  }

  Prefix<Word> prefix;
  uint32_t need = keep;
  if (keep < length) {
    for (int d = 0; d < static_cast<int>(sizeof(Word)); ++d) {
      for (int i = t; i < kBins; i += kThreads) hist[i] = 0;
      __syncthreads();
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        if ((w[j] & prefix.word_mask) == prefix.word) {
          atomicAdd(&hist[Prefix<Word>::Digit(d, w[j], 0)], 1u);
        }
      }
      __syncthreads();
      if (t < 32) FindBucket(hist, need, &found);
      __syncthreads();
      const BucketFound f = found;
      need -= f.below;
      prefix.Fix(d, f.bin);
      if (f.count == need) break;
    }
  }
  // Taken: every word below the prefix, and the first `need` (by
  // position) of the words matching it.
  uint32_t below = 0, ties = 0;
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const Word m = w[j] & prefix.word_mask;
    below += m < prefix.word;
    ties += m == prefix.word;
  }
  uint32_t before;  // packed: ties before this thread << 16 | below before it
  Scan(scan_storage).ExclusiveSum((ties << 16) | below, before);
  uint32_t tie_rank = before >> 16;
  uint32_t slot = (before & 0xffffu) + (tie_rank < need ? tie_rank : need);
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const Word m = w[j] & prefix.word_mask;
    bool take = m < prefix.word;
    if (m == prefix.word) take = tie_rank++ < need;
    if (take) {
      kept_words[slot] = w[j];
      kept_pos[slot] = static_cast<uint16_t>(t * kItems + j);
      ++slot;
    }
  }
  __syncthreads();
  // The kept keys are in position order: a key's rank is how many kept
  // words are below it, plus the equal ones before it.
  for (uint32_t i = t; i < keep; i += kThreads) {
    const Word wi = kept_words[i];
    uint32_t rank = 0;
    for (uint32_t j = 0; j < keep; ++j) {
      const Word wj = kept_words[j];
      rank += (wj < wi) | ((wj == wi) & (j < i));
    }
    a.out.Put(begin, out_at + rank, kept_pos[i]);
  }
}

// ---- guess: one long segment -----------------------------------------

template <typename Word>
struct GuessState {
  Word threshold;   // the sample's word of rank r
  uint32_t count;   // candidates found (may exceed the buffer)
  uint32_t failed;  // the finish found fewer than k or more than the buffer
};

constexpr int kSelectThreads = 1024;

// out[i] = the order word of keys[i * n / samples]: an even sample of the
// keys (one thread a sample, so that the reads overlap).
template <typename Word>
__global__ void SampleKernel(const Word* keys, size_t n, KeyMasks<Word> masks, uint32_t samples,
                             Word* out) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < samples) out[i] = masks.Encode(keys[static_cast<size_t>(i) * n / samples]);
}

// One block: the word of rank `rank` among the samples (dynamic shared
// memory: samples words), and the guess's state reset.
template <typename Word>
__global__ void __launch_bounds__(kSelectThreads)
    SampleThresholdKernel(const Word* sampled, uint32_t samples, uint32_t rank,
                          GuessState<Word>* state) {
  __shared__ uint32_t hist[kBins];
  __shared__ BucketFound found;
  extern __shared__ __align__(16) unsigned char sample_storage[];
  Word* s = reinterpret_cast<Word*>(sample_storage);
  for (uint32_t i = threadIdx.x; i < samples; i += kSelectThreads) s[i] = sampled[i];
  __syncthreads();
  Prefix<Word> prefix;
  BlockSelect<Word, 0, kSelectThreads>(
      [&](uint32_t i, Word* w, uint32_t* p) {
        *w = s[i];
        *p = 0;
      },
      samples, rank, hist, &found, &prefix);
  if (threadIdx.x == 0) {
    state->threshold = prefix.word;
    state->count = 0;
    state->failed = 0;
  }
}

// Candidate buffer: (word, position) pairs, `capacity` of them.
template <typename Word>
struct Candidates {
  Word* words = nullptr;
  uint32_t* positions = nullptr;
  uint32_t capacity = 0;
};

// Which keys a collection pass appends.
template <typename Word>
struct AtOrBelowGuess {  // word <= the sampled threshold
  const GuessState<Word>* state;
  Word threshold;
  __device__ __forceinline__ void Load() { threshold = state->threshold; }
  __device__ __forceinline__ bool operator()(Word w) const { return w <= threshold; }
};
template <typename Word>
struct BelowPrefix {  // the fixed digits below the prefix (or matching it)
  Word prefix, mask;
  bool with_matching;
  __device__ __forceinline__ void Load() {}
  __device__ __forceinline__ bool operator()(Word w) const {
    const Word m = w & mask;
    return m < prefix || (with_matching && m == prefix);
  }
};

// Items per chunk of a collection pass: one 16-byte load.
template <typename Word>
constexpr int kChunkItems = 16 / sizeof(Word);

// Appends every key of [0, n) that `take` takes to the candidates, counting
// past the capacity (a warp's finds reserved by one atomic). Chunks are
// read by 16-byte loads when `aligned`, kChunksInFlight a lane at a time.
constexpr int kChunksInFlight = 4;

template <typename Word>
__device__ __forceinline__ void LoadChunk(const Word* keys, size_t n, size_t at, bool valid,
                                          bool aligned, Word* x) {
  constexpr int kPer = kChunkItems<Word>;
  if (valid && aligned && at + kPer <= n) {
    if constexpr (sizeof(Word) == 4) {
      const uint4 v = __ldcs(reinterpret_cast<const uint4*>(keys + at));
      x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
    } else {
      const ulonglong2 v = __ldcs(reinterpret_cast<const ulonglong2*>(keys + at));
      x[0] = v.x, x[1] = v.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kPer; ++j) x[j] = valid && at + j < n ? keys[at + j] : Word{0};
  }
}

constexpr int kCollectThreads = 256;
template <typename Word>
constexpr size_t kCollectTile = size_t{kCollectThreads} * kChunksInFlight * kChunkItems<Word>;

// One tile of kCollectTile keys a block (chunk c of thread t at
// (c * kCollectThreads + t) * kChunkItems: each load instruction of a warp
// reads 512 contiguous bytes).
template <typename Word, typename Take>
__global__ void __launch_bounds__(kCollectThreads) CollectKernel(const Word* keys, size_t n,
                                                                 KeyMasks<Word> masks, Take take,
                                                                 Candidates<Word> out,
                                                                 uint32_t* count, bool aligned) {
  constexpr int kPer = kChunkItems<Word>;
  take.Load();
  const int lane = threadIdx.x & 31;
  const unsigned lower_lanes = (1u << lane) - 1;
  const size_t tile = blockIdx.x * kCollectTile<Word>;
  Word x[kChunksInFlight][kPer];
#pragma unroll
  for (int c = 0; c < kChunksInFlight; ++c) {
    const size_t at = tile + (static_cast<size_t>(c) * kCollectThreads + threadIdx.x) * kPer;
    LoadChunk(keys, n, at, at < n, aligned, x[c]);
  }
#pragma unroll
  for (int c = 0; c < kChunksInFlight; ++c) {
    const size_t at = tile + (static_cast<size_t>(c) * kCollectThreads + threadIdx.x) * kPer;
    // Most chunks hold no candidate: one vote a chunk decides.
    bool any = false;
#pragma unroll
    for (int j = 0; j < kPer; ++j) any |= at + j < n && take(masks.Encode(x[c][j]));
    if (!__any_sync(kFullMask, any)) continue;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      const Word w = masks.Encode(x[c][j]);
      const bool found = at + j < n && take(w);
      const unsigned ballot = __ballot_sync(kFullMask, found);
      if (ballot == 0) continue;
      const int leader = __ffs(ballot) - 1;
      uint32_t base = 0;
      if (lane == leader) base = atomicAdd(count, static_cast<uint32_t>(__popc(ballot)));
      base = __shfl_sync(kFullMask, base, leader);
      if (found) {
        const uint32_t slot = base + __popc(ballot & lower_lanes);
        if (slot < out.capacity) {
          out.words[slot] = w;
          out.positions[slot] = static_cast<uint32_t>(at + j);
        }
      }
    }
  }
}

// One block: the k first (word, position) pairs of the candidates, ranked
// and written out; `failed` set instead when the candidates cannot hold
// them (fewer than k, or more than the buffer kept). Up to `stage`
// candidates are first copied to dynamic shared memory (words, then
// positions), where the digit passes read them; more are read where they
// are.
template <typename Word, int kMaxK>
__global__ void __launch_bounds__(kSelectThreads)
    FinishKernel(Candidates<Word> in, GuessState<Word>* state, uint32_t k, uint32_t stage,
                 KeptOut<Word> out) {
  __shared__ uint32_t hist[kBins];
  __shared__ BucketFound found;
  __shared__ Word kept_words[kMaxK];
  __shared__ uint32_t kept_pos[kMaxK];
  __shared__ uint32_t kept_count;
  extern __shared__ __align__(16) unsigned char stage_storage[];
  const uint32_t count = state->count;
  if (count < k || count > in.capacity) {
    if (threadIdx.x == 0) state->failed = 1;
    return;
  }
  const Word* words = in.words;
  const uint32_t* positions = in.positions;
  if (count <= stage) {
    Word* staged_words = reinterpret_cast<Word*>(stage_storage);
    uint32_t* staged_pos = reinterpret_cast<uint32_t*>(staged_words + stage);
    for (uint32_t i = threadIdx.x; i < count; i += kSelectThreads) {
      staged_words[i] = words[i];
      staged_pos[i] = positions[i];
    }
    words = staged_words;
    positions = staged_pos;
  }
  if (threadIdx.x == 0) kept_count = 0;
  Prefix<Word> prefix;
  const auto get = [&](uint32_t i, Word* w, uint32_t* p) {
    *w = words[i];
    *p = positions[i];
  };
  // The pairs are distinct: the bucket ends all taken, so every pair Below
  // or Matching the prefix is kept (k of them).
  BlockSelect<Word, 4, kSelectThreads>(get, count, k, hist, &found, &prefix);
  for (uint32_t i = threadIdx.x; i < count; i += kSelectThreads) {
    Word w;
    uint32_t p;
    get(i, &w, &p);
    if (prefix.Below(w, p) || prefix.Matches(w, p)) {
      const uint32_t slot = atomicAdd(&kept_count, 1u);
      kept_words[slot] = w;
      kept_pos[slot] = p;
    }
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < k; i += kSelectThreads) {
    const Word wi = kept_words[i];
    const uint32_t pi = kept_pos[i];
    uint32_t rank = 0;
    for (uint32_t j = 0; j < k; ++j) {
      const Word wj = kept_words[j];
      rank += (wj < wi) | ((wj == wi) & (kept_pos[j] < pi));
    }
    out.Put(0, rank, pi);
  }
}

// ---- the exact select's passes (a failed guess) ----------------------

// hist[digit at `shift`] of the words matching (prefix, mask).
template <typename Word>
__global__ void __launch_bounds__(256) PrefixHistogramKernel(const Word* keys, size_t n,
                                                              KeyMasks<Word> masks, Word prefix,
                                                              Word mask, int shift, uint32_t* hist) {
  __shared__ uint32_t local[kBins];
  for (int i = threadIdx.x; i < kBins; i += blockDim.x) local[i] = 0;
  __syncthreads();
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += gridDim.x * static_cast<size_t>(blockDim.x)) {
    const Word w = masks.Encode(keys[i]);
    if ((w & mask) == prefix) atomicAdd(&local[static_cast<uint32_t>(w >> shift) & 255u], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kBins; i += blockDim.x) {
    if (local[i] != 0) atomicAdd(&hist[i], local[i]);
  }
}

constexpr int kTieThreads = 256;
constexpr int kTieItems = 16;
constexpr size_t kTieTile = size_t{kTieThreads} * kTieItems;

// counts[b] = words equal to `word` in tile b.
template <typename Word>
__global__ void __launch_bounds__(kTieThreads) TieCountKernel(const Word* keys, size_t n,
                                                              KeyMasks<Word> masks, Word word,
                                                              uint32_t* counts) {
  using Scan = cub::BlockScan<uint32_t, kTieThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const size_t base = blockIdx.x * kTieTile + static_cast<size_t>(threadIdx.x) * kTieItems;
  uint32_t equal = 0;
#pragma unroll
  for (int j = 0; j < kTieItems; ++j) equal += base + j < n && masks.Encode(keys[base + j]) == word;
  uint32_t total;
  Scan(scan_storage).ExclusiveSum(equal, equal, total);
  if (threadIdx.x == 0) counts[blockIdx.x] = total;
}

// Appends the first `need` words equal to `word`, in position order, at
// out[first + rank]; tile b's ties start at rank tile_first[b].
template <typename Word>
__global__ void __launch_bounds__(kTieThreads)
    TieWriteKernel(const Word* keys, size_t n, KeyMasks<Word> masks, Word word,
                   const uint32_t* tile_first, uint32_t need, uint32_t first, Candidates<Word> out) {
  using Scan = cub::BlockScan<uint32_t, kTieThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  const size_t base = blockIdx.x * kTieTile + static_cast<size_t>(threadIdx.x) * kTieItems;
  bool equal[kTieItems];
  uint32_t count = 0;
#pragma unroll
  for (int j = 0; j < kTieItems; ++j) {
    equal[j] = base + j < n && masks.Encode(keys[base + j]) == word;
    count += equal[j];
  }
  uint32_t rank;
  Scan(scan_storage).ExclusiveSum(count, rank);
  rank += tile_first[blockIdx.x];
#pragma unroll
  for (int j = 0; j < kTieItems; ++j) {
    if (equal[j] && rank < need) {
      out.words[first + rank] = word;
      out.positions[first + rank] = static_cast<uint32_t>(base + j);
    }
    rank += equal[j];
  }
}

// ---- sort: the first k of a sorted segment ---------------------------

// `out` points at the segment (OutFor): its first `keep` sorted positions.
template <typename Word>
__global__ void CopyKeptKernel(const uint32_t* sorted_positions, uint32_t keep, KeptOut<Word> out) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < keep; i += gridDim.x * blockDim.x) {
    out.Put(0, i, sorted_positions[i]);
  }
}

}  // namespace sortd::cuda::select

#endif  // SORTD_CORE_CUDA_SELECT_TOP_K_KERNELS_CUH_
