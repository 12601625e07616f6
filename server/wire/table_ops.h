// SortTable: validation and execution of a table sort (docs/api.md,
// "Tables"). Rows are ordered by the key columns from the least significant
// to the most, each pass a stable sort of the rows in their current order:
// the non-null rows of the key column are gathered in that order and sorted
// on the engine their type and count pick, the null rows keep their order
// and go first or last. Stable passes from the last key to the first give
// the stable lexicographic order.
#ifndef SORTD_SERVER_WIRE_TABLE_OPS_H_
#define SORTD_SERVER_WIRE_TABLE_OPS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "core/dispatcher.h"
#include "server/metrics/metrics.h"
#include "server/regions/regions.h"
#include "server/wire/table_regions.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

// The most key columns one table sort takes.
inline constexpr int kMaxSortKeys = 32;
// The most columns one table (a SortTable request or a table session)
// carries: each costs the server its own bookkeeping, whatever its rows.
inline constexpr int kMaxTableColumns = 4096;

// INVALID_ARGUMENT naming the field: more than kMaxTableColumns columns;
// no keys or more than kMaxSortKeys, a key naming no column of the
// `columns`, an unknown order or null placement. Shared by SortTable and
// table sessions.
absl::Status ValidateColumnCount(int columns);
absl::Status ValidateSortKeys(const google::protobuf::RepeatedPtrField<v1::SortKey>& by, int columns);

// INVALID_ARGUMENT naming the column or key: no columns, columns of unequal
// length, a validity bitmap shorter than its column, an array unset or
// malformed, a region field malformed (table_regions.h; the references
// themselves are checked against the registry later), no keys or more than kMaxSortKeys, a key naming no column, an
// unknown order or null placement, a request_id too long.
absl::Status ValidateSortTableRequest(const v1::SortTableRequest& request);
// RESOURCE_EXHAUSTED when the response (the permutation, and the columns
// with return_columns) would exceed `max_response_bytes` (0: unchecked).
absl::Status CheckResponseFits(const v1::SortTableRequest& request, uint64_t max_response_bytes);

// Rows, payload bytes in and out, the bytes held while it runs (every
// column, the response, and the passes' scratch), and the type of the first
// key column (routing and metrics).
size_t KeysOf(const v1::SortTableRequest& request);
uint64_t PayloadIn(const v1::SortTableRequest& request);
uint64_t PayloadOut(const v1::SortTableResponse& response);
uint64_t InflightBytes(const v1::SortTableRequest& request);
std::optional<DataType> KeyTypeOf(const v1::SortTableRequest& request);

// Tables are never batched (a batch sorts one column of a core type).
inline bool Batchable(const v1::SortTableRequest&) { return false; }

// Fills the success fields of a metrics record (engine, bytes sent, rows
// as keys sorted).
void DescribeSuccess(const v1::SortTableRequest& request, const v1::SortTableResponse& response,
                     RequestRecord* record);

// Sorts a validated request; fills `response` (indices, columns on request,
// request_id, the engine of the most significant key's pass). Columns and
// the permutation in regions (server/wire/table_regions.h) are read and
// written where they lie; `regions` may be null for a request naming none.
// `device_allowed` false (a gRPC thread): a table in device memory (one
// re-registered as such after routing) is UNAVAILABLE.
absl::Status RunSortTable(Dispatcher& dispatcher, const v1::SortTableRequest& request,
                          v1::SortTableResponse* response, RegionRegistry* regions,
                          bool device_allowed = true);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_TABLE_OPS_H_
