// The GPU selection's host side: the temp layout, the choice of path per
// segment, and the guess path's fallback to the exact select
// (core/cuda/select/top_k.cuh).
#include "core/cuda/select/top_k.cuh"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cuda/radix_kernels.cuh"  // IotaKernel
#include "core/cuda/radix_transform.cuh"
#include "core/cuda/select/top_k_kernels.cuh"

namespace sortd::cuda {
namespace {

using select::Candidates;
using select::GuessState;
using select::KeptOut;

constexpr size_t kAlignment = 256;
size_t Aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// The guess path's sample: as many words as fit 128 KiB of shared memory.
constexpr size_t kSampleBytes = size_t{128} << 10;
// About this many keys are expected at or below the sampled threshold.
constexpr double kGuessMargin = 2.0;

struct Segment {
  size_t begin = 0, length = 0, out_at = 0;
};

// Rows the rows path takes whole: no segment is looked at on the host.
bool ShortRows(const TopKProblem& p) { return p.row_length > 0 && p.row_length <= kTopKRowMaxItems; }

// The segments, in order, with where each one's kept keys go (none listed
// for ShortRows: one launch takes them all).
std::vector<Segment> SegmentsOf(const TopKProblem& p) {
  std::vector<Segment> segments;
  if (ShortRows(p)) return segments;
  size_t out_at = 0;
  auto add = [&](size_t begin, size_t length) {
    segments.push_back({begin, length, out_at});
    out_at += std::min<uint64_t>(p.k, length);
  };
  if (p.row_length > 0) {
    for (size_t b = 0; b < p.num_items; b += p.row_length) add(b, p.row_length);
  } else if (p.num_segments > 0) {
    for (size_t s = 0; s < p.num_segments; ++s) add(p.h_offsets[s], p.h_offsets[s + 1] - p.h_offsets[s]);
  } else {
    add(0, p.num_items);
  }
  return segments;
}

bool Valid(const TopKProblem& p) {
  if (p.k == 0 || (p.d_keys == nullptr && p.num_items > 0) || p.d_positions == nullptr) return false;
  if (p.value_bytes != 0 && (p.d_values == nullptr || p.d_values_out == nullptr)) return false;
  // One block a segment on the rows path.
  const size_t segments = p.row_length > 0 ? p.num_items / p.row_length : p.num_segments;
  if (segments >= (size_t{1} << 31)) return false;
  if (p.value_bytes != 0 && p.value_bytes != 4 && p.value_bytes != 8) return false;
  if (p.row_length > 0) return p.num_items % p.row_length == 0 && p.row_length < (size_t{1} << 32);
  if (p.num_segments > 0) {
    if (p.h_offsets == nullptr || p.h_offsets[0] != 0 || p.h_offsets[p.num_segments] != p.num_items) {
      return false;
    }
    for (size_t s = 0; s < p.num_segments; ++s) {
      if (p.h_offsets[s + 1] < p.h_offsets[s] ||
          p.h_offsets[s + 1] - p.h_offsets[s] >= (size_t{1} << 32)) {
        return false;
      }
    }
    return true;
  }
  return p.num_items < (size_t{1} << 32);
}

// The guess for a segment of n keys: samples, the rank of the threshold
// among them, and the candidate buffer's capacity.
struct Guess {
  uint32_t samples = 0, rank = 0, capacity = 0;
};

Guess GuessFor(size_t n, uint64_t k, size_t word_bytes) {
  Guess g;
  g.samples = static_cast<uint32_t>(std::min(n, kSampleBytes / word_bytes));
  // Expected keys at or below the sample of rank r: r * n / samples. The
  // rank asks for kGuessMargin * k of them, four standard deviations more,
  // and four samples more, so that a guess holds for any input whose
  // order the sample's even spacing does not single out.
  const double x = kGuessMargin * static_cast<double>(k) * g.samples / static_cast<double>(n);
  const double r = std::ceil(x + 4 * std::sqrt(x)) + 4;
  g.rank = static_cast<uint32_t>(std::min<double>(r, g.samples));
  const double expected = static_cast<double>(g.rank) * static_cast<double>(n) / g.samples;
  g.capacity = static_cast<uint32_t>(
      std::min<double>(static_cast<double>(n), std::max(4 * expected, 65536.0 + k)));
  return g;
}

// What one call needs of temp storage, in the order laid out.
struct Layout {
  size_t offsets = 0, out_offsets = 0;  // ragged rows: uint64 each
  size_t samples = 0, state = 0, hist = 0, cand_words = 0, cand_pos = 0, tiles = 0, tile_first = 0;  // guess
  uint32_t capacity = 0;  // candidates the buffer holds
  size_t sort_keys = 0, sort_pos_in = 0, sort_pos_out = 0, sort_temp = 0, sort_temp_bytes = 0;
  size_t total = 0;
};

template <typename Word>
cudaError_t PlanLayout(const TopKProblem& p, const std::vector<Segment>& segments, Layout* l) {
  size_t longest_guess = 0, longest_sort = 0;
  for (const Segment& s : segments) {
    if (s.length <= kTopKRowMaxItems) continue;
    size_t& longest = p.k <= kTopKGuessMaxK ? longest_guess : longest_sort;
    longest = std::max(longest, s.length);
  }
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at += Aligned(bytes);
    return here;
  };
  const bool ragged = p.row_length == 0 && p.num_segments > 0;
  if (ragged) {
    l->offsets = take(8 * (p.num_segments + 1));
    l->out_offsets = take(8 * (p.num_segments + 1));
  }
  if (longest_guess > 0) {
    const Guess g = GuessFor(longest_guess, p.k, sizeof(Word));
    const size_t tiles = (longest_guess + select::kTieTile - 1) / select::kTieTile;
    // The capacity grows with the segment: the longest one's serves all.
    l->capacity = g.capacity;
    l->samples = take(sizeof(Word) * g.samples);
    l->state = take(sizeof(GuessState<Word>));
    l->hist = take(4 * select::kBins);
    l->cand_words = take(sizeof(Word) * g.capacity);
    l->cand_pos = take(4 * size_t{g.capacity});
    l->tiles = take(4 * tiles);
    l->tile_first = take(4 * tiles);
  }
  if (longest_sort > 0) {
    RadixSortProblem sort;
    sort.key_type = p.key_type;
    sort.num_items = longest_sort;
    sort.descending = p.descending;
    sort.value_bytes = 4;
    cudaError_t err = RadixSort(nullptr, l->sort_temp_bytes, sort, nullptr);
    if (err != cudaSuccess) return err;
    l->sort_keys = take(sizeof(Word) * longest_sort);
    l->sort_pos_in = take(4 * longest_sort);
    l->sort_pos_out = take(4 * longest_sort);
    l->sort_temp = take(l->sort_temp_bytes);
  }
  l->total = std::max<size_t>(at, kAlignment);
  return cudaSuccess;
}

template <typename Word>
KeyMasks<Word> MasksFor(const TopKProblem& p) {
  return KeyMasks<Word>::For(ClassOf(p.key_type), p.descending ? ~Word{0} : Word{0},
                             /*nans_present=*/true);
}

// The outputs of one segment, pointed at its place.
template <typename Word>
KeptOut<Word> OutFor(const TopKProblem& p, const Segment& s) {
  KeptOut<Word> out;
  out.keys = static_cast<const Word*>(p.d_keys) + s.begin;
  out.positions = p.d_positions + s.out_at;
  out.keys_out = p.d_keys_out != nullptr ? static_cast<Word*>(p.d_keys_out) + s.out_at : nullptr;
  out.value_bytes = p.value_bytes;
  if (p.value_bytes != 0) {
    out.values = static_cast<const char*>(p.d_values) + s.begin * p.value_bytes;
    out.values_out = static_cast<char*>(p.d_values_out) + s.out_at * p.value_bytes;
  }
  return out;
}

// The rows path over every segment of at most kTopKRowMaxItems keys (one
// launch; longer ones' blocks return at once).
template <typename Word>
cudaError_t RunRows(const TopKProblem& p, const std::vector<Segment>& segments, char* temp,
                    const Layout& l, cudaStream_t stream, TopKStats* stats) {
  size_t longest = ShortRows(p) ? p.row_length : 0;
  for (const Segment& s : segments) {
    if (s.length <= kTopKRowMaxItems) longest = std::max(longest, s.length);
  }
  const size_t blocks = ShortRows(p) ? p.num_items / p.row_length : segments.size();
  if (longest == 0 || blocks == 0) return cudaSuccess;
  select::RowArgs<Word> a;
  a.keys = static_cast<const Word*>(p.d_keys);
  a.masks = MasksFor<Word>(p);
  a.k = p.k;
  Segment all;
  a.out = OutFor<Word>(p, all);
  if (p.row_length > 0 || p.num_segments == 0) {
    a.row_length = p.row_length > 0 ? p.row_length : p.num_items;  // one array: one row
  } else {
    std::vector<uint64_t> offsets(segments.size() + 1), out_offsets(segments.size() + 1);
    for (size_t s = 0; s < segments.size(); ++s) {
      offsets[s] = segments[s].begin;
      out_offsets[s] = segments[s].out_at;
    }
    offsets.back() = p.num_items;
    out_offsets.back() = segments.empty() ? 0 : segments.back().out_at;
    a.offsets = reinterpret_cast<const uint64_t*>(temp + l.offsets);
    a.out_offsets = reinterpret_cast<const uint64_t*>(temp + l.out_offsets);
    cudaError_t err = cudaMemcpyAsync(temp + l.offsets, offsets.data(), 8 * offsets.size(),
                                      cudaMemcpyHostToDevice, stream);
    if (err == cudaSuccess) {
      err = cudaMemcpyAsync(temp + l.out_offsets, out_offsets.data(), 8 * out_offsets.size(),
                            cudaMemcpyHostToDevice, stream);
    }
    // The host vectors go out of scope: the copies must be done first.
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) return err;
  }
  const size_t keep = std::min<uint64_t>(p.k, longest);
  const size_t smem = select::RowSharedBytes<Word>(keep);
  const unsigned grid = static_cast<unsigned>(blocks);
  if (longest <= 1024) {
    select::RowTopKKernel<Word, 128, 8><<<grid, 128, smem, stream>>>(a);
  } else if (longest <= 2048) {
    select::RowTopKKernel<Word, 256, 8><<<grid, 256, smem, stream>>>(a);
  } else {
    select::RowTopKKernel<Word, 512, 8><<<grid, 512, smem, stream>>>(a);
  }
  if (stats != nullptr) ++stats->row_launches;
  return cudaGetLastError();
}

