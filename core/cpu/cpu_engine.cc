// CPU engine. Numeric keys-only sorts run on the keys themselves (after
// moving NaNs aside for floats, so that their payloads and input order
// survive): our radix sort for 32-bit words, vqsort for 64-bit ones
// (core/cpu/vqsort_words.h). Sorts that need the permutation radix-sort the
// keys carrying their index (on one thread, or across the threads of an
// engine of at most 2), or else vqsort packed (ordered key, index) words,
// which makes vqsort stable. Byte strings
// use std::stable_sort on indices. Large arrays are split across threads and
// merged. Keys-only sessions are partitioned while their parts arrive
// (core/cpu/arriving_sort.h).
#include "core/cpu/cpu_engine.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/arriving_sort.h"
#include "core/cpu/parallel.h"
#include "core/cpu/vqsort_words.h"
#include "core/key_transform.h"

namespace sortd {
namespace {

class CpuEngine final : public SortEngine {
 public:
  explicit CpuEngine(const CpuEngineOptions& options) : options_(options) {
    if (options_.max_threads <= 0) {
      options_.max_threads =
          std::max(1u, std::thread::hardware_concurrency());
    }
  }

  EngineKind kind() const override { return EngineKind::kCpu; }

  // Pairs from the tuning's radix_min_pairs keys on one thread, or on an
  // engine of at most cpu::kRadixPermutationMaxThreads threads (across
  // them, see cpu::RadixSortPairsAcross): the radix sort moves the values with the keys
  // (no permutation, no gather). Elsewhere (smaller, above the parallel
  // threshold on more threads, floats with NaNs, whose payloads the ordered
  // words do not keep): argsort and gather, the engine default.
  absl::Status SortPairsNumeric(NumericSpan keys, void* values, size_t value_width,
                                SortOrder order) override {
    const size_t n = keys.size;
    const bool one_thread_wins = RadixPermutation(n);
    if (keys.type != DataType::kBytes && (value_width == 4 || value_width == 8) &&
        n >= cpu::ActiveCpuCrossovers().radix_min_pairs && n <= (size_t{1} << 32) && one_thread_wins &&
        keys.data != nullptr && values != nullptr) {
      const bool descending = order == SortOrder::kDescending;
      bool sorted = false;
      VisitNumeric(keys.type, [&](auto key_tag) {
        using T = decltype(key_tag);
        T* k = static_cast<T*>(keys.data);
        sorted = value_width == 4 ? SortPairsDirect(k, static_cast<uint32_t*>(values), n, descending)
                                  : SortPairsDirect(k, static_cast<uint64_t*>(values), n, descending);
      });
      if (sorted) return absl::OkStatus();
    }
    return SortEngine::SortPairsNumeric(keys, values, value_width, order);
  }

  // Keys-only arrays from the parallel threshold up are partitioned while
  // their parts land (core/cpu/arriving_sort.h); the others: UNAVAILABLE.
  absl::Status SortArriving(const ArrivingSort& sort) override {
    return cpu::SortKeysArriving(sort, {options_.max_threads, options_.parallel_threshold});
  }

  absl::Status SortNumeric(NumericSpan keys, SortOrder order,
                           absl::Span<uint64_t> indices) override {
    if (keys.type == DataType::kBytes) {
      return absl::InvalidArgumentError("keys: bytes keys are not numeric");
    }
    if (keys.size > 0 && keys.data == nullptr) {
      return absl::InvalidArgumentError("keys: null data");
    }
    if (!indices.empty() && indices.size() != keys.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("indices: size ", indices.size(), " != keys size ",
                       keys.size));
    }
    const bool descending = order == SortOrder::kDescending;
    const bool want_indices = !indices.empty();
    switch (keys.type) {
      case DataType::kUint32:
        return Dispatch(static_cast<uint32_t*>(keys.data), keys.size, descending, want_indices, indices);
      case DataType::kInt32:
        return Dispatch(static_cast<int32_t*>(keys.data), keys.size, descending, want_indices, indices);
      case DataType::kFloat32:
        return Dispatch(static_cast<float*>(keys.data), keys.size, descending, want_indices, indices);
      case DataType::kUint64:
        return Dispatch(static_cast<uint64_t*>(keys.data), keys.size, descending, want_indices, indices);
      case DataType::kInt64:
        return Dispatch(static_cast<int64_t*>(keys.data), keys.size, descending, want_indices, indices);
      case DataType::kFloat64:
        return Dispatch(static_cast<double*>(keys.data), keys.size, descending, want_indices, indices);
      case DataType::kBytes:
        break;
    }
    return absl::InvalidArgumentError("keys: unknown key type");
  }

