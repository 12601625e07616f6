// Random byte strings for the string-sort benchmarks (the GPU merge sort
// and the CPU engine are measured on the same inputs): lengths uniform in
// [min_len, max_len], bytes uniform in 0..255, packed back to back with
// offsets, from a seeded mt19937_64.
#ifndef SORTD_BENCH_RANDOM_STRINGS_H_
#define SORTD_BENCH_RANDOM_STRINGS_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace sortd::bench {

struct PackedStrings {
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> offsets;  // size() + 1 entries
  size_t size() const { return offsets.size() - 1; }
};

inline PackedStrings RandomStrings(size_t n, size_t min_len, size_t max_len, uint64_t seed) {
  std::mt19937_64 rng(seed);
  PackedStrings s;
  s.offsets.reserve(n + 1);
  s.offsets.push_back(0);
  s.bytes.reserve(n * (min_len + max_len) / 2);
  for (size_t i = 0; i < n; ++i) {
    const size_t len = min_len + rng() % (max_len - min_len + 1);
    for (size_t j = 0; j < len; j += 8) {
      uint64_t word = rng();
      for (size_t k = j; k < len && k < j + 8; ++k, word >>= 8) {
        s.bytes.push_back(static_cast<uint8_t>(word));
      }
    }
    s.offsets.push_back(s.bytes.size());
  }
  return s;
}

}  // namespace sortd::bench

#endif  // SORTD_BENCH_RANDOM_STRINGS_H_