// Shared memory the finish copies candidates into (with its own arrays of
// kTopKGuessMaxK kept pairs, within the SM's 227 KiB).
constexpr size_t kStageBytes = size_t{160} << 10;

template <typename Word>
cudaError_t Finish(const Candidates<Word>& cand, GuessState<Word>* state, uint32_t k,
                   const KeptOut<Word>& out, cudaStream_t stream, GuessState<Word>* host_state) {
  const uint32_t stage = static_cast<uint32_t>(
      std::min<size_t>(cand.capacity, kStageBytes / (sizeof(Word) + 4)));
  const size_t smem = size_t{stage} * (sizeof(Word) + 4);
  auto* kernel = select::FinishKernel<Word, kTopKGuessMaxK>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  kernel<<<1, select::kSelectThreads, smem, stream>>>(cand, state, k, stage, out);
  err = cudaGetLastError();
  if (err == cudaSuccess) {
    err = cudaMemcpyAsync(host_state, state, sizeof(*state), cudaMemcpyDeviceToHost, stream);
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  return err;
}

template <typename Word>
unsigned CollectGrid(size_t n) {
  return static_cast<unsigned>(std::max<size_t>(1, (n + select::kCollectTile<Word> - 1) / select::kCollectTile<Word>));
}

unsigned GridFor(size_t items, size_t per_thread, int threads) {
  int device = 0, sms = 132;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  const size_t wanted = (items + per_thread * threads - 1) / (per_thread * threads);
  return static_cast<unsigned>(std::clamp<size_t>(wanted, 1, static_cast<size_t>(sms) * 8));
}

// The exact select of one segment (the guess did not hold): histograms of
// the words matching the prefix, read back digit by digit, until the keys
// below the prefix and matching it fit the candidate buffer; at the last
// digit, ties at the word are taken by position.
template <typename Word>
cudaError_t ExactSelect(const Word* keys, size_t n, uint32_t k, const KeyMasks<Word>& masks,
                        char* temp, const Layout& l, const Candidates<Word>& cand,
                        const KeptOut<Word>& out, cudaStream_t stream) {
  auto* state = reinterpret_cast<GuessState<Word>*>(temp + l.state);
  auto* hist = reinterpret_cast<uint32_t*>(temp + l.hist);
  GuessState<Word> host_state{};
  const unsigned grid = GridFor(n, 16, 256);
  Word prefix = 0, mask = 0;
  uint32_t below = 0, need = k;
  cudaError_t err = cudaSuccess;
  for (int shift = 8 * static_cast<int>(sizeof(Word)) - 8; shift >= 0; shift -= 8) {
    uint32_t h[select::kBins];
    err = cudaMemsetAsync(hist, 0, sizeof(h), stream);
    if (err != cudaSuccess) return err;
    select::PrefixHistogramKernel<Word><<<grid, 256, 0, stream>>>(keys, n, masks, prefix, mask, shift, hist);
    err = cudaGetLastError();
    if (err == cudaSuccess) err = cudaMemcpyAsync(h, hist, sizeof(h), cudaMemcpyDeviceToHost, stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    if (err != cudaSuccess) return err;
    uint32_t bin = 0, acc = 0;
    while (acc + h[bin] < need) acc += h[bin++];
    below += acc;
    need -= acc;
    prefix |= static_cast<Word>(bin) << shift;
    mask |= static_cast<Word>(255) << shift;
    if (static_cast<uint64_t>(below) + h[bin] <= cand.capacity) {
      // Everything below the prefix or matching it fits: select among it.
      err = cudaMemsetAsync(state, 0, sizeof(*state), stream);
      if (err != cudaSuccess) return err;
      select::CollectKernel<Word><<<CollectGrid<Word>(n), select::kCollectThreads, 0, stream>>>(
          keys, n, masks, select::BelowPrefix<Word>{prefix, mask, true}, cand, &state->count,
          reinterpret_cast<uintptr_t>(keys) % 16 == 0);
      err = cudaGetLastError();
      if (err == cudaSuccess) err = Finish(cand, state, k, out, stream, &host_state);
      return err == cudaSuccess && host_state.failed ? cudaErrorUnknown : err;
    }
  }
  // Every word matching the prefix is the same word and there are more
  // of them than the buffer: the keys below it, then the first `need` of
  // it by position.
  err = cudaMemsetAsync(state, 0, sizeof(*state), stream);
  if (err != cudaSuccess) return err;
  select::CollectKernel<Word><<<CollectGrid<Word>(n), select::kCollectThreads, 0, stream>>>(
      keys, n, masks, select::BelowPrefix<Word>{prefix, mask, false}, cand, &state->count,
      reinterpret_cast<uintptr_t>(keys) % 16 == 0);
  const size_t tiles = (n + select::kTieTile - 1) / select::kTieTile;
  auto* tile_counts = reinterpret_cast<uint32_t*>(temp + l.tiles);
  auto* tile_first = reinterpret_cast<uint32_t*>(temp + l.tile_first);
  select::TieCountKernel<Word><<<static_cast<unsigned>(tiles), select::kTieThreads, 0, stream>>>(
      keys, n, masks, prefix, tile_counts);
  err = cudaGetLastError();
  std::vector<uint32_t> counts(tiles);
  if (err == cudaSuccess) {
    err = cudaMemcpyAsync(counts.data(), tile_counts, 4 * tiles, cudaMemcpyDeviceToHost, stream);
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) return err;
  std::vector<uint32_t> first(tiles);
  size_t used = 0;
  for (uint64_t acc = 0; used < tiles && acc < need; ++used) {
    first[used] = static_cast<uint32_t>(acc);
    acc += counts[used];
  }
  err = cudaMemcpyAsync(tile_first, first.data(), 4 * used, cudaMemcpyHostToDevice, stream);
  if (err != cudaSuccess) return err;
  select::TieWriteKernel<Word><<<static_cast<unsigned>(used), select::kTieThreads, 0, stream>>>(
      keys, n, masks, prefix, tile_first, need, below, cand);
  host_state.count = below + need;
  err = cudaGetLastError();
  if (err == cudaSuccess) {
    err = cudaMemcpyAsync(&state->count, &host_state.count, 4, cudaMemcpyHostToDevice, stream);
  }
  if (err == cudaSuccess) err = Finish(cand, state, k, out, stream, &host_state);
  return err == cudaSuccess && host_state.failed ? cudaErrorUnknown : err;
}

// The guess path for one long segment (k <= kTopKGuessMaxK < length).
template <typename Word>
cudaError_t GuessSegment(const TopKProblem& p, const Segment& s, char* temp, const Layout& l,
                         cudaStream_t stream, TopKStats* stats) {
  const Word* keys = static_cast<const Word*>(p.d_keys) + s.begin;
  const KeyMasks<Word> masks = MasksFor<Word>(p);
  const uint32_t k = static_cast<uint32_t>(p.k);
  const Guess g = GuessFor(s.length, k, sizeof(Word));
  Candidates<Word> cand;
  cand.words = reinterpret_cast<Word*>(temp + l.cand_words);
  cand.positions = reinterpret_cast<uint32_t*>(temp + l.cand_pos);
  cand.capacity = l.capacity;
  auto* state = reinterpret_cast<GuessState<Word>*>(temp + l.state);
  const KeptOut<Word> out = OutFor<Word>(p, s);
  if (stats != nullptr) ++stats->guesses;

  auto* sampled = reinterpret_cast<Word*>(temp + l.samples);
  select::SampleKernel<Word><<<(g.samples + 255) / 256, 256, 0, stream>>>(keys, s.length, masks,
                                                                          g.samples, sampled);
  const size_t smem = size_t{g.samples} * sizeof(Word);
  cudaError_t err = cudaFuncSetAttribute(select::SampleThresholdKernel<Word>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  select::SampleThresholdKernel<Word><<<1, select::kSelectThreads, smem, stream>>>(
      sampled, g.samples, g.rank, state);
  select::CollectKernel<Word><<<CollectGrid<Word>(s.length), select::kCollectThreads, 0, stream>>>(
      keys, s.length, masks, select::AtOrBelowGuess<Word>{state, Word{0}}, cand, &state->count,
      reinterpret_cast<uintptr_t>(keys) % 16 == 0);
  err = cudaGetLastError();
  GuessState<Word> host_state{};
  if (err == cudaSuccess) err = Finish(cand, state, k, out, stream, &host_state);
  if (err != cudaSuccess || !host_state.failed) return err;
  if (stats != nullptr) ++stats->guesses_failed;
  return ExactSelect(keys, s.length, k, masks, temp, l, cand, out, stream);
}

// The sort path for one long segment (k > kTopKGuessMaxK).
template <typename Word>
cudaError_t SortSegment(const TopKProblem& p, const Segment& s, char* temp, const Layout& l,
                        cudaStream_t stream, TopKStats* stats) {
  auto* pos_in = reinterpret_cast<uint32_t*>(temp + l.sort_pos_in);
  auto* pos_out = reinterpret_cast<uint32_t*>(temp + l.sort_pos_out);
  IotaKernel<uint32_t><<<GridFor(s.length, 4, 256), 256, 0, stream>>>(pos_in, s.length);
  RadixSortProblem sort;
  sort.key_type = p.key_type;
  sort.num_items = s.length;
  sort.descending = p.descending;
  sort.d_keys_in = static_cast<const Word*>(p.d_keys) + s.begin;
  sort.d_keys_out = temp + l.sort_keys;
  sort.value_bytes = 4;
  sort.d_values_in = pos_in;
  sort.d_values_out = pos_out;
  size_t temp_bytes = l.sort_temp_bytes;
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) err = RadixSort(temp + l.sort_temp, temp_bytes, sort, stream);
  if (err != cudaSuccess) return err;
  const uint32_t keep = static_cast<uint32_t>(std::min<uint64_t>(p.k, s.length));
  const KeptOut<Word> out = OutFor<Word>(p, s);  // keys and values at the segment
  select::CopyKeptKernel<Word><<<GridFor(keep, 1, 256), 256, 0, stream>>>(pos_out, keep, out);
  if (stats != nullptr) ++stats->sorted_segments;
  return cudaGetLastError();
}

template <typename Word>
cudaError_t Run(void* d_temp, size_t temp_bytes, const TopKProblem& p, cudaStream_t stream,
                TopKStats* stats) {
  const std::vector<Segment> segments = SegmentsOf(p);
  Layout l;
  cudaError_t err = PlanLayout<Word>(p, segments, &l);
  if (err != cudaSuccess) return err;
  if (d_temp == nullptr || temp_bytes < l.total) return cudaErrorInvalidValue;
  char* temp = static_cast<char*>(d_temp);
  err = RunRows<Word>(p, segments, temp, l, stream, stats);
  for (size_t i = 0; err == cudaSuccess && i < segments.size(); ++i) {
    const Segment& s = segments[i];
    if (s.length <= kTopKRowMaxItems) continue;
    err = p.k <= kTopKGuessMaxK ? GuessSegment<Word>(p, s, temp, l, stream, stats)
                                : SortSegment<Word>(p, s, temp, l, stream, stats);
  }
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  return err;
}

}  // namespace

cudaError_t TopKTempBytes(const TopKProblem& problem, size_t* temp_bytes) {
  if (!Valid(problem)) return cudaErrorInvalidValue;
  const std::vector<Segment> segments = SegmentsOf(problem);
  Layout l;
  cudaError_t err = RadixKeyBytes(problem.key_type) == 4
                        ? PlanLayout<uint32_t>(problem, segments, &l)
                        : PlanLayout<uint64_t>(problem, segments, &l);
  *temp_bytes = l.total;
  return err;
}

cudaError_t TopK(void* d_temp, size_t temp_bytes, const TopKProblem& problem, cudaStream_t stream,
                 TopKStats* stats) {
  if (!Valid(problem)) return cudaErrorInvalidValue;
  return RadixKeyBytes(problem.key_type) == 4
             ? Run<uint32_t>(d_temp, temp_bytes, problem, stream, stats)
             : Run<uint64_t>(d_temp, temp_bytes, problem, stream, stats);
}

}  // namespace sortd::cuda
