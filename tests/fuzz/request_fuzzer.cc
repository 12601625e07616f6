// Fuzzer of request decoding, validation and execution for Sort,
// SortPairs, SortTable and TopK: the bytes a client sends go through the server's own path
// (ParseRawMessage from a grpc::ByteBuffer, Validate*, CheckResponseFits,
// InflightBytes, RunSort/RunSortPairs on the CPU engine). Whatever the
// bytes, a request is either refused with INVALID_ARGUMENT naming a field
// (or RESOURCE_EXHAUSTED for a response over the limit), or sorted, and
// then the answer is checked against the reference stable sort.
//
// Input: byte 0 picks the message (even: SortRequest, odd:
// SortPairsRequest; 0x80 and above, even: SortTableRequest, odd:
// TopKRequest); the rest is the serialized message. A TopK answer is
// checked against the first k of each segment's reference sort.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>

#include "core/dispatcher.h"
#include "server/grpc/raw_message.h"
#include "server/regions/regions.h"
#include "server/wire/region_ops.h"
#include "server/wire/sort_ops.h"
#include "server/wire/table_ops.h"
#include "server/wire/top_k_ops.h"
#include "server/wire/typed_array.h"
#include "tests/fuzz/fuzz_oracle.h"
#include "tests/fuzz/table_oracle.h"

