// Single-thread LSD radix sort of 32/64-bit integer keys, alone or carrying a
// 32/64-bit payload (stable, so argsort needs no packed words). Arrays beyond
// the caches are first split by their top digit, then each bucket is sorted
// in cache; pairs travel through that split as records (key beside value).
// The CPU engine uses it above the sizes where it measures faster than
// vqsort (core/cpu/vqsort_words.h).
#ifndef SORTD_CORE_CPU_RADIX_SORT_H_
#define SORTD_CORE_CPU_RADIX_SORT_H_

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>


namespace sortd::cpu {

// Passes of kRadixBits bits each: 8 measured faster than 11 on this VM for
// both widths (docs/benchmarks.md "CPU engine"): 256 write streams stay in
// L1 and in the TLB, 2048 do not.
inline constexpr int kRadixBits = 8;

namespace radix_internal {

template <typename K>
using Unsigned = std::make_unsigned_t<K>;

// XORed into every key before its digits are taken: the sign bit for signed
// keys (two's complement order), all bits for descending.
template <typename K>
constexpr Unsigned<K> KeyXor(bool descending) {
  using U = Unsigned<K>;
  const U sign = std::is_signed_v<K> ? U(U{1} << (sizeof(U) * 8 - 1)) : U{0};
  return descending ? U(~sign) : sign;
}

template <typename K>
inline constexpr int kPasses = (sizeof(K) * 8 + kRadixBits - 1) / kRadixBits;
inline constexpr size_t kBuckets = size_t{1} << kRadixBits;
#ifndef SORTD_RADIX_PREFETCH_MIN
#define SORTD_RADIX_PREFETCH_MIN (size_t{16} << 20)
#endif
inline constexpr size_t kPrefetchMinBytes = SORTD_RADIX_PREFETCH_MIN;
#ifndef SORTD_RADIX_LSD_MAX
#define SORTD_RADIX_LSD_MAX (size_t{1} << 20)
#endif
inline constexpr size_t kLsdMaxBytes = SORTD_RADIX_LSD_MAX;

// Counts digits [0, kDigits) of every key, one read.
template <int kDigits, typename K, typename Count>
void CountDigits(const K* keys, size_t n, Unsigned<K> key_xor, Count (*counts)[kBuckets]) {
  constexpr Unsigned<K> mask = kBuckets - 1;
  for (size_t i = 0; i < n; ++i) {
    const Unsigned<K> k = static_cast<Unsigned<K>>(keys[i]) ^ key_xor;
    for (int p = 0; p < kDigits; ++p) ++counts[p][(k >> (p * kRadixBits)) & mask];
  }
}

// One read of the keys counts the digits of passes [low, high) into
// counts[0, high - low). Count is uint32_t when n fits: half the cache
// footprint of size_t counters.
template <typename K, typename Count>
void Histograms(const K* keys, size_t n, Unsigned<K> key_xor, int low, int high,
                Count (*counts)[kBuckets]) {
  constexpr Unsigned<K> mask = kBuckets - 1;
  std::memset(counts, 0, sizeof(Count) * kBuckets * (high - low));
  // The usual cases, every digit or all below an MSD split, as loops the
  // compiler unrolls: with the digit range known only at run time the
  // count takes 1.5x as long (measured: u32 2^24, buckets' counts 14 ms).
  if (low == 0 && (high == kPasses<K> || high == kPasses<K> - 1)) {
    if (high == kPasses<K>) {
      CountDigits<kPasses<K>>(keys, n, key_xor, counts);
    } else {
      CountDigits<kPasses<K> - 1>(keys, n, key_xor, counts);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const Unsigned<K> k = static_cast<Unsigned<K>>(keys[i]) ^ key_xor;
    for (int p = low; p < high; ++p) ++counts[p - low][(k >> (p * kRadixBits)) & mask];
  }
}

// Moves src to dst ordered by the digit at `shift`, stably; `next` holds each
// bucket's first output position and is advanced. kPrefetch: announce the
// write one cache line ahead in the same bucket, so that the line's read
// for ownership overlaps the writes before it (arrays beyond the caches).
// Keys alone go four at a time, loaded and their digits taken before any
// is stored: the compiler cannot move a load of src above a store to dst
// (they might alias), and grouping the loads measured 5-11% faster for
// whole sorts (dev VM, u32 2^16-2^24, u64 2^20-2^22).
template <bool kPrefetch, typename K, typename V, typename Count>
void Scatter(const K* src, K* dst, const V* vsrc, V* vdst, size_t n, int shift,
             Unsigned<K> key_xor, Count* next) {
  constexpr Unsigned<K> mask = kBuckets - 1;
  size_t i = 0;
  if constexpr (std::is_void_v<V>) {
    auto digit = [&](K k) -> size_t { return ((static_cast<Unsigned<K>>(k) ^ key_xor) >> shift) & mask; };
    auto put = [&](K k, size_t d) {
      const Count pos = next[d]++;
      if constexpr (kPrefetch) __builtin_prefetch(reinterpret_cast<const char*>(dst + pos) + 64, 1);
      dst[pos] = k;
    };
    for (; i + 4 <= n; i += 4) {
      const K k0 = src[i], k1 = src[i + 1], k2 = src[i + 2], k3 = src[i + 3];
      const size_t d0 = digit(k0), d1 = digit(k1), d2 = digit(k2), d3 = digit(k3);
      put(k0, d0);
      put(k1, d1);
      put(k2, d2);
      put(k3, d3);
    }
  }
  for (; i < n; ++i) {
    const K k = src[i];
    const size_t d = ((static_cast<Unsigned<K>>(k) ^ key_xor) >> shift) & mask;
    const Count pos = next[d]++;
    if constexpr (kPrefetch) {
      __builtin_prefetch(reinterpret_cast<const char*>(dst + pos) + 64, 1);
      if constexpr (!std::is_void_v<V>) {
        __builtin_prefetch(reinterpret_cast<const char*>(vdst + pos) + 64, 1);
      }
    }
    dst[pos] = k;
    if constexpr (!std::is_void_v<V>) vdst[pos] = vsrc[i];
  }
}

template <typename K, typename V>
constexpr size_t ElementBytes() {
  if constexpr (std::is_void_v<V>) {
    return sizeof(K);
  } else {
    return sizeof(K) + sizeof(V);
  }
}

// Scatter by one digit, prefetching where the arrays exceed the caches.
template <typename K, typename V, typename Count>
void ScatterPass(const K* src, K* dst, const V* vsrc, V* vdst, size_t n, int shift,
                 Unsigned<K> key_xor, const Count* counts) {
  Count next[kBuckets];
  Count running = 0;
  for (size_t b = 0; b < kBuckets; ++b) {
    next[b] = running;
    running += counts[b];
  }
  if (n * ElementBytes<K, V>() >= kPrefetchMinBytes) {
    Scatter<true>(src, dst, vsrc, vdst, n, shift, key_xor, next);
  } else {
    Scatter<false>(src, dst, vsrc, vdst, n, shift, key_xor, next);
  }
}

// LSD on digits [low, high): one histogram read, then one scatter per digit
// that is not the same in every key, ping-ponging with the scratch arrays.
// Returns true when the result ended in the scratch arrays.
template <typename K, typename V, typename Count>
bool LsdSort(K* keys, V* values, size_t n, Unsigned<K> key_xor, int low, int high,
             K* key_scratch, V* value_scratch) {
  Count counts[kPasses<K>][kBuckets];
  Histograms(keys, n, key_xor, low, high, counts);
  const Unsigned<K> first = static_cast<Unsigned<K>>(keys[0]) ^ key_xor;
  K* src = keys;
  K* dst = key_scratch;
  V* vsrc = values;
  V* vdst = value_scratch;
  bool in_scratch = false;
  for (int p = low; p < high; ++p) {
    const int shift = p * kRadixBits;
    if (counts[p - low][(first >> shift) & (kBuckets - 1)] == n) continue;
    ScatterPass(src, dst, vsrc, vdst, n, shift, key_xor, counts[p - low]);
    std::swap(src, dst);
    std::swap(vsrc, vdst);
    in_scratch = !in_scratch;
  }
  return in_scratch;
}

template <typename K, typename V>
void CopyElements(const K* keys, const V* values, size_t n, K* key_dst, V* value_dst) {
  std::memcpy(key_dst, keys, n * sizeof(K));
  if constexpr (!std::is_void_v<V>) std::memcpy(value_dst, values, n * sizeof(V));
}

// Counts the digit at `shift` of every key (an MSD split's one read); true
// when every key has the same digit there, so the split can be skipped.
template <typename K, typename Count>
bool CountOneDigit(const K* keys, size_t n, int shift, Unsigned<K> key_xor, Count* counts) {
  constexpr Unsigned<K> mask = kBuckets - 1;
  std::fill(counts, counts + kBuckets, Count{0});
  for (size_t i = 0; i < n; ++i) {
    ++counts[((static_cast<Unsigned<K>>(keys[i]) ^ key_xor) >> shift) & mask];
  }
  return counts[((static_cast<Unsigned<K>>(keys[0]) ^ key_xor) >> shift) & mask] == n;
}

template <typename K, typename Count>
void HybridSort(K* keys, size_t n, Unsigned<K> key_xor, int low, int high, K* scratch);

// One bucket [begin, begin + len) that an MSD split by digit `top` left in
// the scratch, sorted on digits [low, top) back into the keys: by LSD in
// cache, or split again when skewed keys made it too large.
template <typename K, typename Count>
void SortSplitBucket(K* keys, K* scratch, size_t begin, size_t len, Unsigned<K> key_xor, int low, int top) {
  K* bucket = scratch + begin;
  if (len * sizeof(K) > kLsdMaxBytes) {  // skewed keys: split again
    HybridSort<K, Count>(bucket, len, key_xor, low, top, keys + begin);
    std::memcpy(keys + begin, bucket, len * sizeof(K));
  } else if (len > 0 && !LsdSort<K, void, Count>(bucket, nullptr, len, key_xor, low, top, keys + begin, nullptr)) {
    std::memcpy(keys + begin, bucket, len * sizeof(K));
  }
}

// Sorts keys on digits [low, high), result in keys (pairs take
// HybridSortPairs). Arrays larger than kLsdMaxBytes are first split by
// their top digit (one MSD scatter into the scratch), and each bucket,
// small enough to stay in cache, is sorted by LSD on the digits below it
// back into the keys: every pass after the first then runs in cache
// instead of over memory.
template <typename K, typename Count>
void HybridSort(K* keys, size_t n, Unsigned<K> key_xor, int low, int high, K* scratch) {
  if (n < 2 || high <= low) return;
  if (high - low == 1 || n * sizeof(K) <= kLsdMaxBytes) {
    if (LsdSort<K, void, Count>(keys, nullptr, n, key_xor, low, high, scratch, nullptr)) {
      std::memcpy(keys, scratch, n * sizeof(K));
    }
    return;
  }
  const int top = high - 1;
  const int shift = top * kRadixBits;
  Count counts[kBuckets];
  if (CountOneDigit(keys, n, shift, key_xor, counts)) {
    HybridSort<K, Count>(keys, n, key_xor, low, top, scratch);
    return;
  }
  ScatterPass<K, void>(keys, scratch, nullptr, nullptr, n, shift, key_xor, counts);
  size_t begin = 0;
  for (size_t b = 0; b < kBuckets; ++b) {
    SortSplitBucket<K, Count>(keys, scratch, begin, counts[b], key_xor, low, top);
    begin += counts[b];
  }
}

// A key beside its value: the layout of the pairs' MSD pass and in-cache
// passes. Keys and values in two arrays mean two write streams per bucket:
// 512 for a byte digit, more than L1 holds lines for; measured on the
// development VM (u32 keys, u32 values, 2^24): the MSD scatter 70 -> 35 ms,
// the whole sort 165 -> 115 ms. Packed to 4 bytes: 12-byte records for
// mixed widths (x86 loads them unaligned at no cost).
#pragma pack(push, 4)
template <typename K, typename V>
struct Record {
  K key;
  V value;
};
#pragma pack(pop)

// The in-cache passes' second buffer, one per thread (kLsdMaxBytes, kept,
// 16-byte aligned): a bucket's records ping-pong between the scratch block
// and it; small pairs sorts take their key and value scratch from it.
inline unsigned char* RecordBuffer() {
  thread_local std::unique_ptr<unsigned char[]> buffer(new unsigned char[kLsdMaxBytes]);
  return buffer.get();
}

// Scatters records by the digit at `shift`; `next` as in Scatter, and
// four at a time as Scatter's keys (u32/u32 2^20 pairs 5% faster on the
// dev VM). kSplit: writes keys and values to their own arrays (the last
// pass).
template <bool kSplit, typename K, typename V, typename Count>
void ScatterRecords(const Record<K, V>* src, Record<K, V>* dst, K* keys, V* values, size_t n,
                    int shift, Unsigned<K> key_xor, Count* next) {
  constexpr Unsigned<K> mask = kBuckets - 1;
  auto digit = [&](const Record<K, V>& r) -> size_t {
    return ((static_cast<Unsigned<K>>(r.key) ^ key_xor) >> shift) & mask;
  };
  auto put = [&](const Record<K, V>& r, size_t d) {
    const Count pos = next[d]++;
    if constexpr (kSplit) {
      keys[pos] = r.key;
      values[pos] = r.value;
    } else {
      dst[pos] = r;
    }
  };
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const Record<K, V> r0 = src[i], r1 = src[i + 1], r2 = src[i + 2], r3 = src[i + 3];
    const size_t d0 = digit(r0), d1 = digit(r1), d2 = digit(r2), d3 = digit(r3);
    put(r0, d0);
    put(r1, d1);
    put(r2, d2);
    put(r3, d3);
  }
  for (; i < n; ++i) put(src[i], digit(src[i]));
}

// LSD on digits [low, high) of a bucket of records that fits the caches,
// the result split into keys/values: passes ping-pong between `records`
// and the thread's RecordBuffer, the last one writes the two arrays.
template <typename K, typename V, typename Count>
void LsdSortRecords(Record<K, V>* records, size_t n, K* keys, V* values, Unsigned<K> key_xor,
                    int low, int high) {
  constexpr Unsigned<K> mask = kBuckets - 1;
  Count counts[kPasses<K>][kBuckets];
  std::memset(counts, 0, sizeof(Count) * kBuckets * (high - low));
  if (low == 0 && high == kPasses<K> - 1) {  // below an MSD split: a loop the compiler unrolls
    for (size_t i = 0; i < n; ++i) {
      const Unsigned<K> k = static_cast<Unsigned<K>>(records[i].key) ^ key_xor;
      for (int p = 0; p < kPasses<K> - 1; ++p) ++counts[p][(k >> (p * kRadixBits)) & mask];
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      const Unsigned<K> k = static_cast<Unsigned<K>>(records[i].key) ^ key_xor;
      for (int p = low; p < high; ++p) ++counts[p - low][(k >> (p * kRadixBits)) & mask];
    }
  }
  const Unsigned<K> first = static_cast<Unsigned<K>>(records[0].key) ^ key_xor;
  int passes[kPasses<K>];
  int count = 0;
  for (int p = low; p < high; ++p) {
    if (counts[p - low][(first >> (p * kRadixBits)) & mask] != n) passes[count++] = p;
  }
  Record<K, V>* src = records;
  Record<K, V>* dst = reinterpret_cast<Record<K, V>*>(RecordBuffer());
  for (int i = 0; i < count; ++i) {
    const int p = passes[i];
    Count next[kBuckets];
    Count running = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
      next[b] = running;
      running += counts[p - low][b];
    }
    if (i + 1 == count) {
      ScatterRecords<true>(src, dst, keys, values, n, p * kRadixBits, key_xor, next);
      return;
    }
    ScatterRecords<false>(src, dst, keys, values, n, p * kRadixBits, key_xor, next);
    std::swap(src, dst);
  }
  for (size_t i = 0; i < n; ++i) {  // every digit the same: unpack as they are
    keys[i] = src[i].key;
    values[i] = src[i].value;
  }
}

template <typename K, typename V, typename Count>
void HybridSortPairs(K* keys, V* values, size_t n, Unsigned<K> key_xor, int low, int high,
                     Record<K, V>* records);

// One bucket [begin, begin + len) of records that an MSD split by digit
// `top` left in `records`, sorted on digits [low, top) into keys/values: by
// LsdSortRecords in cache, or unpacked and split again when skewed keys
// made it too large.
template <typename K, typename V, typename Count>
void SortSplitRecordBucket(K* keys, V* values, Record<K, V>* records, size_t begin, size_t len,
                           Unsigned<K> key_xor, int low, int top) {
  if (len * sizeof(Record<K, V>) > kLsdMaxBytes) {
    for (size_t i = 0; i < len; ++i) {
      keys[begin + i] = records[begin + i].key;
      values[begin + i] = records[begin + i].value;
    }
    HybridSortPairs<K, V, Count>(keys + begin, values + begin, len, key_xor, low, top, records + begin);
  } else if (len > 0) {
    LsdSortRecords<K, V, Count>(records + begin, len, keys + begin, values + begin, key_xor, low, top);
  }
}

// Pairs on digits [low, high), result in keys/values; `records`: scratch
// for n records (4-byte aligned: a skewed bucket's part of the block).
// Small arrays: LSD on the two arrays, their scratch carved from the
// thread's RecordBuffer, which is aligned for both. Larger: an MSD scatter
// by the top digit into records, then each bucket by LsdSortRecords back
// into keys/values; a bucket still too large (skewed keys) is unpacked and
// split again by the next digit (on the last digit the scatter alone
// sorts it).
template <typename K, typename V, typename Count>
void HybridSortPairs(K* keys, V* values, size_t n, Unsigned<K> key_xor, int low, int high,
                     Record<K, V>* records) {
  if (n < 2 || high <= low) return;
  if (n * sizeof(Record<K, V>) <= kLsdMaxBytes) {
    // Values first when wider: both arrays then start aligned.
    unsigned char* block = RecordBuffer();
    K* key_scratch;
    V* value_scratch;
    if constexpr (sizeof(V) > sizeof(K)) {
      value_scratch = reinterpret_cast<V*>(block);
      key_scratch = reinterpret_cast<K*>(block + n * sizeof(V));
    } else {
      key_scratch = reinterpret_cast<K*>(block);
      value_scratch = reinterpret_cast<V*>(block + n * sizeof(K));
    }
    if (LsdSort<K, V, Count>(keys, values, n, key_xor, low, high, key_scratch, value_scratch)) {
      CopyElements(key_scratch, value_scratch, n, keys, values);
    }
    return;
  }
  const int top = high - 1;
  const int shift = top * kRadixBits;
  constexpr Unsigned<K> mask = kBuckets - 1;
  Count counts[kBuckets];
  if (CountOneDigit(keys, n, shift, key_xor, counts)) {
    HybridSortPairs<K, V, Count>(keys, values, n, key_xor, low, top, records);
    return;
  }
  Count next[kBuckets];
  Count running = 0;
  for (size_t b = 0; b < kBuckets; ++b) {
    next[b] = running;
    running += counts[b];
  }
  for (size_t i = 0; i < n; ++i) {  // arrays beyond the caches: prefetch as Scatter does
    const K k = keys[i];
    const size_t d = ((static_cast<Unsigned<K>>(k) ^ key_xor) >> shift) & mask;
    const Count pos = next[d]++;
    __builtin_prefetch(reinterpret_cast<const char*>(records + pos) + 64, 1);
    records[pos] = Record<K, V>{k, values[i]};
  }
  size_t begin = 0;
  for (size_t b = 0; b < kBuckets; ++b) {
    SortSplitRecordBucket<K, V, Count>(keys, values, records, begin, counts[b], key_xor, low, top);
    begin += counts[b];
  }
}

template <typename K, typename V>
void SortPairs(K* keys, V* values, size_t n, bool descending, void* scratch) {
  if (n < 2) return;
  const Unsigned<K> key_xor = KeyXor<K>(descending);
  auto* records = static_cast<Record<K, V>*>(scratch);
  if (n <= UINT32_MAX) {
    HybridSortPairs<K, V, uint32_t>(keys, values, n, key_xor, 0, kPasses<K>, records);
  } else {
    HybridSortPairs<K, V, size_t>(keys, values, n, key_xor, 0, kPasses<K>, records);
  }
}

template <typename K>
void SortKeys(K* keys, size_t n, bool descending, int low, K* scratch) {
  if (n < 2) return;
  const Unsigned<K> key_xor = KeyXor<K>(descending);
  if (n <= UINT32_MAX) {
    HybridSort<K, uint32_t>(keys, n, key_xor, low, kPasses<K>, scratch);
  } else {
    HybridSort<K, size_t>(keys, n, key_xor, low, kPasses<K>, scratch);
  }
}

}  // namespace radix_internal

