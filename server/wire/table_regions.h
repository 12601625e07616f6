// SortTable requests whose columns or permutation lie in registered
// regions (docs/api.md, "Tables in regions"): a column's values
// (TableColumn.values_region, any fixed-width type) and its validity
// bitmap (validity_region) are read where they lie, the permutation is
// written to indices_region, and with return_columns the region columns
// are reordered in place. Columns and the permutation may also lie in
// CUDA regions of one GPU: such a table is sorted on that GPU only (its
// columns copied on the device, core/cuda/table_job.cu), by fixed-width
// keys, for the permutation alone (no return_columns: device memory is
// not reordered).
#ifndef SORTD_SERVER_WIRE_TABLE_REGIONS_H_
#define SORTD_SERVER_WIRE_TABLE_REGIONS_H_

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/regions/regions.h"
#include "server/wire/region_slices.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

// Whether a table request names any region.
bool UsesRegions(const v1::SortTableRequest& request);

// The region fields' checks that need no registry, for one column of
// `rows` rows named `field` ("columns[1] (\"ts\")"): values and
// values_region not both, a values_region's count and time unit,
// validity_region only with values_region, of ELEMENT_TYPE_UINT8 and long
// enough. INVALID_ARGUMENT naming the field.
absl::Status ValidateColumnRegions(const v1::TableColumn& column, uint64_t rows,
                                   const std::string& field);
// indices_region: ELEMENT_TYPE_UINT64, one slot a row.
absl::Status ValidateIndicesRegion(const v1::SortTableRequest& request, uint64_t rows);

// Every slice a table request names, resolved and held for its sort.
struct TableSlices {
  std::vector<std::optional<Slice>> values;    // one a column; unset: inline
  std::vector<std::optional<Slice>> validity;  // one a column; unset: inline or none
  std::optional<Slice> indices;
  int device = -1;  // the GPU of the slices in CUDA regions; -1: none
  std::vector<const Slice*> all() const;
};

// Resolves the slices of a validated request: each must be registered
// (NOT_FOUND), within its region and aligned, apart from the others where
// it is written (the permutation always; every column with
// return_columns), and, in a CUDA region, on the one GPU of the table's
// other device slices and without return_columns (INVALID_ARGUMENT).
// FAILED_PRECONDITION when the server has regions off.
absl::StatusOr<TableSlices> ResolveTableSlices(const RegionRegistry* regions,
                                               const v1::SortTableRequest& request);

// For admission: the references checked (ResolveTableSlices) before the
// request is admitted; true when a slice is in device memory (the request
// then runs on the GPU workers' pool, never on a gRPC thread).
absl::StatusOr<bool> CheckRegionReferences(const RegionRegistry* regions,
                                           const v1::SortTableRequest& request);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_TABLE_REGIONS_H_