namespace sortd::fuzz {
namespace {

// Larger accepted requests are validated but not sorted (time per input).
constexpr size_t kMaxKeysSorted = size_t{1} << 14;
constexpr uint64_t kMaxResponseBytes = uint64_t{1} << 20;

std::vector<std::string> Strings(const v1::TypedArray& a) {
  return {a.bytes().values().begin(), a.bytes().values().end()};
}

template <typename T>
std::vector<T> Numbers(const v1::TypedArray& a) {
  const auto& field = NumericField<T>(a);
  return {field.begin(), field.end()};
}

// The stable reference permutation of `keys` in `order`.
std::vector<uint64_t> Permutation(const v1::TypedArray& keys, SortOrder order,
                                  v1::NullPlacement nulls) {
  std::vector<uint64_t> perm;
  size_t width = 0;
  if (const std::string* bytes = NarrowPayload(keys, &width)) {
    std::vector<double> values(bytes->size() / width);
    for (size_t i = 0; i < values.size(); ++i) values[i] = NarrowValue(keys, *bytes, width, i);
    return ReferencePermutation(values, order);
  }
  if (const auto* times = TimeValues(keys)) {
    // NaT (the int64 minimum) is a null: placed by `nulls`, stable.
    std::vector<uint64_t> nat, rest;
    std::vector<int64_t> rest_values;
    for (int i = 0; i < times->size(); ++i) {
      if (times->Get(i) == std::numeric_limits<int64_t>::min()) {
        nat.push_back(i);
      } else {
        rest.push_back(i);
        rest_values.push_back(times->Get(i));
      }
    }
    std::vector<uint64_t> sorted_rest;
    for (uint64_t r : ReferencePermutation(rest_values, order)) sorted_rest.push_back(rest[r]);
    perm = nulls == v1::NULL_PLACEMENT_FIRST ? nat : sorted_rest;
    const std::vector<uint64_t>& tail = nulls == v1::NULL_PLACEMENT_FIRST ? sorted_rest : nat;
    perm.insert(perm.end(), tail.begin(), tail.end());
    return perm;
  }
  const DataType type = *TypeOf(keys);
  if (type == DataType::kBytes) return ReferencePermutation(Strings(keys), order);
  VisitNumeric(type, [&](auto tag) {
    perm = ReferencePermutation(Numbers<decltype(tag)>(keys), order);
  });
  return perm;
}

// `out` is `in` permuted by `perm`, bit for bit, in `in`'s type.
void CheckGathered(const v1::TypedArray& in, const std::vector<uint64_t>& perm,
                   const v1::TypedArray& out, absl::string_view what) {
  if (LengthOf(in) == 0) {
    Check(LengthOf(out) == 0, std::string(what) + ": answer for an empty array is not empty");
    return;
  }
  Check(out.array_case() == in.array_case(), std::string(what) + ": type changed");
  size_t width = 0;
  if (const std::string* bytes = NarrowPayload(in, &width)) {
    std::string expected;
    for (uint64_t i : perm) expected.append(*bytes, i * width, width);
    Check(*NarrowPayload(out, &width) == expected, std::string(what) + ": packed elements differ");
    return;
  }
  if (const auto* times = TimeValues(in)) {
    const std::vector<int64_t> values(times->begin(), times->end());
    const auto* got = TimeValues(out);
    Check(std::vector<int64_t>(got->begin(), got->end()) == Gather(values, perm),
          std::string(what) + ": times differ");
    Check(in.has_datetime64() ? out.datetime64().unit() == in.datetime64().unit()
                              : out.timedelta64().unit() == in.timedelta64().unit(),
          std::string(what) + ": time unit changed");
    return;
  }
  const DataType type = *TypeOf(in);
  if (type == DataType::kBytes) {
    Check(Strings(out) == Gather(Strings(in), perm), std::string(what) + ": byte strings differ");
    return;
  }
  VisitNumeric(type, [&](auto tag) {
    using T = decltype(tag);
    Check(::sortd::testing::SameBits(Numbers<T>(out), Gather(Numbers<T>(in), perm)), what);
  });
}

// Region requests run against a real registry holding one 64 KiB system
// region named "fuzz" (and a second name, "fuzz2", for the same memory, so
// that overlap checks across names are reached): whatever the references,
// the answer is a sort or a refusal naming the field, never a read or write
// outside the region (ASan would see it).
RegionRegistry& FuzzRegions() {
  static RegionRegistry* registry = [] {
    RegionLimits limits;
    limits.allow_system = true;
    auto* r = new RegionRegistry(limits);
    const std::string key = "/sortd-fuzz-" + std::to_string(getpid());
    const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    Check(fd >= 0 && ftruncate(fd, 64 << 10) == 0, "creating the fuzz region");
    close(fd);
    Check(r->RegisterSystem("fuzz", key, 0, 64 << 10).ok(), "registering the fuzz region");
    Check(r->RegisterSystem("fuzz2", key, 0, 64 << 10).ok(), "registering it again");
    shm_unlink(key.c_str());  // the mappings keep it
    return r;
  }();
  return *registry;
}

template <typename Request, typename Response, typename Run>
void FuzzRegionRequest(const Request& request, Run run) {
  Response response;
  const absl::Status ran = run(CpuDispatcher(), request, &response, &FuzzRegions());
  if (!ran.ok()) {
    CheckRefusal(ran, "a region request", {absl::StatusCode::kInvalidArgument,
                                           absl::StatusCode::kNotFound});
    return;
  }
  Check(response.request_id() == request.request_id(), "request_id not echoed");
  Check(!response.has_keys(), "a region sort answered with inline keys");
}

template <typename Request>
bool Decode(const uint8_t* data, size_t size, Request* request) {
  grpc::Slice slice(data, size);
  grpc::ByteBuffer bytes(&slice, 1);
  const absl::Status parsed = ParseRawMessage(&bytes, request, "request");
  if (!parsed.ok()) {
    CheckRefusal(parsed, "ParseRawMessage", {absl::StatusCode::kInvalidArgument});
    return false;
  }
  return true;
}

// Refused for its size, or small enough to sort here.
template <typename Request>
bool Admissible(const Request& request) {
  const absl::Status fits = CheckResponseFits(request, kMaxResponseBytes);
  if (!fits.ok()) {
    CheckRefusal(fits, "CheckResponseFits", {absl::StatusCode::kResourceExhausted});
    return false;
  }
  Check(InflightBytes(request) >= PayloadIn(request), "InflightBytes below the payload");
  return KeysOf(request) <= kMaxKeysSorted;
}

void FuzzSort(const uint8_t* data, size_t size) {
  v1::SortRequest request;
  if (!Decode(data, size, &request)) return;
  const absl::Status valid = ValidateSortRequest(request);
  if (!valid.ok()) {
    CheckRefusal(valid, "ValidateSortRequest", {absl::StatusCode::kInvalidArgument});
    return;
  }
  if (UsesRegions(request)) {
    FuzzRegionRequest<v1::SortRequest, v1::SortResponse>(
        request, [](Dispatcher& d, const v1::SortRequest& r, v1::SortResponse* out,
                    RegionRegistry* regions) { return RunSort(d, r, out, regions); });
    return;
  }
  if (!Admissible(request)) return;
  v1::SortResponse response;
  const absl::Status ran = RunSort(CpuDispatcher(), request, &response);
  Check(ran.ok(), "RunSort refused a valid request: " + ran.ToString());
  Check(response.request_id() == request.request_id(), "request_id not echoed");
  const std::vector<uint64_t> perm =
      Permutation(request.keys(), ToCoreOrder(request.order()), request.nulls());
  CheckGathered(request.keys(), perm, response.keys(), "Sort keys");
  // The unary handler's path: the request's arrays moved into the response.
  v1::SortRequest movable = request;
  v1::SortResponse moved;
  Check(RunSort(CpuDispatcher(), &movable, &moved).ok(), "RunSort (moving) refused it");
  Check(moved.SerializeAsString() == response.SerializeAsString(),
        "RunSort moving the keys answered differently from copying them");
  if (request.return_indices()) {
    Check(::sortd::testing::SameIndices({response.indices().begin(), response.indices().end()},
                                        perm),
          "Sort indices");
  } else {
    Check(response.indices().empty(), "indices returned without return_indices");
  }
}

void FuzzSortPairs(const uint8_t* data, size_t size) {
  v1::SortPairsRequest request;
  if (!Decode(data, size, &request)) return;
  const absl::Status valid = ValidateSortPairsRequest(request);
  if (!valid.ok()) {
    CheckRefusal(valid, "ValidateSortPairsRequest", {absl::StatusCode::kInvalidArgument});
    return;
  }
  if (UsesRegions(request)) {
    FuzzRegionRequest<v1::SortPairsRequest, v1::SortPairsResponse>(
        request, [](Dispatcher& d, const v1::SortPairsRequest& r, v1::SortPairsResponse* out,
                    RegionRegistry* regions) { return RunSortPairs(d, r, out, regions); });
    return;
  }
  if (!Admissible(request)) return;
  v1::SortPairsResponse response;
  const absl::Status ran = RunSortPairs(CpuDispatcher(), request, &response);
  Check(ran.ok(), "RunSortPairs refused a valid request: " + ran.ToString());
  Check(response.request_id() == request.request_id(), "request_id not echoed");
  const std::vector<uint64_t> perm =
      Permutation(request.keys(), ToCoreOrder(request.order()), request.nulls());
  CheckGathered(request.keys(), perm, response.keys(), "SortPairs keys");
  CheckGathered(request.values(), perm, response.values(), "SortPairs values");
  v1::SortPairsRequest movable = request;
  v1::SortPairsResponse moved;
  Check(RunSortPairs(CpuDispatcher(), &movable, &moved).ok(), "RunSortPairs (moving) refused it");
  Check(moved.SerializeAsString() == response.SerializeAsString(),
        "RunSortPairs moving the arrays answered differently from copying them");
}

void FuzzSortTable(const uint8_t* data, size_t size) {
  v1::SortTableRequest request;
  if (!Decode(data, size, &request)) return;
  const absl::Status valid = ValidateSortTableRequest(request);
  if (!valid.ok()) {
    CheckRefusal(valid, "ValidateSortTableRequest", {absl::StatusCode::kInvalidArgument});
    return;
  }
  if (!Admissible(request)) return;
  v1::SortTableResponse response;
  if (UsesRegions(request)) {
    // Whatever the references: a sort whose permutation (inline, or in the
    // region) is one, or a refusal naming the field.
    const absl::Status ran = RunSortTable(CpuDispatcher(), request, &response, &FuzzRegions());
    if (!ran.ok()) {
      CheckRefusal(ran, "a table region request", {absl::StatusCode::kInvalidArgument,
                                                   absl::StatusCode::kNotFound});
      return;
    }
    Check(response.request_id() == request.request_id(), "request_id not echoed");
    Check(request.has_indices_region() ? response.indices().empty()
                                       : static_cast<size_t>(response.indices_size()) == KeysOf(request),
          "a table region sort's permutation went to the wrong place");
    std::vector<uint64_t> seen(response.indices().begin(), response.indices().end());
    std::sort(seen.begin(), seen.end());
    for (size_t i = 0; i < seen.size(); ++i) Check(seen[i] == i, "not a permutation");
    return;
  }
  const absl::Status ran = RunSortTable(CpuDispatcher(), request, &response, nullptr);
  Check(ran.ok(), "RunSortTable refused a valid request: " + ran.ToString());
  Check(response.request_id() == request.request_id(), "request_id not echoed");
  const std::vector<uint64_t> perm = TablePermutation(request);
  Check(std::vector<uint64_t>(response.indices().begin(), response.indices().end()) == perm,
        "SortTable permutation");
  if (request.return_columns()) {
    Check(response.columns_size() == request.columns_size(), "SortTable column count");
    for (int c = 0; c < request.columns_size(); ++c) {
      CheckGathered(request.columns(c).values(), perm, response.columns(c).values(), "SortTable column");
    }
  } else {
    Check(response.columns_size() == 0, "columns returned without return_columns");
  }
}

void FuzzTopK(const uint8_t* data, size_t size) {
  v1::TopKRequest request;
  if (!Decode(data, size, &request)) return;
  const absl::Status valid = ValidateTopKRequest(request);
  if (!valid.ok()) {
    CheckRefusal(valid, "ValidateTopKRequest", {absl::StatusCode::kInvalidArgument});
    return;
  }
  // Many segments cost the reference one sort each: bounded too.
  if (!Admissible(request) || request.segment_lengths_size() > 4096 ||
      (request.row_length() > 0 && KeysOf(request) / request.row_length() > 4096)) {
    return;
  }
  v1::TopKResponse response;
  if (UsesRegions(request)) {
    // Whatever the references: an answer of the kept size, positions
    // inside their segments, or a refusal naming the field.
    const absl::Status ran =
        RunTopK(request, &response, /*threads=*/2, kMaxResponseBytes, &FuzzRegions());
    if (!ran.ok()) {
      CheckRefusal(ran, "a TopK region request", {absl::StatusCode::kInvalidArgument,
                                                  absl::StatusCode::kNotFound,
                                                  absl::StatusCode::kFailedPrecondition});
      return;
    }
    Check(LengthOf(response.keys()) == KeptKeys(request), "TopK region keys kept");
    Check(!request.return_indices() ||
              static_cast<uint64_t>(response.indices_size()) == KeptKeys(request),
          "TopK region indices kept");
    return;
  }
  const absl::Status ran = RunTopK(request, &response, /*threads=*/2, kMaxResponseBytes);
  if (!ran.ok()) {
    // Only byte strings are checked against the limit once selected.
    CheckRefusal(ran, "RunTopK", {absl::StatusCode::kResourceExhausted});
    Check(request.keys().has_bytes() || request.values().has_bytes(),
          "RunTopK refused fixed-width arrays the size check let through");
    return;
  }
  Check(response.request_id() == request.request_id(), "request_id not echoed");
  // Each segment's reference sort: its first k, as positions in the
  // segment (the indices) and in the array (what keys and values gather).
  const uint64_t n = KeysOf(request);
  std::vector<uint64_t> lengths(request.segment_lengths().begin(), request.segment_lengths().end());
  if (request.row_length() > 0) lengths.assign(n / request.row_length(), request.row_length());
  if (request.row_length() == 0 && request.segment_lengths_size() == 0) lengths = {n};
  std::vector<uint64_t> local, global, counts;
  uint64_t begin = 0;
  for (uint64_t length : lengths) {
    std::vector<uint64_t> slice(length);
    std::iota(slice.begin(), slice.end(), begin);
    v1::TypedArray segment;
    Check(GatherTypedArray(request.keys(), slice, &segment).ok(), "slicing the keys");
    const std::vector<uint64_t> perm =
        Permutation(segment, ToCoreOrder(request.order()), request.nulls());
    const uint64_t kept = std::min<uint64_t>(request.k(), length);
    counts.push_back(kept);
    for (uint64_t j = 0; j < kept; ++j) {
      local.push_back(perm[j]);
      global.push_back(begin + perm[j]);
    }
    begin += length;
  }
  if (request.return_indices()) {
    Check(std::vector<uint64_t>(response.indices().begin(), response.indices().end()) == local,
          "TopK positions");
  } else {
    Check(response.indices().empty(), "TopK indices without return_indices");
  }
  Check(request.segment_lengths_size() > 0
            ? std::vector<uint64_t>(response.segment_counts().begin(),
                                    response.segment_counts().end()) == counts
            : response.segment_counts().empty(),
        "TopK segment_counts");
  CheckGathered(request.keys(), global, response.keys(), "TopK keys");
  if (request.has_values()) CheckGathered(request.values(), global, response.values(), "TopK values");
}

}  // namespace
}  // namespace sortd::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  grpc_init();  // ByteBuffer and Slice need the library initialised
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // Byte 0: 0x00-0x7f and even: Sort; odd: SortPairs; 0x80 and above, even:
  // SortTable, odd: TopK (the corpus's seeds start 0x00, 0x01, 0x80, 0x81).
  if (data[0] >= 0x80 && data[0] % 2 == 0) {
    sortd::fuzz::FuzzSortTable(data + 1, size - 1);
  } else if (data[0] >= 0x80) {
    sortd::fuzz::FuzzTopK(data + 1, size - 1);
  } else if (data[0] % 2 == 0) {
    sortd::fuzz::FuzzSort(data + 1, size - 1);
  } else {
    sortd::fuzz::FuzzSortPairs(data + 1, size - 1);
  }
  return 0;
}