// Sorts keys[0, n) (uint32_t, int32_t, uint64_t or int64_t) ascending, or
// descending. scratch: n keys, contents ignored and clobbered.
template <typename K>
void RadixSortKeys(K* keys, size_t n, bool descending, K* scratch) {
  static_assert(std::is_integral_v<K> && (sizeof(K) == 4 || sizeof(K) == 8));
  radix_internal::SortKeys(keys, n, descending, 0, scratch);
}

// Stable sort of unsigned words by their bits from ignored_low_bits (a
// multiple of kRadixBits) up: the low bits are a payload packed under the
// key, e.g. (key << 32 | index) words sort by key and keep input order
// among equal keys. Ascending only (flip the key bits for descending).
template <typename W>
void RadixSortWordsAbove(W* words, size_t n, int ignored_low_bits, W* scratch) {
  static_assert(std::is_unsigned_v<W> && (sizeof(W) == 4 || sizeof(W) == 8));
  radix_internal::SortKeys(words, n, /*descending=*/false, ignored_low_bits / kRadixBits, scratch);
}

// Bytes of scratch RadixSortPairs needs: n keys and n values in one block.
template <typename K, typename V>
constexpr size_t RadixPairsScratchBytes(size_t n) {
  return n * sizeof(radix_internal::Record<K, V>);
}

// Stable sort of keys with values[i] travelling with keys[i] (V: any 4- or
// 8-byte trivially copyable type). Descending reverses the key order only:
// equal keys keep their input order. scratch: RadixPairsScratchBytes<K, V>(n)
// bytes, 4-byte aligned, contents ignored and clobbered.
template <typename K, typename V>
void RadixSortPairs(K* keys, V* values, size_t n, bool descending, void* scratch) {
  static_assert(std::is_integral_v<K> && (sizeof(K) == 4 || sizeof(K) == 8));
  static_assert(std::is_trivially_copyable_v<V> && (sizeof(V) == 4 || sizeof(V) == 8));
  static_assert(sizeof(radix_internal::Record<K, V>) == sizeof(K) + sizeof(V));
  radix_internal::SortPairs(keys, values, n, descending, scratch);
}

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_RADIX_SORT_H_
