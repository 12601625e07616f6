// Element types sortd sorts by conversion to a word the engines already
// sort: 8- and 16-bit integers, bool, float16 and bfloat16 widen to
// uint32 (a radix sort then skips the passes over the constant upper
// digits), datetime64 / timedelta64 (int64 with NaT as a null) map to
// uint64 with the null placed. Ascending order of the words is sortd's
// order of the elements (docs/api.md, "Types"), so one engine call sorts
// them in either direction; the engines never see these types.
#ifndef SORTD_CORE_SORTABLE_KEYS_H_
#define SORTD_CORE_SORTABLE_KEYS_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "core/types.h"

namespace sortd {

enum class NarrowType { kInt8, kUint8, kInt16, kUint16, kFloat16, kBFloat16, kBool };

// Bytes per element (1 or 2).
constexpr size_t NarrowWidth(NarrowType type) {
  return type == NarrowType::kInt8 || type == NarrowType::kUint8 || type == NarrowType::kBool ? 1
                                                                                                : 2;
}
const char* NarrowTypeName(NarrowType type);  // "int8", ..., "bool"

// Whether WidenNarrow is one to one, so that NarrowWords restores the
// elements. Not for the floats: every NaN widens to one word (NaNs are equal
// and last, as for float32), so their elements are restored by gathering
// the input through the sort's permutation, payloads unchanged.
constexpr bool NarrowIsBijective(NarrowType type) {
  return type != NarrowType::kFloat16 && type != NarrowType::kBFloat16;
}

// words[i] = the order-preserving word of element i of `src` (packed
// little-endian, NarrowWidth bytes each): integers offset to unsigned,
// floats as sign-magnitude flipped (-0.0 before +0.0), NaN above +inf.
void WidenNarrow(NarrowType type, const uint8_t* src, absl::Span<uint32_t> words);
// The inverse for a bijective type: dst (packed) from sorted words.
void NarrowWords(NarrowType type, absl::Span<const uint32_t> words, uint8_t* dst);

// Where nulls go, in both orders.
enum class NullPlacement { kLast, kFirst };

// The int64 value numpy uses for NaT (not a time).
inline constexpr int64_t kNaT = INT64_MIN;

// datetime64 / timedelta64: words[i] in int64 order with NaT placed so that
// an engine sorting the words in `order` puts every NaT first or last (NaTs
// equal, stable). One to one: TimeFromWords restores the values.
void TimeToWords(absl::Span<const int64_t> src, SortOrder order, NullPlacement nulls,
                 absl::Span<uint64_t> words);
void TimeFromWords(absl::Span<const uint64_t> words, SortOrder order, NullPlacement nulls,
                   absl::Span<int64_t> dst);

}  // namespace sortd

#endif  // SORTD_CORE_SORTABLE_KEYS_H_
