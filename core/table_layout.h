// The terms a packed table sort is made of (core/table_keys.h), apart from
// how they are computed, so that the GPU engine can pack and sort a table
// on the device (GpuEngine::SortTableRows) from the same layout the host
// path uses: the key columns viewed in place, each key's range, and where
// each key's fields lie in the packed words.
#ifndef SORTD_CORE_TABLE_LAYOUT_H_
#define SORTD_CORE_TABLE_LAYOUT_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "core/sortable_keys.h"
#include "core/types.h"

namespace sortd {

// One key column of a table sort, viewed in place.
struct TableKey {
  enum class Kind {
    kNumeric,  // `type`: uint32 .. float64 (not bytes)
    kNarrow,   // `narrow`, packed little-endian
    kTime,     // datetime64 / timedelta64 as int64; NaT is a null
  };
  Kind kind = Kind::kNumeric;
  DataType type = DataType::kUint32;
  NarrowType narrow = NarrowType::kUint8;
  const void* data = nullptr;  // the column's `rows` elements
  // Arrow validity bitmap (bit per row, LSB first, 1 = valid), or null when
  // every row is valid.
  const uint8_t* validity = nullptr;
  SortOrder order = SortOrder::kAscending;
  NullPlacement nulls = NullPlacement::kLast;
};

// What the scan of one key finds: the smallest and largest
// order-preserving word of its non-null rows, and how many rows are null
// and not.
struct KeyRange {
  uint64_t lo = std::numeric_limits<uint64_t>::max();
  uint64_t hi = 0;
  uint64_t nulls = 0;
  uint64_t valid = 0;
};

// One field of a packed word: a key's null bit, or its value less `base`
// (ascending) or subtracted from it (descending), `bits` wide at `shift`.
struct PackedField {
  int key = 0;
  bool null_bit = false;
  int word = 0;
  int shift = 0;
  int bits = 0;
  uint64_t base = 0;
};

// Every field, and the bits each word uses (1..64; a word of 32 or fewer
// sorts as uint32), the most significant word first.
struct PackedLayout {
  std::vector<int> word_bits;
  std::vector<PackedField> fields;
};

// The layout for keys of these ranges (core/table_keys.cc lays them out);
// handed to the GPU engine, which scans the ranges on the device.
using PackingPlanner = std::function<PackedLayout(absl::Span<const KeyRange>)>;

}  // namespace sortd

#endif  // SORTD_CORE_TABLE_LAYOUT_H_
