// Sort/SortPairs execution. Numeric keys are moved (unary calls, whose
// request is theirs to give) or copied once (memcpy) into the response and
// sorted there in place; byte strings are argsorted and copied
// into the response in sorted order; values are gathered by the permutation,
// except numeric pairs on the CPU engine, sorted together with their keys.
#include "server/wire/sort_ops.h"

#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/wire/converted_arrays.h"
#include "server/wire/region_ops.h"
#include "server/wire/request_checks.h"
#include "server/wire/typed_array.h"

namespace sortd {
namespace {

constexpr absl::string_view kKeysRequired =
    "keys: required (set one of uint32, int32, float32, uint64, int64, float64, bytes, int8, "
    "uint8, int16, uint16, float16, bfloat16, boolean, datetime64, timedelta64)";
constexpr absl::string_view kValuesRequired =
    "values: required (set one of uint32, int32, float32, uint64, int64, float64, bytes, int8, "
    "uint8, int16, uint16, float16, bfloat16, boolean, datetime64, timedelta64)";

// Fills `out` with the elements of `in`: by swapping them out of `movable`
// (the same array, the caller's to give away) without touching a byte, or
// by a copy when that is null. The swap keeps the sort in pages the request
// already faulted in, instead of a copy pass into fresh ones.
template <typename T>
void TakeOrCopy(const v1::TypedArray& in, v1::TypedArray* movable,
                google::protobuf::RepeatedField<T>* out) {
  if (movable != nullptr) {
    out->Swap(MutableNumericField<T>(movable));
  } else {
    out->CopyFrom(NumericField<T>(in));
  }
}

// Numeric pairs that the CPU engine takes: keys and values copied into the
// response and sorted there together (the engine moves each value with its
// key: no permutation, no gather; core/cpu/cpu_engine.cc). Nothing (and
// nothing written) when that does not apply: byte strings, or a GPU engine,
// whose pairs path is measured through the permutation.
// `movable`: the request itself, when the caller lets its arrays be moved
// into the response (no copy pass); null: they are copied.
std::optional<absl::StatusOr<EngineKind>> SortNumericPairsOnCpu(Dispatcher& dispatcher,
                                                                const v1::SortPairsRequest& request,
                                                                v1::SortPairsRequest* movable,
                                                                v1::SortPairsResponse* response) {
  if (IsConvertedArray(request.keys())) return std::nullopt;
  const DataType key_type = *TypeOf(request.keys());
  const std::optional<DataType> value_type = TypeOf(request.values());
  if (key_type == DataType::kBytes || !value_type || *value_type == DataType::kBytes) {
    return std::nullopt;
  }
  const size_t n = LengthOf(request.keys());
  if (dispatcher.ForNumeric(key_type, n).kind() != EngineKind::kCpu) return std::nullopt;
  void* values = nullptr;
  VisitNumeric(*value_type, [&](auto v) {
    using V = decltype(v);
    auto* field = MutableNumericField<V>(response->mutable_values());
    TakeOrCopy(request.values(), movable ? movable->mutable_values() : nullptr, field);
    values = field->mutable_data();
  });
  absl::StatusOr<EngineKind> ran = absl::InternalError("unreachable");
  VisitNumeric(key_type, [&](auto k) {
    using K = decltype(k);
    auto* field = MutableNumericField<K>(response->mutable_keys());
    TakeOrCopy(request.keys(), movable ? movable->mutable_keys() : nullptr, field);
    ran = dispatcher.SortPairsNumeric(NumericSpan(field->mutable_data(), n), values,
                                      ElementSize(*value_type), ToCoreOrder(request.order()));
  });
  return ran;
}

}  // namespace

absl::Status ValidateTypedArray(const v1::TypedArray& array, absl::string_view field,
                                absl::string_view required) {
  if (IsConvertedArray(array)) return ValidateConvertedArray(array, field);
  if (!TypeOf(array)) return absl::InvalidArgumentError(required);
  return absl::OkStatus();
}

absl::StatusOr<EngineKind> SortKeys(Dispatcher& dispatcher,
                                    const v1::TypedArray& keys,
                                    SortOrder order, NullPlacement nulls, v1::TypedArray* out_keys,
                                    absl::Span<uint64_t> indices, v1::TypedArray* movable_keys) {
  if (IsConvertedArray(keys)) {
    return SortConvertedKeys(dispatcher, keys, order, nulls, out_keys, indices);
  }
  const DataType type = *TypeOf(keys);
  const size_t n = LengthOf(keys);
  if (type == DataType::kBytes) {
    std::vector<std::string_view> views(keys.bytes().values().begin(),
                                        keys.bytes().values().end());
    std::vector<uint64_t> local;
    absl::Span<uint64_t> perm = indices;
    if (perm.empty() && n > 0) {
      local.resize(n);
      perm = absl::MakeSpan(local);
    }
    absl::StatusOr<EngineKind> ran = dispatcher.ArgsortBytes(views, order, perm);
    if (!ran.ok()) return ran.status();
    absl::Status status = GatherTypedArray(keys, perm, out_keys);
    if (!status.ok()) return status;
    return ran;
  }
  absl::StatusOr<EngineKind> ran = absl::InternalError("unreachable");
  VisitNumeric(type, [&](auto t) {
    using T = decltype(t);
    auto* field = MutableNumericField<T>(out_keys);
    TakeOrCopy(keys, movable_keys, field);
    ran = dispatcher.SortNumeric(NumericSpan(field->mutable_data(), n), order, indices);
  });
  return ran;
}

absl::Status ValidateSortRequest(const v1::SortRequest& request) {
  if (UsesRegions(request)) return ValidateRegionSort(request);
  absl::Status id = ValidateRequestId(request.request_id());
  if (!id.ok()) return id;
  absl::Status keys = ValidateTypedArray(request.keys(), "keys", kKeysRequired);
  if (!keys.ok()) return keys;
  absl::Status nulls = ValidateNulls(request.nulls());
  if (!nulls.ok()) return nulls;
  return ValidateOrder(request.order());
}

absl::Status ValidateSortPairsRequest(const v1::SortPairsRequest& request) {
  if (UsesRegions(request)) return ValidateRegionSortPairs(request);
  absl::Status id = ValidateRequestId(request.request_id());
  if (!id.ok()) return id;
  absl::Status keys_ok = ValidateTypedArray(request.keys(), "keys", kKeysRequired);
  if (!keys_ok.ok()) return keys_ok;
  absl::Status values_ok = ValidateTypedArray(request.values(), "values", kValuesRequired);
  if (!values_ok.ok()) return values_ok;
  absl::Status nulls_ok = ValidateNulls(request.nulls());
  if (!nulls_ok.ok()) return nulls_ok;
  const size_t keys = LengthOf(request.keys());
  const size_t values = LengthOf(request.values());
  if (keys != values) {
    return absl::InvalidArgumentError(absl::StrCat(
        "values: length ", values, " does not match keys length ", keys));
  }
  return ValidateOrder(request.order());
}

namespace {

// The response's fields besides the arrays: request_id, engine, error.
uint64_t ResponseOverhead(const std::string& request_id) {
  return FieldBytes(request_id.size()) + 16;
}

absl::Status ResponseTooLarge(uint64_t bytes, uint64_t limit) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "response: ", bytes, " bytes would exceed the message limit of ", limit,
      " bytes (--max_message_bytes); sort arrays this large with SortChunked"));
}

}  // namespace

