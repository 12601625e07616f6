// Sort and SortPairs requests whose arrays are in registered regions
// (server/regions/regions.h): checking each reference, then sorting the
// region's memory in place (after a copy into the output slice when the
// request names one). Arrays in device memory (CUDA regions) are sorted on
// a GPU only; host regions go through the dispatcher like inline arrays.
#ifndef SORTD_SERVER_WIRE_REGION_OPS_H_
#define SORTD_SERVER_WIRE_REGION_OPS_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/dispatcher.h"
#include "server/regions/regions.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

// Whether a request names any region (it is then served from regions only).
bool UsesRegions(const v1::SortRequest& request);
bool UsesRegions(const v1::SortPairsRequest& request);

// What can be checked without the registry: the arrays left unset, the
// regions needed present, the order and request_id valid.
absl::Status ValidateRegionSort(const v1::SortRequest& request);
absl::Status ValidateRegionSortPairs(const v1::SortPairsRequest& request);

// Whether this caller may use regions: FAILED_PRECONDITION when the server
// has them off, PERMISSION_DENIED for a peer on another host.
absl::Status CheckRegionAccess(const RegionRegistry* regions, absl::string_view peer);
// Only the first part: FAILED_PRECONDITION when regions are off.
absl::Status CheckRegionsEnabled(const RegionRegistry* regions);

// Checks that every region a request names exists and that each slice is
// well-typed, aligned and within its region, before the request is
// admitted (so that a slice count past its region is INVALID_ARGUMENT, not
// a request too large for admission); the sort checks again when it runs.
// Returns whether a slice is in a CUDA region: such a request is sorted on
// a GPU whatever its size, never inline on a gRPC thread, on the GPU pool.
absl::StatusOr<bool> CheckRegionReferences(const RegionRegistry* regions,
                                           const v1::SortRequest& request);
absl::StatusOr<bool> CheckRegionReferences(const RegionRegistry* regions,
                                           const v1::SortPairsRequest& request);

// The key type a region request names (for routing and metrics), if valid.
std::optional<DataType> RegionKeyType(const v1::RegionSlice& slice);

// Run a validated region request; fill `response` (request_id, engine;
// indices when return_indices without indices_region). Errors name the
// field: NOT_FOUND for an unknown region, INVALID_ARGUMENT for a reference
// out of bounds, misaligned, of the wrong type or count, or overlapping
// another without being identical to it.
// `device_allowed` false: a slice in a CUDA region (one re-registered as
// such after the request was routed to a gRPC thread) is UNAVAILABLE.
absl::Status RunRegionSort(RegionRegistry& regions, Dispatcher& dispatcher,
                           const v1::SortRequest& request, v1::SortResponse* response,
                           bool device_allowed = true);
absl::Status RunRegionSortPairs(RegionRegistry& regions, Dispatcher& dispatcher,
                                const v1::SortPairsRequest& request,
                                v1::SortPairsResponse* response, bool device_allowed = true);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_REGION_OPS_H_