  absl::Status ArgsortBytes(absl::Span<const std::string_view> keys,
                            SortOrder order,
                            absl::Span<uint64_t> indices) override {
    if (indices.size() != keys.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("indices: size ", indices.size(), " != keys size ",
                       keys.size()));
    }
    std::iota(indices.begin(), indices.end(), uint64_t{0});
    const std::string_view* k = keys.data();
    auto less = [k](uint64_t a, uint64_t b) { return LessBytes(k[a], k[b]); };
    auto greater = [k](uint64_t a, uint64_t b) { return LessBytes(k[b], k[a]); };
    if (order == SortOrder::kDescending) {
      SortStable(indices.data(), indices.size(), greater);
    } else {
      SortStable(indices.data(), indices.size(), less);
    }
    return absl::OkStatus();
  }

 private:
  // Unsigned lexicographic comparison, shorter prefix first.
  static bool LessBytes(std::string_view a, std::string_view b) {
    const size_t n = std::min(a.size(), b.size());
    const int c = n == 0 ? 0 : std::memcmp(a.data(), b.data(), n);
    return c < 0 || (c == 0 && a.size() < b.size());
  }

  int ThreadsFor(size_t n) const {
    return n >= options_.parallel_threshold ? options_.max_threads : 1;
  }

  // Argsorts and pairs take the radix routes below the parallel threshold,
  // and on engines of so few threads that the other parallel routes
  // measured slower (cpu::kRadixPermutationMaxThreads).
  bool RadixPermutation(size_t n) const {
    return ThreadsFor(n) == 1 || options_.max_threads <= cpu::kRadixPermutationMaxThreads;
  }

  template <typename T, typename Less>
  void SortStable(T* data, size_t n, Less less) {
    cpu::ParallelSort(data, n, ThreadsFor(n), less, [&](T* p, size_t len) {
      std::stable_sort(p, p + len, less);
    });
  }

  // Sorts words (core/cpu/vqsort_words.h), on one thread or partitioned
  // across threads by size.
  template <typename W>
  void SortWords(W* data, size_t n, bool descending) {
    cpu::SortWords(data, n, ThreadsFor(n), descending);
  }

  template <typename T>
  absl::Status Dispatch(T* keys, size_t n, bool descending, bool want_indices,
                        absl::Span<uint64_t> indices) {
    if (want_indices) {
      if constexpr (sizeof(T) == 8) {
        if (n >= cpu::ActiveCpuCrossovers().radix_min_argsort64 && n <= (size_t{1} << 32) &&
            RadixPermutation(n)) {
          ArgsortRadix64(keys, n, descending, indices.data());
          return absl::OkStatus();
        }
      }
      if constexpr (sizeof(T) == 4) {
        if (n >= cpu::ActiveCpuCrossovers().radix_min_argsort32 && n <= (size_t{1} << 32) &&
            RadixPermutation(n)) {
          ArgsortRadix32(keys, n, descending, indices.data());
          return absl::OkStatus();
        }
      }
      if (sizeof(T) == 4 && n <= (size_t{1} << 32)) {
        ArgsortPacked32(keys, n, descending, indices.data());
      } else {
        ArgsortPacked128(keys, n, descending, indices.data());
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      SortFloatKeys(keys, n, descending);
    } else {
      SortWords(keys, n, descending);
    }
    return absl::OkStatus();
  }

  // The usual case, no NaN: one branch-free pass maps the floats to ordered
  // words in place (negative: all bits flipped; positive: the sign bit set),
  // noting any NaN; then the sort and the inverse pass. Both passes
  // vectorise, where the general path below takes a branchy compaction pass
  // and NaN checks in each mapping (one thread, dev VM: f32 2^20 6.6-6.9 ->
  // 5.5-5.8 ms, 2^24 151-155 -> 128-135 ms). The mapping is a bijection on
  // every bit pattern, so an array with a NaN is mapped back exactly and
  // returns false.
  template <typename T>
  bool SortFloatKeysWithoutNaNs(T* keys, size_t n, bool descending) {
    using Word = typename OrderedBits<T>::Word;
    using SignedWord = std::make_signed_t<Word>;
    constexpr int kTopBit = sizeof(Word) * 8 - 1;
    constexpr Word kSign = Word{1} << kTopBit;
    constexpr Word kInfinity = static_cast<Word>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
    Word* words = reinterpret_cast<Word*>(keys);
    Word nan_seen = 0;
    for (size_t i = 0; i < n; ++i) {
      Word bits;
      std::memcpy(&bits, keys + i, sizeof(bits));
      nan_seen |= static_cast<Word>((bits & ~kSign) > kInfinity);
      const Word flip = static_cast<Word>(static_cast<SignedWord>(bits) >> kTopBit) | kSign;
      words[i] = bits ^ flip;
    }
    if (nan_seen == 0) SortWords(words, n, descending);
    for (size_t i = 0; i < n; ++i) {
      const Word word = words[i];
      const Word flip = static_cast<Word>(static_cast<SignedWord>(~word) >> kTopBit) | kSign;
      const Word bits = word ^ flip;
      std::memcpy(keys + i, &bits, sizeof(bits));
    }
    return nan_seen == 0;
  }

  // Keys-only float sort. NaNs are moved, in input order, to the end
  // (ascending) or the front (descending); the rest are mapped to ordered
  // unsigned words, sorted, and mapped back. Non-NaN floats are equal only
  // when bit-identical, so stability needs no index there.
  template <typename T>
  void SortFloatKeys(T* keys, size_t n, bool descending) {
    using Bits = OrderedBits<T>;
    using Word = typename Bits::Word;
    static_assert(sizeof(Word) == sizeof(T));
    if (SortFloatKeysWithoutNaNs(keys, n, descending)) return;
    std::vector<T> nans;
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      T k = keys[i];
      if (k != k) {
        nans.push_back(k);
      } else {
        keys[kept++] = k;
      }
    }
    T* numbers = keys;
    if (descending && !nans.empty()) {
      std::memmove(keys + nans.size(), keys, kept * sizeof(T));
      std::memcpy(keys, nans.data(), nans.size() * sizeof(T));
      numbers = keys + nans.size();
    } else if (!nans.empty()) {
      std::memcpy(keys + kept, nans.data(), nans.size() * sizeof(T));
    }
    Word* words = reinterpret_cast<Word*>(numbers);
    for (size_t i = 0; i < kept; ++i) {
      words[i] = Bits::Encode(numbers[i]);
    }
    SortWords(words, kept, descending);
    for (size_t i = 0; i < kept; ++i) {
      numbers[i] = Bits::Decode(words[i]);
    }
  }

