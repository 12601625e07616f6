// The radix sort of core/cpu/radix_sort.h across threads, for 4- and 8-byte
// integer keys, alone or with their values: each thread counts the top
// digit of its part of the keys, scatters that part into the scratch array
// (every thread has its own place in every bucket, after the threads
// before it: stable), then each thread sorts a contiguous run of buckets
// back into the keys in cache. One pass over memory and the in-cache
// passes, where the sample partition of core/cpu/parallel.h adds a
// partition scatter into fresh memory and a copy back.
#ifndef SORTD_CORE_CPU_PARALLEL_RADIX_H_
#define SORTD_CORE_CPU_PARALLEL_RADIX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/cpu/parallel.h"
#include "core/cpu/radix_sort.h"

namespace sortd::cpu {
namespace radix_internal {

// What the scratch holds: keys, or records for pairs.
template <typename K, typename V>
struct ScratchOf {
  using type = Record<K, V>;
};
template <typename K>
struct ScratchOf<K, void> {
  using type = K;
};

// V = void: keys only, `scratch` holds n keys; else pairs, `scratch` n
// Records (RadixPairsScratchBytes). False, nothing touched, when the top
// digit could leave the threads unevenly loaded.
template <typename K, typename V>
bool ParallelRadixSort(K* keys, V* values, size_t n, bool descending, void* scratch, int threads) {
  using U = Unsigned<K>;
  constexpr bool kPairs = !std::is_void_v<V>;
  if (n > UINT32_MAX || threads < 1) return false;
  const U key_xor = KeyXor<K>(descending);
  constexpr int kTop = kPasses<K> - 1;
  constexpr int kShift = kTop * kRadixBits;
  constexpr U kMask = kBuckets - 1;
  auto digit = [key_xor](K k) { return ((static_cast<U>(k) ^ key_xor) >> kShift) & kMask; };

  // A bucket of more than a quarter of a thread's share (uniform keys put
  // 1/256 of them in each) declines. A sample first, so that skewed keys
  // (floats of a few binades, say) decline without counting them all.
  constexpr size_t kSample = 1024;
  if (n >= 4 * kSample) {
    uint32_t sampled[kBuckets] = {};
    for (size_t i = 0; i < kSample; ++i) ++sampled[digit(keys[i * (n / kSample)])];
    if (*std::max_element(sampled, sampled + kBuckets) * 4 * static_cast<size_t>(threads) > kSample) {
      return false;
    }
  }
  std::vector<uint32_t> counts(static_cast<size_t>(threads) * kBuckets, 0);
  RunTasks(threads, [&](int t) {
    uint32_t local[kBuckets] = {};
    for (size_t i = PartBegin(n, threads, t), e = PartBegin(n, threads, t + 1); i < e; ++i) {
      ++local[digit(keys[i])];
    }
    std::copy(local, local + kBuckets, counts.begin() + static_cast<size_t>(t) * kBuckets);
  });
  // Bucket b starts at bucket_begin[b]; within it thread t writes from
  // offsets[t][b].
  std::vector<uint32_t> offsets(counts.size());
  std::vector<size_t> bucket_begin(kBuckets + 1);
  size_t running = 0;
  size_t largest = 0;
  for (size_t b = 0; b < kBuckets; ++b) {
    bucket_begin[b] = running;
    for (int t = 0; t < threads; ++t) {
      offsets[static_cast<size_t>(t) * kBuckets + b] = static_cast<uint32_t>(running);
      running += counts[static_cast<size_t>(t) * kBuckets + b];
    }
    largest = std::max(largest, running - bucket_begin[b]);
  }
  bucket_begin[kBuckets] = n;
  if (largest * 4 * static_cast<size_t>(threads) > n) return false;

  auto* out = static_cast<typename ScratchOf<K, V>::type*>(scratch);
  RunTasks(threads, [&](int t) {
    uint32_t next[kBuckets];
    std::copy(offsets.begin() + static_cast<size_t>(t) * kBuckets,
              offsets.begin() + static_cast<size_t>(t + 1) * kBuckets, next);
    for (size_t i = PartBegin(n, threads, t), e = PartBegin(n, threads, t + 1); i < e; ++i) {
      const K k = keys[i];
      const uint32_t pos = next[digit(k)]++;
      __builtin_prefetch(reinterpret_cast<const char*>(out + pos) + 64, 1);
      if constexpr (kPairs) {
        out[pos] = {k, values[i]};
      } else {
        out[pos] = k;
      }
    }
  });
  // Thread t sorts the buckets whose middle falls in its share of [0, n).
  RunTasks(threads, [&](int t) {
    const size_t lo = PartBegin(n, threads, t), hi = PartBegin(n, threads, t + 1);
    for (size_t b = 0; b < kBuckets; ++b) {
      const size_t begin = bucket_begin[b], len = bucket_begin[b + 1] - begin;
      const size_t middle = begin + len / 2;
      if (len == 0 || middle < lo || middle >= hi) continue;
      if constexpr (kPairs) {
        SortSplitRecordBucket<K, V, uint32_t>(keys, values, out, begin, len, key_xor, 0, kTop);
      } else {
        SortSplitBucket<K, uint32_t>(keys, out, begin, len, key_xor, 0, kTop);
      }
    }
  });
  return true;
}

}  // namespace radix_internal

// Sorts keys[0, n) across `threads` (>= 1) with `scratch` (n keys, contents
// ignored and clobbered); same result as RadixSortKeys. Returns false, keys
// untouched, when the top digit could leave the threads unevenly loaded (a
// bucket of more than a quarter of a thread's share, e.g. keys that all
// share their top byte): the caller then takes another route.
template <typename K>
bool ParallelRadixSortKeys(K* keys, size_t n, bool descending, K* scratch, int threads) {
  static_assert(std::is_integral_v<K> && (sizeof(K) == 4 || sizeof(K) == 8));
  return radix_internal::ParallelRadixSort<K, void>(keys, nullptr, n, descending, scratch, threads);
}

// RadixSortPairs across `threads`; scratch: RadixPairsScratchBytes<K, V>(n)
// bytes, 4-byte aligned. False, nothing touched, as above.
template <typename K, typename V>
bool ParallelRadixSortPairs(K* keys, V* values, size_t n, bool descending, void* scratch, int threads) {
  static_assert(std::is_integral_v<K> && (sizeof(K) == 4 || sizeof(K) == 8));
  static_assert(std::is_trivially_copyable_v<V> && (sizeof(V) == 4 || sizeof(V) == 8));
  return radix_internal::ParallelRadixSort<K, V>(keys, values, n, descending, scratch, threads);
}

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_PARALLEL_RADIX_H_
