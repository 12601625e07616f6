// Region references (v1::RegionSlice) checked against the registry: the
// slices a region request names, held for as long as its sort runs, and
// the checks every region request shares (bounds, alignment, overlap, the
// client's shm object still whole). Used by region_ops (Sort, SortPairs)
// and table_regions (SortTable).
#ifndef SORTD_SERVER_WIRE_REGION_SLICES_H_
#define SORTD_SERVER_WIRE_REGION_SLICES_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/types.h"
#include "server/regions/regions.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

// A RegionSlice checked against its region: where its elements are, held
// for as long as the sort runs (the region stays mapped meanwhile).
struct Slice {
  std::shared_ptr<const Region> region;
  std::string field;  // "keys_region", "columns[2].values_region", ...
  v1::ElementType element = v1::ELEMENT_TYPE_UNSPECIFIED;
  DataType type = DataType::kUint32;  // the six numeric types; else unused
  uint64_t width = 4;                 // bytes an element
  uint8_t* data = nullptr;
  size_t count = 0;
  uint64_t begin = 0;  // bytes within the region's backing memory
  uint64_t end = 0;

  bool on_device() const { return region->kind() == RegionKind::kCuda; }
  size_t bytes() const { return count * width; }
  bool SameMemory(const Slice& other) const { return region->backing() == other.region->backing(); }
  bool Identical(const Slice& other) const {
    return SameMemory(other) && begin == other.begin && end == other.end;
  }
  bool Overlaps(const Slice& other) const {
    return SameMemory(other) && begin < other.end && other.begin < end && bytes() > 0 &&
           other.bytes() > 0;
  }
};

// Which element types a slice may name.
enum class SliceTypes {
  kNumeric,     // ELEMENT_TYPE_UINT32 .. FLOAT64 (Sort, SortPairs)
  kFixedWidth,  // those and INT8 .. TIMEDELTA64 (a table's columns)
};

// The slice `ref` names, checked: region named and registered (NOT_FOUND),
// type allowed, offset aligned, elements within the region, the shm object
// whole (INVALID_ARGUMENT / FAILED_PRECONDITION naming `field`).
absl::StatusOr<Slice> Resolve(const RegionRegistry& regions, const v1::RegionSlice& ref,
                              absl::string_view field, SliceTypes types = SliceTypes::kNumeric);

// An output slice must match its input's type and count.
absl::Status CheckMatches(const Slice& out, const Slice& in);

// No two slices may share bytes, except an output identical to its input
// (in place), listed in `same`.
absl::Status CheckDisjoint(const std::vector<const Slice*>& slices,
                           const std::vector<std::pair<const Slice*, const Slice*>>& same);

// Copies an input slice into its output unless they are the same memory.
absl::Status CopyInto(const Slice& out, const Slice& in);

// After a sort: every slice's memory still there (a client that shrank its
// shm object meanwhile gets an error, not a sort of lost bytes). A sort by
// DMA (`by_dma`: on a GPU) never faults on lost pages, so the size is read
// for pinned slices of any span then.
absl::Status CheckStillIntact(const std::vector<const Slice*>& slices, bool by_dma);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_REGION_SLICES_H_