absl::Status CheckResponseFits(const v1::SortRequest& request, uint64_t max_response_bytes) {
  if (max_response_bytes == 0) return absl::OkStatus();
  // The sorted keys encode exactly as the request's keys did.
  uint64_t bytes = FieldBytes(request.keys().ByteSizeLong()) + ResponseOverhead(request.request_id());
  if (request.return_indices() && !request.has_indices_region()) {
    bytes += FieldBytes(8 * KeysOf(request));
  }
  if (bytes > max_response_bytes && UsesRegions(request)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "response: ", bytes, " bytes of indices would exceed the message limit of ",
        max_response_bytes, " bytes (--max_message_bytes); set indices_region to receive them "
        "in a region"));
  }
  if (bytes > max_response_bytes) return ResponseTooLarge(bytes, max_response_bytes);
  return absl::OkStatus();
}

absl::Status CheckResponseFits(const v1::SortPairsRequest& request, uint64_t max_response_bytes) {
  if (max_response_bytes == 0) return absl::OkStatus();
  const uint64_t bytes = FieldBytes(request.keys().ByteSizeLong()) +
                         FieldBytes(request.values().ByteSizeLong()) +
                         ResponseOverhead(request.request_id());
  if (bytes > max_response_bytes) return ResponseTooLarge(bytes, max_response_bytes);
  return absl::OkStatus();
}

namespace {

// a * b, saturating far below overflow (counts are not validated yet).
uint64_t SaturatingProduct(uint64_t a, uint64_t b) {
  constexpr uint64_t kCap = uint64_t{1} << 62;
  return a != 0 && b > kCap / a ? kCap : a * b;
}

uint64_t WidthOf(const v1::RegionSlice& slice) {
  const std::optional<DataType> type = RegionKeyType(slice);
  return type ? ElementSize(*type) : 8;
}

}  // namespace

