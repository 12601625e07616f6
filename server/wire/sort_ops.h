// Validation and execution of Sort/SortPairs requests: the translation
// between protobuf messages and core engine calls. Runs on worker threads.
#ifndef SORTD_SERVER_WIRE_SORT_OPS_H_
#define SORTD_SERVER_WIRE_SORT_OPS_H_

#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "core/dispatcher.h"
#include "server/metrics/metrics.h"
#include "server/regions/regions.h"
#include "server/runtime/batcher.h"
#include "server/wire/request_checks.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

// OK when `array` is set to a core or a converted type (and a converted
// one is well formed: converted_arrays.h); else INVALID_ARGUMENT naming
// `field`, or saying `required` when nothing is set.
absl::Status ValidateTypedArray(const v1::TypedArray& array, absl::string_view field,
                                absl::string_view required);

// Sorts `keys` (any type) into `out_keys` (replaced, same type); fills
// `indices` (when not empty: one slot per key) with the permutation.
// `nulls` places NaT in time keys. Returns the engine that ran.
// `movable_keys` (may be null): `keys` itself, when the caller lets numeric
// keys be swapped into `out_keys` instead of copied (it is left empty).
absl::StatusOr<EngineKind> SortKeys(Dispatcher& dispatcher, const v1::TypedArray& keys,
                                    SortOrder order, NullPlacement nulls, v1::TypedArray* out_keys,
                                    absl::Span<uint64_t> indices,
                                    v1::TypedArray* movable_keys = nullptr);

// INVALID_ARGUMENT naming the field when a request is malformed.
absl::Status ValidateSortRequest(const v1::SortRequest& request);
absl::Status ValidateSortPairsRequest(const v1::SortPairsRequest& request);

// RESOURCE_EXHAUSTED, before any work, when the response to a valid request
// would exceed `max_response_bytes` (0: unchecked): e.g. keys that fit one
// message whose 8-byte indices do not. Names the limit and SortChunked.
absl::Status CheckResponseFits(const v1::SortRequest& request, uint64_t max_response_bytes);
absl::Status CheckResponseFits(const v1::SortPairsRequest& request, uint64_t max_response_bytes);

// Bytes a request holds while it is in flight (request plus response), for
// admission control.
uint64_t InflightBytes(const v1::SortRequest& request);
uint64_t InflightBytes(const v1::SortPairsRequest& request);

// Payload bytes (keys + values) of requests and responses, for metrics.
uint64_t PayloadIn(const v1::SortRequest& request);
uint64_t PayloadIn(const v1::SortPairsRequest& request);
uint64_t PayloadOut(const v1::SortResponse& response);
uint64_t PayloadOut(const v1::SortPairsResponse& response);
std::optional<DataType> KeyTypeOf(const v1::SortRequest& request);
std::optional<DataType> KeyTypeOf(const v1::SortPairsRequest& request);

size_t KeysOf(const v1::SortRequest& request);
size_t KeysOf(const v1::SortPairsRequest& request);

// Fills the success fields of a metrics record from a finished request.
template <typename Request, typename Response>
void DescribeSuccess(const Request& request, const Response& response,
                     RequestRecord* record) {
  record->engine = FromProtoEngine(response.engine());
  record->bytes_sent = PayloadOut(response);
  record->keys_sorted = KeysOf(request);
}

// Run a validated request; fill `response` (request_id and engine included).
// Requests naming regions are served from `regions` (FAILED_PRECONDITION
// when null or off; the caller checked the peer: CheckRegionAccess).
// `device_allowed` false (a sort on a gRPC thread): a request naming a
// CUDA region is refused UNAVAILABLE instead of sorted there.
absl::Status RunSort(Dispatcher& dispatcher, const v1::SortRequest& request,
                     v1::SortResponse* response, RegionRegistry* regions = nullptr,
                     bool device_allowed = true);
absl::Status RunSortPairs(Dispatcher& dispatcher,
                          const v1::SortPairsRequest& request,
                          v1::SortPairsResponse* response, RegionRegistry* regions = nullptr,
                          bool device_allowed = true);
// The same, moving the request's numeric arrays into the response instead
// of copying them (a unary call's request is its own): the sort runs in the
// pages the parse filled, and the request is left without its payload.
absl::Status RunSort(Dispatcher& dispatcher, v1::SortRequest* request,
                     v1::SortResponse* response, RegionRegistry* regions = nullptr,
                     bool device_allowed = true);
absl::Status RunSortPairs(Dispatcher& dispatcher, v1::SortPairsRequest* request,
                          v1::SortPairsResponse* response, RegionRegistry* regions = nullptr,
                          bool device_allowed = true);

// Whether a request may join a batch: its keys have a core type (converted
// keys, converted_arrays.h, are sorted one request at a time).
bool Batchable(const v1::SortRequest& request);
bool Batchable(const v1::SortPairsRequest& request);

// Batched execution (server/runtime/batcher.h). PrepareBatched sizes the
// response's arrays and points `out` at request and response memory
// (`scratch`, SortPairs only, holds the permutation; null for Sort); after
// the batch ran,
// CompleteBatched finishes the response (SortPairs: gathers the values).
// Both need a validated request with numeric keys.
void PrepareBatched(const v1::SortRequest& request, v1::SortResponse* response,
                    Batcher::Request* out, std::vector<uint64_t>* scratch);
void PrepareBatched(const v1::SortPairsRequest& request, v1::SortPairsResponse* response,
                    Batcher::Request* out, std::vector<uint64_t>* scratch);
absl::Status CompleteBatched(const v1::SortRequest& request, v1::SortResponse* response,
                             const std::vector<uint64_t>* scratch);
absl::Status CompleteBatched(const v1::SortPairsRequest& request, v1::SortPairsResponse* response,
                             const std::vector<uint64_t>* scratch);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_SORT_OPS_H_
