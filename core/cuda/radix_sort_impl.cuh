// OneSweep radix sort, host side: temp-storage layout, pass planning
// (skipping passes whose digit is the same for every key), the
// NaN-preserving modes, and the launches. Templated on the pass tuning so
// that the benchmark can instantiate alternatives; radix_sort.cu
// instantiates the defaults of radix_tuning.cuh. Every launch is checked.
#ifndef SORTD_CORE_CUDA_RADIX_SORT_IMPL_CUH_
#define SORTD_CORE_CUDA_RADIX_SORT_IMPL_CUH_

#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/cuda/radix_kernels.cuh"
#include "core/cuda/radix_sort.cuh"

namespace sortd::cuda::detail {


#define SORTD_CUDA_TRY(call)                 \
  do {                                       \
    cudaError_t sortd_err_ = (call);         \
    if (sortd_err_ != cudaSuccess) return sortd_err_; \
  } while (0)

constexpr size_t kAlign = 256;
inline size_t AlignUp(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Carves aligned sub-buffers out of one temp allocation (or only sizes
// them when base is null).
class TempLayout {
 public:
  explicit TempLayout(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* Take(size_t count) {
    const size_t offset = size_;
    size_ += AlignUp(count * sizeof(T));
    return base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + offset);
  }
  size_t size() const { return size_; }

 private:
  char* base_;
  size_t size_ = 0;
};

inline int GridFor(size_t n, int block) {
  const size_t blocks = (n + block - 1) / block;
  return static_cast<int>(std::min<size_t>(std::max<size_t>(blocks, 1), 65535));
}

template <typename Word, typename Tuning>
struct Plan {
  static constexpr int kPasses = sizeof(Word) * 8 / kRadixBits;
  static constexpr int kKeysTile = Tuning::Keys::kBlockThreads * Tuning::Keys::kItemsPerThread;
  static constexpr int kPairsTile = Tuning::Pairs::kBlockThreads * Tuning::Pairs::kItemsPerThread;
  // Status words are sized for the smaller tile (more tiles).
  static constexpr int kMinTile = kKeysTile < kPairsTile ? kKeysTile : kPairsTile;
};

// Launches one OneSweep kernel per pass with the given offset width,
// ping-ponging so that the last pass writes keys_out/values_out.
template <typename Word, typename Value, typename Offset, typename Pass>
cudaError_t LaunchPasses(const std::vector<int>& passes, const Word* keys_in, Word* keys_out,
                         Word* keys_alt, const Value* values_in, Value* values_out,
                         Value* values_alt, size_t n, KeyMasks<Word> masks,
                         const unsigned long long* offsets, unsigned long long* status,
                         unsigned int* tile_counters, cudaStream_t stream) {
  constexpr int kTile = Pass::kBlockThreads * Pass::kItemsPerThread;
  const size_t tiles = (n + kTile - 1) / kTile;
  const int k = static_cast<int>(passes.size());
  constexpr size_t kSmem =
      OneSweepSharedBytes<Word, Value, Pass::kBlockThreads, Pass::kItemsPerThread>();
  auto kernel = OneSweepPassKernel<Word, Value, Offset, Pass::kBlockThreads,
                                   Pass::kItemsPerThread, Pass::kMinBlocks>;
  // Per device and cheap: set on every call so that every GPU gets it.
  SORTD_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kSmem)));
  // One zeroing of the status words serves every pass (epochs 1..k).
  SORTD_CUDA_TRY(cudaMemsetAsync(status, 0, tiles * kRadixBins * sizeof(unsigned long long), stream));
  const Word* src_keys = keys_in;
  const Value* src_values = values_in;
  for (int i = 0; i < k; ++i) {
    const bool to_out = (k - 1 - i) % 2 == 0;
    Word* dst_keys = to_out ? keys_out : keys_alt;
    Value* dst_values = to_out ? values_out : values_alt;
    const int p = passes[i];
    kernel<<<static_cast<unsigned int>(tiles), Pass::kBlockThreads, kSmem, stream>>>(
        src_keys, dst_keys, src_values, dst_values, n, p * kRadixBits, masks,
        /*encode=*/i == 0, /*decode=*/i == k - 1, offsets + p * kRadixBins, status,
        /*epoch=*/static_cast<unsigned int>(i + 1), tile_counters + p);
    SORTD_CUDA_TRY(cudaGetLastError());
    src_keys = dst_keys;
    src_values = dst_values;
  }
  return cudaSuccess;
}

// Picks the pass tuning (keys-only or pairs) and the offset width.
template <typename Word, typename Value, typename Tuning>
cudaError_t RunPasses(const std::vector<int>& passes, const Word* keys_in, Word* keys_out,
                      Word* keys_alt, const Value* values_in, Value* values_out,
                      Value* values_alt, size_t n, KeyMasks<Word> masks,
                      const unsigned long long* offsets, unsigned long long* status,
                      unsigned int* tile_counters, cudaStream_t stream) {
  using Pass = std::conditional_t<std::is_same_v<Value, NoValue>, typename Tuning::Keys,
                                  typename Tuning::Pairs>;
  if (n < (size_t{1} << 32)) {
    return LaunchPasses<Word, Value, uint32_t, Pass>(passes, keys_in, keys_out, keys_alt, values_in,
                                                     values_out, values_alt, n, masks, offsets,
                                                     status, tile_counters, stream);
  }
  return LaunchPasses<Word, Value, uint64_t, Pass>(passes, keys_in, keys_out, keys_alt, values_in,
                                                   values_out, values_alt, n, masks, offsets,
                                                   status, tile_counters, stream);
}

