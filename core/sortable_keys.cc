#include "core/sortable_keys.h"

#include <cstring>

namespace sortd {
namespace {

uint16_t Load16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void Store16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// A 16-bit float's word: NaNs (exponent all ones, mantissa not zero) one
// word above every number; otherwise negative values' bits flipped,
// positive values' sign bit set, so -inf < ... < -0.0 < +0.0 < ... < +inf.
uint32_t Float16Word(uint16_t bits, uint16_t exponent_mask, uint16_t mantissa_mask) {
  if ((bits & exponent_mask) == exponent_mask && (bits & mantissa_mask) != 0) return 0x10000u;
  return (bits & 0x8000u) ? static_cast<uint16_t>(~bits) : (bits | 0x8000u);
}

// Ascending engine order must end with the nulls when they go last in
// ascending order, or first in descending order (the engine reverses).
bool NullsAtTheTop(SortOrder order, NullPlacement nulls) {
  return (order == SortOrder::kAscending) == (nulls == NullPlacement::kLast);
}

constexpr uint64_t kSign64 = uint64_t{1} << 63;

}  // namespace

const char* NarrowTypeName(NarrowType type) {
  switch (type) {
    case NarrowType::kInt8: return "int8";
    case NarrowType::kUint8: return "uint8";
    case NarrowType::kInt16: return "int16";
    case NarrowType::kUint16: return "uint16";
    case NarrowType::kFloat16: return "float16";
    case NarrowType::kBFloat16: return "bfloat16";
    case NarrowType::kBool: return "bool";
  }
  return "unknown";
}

void WidenNarrow(NarrowType type, const uint8_t* src, absl::Span<uint32_t> words) {
  const size_t n = words.size();
  switch (type) {
    case NarrowType::kUint8:
    case NarrowType::kBool:
      for (size_t i = 0; i < n; ++i) words[i] = src[i];
      return;
    case NarrowType::kInt8:
      for (size_t i = 0; i < n; ++i) words[i] = src[i] ^ 0x80u;
      return;
    case NarrowType::kUint16:
      for (size_t i = 0; i < n; ++i) words[i] = Load16(src + 2 * i);
      return;
    case NarrowType::kInt16:
      for (size_t i = 0; i < n; ++i) words[i] = Load16(src + 2 * i) ^ 0x8000u;
      return;
    case NarrowType::kFloat16:
      for (size_t i = 0; i < n; ++i) words[i] = Float16Word(Load16(src + 2 * i), 0x7C00, 0x03FF);
      return;
    case NarrowType::kBFloat16:
      for (size_t i = 0; i < n; ++i) words[i] = Float16Word(Load16(src + 2 * i), 0x7F80, 0x007F);
      return;
  }
}

void NarrowWords(NarrowType type, absl::Span<const uint32_t> words, uint8_t* dst) {
  const size_t n = words.size();
  switch (type) {
    case NarrowType::kUint8:
    case NarrowType::kBool:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(words[i]);
      return;
    case NarrowType::kInt8:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(words[i] ^ 0x80u);
      return;
    case NarrowType::kUint16:
      for (size_t i = 0; i < n; ++i) Store16(dst + 2 * i, static_cast<uint16_t>(words[i]));
      return;
    case NarrowType::kInt16:
      for (size_t i = 0; i < n; ++i) Store16(dst + 2 * i, static_cast<uint16_t>(words[i] ^ 0x8000u));
      return;
    case NarrowType::kFloat16:
    case NarrowType::kBFloat16:
      return;  // not one to one: callers gather (NarrowIsBijective)
  }
}

void TimeToWords(absl::Span<const int64_t> src, SortOrder order, NullPlacement nulls,
                 absl::Span<uint64_t> words) {
  // Offset to unsigned: NaT (the minimum) becomes 0, below every time. To
  // put it at the top, rotate down by one: NaT wraps to the maximum word
  // and every time keeps its order.
  const uint64_t shift = NullsAtTheTop(order, nulls) ? 1 : 0;
  for (size_t i = 0; i < src.size(); ++i) {
    words[i] = (static_cast<uint64_t>(src[i]) ^ kSign64) - shift;
  }
}

void TimeFromWords(absl::Span<const uint64_t> words, SortOrder order, NullPlacement nulls,
                   absl::Span<int64_t> dst) {
  const uint64_t shift = NullsAtTheTop(order, nulls) ? 1 : 0;
  for (size_t i = 0; i < words.size(); ++i) {
    dst[i] = static_cast<int64_t>((words[i] + shift) ^ kSign64);
  }
}

}  // namespace sortd
