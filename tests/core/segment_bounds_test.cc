// The segmented sort's host pass for missing length bounds
// (core/cuda/segment_bounds.h): plain C++, so it is tested here, without a
// GPU, on whichever clone (AVX2 or baseline) this machine's loader picks.
#include "core/cuda/segment_bounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace sortd::cuda {
namespace {

std::vector<uint32_t> OffsetsOf(const std::vector<uint32_t>& lengths, uint32_t first) {
  std::vector<uint32_t> offsets(lengths.size() + 1, first);
  for (size_t s = 0; s < lengths.size(); ++s) offsets[s + 1] = offsets[s] + lengths[s];
  return offsets;
}

void ExpectBounds(const std::vector<uint32_t>& lengths, uint32_t first = 0) {
  const std::vector<uint32_t> offsets = OffsetsOf(lengths, first);
  uint32_t shortest = 12345, longest = 12345;
  SegmentLengthBounds(offsets.data(), static_cast<int>(lengths.size()), &shortest, &longest);
  EXPECT_EQ(shortest, *std::min_element(lengths.begin(), lengths.end())) << lengths.size() << " segments";
  EXPECT_EQ(longest, *std::max_element(lengths.begin(), lengths.end())) << lengths.size() << " segments";
}

TEST(SegmentLengthBounds, MatchesMinAndMaxAtEverySizeAndPosition) {
  std::mt19937 rng(3);
  for (size_t segments : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 65536, 65537}) {
    std::vector<uint32_t> lengths(segments);
    for (uint32_t& len : lengths) len = 100 + rng() % 50;
    ExpectBounds(lengths);
    // The extremes at the first, the last and a middle position (vector
    // lanes and the scalar remainder).
    for (size_t at : {size_t{0}, segments - 1, segments / 2}) {
      std::vector<uint32_t> with = lengths;
      with[at] = 0;
      ExpectBounds(with);
      with[at] = 5000;
      ExpectBounds(with, /*first=*/77);
    }
  }
}

// Lengths with the top bit set (the pass biases them into signed lanes).
TEST(SegmentLengthBounds, LengthsAbove2To31) {
  ExpectBounds({0x80000005u, 3, 0x7fffffffu, 10});
  ExpectBounds({0x90000000u, 0x80000000u, 0x80000001u});
}

}  // namespace
}  // namespace sortd::cuda