uint64_t InflightBytes(const v1::SortRequest& request) {
  // Region requests carry no payload, but the CPU engine's worst case
  // allocates: scratch the size of the keys (floats' NaNs), and for an
  // argsort 16 bytes of packed words per key, plus indices returned in
  // the response.
  if (UsesRegions(request)) {
    const uint64_t n = KeysOf(request);
    uint64_t per_key = WidthOf(request.keys_region());
    if (request.return_indices()) per_key += 16 + (request.has_indices_region() ? 0 : 8);
    return SaturatingProduct(n, per_key);
  }
  const uint64_t keys = PayloadBytes(request.keys());
  const uint64_t indices = request.return_indices() ? LengthOf(request.keys()) * 8 : 0;
  return 2 * keys + indices;
}

uint64_t InflightBytes(const v1::SortPairsRequest& request) {
  // Region pairs on the CPU engine: an argsort's packed words and
  // permutation (24 bytes per key), and copies of the keys and values.
  if (UsesRegions(request)) {
    return SaturatingProduct(KeysOf(request), 24 + WidthOf(request.keys_region()) +
                                                  WidthOf(request.values_region()));
  }
  return 2 * (PayloadBytes(request.keys()) + PayloadBytes(request.values())) +
         LengthOf(request.keys()) * 8;
}

uint64_t PayloadIn(const v1::SortRequest& request) { return PayloadBytes(request.keys()); }
uint64_t PayloadIn(const v1::SortPairsRequest& request) {
  return PayloadBytes(request.keys()) + PayloadBytes(request.values());
}
uint64_t PayloadOut(const v1::SortResponse& response) {
  return PayloadBytes(response.keys()) + 8 * static_cast<uint64_t>(response.indices_size());
}
uint64_t PayloadOut(const v1::SortPairsResponse& response) {
  return PayloadBytes(response.keys()) + PayloadBytes(response.values());
}
std::optional<DataType> KeyTypeOf(const v1::SortRequest& request) {
  if (request.has_keys_region()) return RegionKeyType(request.keys_region());
  if (IsConvertedArray(request.keys())) return ConvertedSortType(request.keys());
  return TypeOf(request.keys());
}
std::optional<DataType> KeyTypeOf(const v1::SortPairsRequest& request) {
  if (request.has_keys_region()) return RegionKeyType(request.keys_region());
  if (IsConvertedArray(request.keys())) return ConvertedSortType(request.keys());
  return TypeOf(request.keys());
}

size_t KeysOf(const v1::SortRequest& request) {
  if (request.has_keys_region()) return static_cast<size_t>(request.keys_region().count());
  return LengthOf(request.keys());
}
size_t KeysOf(const v1::SortPairsRequest& request) {
  if (request.has_keys_region()) return static_cast<size_t>(request.keys_region().count());
  return LengthOf(request.keys());
}