template <typename Index>
cudaError_t Iota(Index* out, size_t n, cudaStream_t stream) {
  IotaKernel<<<GridFor(n, 256), 256, 0, stream>>>(out, n);
  return cudaGetLastError();
}

template <typename T, typename Index>
cudaError_t Gather(const void* in, const Index* index, void* out, size_t n, cudaStream_t stream) {
  GatherKernel<<<GridFor(n, 256), 256, 0, stream>>>(static_cast<const T*>(in), index,
                                                      static_cast<T*>(out), n);
  return cudaGetLastError();
}

template <typename Index>
cudaError_t GatherBytes(int bytes, const void* in, const Index* index, void* out, size_t n,
                        cudaStream_t stream) {
  return bytes == 4 ? Gather<uint32_t>(in, index, out, n, stream)
                    : Gather<uint64_t>(in, index, out, n, stream);
}

template <typename Word, typename Tuning>
cudaError_t SortWords(void* d_temp, size_t& temp_bytes, const RadixSortProblem& p,
                      cudaStream_t stream, RadixSortStats* stats) {
  constexpr int kPasses = Plan<Word, Tuning>::kPasses;
  const size_t n = p.num_items;
  const size_t tiles = (n + Plan<Word, Tuning>::kMinTile - 1) / Plan<Word, Tuning>::kMinTile;
  const KeyClass cls = ClassOf(p.key_type);
  const bool is_float = cls == KeyClass::kFloat;
  const bool wide_index = n > (size_t{1} << 32);
  const size_t index_bytes = wide_index ? 8 : 4;
  const size_t value_slot = std::max<size_t>({static_cast<size_t>(p.value_bytes),
                                              is_float ? sizeof(Word) : 0,
                                              is_float ? index_bytes : 0});

  TempLayout t(d_temp);
  Word* keys_alt = t.Take<Word>(n);
  Word* keys_scratch = is_float ? t.Take<Word>(n) : nullptr;  // NaN modes: discarded keys
  char* values_alt = t.Take<char>(n * value_slot);
  char* index_a = is_float ? t.Take<char>(n * index_bytes) : nullptr;
  char* index_b = is_float ? t.Take<char>(n * index_bytes) : nullptr;
  unsigned long long* hist = t.Take<unsigned long long>(kPasses * kRadixBins + 1);
  unsigned long long* offsets = t.Take<unsigned long long>(kPasses * kRadixBins);
  unsigned long long* status = t.Take<unsigned long long>(std::max<size_t>(tiles, 1) * kRadixBins);
  unsigned int* tile_counters = t.Take<unsigned int>(kPasses);
  if (d_temp == nullptr) {
    temp_bytes = t.size();
    return cudaSuccess;
  }
  if (temp_bytes < t.size()) return cudaErrorInvalidValue;
  if (p.value_bytes != 0 && p.value_bytes != 4 && p.value_bytes != 8) return cudaErrorInvalidValue;
  if (stats != nullptr) *stats = RadixSortStats{kPasses, 0, false};
  if (n == 0) return cudaSuccess;

  const Word flip = p.descending ? ~Word{0} : Word{0};
  const Word* keys_in = static_cast<const Word*>(p.d_keys_in);
  Word* keys_out = static_cast<Word*>(p.d_keys_out);
  unsigned long long* nan_count = hist + kPasses * kRadixBins;

  // Histogram of every digit in one read, then per-digit offsets.
  SORTD_CUDA_TRY(cudaMemsetAsync(hist, 0, (kPasses * kRadixBins + 1) * sizeof(unsigned long long), stream));
  SORTD_CUDA_TRY(cudaMemsetAsync(tile_counters, 0, kPasses * sizeof(unsigned int), stream));
  int sms = 0, device = 0;
  SORTD_CUDA_TRY(cudaGetDevice(&device));
  SORTD_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int hist_grid = static_cast<int>(std::min<size_t>(
      static_cast<size_t>(sms) * HistogramTuning::kBlocksPerSm,
      std::max<size_t>(1, (n + HistogramTuning::kBlockThreads - 1) / HistogramTuning::kBlockThreads)));
  GlobalHistogramKernel<Word, HistogramTuning::kBlockThreads>
      <<<hist_grid, HistogramTuning::kBlockThreads, 0, stream>>>(
          keys_in, n, KeyMasks<Word>::For(cls, flip, /*nans_present=*/true), hist, nan_count);
  SORTD_CUDA_TRY(cudaGetLastError());
  DigitOffsetsKernel<kRadixBins><<<kPasses, kRadixBins, 0, stream>>>(hist, offsets);
  SORTD_CUDA_TRY(cudaGetLastError());

  // Plan: which passes run, and whether NaNs force a payload-keeping mode.
  std::vector<int> passes;
  unsigned long long nans = 0;
  if (p.skip_trivial_passes || is_float) {
    std::vector<unsigned long long> h(kPasses * kRadixBins + 1);
    SORTD_CUDA_TRY(cudaMemcpyAsync(h.data(), hist, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost, stream));
    SORTD_CUDA_TRY(cudaStreamSynchronize(stream));
    nans = h[kPasses * kRadixBins];
    for (int pass = 0; pass < kPasses; ++pass) {
      bool trivial = false;
      if (p.skip_trivial_passes) {
        for (int d = 0; d < kRadixBins; ++d) trivial |= h[pass * kRadixBins + d] == n;
      }
      if (!trivial) passes.push_back(pass);
    }
  } else {
    for (int pass = 0; pass < kPasses; ++pass) passes.push_back(pass);
  }
  if (stats != nullptr) {
    stats->passes_run = static_cast<int>(passes.size());
    stats->nan_mode = nans > 0;
  }

  const KeyMasks<Word> masks = KeyMasks<Word>::For(cls, flip, nans > 0);

  if (passes.empty()) {  // every key equal: the input order is the answer
    if (keys_out != keys_in) {
      SORTD_CUDA_TRY(cudaMemcpyAsync(keys_out, keys_in, n * sizeof(Word), cudaMemcpyDeviceToDevice, stream));
    }
    if (p.value_bytes > 0 && p.d_values_out != p.d_values_in) {
      SORTD_CUDA_TRY(cudaMemcpyAsync(p.d_values_out, p.d_values_in, n * p.value_bytes,
                                     cudaMemcpyDeviceToDevice, stream));
    }
    return cudaSuccess;
  }

  if (nans > 0 && p.value_bytes == 0) {
    // Keys-only with NaNs: all NaNs sort as one key, so the original bits
    // (payloads) ride along as values and become the output keys.
    return RunPasses<Word, Word, Tuning>(passes, keys_in, keys_scratch, keys_alt, keys_in, keys_out,
                                 reinterpret_cast<Word*>(values_alt), n, masks, offsets,
                                 status, tile_counters, stream);
  }
  if (nans > 0) {
    // Pairs with NaN keys: sort (key, index), then gather keys and values.
    auto argsort = [&](auto index_tag) -> cudaError_t {
      using Index = decltype(index_tag);
      Index* idx_in = reinterpret_cast<Index*>(index_a);
      Index* idx_out = reinterpret_cast<Index*>(index_b);
      SORTD_CUDA_TRY(Iota(idx_in, n, stream));
      SORTD_CUDA_TRY((RunPasses<Word, Index, Tuning>(passes, keys_in, keys_scratch, keys_alt, idx_in, idx_out,
                                             reinterpret_cast<Index*>(values_alt), n, masks,
                                             offsets, status, tile_counters, stream)));
      SORTD_CUDA_TRY(GatherBytes<Index>(sizeof(Word), keys_in, idx_out, keys_out, n, stream));
      return GatherBytes<Index>(p.value_bytes, p.d_values_in, idx_out, p.d_values_out, n, stream);
    };
    return wide_index ? argsort(uint64_t{}) : argsort(uint32_t{});
  }
  switch (p.value_bytes) {
    case 0:
      return RunPasses<Word, NoValue, Tuning>(passes, keys_in, keys_out, keys_alt, nullptr, nullptr,
                                      nullptr, n, masks, offsets, status, tile_counters, stream);
    case 4:
      return RunPasses<Word, uint32_t, Tuning>(passes, keys_in, keys_out, keys_alt,
                                       static_cast<const uint32_t*>(p.d_values_in),
                                       static_cast<uint32_t*>(p.d_values_out),
                                       reinterpret_cast<uint32_t*>(values_alt), n, masks,
                                       offsets, status, tile_counters, stream);
    default:
      return RunPasses<Word, uint64_t, Tuning>(passes, keys_in, keys_out, keys_alt,
                                       static_cast<const uint64_t*>(p.d_values_in),
                                       static_cast<uint64_t*>(p.d_values_out),
                                       reinterpret_cast<uint64_t*>(values_alt), n, masks,
                                       offsets, status, tile_counters, stream);
  }
}

template <typename Tuning32, typename Tuning64>
cudaError_t RadixSortTuned(void* d_temp_storage, size_t& temp_storage_bytes,
                           const RadixSortProblem& problem, cudaStream_t stream,
                           RadixSortStats* stats) {
  if (RadixKeyBytes(problem.key_type) == 4) {
    return SortWords<uint32_t, Tuning32>(d_temp_storage, temp_storage_bytes, problem, stream, stats);
  }
  return SortWords<uint64_t, Tuning64>(d_temp_storage, temp_storage_bytes, problem, stream, stats);
}

#undef SORTD_CUDA_TRY

}  // namespace sortd::cuda::detail

#endif  // SORTD_CORE_CUDA_RADIX_SORT_IMPL_CUH_
