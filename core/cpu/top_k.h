// Selection on the CPU (issue #53): the first k keys of sortd's stable sort
// of an array, with their positions, without sorting the rest. Equal keys
// keep their input order (the earliest positions win), floats follow sortd's
// order (NaN last ascending, first descending: the exact reverse), and the
// keys come back as they were (NaN payloads included).
//
// How: keys become order-preserving words (OrderedBits; complemented for
// descending), so the answer is the k smallest (word, position) pairs. Each
// thread scans a contiguous part with a max-heap of its k best; a key enters
// only when its word is below the heap's worst (positions rise within a
// part, so an equal word never displaces an earlier one), which for most
// inputs is a compare and a not-taken branch per key. The threads' heaps,
// k each, are then merged by one sort of at most threads * k pairs.
#ifndef SORTD_CORE_CPU_TOP_K_H_
#define SORTD_CORE_CPU_TOP_K_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "core/types.h"

namespace sortd::cpu {

template <typename T>
struct TopKResult {
  std::vector<T> keys;            // min(k, n) keys in sorted order
  std::vector<uint64_t> indices;  // their positions in the input
};

// Below this many keys a part, one thread scans the whole array.
inline constexpr size_t kTopKParallelMinKeys = size_t{1} << 18;
// Parts (or segments) of at most kTopKSelectMaxKeys keys where k is at
// least 1/kTopKSelectShare of them are selected by a radix select over all
// their (word, position) pairs (16 bytes a key of scratch), the others by
// a heap of k pairs.
inline constexpr size_t kTopKSelectShare = 16;
inline constexpr size_t kTopKSelectMaxKeys = size_t{1} << 16;

// The first min(k, keys.size()) keys of the stable sort of `keys` in
// `order`, on at most `threads` threads (the answer is the same for any).
// Defined for uint32_t, int32_t, float, uint64_t, int64_t and double.
template <typename T>
TopKResult<T> TopK(absl::Span<const T> keys, size_t k, SortOrder order, int threads = 1);
// The same positions only, written to out[0, min(k, keys.size())): what
// the TopK RPC keeps of each segment, without a vector a segment.
template <typename T>
void TopKPositions(absl::Span<const T> keys, size_t k, SortOrder order, int threads,
                   uint64_t* out);

// The same for byte strings (sortd's order: bytewise, unsigned, a prefix
// first): the positions of the first min(k, keys.size()) in sorted order.
// One thread (string arrays are bounded by one message).
std::vector<uint64_t> TopKStrings(absl::Span<const std::string_view> keys, size_t k,
                                  SortOrder order);

}  // namespace sortd::cpu

#endif  // SORTD_CORE_CPU_TOP_K_H_