namespace {

// RunSort and RunSortPairs; `movable`: the request, when its arrays may be
// moved into the response (null: copied).
absl::Status RunSortImpl(Dispatcher& dispatcher, const v1::SortRequest& request,
                         v1::SortRequest* movable, v1::SortResponse* response,
                         RegionRegistry* regions, bool device_allowed) {
  if (UsesRegions(request)) {
    absl::Status access = CheckRegionsEnabled(regions);
    if (!access.ok()) return access;
    return RunRegionSort(*regions, dispatcher, request, response, device_allowed);
  }
  response->set_request_id(request.request_id());
  // The permutation is written straight into the response.
  absl::Span<uint64_t> indices;
  if (request.return_indices()) {
    auto* field = response->mutable_indices();
    field->Resize(static_cast<int>(LengthOf(request.keys())), 0);
    indices = absl::MakeSpan(field->mutable_data(), field->size());
  }
  absl::StatusOr<EngineKind> engine =
      SortKeys(dispatcher, request.keys(), ToCoreOrder(request.order()),
               ToCoreNulls(request.nulls()), response->mutable_keys(), indices,
               movable ? movable->mutable_keys() : nullptr);
  if (!engine.ok()) return engine.status();
  response->set_engine(ToProtoEngine(*engine));
  return absl::OkStatus();
}

absl::Status RunSortPairsImpl(Dispatcher& dispatcher, const v1::SortPairsRequest& request,
                              v1::SortPairsRequest* movable, v1::SortPairsResponse* response,
                              RegionRegistry* regions, bool device_allowed) {
  if (UsesRegions(request)) {
    absl::Status access = CheckRegionsEnabled(regions);
    if (!access.ok()) return access;
    return RunRegionSortPairs(*regions, dispatcher, request, response, device_allowed);
  }
  response->set_request_id(request.request_id());
  if (std::optional<absl::StatusOr<EngineKind>> ran =
          SortNumericPairsOnCpu(dispatcher, request, movable, response)) {
    if (!ran->ok()) return ran->status();
    response->set_engine(ToProtoEngine(**ran));
    return absl::OkStatus();
  }
  std::vector<uint64_t> indices(LengthOf(request.keys()));
  absl::StatusOr<EngineKind> engine =
      SortKeys(dispatcher, request.keys(), ToCoreOrder(request.order()),
               ToCoreNulls(request.nulls()), response->mutable_keys(), absl::MakeSpan(indices),
               movable ? movable->mutable_keys() : nullptr);
  if (!engine.ok()) return engine.status();
  absl::Status status =
      GatherTypedArray(request.values(), indices, response->mutable_values());
  if (!status.ok()) return status;
  response->set_engine(ToProtoEngine(*engine));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunSort(Dispatcher& dispatcher, const v1::SortRequest& request,
                     v1::SortResponse* response, RegionRegistry* regions, bool device_allowed) {
  return RunSortImpl(dispatcher, request, nullptr, response, regions, device_allowed);
}

absl::Status RunSort(Dispatcher& dispatcher, v1::SortRequest* request,
                     v1::SortResponse* response, RegionRegistry* regions, bool device_allowed) {
  return RunSortImpl(dispatcher, *request, request, response, regions, device_allowed);
}

absl::Status RunSortPairs(Dispatcher& dispatcher, const v1::SortPairsRequest& request,
                          v1::SortPairsResponse* response, RegionRegistry* regions,
                          bool device_allowed) {
  return RunSortPairsImpl(dispatcher, request, nullptr, response, regions, device_allowed);
}

absl::Status RunSortPairs(Dispatcher& dispatcher, v1::SortPairsRequest* request,
                          v1::SortPairsResponse* response, RegionRegistry* regions,
                          bool device_allowed) {
  return RunSortPairsImpl(dispatcher, *request, request, response, regions, device_allowed);
}

bool Batchable(const v1::SortRequest& request) { return !IsConvertedArray(request.keys()); }
bool Batchable(const v1::SortPairsRequest& request) { return !IsConvertedArray(request.keys()); }

namespace {

// Points `out` at the request's keys and a response keys field of the
// same type and length (the batch writes the sorted keys there).
template <typename Request, typename Response>
void PrepareKeys(const Request& request, Response* response, Batcher::Request* out) {
  const DataType type = *TypeOf(request.keys());
  const size_t n = LengthOf(request.keys());
  out->type = type;
  out->order = ToCoreOrder(request.order());
  out->size = n;
  response->set_request_id(request.request_id());
  VisitNumeric(type, [&](auto t) {
    using T = decltype(t);
    auto* field = MutableNumericField<T>(response->mutable_keys());
    // Room without a zero fill: the batch writes every element.
    field->Reserve(static_cast<int>(n));
    out->keys_out = n == 0 ? nullptr : field->AddNAlreadyReserved(static_cast<int>(n));
    out->keys_in = NumericField<T>(request.keys()).data();
  });
}

}  // namespace

void PrepareBatched(const v1::SortRequest& request, v1::SortResponse* response,
                    Batcher::Request* out, std::vector<uint64_t>*) {
  PrepareKeys(request, response, out);
  if (request.return_indices()) {
    auto* field = response->mutable_indices();
    field->Reserve(static_cast<int>(out->size));
    if (out->size > 0) {  // every element written by the batch
      out->indices = absl::MakeSpan(field->AddNAlreadyReserved(static_cast<int>(out->size)), out->size);
    }
  }
}

void PrepareBatched(const v1::SortPairsRequest& request, v1::SortPairsResponse* response,
                    Batcher::Request* out, std::vector<uint64_t>* scratch) {
  PrepareKeys(request, response, out);
  scratch->resize(out->size);
  out->indices = absl::MakeSpan(*scratch);
}

absl::Status CompleteBatched(const v1::SortRequest&, v1::SortResponse*,
                             const std::vector<uint64_t>*) {
  return absl::OkStatus();
}

absl::Status CompleteBatched(const v1::SortPairsRequest& request, v1::SortPairsResponse* response,
                             const std::vector<uint64_t>* scratch) {
  return GatherTypedArray(request.values(), *scratch, response->mutable_values());
}

}  // namespace sortd
