// TopK: validation and execution of a selection (docs/api.md, "Top-k"):
// the first k keys of the stable sort of an array, or of each segment of
// it. Keys of the converted types become their order words first
// (core/sortable_keys.h), every segment is scanned by the CPU selection
// (core/cpu/top_k.h: a heap of the k best, no sort of the rest), and the
// kept positions gather the keys as sent (NaN payloads kept) and the
// values. Arrays in host memory run on the CPU at every size: a scan at
// memory speed reads the array once, about what a copy to a GPU would
// cost. Arrays in CUDA regions are selected on their GPU
// (core/cuda/select/top_k.cuh), and only the kept entries come back.
#ifndef SORTD_SERVER_WIRE_TOP_K_OPS_H_
#define SORTD_SERVER_WIRE_TOP_K_OPS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/dispatcher.h"
#include "core/types.h"
#include "server/metrics/metrics.h"
#include "server/regions/regions.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

// INVALID_ARGUMENT naming the field: keys unset or malformed, k = 0,
// values of another length, an unknown order or null placement, both
// row_length and segment_lengths, keys not a whole number of rows,
// segment lengths not summing to the keys' length, a request_id too long.
absl::Status ValidateTopKRequest(const v1::TopKRequest& request);
// RESOURCE_EXHAUSTED when the fixed-width part of the response (keys,
// indices, values, counts) would exceed `max_response_bytes` (0:
// unchecked). Byte strings are checked once selected (RunTopK).
absl::Status CheckResponseFits(const v1::TopKRequest& request, uint64_t max_response_bytes);

// Keys looked at, payload bytes in and out, the bytes held while it runs
// (the request, the response's bound, converted keys' words) and the key
// type (routing and metrics: a converted type's word type).
size_t KeysOf(const v1::TopKRequest& request);
uint64_t PayloadIn(const v1::TopKRequest& request);
uint64_t PayloadOut(const v1::TopKResponse& response);
uint64_t InflightBytes(const v1::TopKRequest& request);
std::optional<DataType> KeyTypeOf(const v1::TopKRequest& request);
// How many keys the response keeps: min(k, length) summed over segments.
uint64_t KeptKeys(const v1::TopKRequest& request);

// Selections are never batched.
inline bool Batchable(const v1::TopKRequest&) { return false; }
// Keys (and values) in system regions, read in place by the CPU, or in
// CUDA regions of one GPU, selected there (FAILED_PRECONDITION for values
// elsewhere than the keys, or converted key types in device memory).
// Returns whether the keys lie in device memory.
bool UsesRegions(const v1::TopKRequest& request);
absl::StatusOr<bool> CheckRegionReferences(const RegionRegistry* regions,
                                           const v1::TopKRequest& request);

// Fills the success fields of a metrics record (engine, bytes sent, the
// keys looked at as keys sorted).
void DescribeSuccess(const v1::TopKRequest& request, const v1::TopKResponse& response,
                     RequestRecord* record);

// Selects for a validated request on up to `threads` threads; fills
// `response` (request_id and engine included). RESOURCE_EXHAUSTED when
// byte strings kept would exceed `max_response_bytes` (0: unchecked).
// Region slices are resolved in `regions` (the caller checked the peer);
// slices in CUDA regions go to `dispatcher`'s GPU engine where
// `device_allowed` (not on a gRPC thread; else UNAVAILABLE, retry).
absl::Status RunTopK(const v1::TopKRequest& request, v1::TopKResponse* response, int threads,
                     uint64_t max_response_bytes = 0, RegionRegistry* regions = nullptr,
                     Dispatcher* dispatcher = nullptr, bool device_allowed = false);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_TOP_K_OPS_H_