  // Stable argsort of 32-bit keys: sort (ordered key << 32 | index) words
  // ascending; descending flips the key bits so that equal keys still keep
  // ascending indices. The words live in the caller's index buffer, each
  // replaced by its index as it is read back: no memory of its own (fresh
  // memory per call cost more than the sort below 2^17 keys: page faults).
  template <typename T>
  void ArgsortPacked32(T* keys, size_t n, bool descending, uint64_t* indices) {
    using Bits = OrderedBits<T>;
    const uint32_t flip = descending ? ~uint32_t{0} : 0;
    uint64_t* packed = indices;
    bool has_nan = false;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t word = static_cast<uint32_t>(Bits::Encode(keys[i]));
      has_nan |= keys[i] != keys[i];
      packed[i] = (uint64_t{word ^ flip} << 32) | i;
    }
    std::vector<T> originals;
    if (has_nan) originals.assign(keys, keys + n);
    SortWords(packed, n, /*descending=*/false);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t word = packed[i];
      const uint64_t index = word & 0xffffffffu;
      indices[i] = index;
      keys[i] = has_nan ? originals[index] : Bits::Decode(static_cast<uint32_t>(word >> 32) ^ flip);
    }
  }

  // Keys mapped to ordered words in place, sorted with the values riding
  // along (stable; descending reverses the key order only), mapped back.
  // False, untouched, when a float key is a NaN (all NaNs map to one word:
  // their payloads would be lost).
  template <typename T, typename V>
  bool SortPairsDirect(T* keys, V* values, size_t n, bool descending) {
    using Bits = OrderedBits<T>;
    using Word = typename Bits::Word;
    static_assert(sizeof(Word) == sizeof(T));
    if constexpr (std::is_floating_point_v<T>) {
      for (size_t i = 0; i < n; ++i) {
        if (keys[i] != keys[i]) return false;
      }
    }
    Word* words = reinterpret_cast<Word*>(keys);
    for (size_t i = 0; i < n; ++i) words[i] = Bits::Encode(keys[i]);
    const cpu::ScratchLease scratch(cpu::RadixPairsScratchBytes<Word, V>(n));
    cpu::RadixSortPairsAcross(ThreadsFor(n), words, values, n, descending, scratch.as<void>());
    for (size_t i = 0; i < n; ++i) keys[i] = Bits::Decode(words[i]);
    return true;
  }

  // Stable argsort of 32-bit keys by the radix sort (n <= 2^32; across the
  // threads where RadixSortPairsAcross does): it moves each ordered key with
  // its 32-bit index. Its arrays live in the
  // caller's index buffer (8 bytes a key: n words, then n 32-bit indices),
  // so the sort's scratch is its only other memory: on the development VM
  // fresh memory costs about a radix pass (docs/benchmarks.md).
  template <typename T>
  void ArgsortRadix32(T* keys, size_t n, bool descending, uint64_t* indices) {
    using Bits = OrderedBits<T>;
    static_assert(sizeof(typename Bits::Word) == 4);
    unsigned char* raw = reinterpret_cast<unsigned char*>(indices);
    uint32_t* words = reinterpret_cast<uint32_t*>(raw);
    uint32_t* index = words + n;
    bool has_nan = false;
    for (size_t i = 0; i < n; ++i) {
      has_nan |= keys[i] != keys[i];
      words[i] = static_cast<uint32_t>(Bits::Encode(keys[i]));
      index[i] = static_cast<uint32_t>(i);
    }
    std::vector<T> originals;
    if (has_nan) originals.assign(keys, keys + n);
    const cpu::ScratchLease scratch(cpu::RadixPairsScratchBytes<uint32_t, uint32_t>(n));
    cpu::RadixSortPairsAcross(ThreadsFor(n), words, index, n, descending, scratch.as<void>());
    for (size_t i = 0; i < n; ++i) {
      keys[i] = has_nan ? originals[index[i]] : Bits::Decode(words[i]);
    }
    // Widen the 32-bit indices in place, front to back: the 8 bytes of
    // indices[i] cover indices 2i - n and 2i - n + 1 of the 32-bit array,
    // both already read. Bytes (memcpy) because the two views overlap.
    for (size_t i = 0; i < n; ++i) {
      uint32_t from;
      std::memcpy(&from, raw + 4 * (n + i), sizeof(from));
      const uint64_t wide = from;
      std::memcpy(raw + 8 * i, &wide, sizeof(wide));
    }
  }

  // Stable argsort of 64-bit keys by the radix sort (n <= 2^32; across the
  // threads where RadixSortPairsAcross does): it moves each ordered key with
  // its 32-bit index; descending reverses the
  // key order only, so equal keys keep ascending indices. The words live in
  // the caller's index buffer (one 8-byte word per slot, replaced by the
  // index as it is read back).
  template <typename T>
  void ArgsortRadix64(T* keys, size_t n, bool descending, uint64_t* indices) {
    using Bits = OrderedBits<T>;
    using Word = typename Bits::Word;
    static_assert(sizeof(Word) == 8 && std::is_same_v<Word, uint64_t>);
    Word* words = indices;
    // The 32-bit indices, then the sort's scratch: one block (reused per
    // thread up to a size).
    const size_t index_bytes = (n * sizeof(uint32_t) + 7) & ~size_t{7};
    const cpu::ScratchLease scratch(index_bytes + cpu::RadixPairsScratchBytes<Word, uint32_t>(n));
    uint32_t* index = scratch.as<uint32_t>();
    void* sort_scratch = scratch.as<unsigned char>() + index_bytes;
    bool has_nan = false;
    for (size_t i = 0; i < n; ++i) {
      has_nan |= keys[i] != keys[i];
      words[i] = Bits::Encode(keys[i]);
      index[i] = static_cast<uint32_t>(i);
    }
    std::vector<T> originals;
    if (has_nan) originals.assign(keys, keys + n);
    cpu::RadixSortPairsAcross(ThreadsFor(n), words, index, n, descending, sort_scratch);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t from = index[i];
      const Word word = words[i];
      indices[i] = from;
      keys[i] = has_nan ? originals[from] : Bits::Decode(word);
    }
  }

  // Same for 64-bit keys across threads (or more than 2^32 keys): 128-bit
  // words, index in the low half.
  template <typename T>
  void ArgsortPacked128(T* keys, size_t n, bool descending, uint64_t* indices) {
    using Bits = OrderedBits<T>;
    using Word = typename Bits::Word;
    const Word flip = descending ? ~Word{0} : 0;
    const cpu::ScratchLease scratch(n * sizeof(hwy::uint128_t));
    hwy::uint128_t* packed = scratch.as<hwy::uint128_t>();
    bool has_nan = false;
    for (size_t i = 0; i < n; ++i) {
      has_nan |= keys[i] != keys[i];
      packed[i].hi = static_cast<uint64_t>(Bits::Encode(keys[i]) ^ flip);
      packed[i].lo = i;
    }
    std::vector<T> originals;
    if (has_nan) originals.assign(keys, keys + n);
    SortWords(packed, n, /*descending=*/false);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t index = packed[i].lo;
      indices[i] = index;
      keys[i] = has_nan ? originals[index]
                        : Bits::Decode(static_cast<Word>(packed[i].hi) ^ flip);
    }
  }

  CpuEngineOptions options_;
};

}  // namespace

std::unique_ptr<SortEngine> CreateCpuEngine(const CpuEngineOptions& options) {
  cpu::PinCpuTuning(options.tuning);
  return std::make_unique<CpuEngine>(options);
}

}  // namespace sortd
