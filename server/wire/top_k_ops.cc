#include "server/wire/top_k_ops.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/cpu/parallel.h"
#include "core/cpu/top_k.h"
#include "core/sortable_keys.h"
#include "server/wire/converted_arrays.h"
#include "server/wire/region_ops.h"
#include "server/wire/region_slices.h"
#include "server/wire/request_checks.h"
#include "server/wire/sort_ops.h"
#include "server/wire/typed_array.h"

namespace sortd {
namespace {

constexpr absl::string_view kTopKKeysRequired =
    "keys: required (set one of uint32, int32, float32, uint64, int64, float64, bytes, int8, "
    "uint8, int16, uint16, float16, bfloat16, boolean, datetime64, timedelta64)";

// Segment boundaries: offsets[s] .. offsets[s + 1] is segment s (one
// segment, the whole array, without row_length or segment_lengths).
std::vector<uint64_t> SegmentOffsets(const v1::TopKRequest& request) {
  const uint64_t n = KeysOf(request);
  std::vector<uint64_t> offsets{0};
  if (request.row_length() > 0) {
    const uint64_t rows = n / request.row_length();
    offsets.reserve(rows + 1);
    for (uint64_t r = 1; r <= rows; ++r) offsets.push_back(r * request.row_length());
  } else if (request.segment_lengths_size() > 0) {
    offsets.reserve(request.segment_lengths_size() + 1);
    for (uint64_t length : request.segment_lengths()) offsets.push_back(offsets.back() + length);
  } else {
    offsets.push_back(n);
  }
  return offsets;
}

// Bytes per element of a fixed-width array (0 for byte strings or unset).
uint64_t FixedWidth(const v1::TypedArray& array) {
  const uint64_t n = LengthOf(array);
  const std::optional<DataType> type = TypeOf(array);
  if (type && *type == DataType::kBytes) return 0;
  return n == 0 ? 0 : PayloadBytes(array) / n;
}

// The same for an inline array or, when set, its region slice.
uint64_t WidthOf(const v1::TypedArray& array, bool in_region, const v1::RegionSlice& slice) {
  if (!in_region) return FixedWidth(array);
  const std::optional<DataType> type = RegionKeyType(slice);
  return type ? ElementSize(*type) : 8;
}
uint64_t KeyWidth(const v1::TopKRequest& r) {
  return WidthOf(r.keys(), r.has_keys_region(), r.keys_region());
}
uint64_t ValueWidth(const v1::TopKRequest& r) {
  return WidthOf(r.values(), r.has_values_region(), r.values_region());
}
bool HasValues(const v1::TopKRequest& r) { return r.has_values() || r.has_values_region(); }
bool IsSet(const v1::TypedArray& a) { return a.array_case() != v1::TypedArray::ARRAY_NOT_SET; }

// Writes to out[0, min(k, end - begin)) the positions (within the
// segment) of the first k keys of keys[begin, end) in sorted order, for
// one key representation.
using SelectFn = std::function<void(size_t begin, size_t end, size_t k, int threads,
                                    uint64_t* out)>;

template <typename T>
SelectFn SelectOver(const T* keys, SortOrder order) {
  return [keys, order](size_t begin, size_t end, size_t k, int threads, uint64_t* out) {
    cpu::TopKPositions<T>(absl::MakeConstSpan(keys + begin, end - begin), k, order, threads,
                          out);
  };
}

// The selector over numeric keys at `data` (a region slice).
SelectFn SelectOverNumeric(DataType type, const void* data, SortOrder order) {
  SelectFn select;
  VisitNumeric(type, [&](auto t) {
    using T = decltype(t);
    select = SelectOver(static_cast<const T*>(data), order);
  });
  return select;
}

// dst = the slice's elements at `positions`, as an array of its type.
absl::Status GatherSlice(const Slice& slice, absl::Span<const uint64_t> positions,
                         v1::TypedArray* dst) {
  absl::Status status;
  VisitNumeric(slice.type, [&](auto t) {
    using T = decltype(t);
    auto* out = MutableNumericField<T>(dst);
    out->Resize(static_cast<int>(positions.size()), T{});
    status = GatherByIndex(slice.data, sizeof(T), positions, out->mutable_data());
  });
  return status;
}

// Builds the selector for the request's keys; `words` and `views` hold
// what converted keys and byte strings are selected over.
SelectFn MakeSelector(const v1::TypedArray& keys, SortOrder order, NullPlacement nulls,
                      std::vector<uint32_t>* narrow_words, std::vector<uint64_t>* time_words,
                      std::vector<std::string_view>* views) {
  NarrowType narrow;
  if (const std::string* bytes = NarrowBytes(keys, &narrow)) {
    // Ascending word order is sortd's order of the elements.
    narrow_words->resize(bytes->size() / NarrowWidth(narrow));
    WidenNarrow(narrow, reinterpret_cast<const uint8_t*>(bytes->data()),
                absl::MakeSpan(*narrow_words));
    return SelectOver(narrow_words->data(), order);
  }
  if (const auto* times = TimeValuesOf(keys)) {
    // Words whose sort in `order` places NaT where `nulls` says.
    time_words->resize(times->size());
    TimeToWords(absl::MakeConstSpan(times->data(), times->size()), order, nulls,
                absl::MakeSpan(*time_words));
    return SelectOver(time_words->data(), order);
  }
  const DataType type = *TypeOf(keys);
  if (type == DataType::kBytes) {
    views->reserve(keys.bytes().values_size());
    for (const std::string& s : keys.bytes().values()) views->emplace_back(s);
    const std::string_view* data = views->data();
    return [data, order](size_t begin, size_t end, size_t k, int, uint64_t* out) {
      const std::vector<uint64_t> kept =
          cpu::TopKStrings(absl::MakeConstSpan(data + begin, end - begin), k, order);
      std::copy(kept.begin(), kept.end(), out);
    };
  }
  SelectFn select;
  VisitNumeric(type, [&](auto t) {
    using T = decltype(t);
    select = SelectOver(NumericField<T>(keys).data(), order);
  });
  return select;
}

// Whether keys of `type` in device memory are selected on the GPU (the
// radix types; the converted ones are not laid out there as words).
bool GpuSelectable(DataType type) {
  switch (type) {
    case DataType::kUint32: case DataType::kInt32: case DataType::kFloat32:
    case DataType::kUint64: case DataType::kInt64: case DataType::kFloat64:
      return true;
    default:
      return false;
  }
}

// The request's slices resolved in their regions: keys and values both in
// system regions (read by the CPU), or both in CUDA regions of one GPU
// (selected there, core/cuda/select/top_k.cuh).
absl::Status ResolveSlices(const RegionRegistry& regions, const v1::TopKRequest& request,
                           std::optional<Slice>* keys, std::optional<Slice>* values) {
  absl::StatusOr<Slice> k = Resolve(regions, request.keys_region(), "keys_region");
  if (!k.ok()) return k.status();
  *keys = *std::move(k);
  if (request.has_values_region()) {
    absl::StatusOr<Slice> v = Resolve(regions, request.values_region(), "values_region");
    if (!v.ok()) return v.status();
    *values = *std::move(v);
    if ((*values)->on_device() != (*keys)->on_device() ||
        ((*keys)->on_device() && (*values)->region->device() != (*keys)->region->device())) {
      return absl::FailedPreconditionError(
          "values_region: must lie where keys_region does (both in system regions, or both in "
          "CUDA regions of one GPU)");
    }
  }
  if ((*keys)->on_device() && !GpuSelectable((*keys)->type)) {
    return absl::FailedPreconditionError(
        "keys_region.type: a CUDA region's keys are selected on its GPU, which takes uint32, "
        "int32, float32, uint64, int64 and float64");
  }
  return absl::OkStatus();
}

absl::Status DeviceMovedHere() {
  return absl::UnavailableError(
      "keys_region became a CUDA region after the request was routed (it was unregistered and "
      "registered again); retry");
}

absl::Status TooLarge(uint64_t bytes, uint64_t limit) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "response: ", bytes, " bytes would exceed the message limit of ", limit,
      " bytes (--max_message_bytes); ask for a smaller k"));
}

}  // namespace

bool UsesRegions(const v1::TopKRequest& request) {
  return request.has_keys_region() || request.has_values_region();
}

absl::StatusOr<bool> CheckRegionReferences(const RegionRegistry* regions,
                                           const v1::TopKRequest& request) {
  absl::Status enabled = CheckRegionsEnabled(regions);
  if (!enabled.ok()) return enabled;
  std::optional<Slice> keys, values;
  absl::Status status = ResolveSlices(*regions, request, &keys, &values);
  if (!status.ok()) return status;
  return keys->on_device();
}

absl::Status ValidateTopKRequest(const v1::TopKRequest& request) {
  absl::Status status = ValidateRequestId(request.request_id());
  if (status.ok() && request.has_keys_region()) {
    if (IsSet(request.keys())) {
      return absl::InvalidArgumentError("keys: leave unset when keys_region is set");
    }
    absl::StatusOr<std::optional<DataType>> type =
        ValidateElementType(request.keys_region().type(), "keys_region.type", false);
    status = type.status();
  } else if (status.ok()) {
    if (request.has_values_region()) {
      return absl::InvalidArgumentError("values_region: needs keys_region (keys inline take "
                                        "values inline)");
    }
    status = ValidateTypedArray(request.keys(), "keys", kTopKKeysRequired);
  }
  if (status.ok()) status = ValidateOrder(request.order());
  if (status.ok()) status = ValidateNulls(request.nulls());
  if (!status.ok()) return status;
  if (request.k() == 0) {
    return absl::InvalidArgumentError(
        "k: must be at least 1 (0 is proto3's unset; a k past the length returns every key, "
        "sorted)");
  }
  const uint64_t n = KeysOf(request);
  if (request.has_values_region()) {
    if (IsSet(request.values())) {
      return absl::InvalidArgumentError("values: leave unset when values_region is set");
    }
    absl::StatusOr<std::optional<DataType>> type =
        ValidateElementType(request.values_region().type(), "values_region.type", false);
    if (!type.ok()) return type.status();
    if (request.values_region().count() != n) {
      return absl::InvalidArgumentError(absl::StrCat("values_region: count ",
                                                     request.values_region().count(),
                                                     " does not match keys_region's ", n));
    }
  } else if (request.has_values()) {
    if (request.has_keys_region()) {
      return absl::InvalidArgumentError("values: in values_region when keys_region is set");
    }
    status = ValidateTypedArray(request.values(), "values", "values: no array set");
    if (!status.ok()) return status;
    const uint64_t values = LengthOf(request.values());
    if (values != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("values: length ", values, " does not match keys length ", n));
    }
  }
  if (request.row_length() > 0 && request.segment_lengths_size() > 0) {
    return absl::InvalidArgumentError(
        "segment_lengths: set row_length or segment_lengths, not both");
  }
  if (request.row_length() > 0 && n % request.row_length() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("row_length: keys' length ", n,
                                                   " is not a whole number of rows of ",
                                                   request.row_length()));
  }
  if (request.segment_lengths_size() > 0) {
    uint64_t sum = 0;
    for (int s = 0; s < request.segment_lengths_size(); ++s) {
      const uint64_t length = request.segment_lengths(s);
      if (length > n - sum) {
        return absl::InvalidArgumentError(absl::StrCat(
            "segment_lengths: segments 0..", s, " hold more than the keys' length ", n));
      }
      sum += length;
    }
    if (sum != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("segment_lengths: sum to ", sum, " but keys has ", n));
    }
  }
  return absl::OkStatus();
}

uint64_t KeptKeys(const v1::TopKRequest& request) {
  const uint64_t k = request.k();
  const uint64_t n = KeysOf(request);
  if (request.row_length() > 0) {
    return n / request.row_length() * std::min(k, request.row_length());
  }
  if (request.segment_lengths_size() > 0) {
    uint64_t kept = 0;
    for (uint64_t length : request.segment_lengths()) kept += std::min(k, length);
    return kept;
  }
  return std::min(k, n);
}

absl::Status CheckResponseFits(const v1::TopKRequest& request, uint64_t max_response_bytes) {
  if (max_response_bytes == 0) return absl::OkStatus();
  const uint64_t kept = KeptKeys(request);
  uint64_t bytes = FieldBytes(kept * KeyWidth(request)) +
                   FieldBytes(request.request_id().size()) + 16;
  if (request.return_indices()) bytes += FieldBytes(8 * kept);
  if (HasValues(request)) bytes += FieldBytes(kept * ValueWidth(request));
  // Counts are varints: at most 10 bytes each.
  bytes += FieldBytes(10 * static_cast<uint64_t>(request.segment_lengths_size()));
  if (bytes > max_response_bytes) return TooLarge(bytes, max_response_bytes);
  return absl::OkStatus();
}

size_t KeysOf(const v1::TopKRequest& request) {
  if (request.has_keys_region()) return static_cast<size_t>(request.keys_region().count());
  return LengthOf(request.keys());
}

uint64_t PayloadIn(const v1::TopKRequest& request) {
  return PayloadBytes(request.keys()) + PayloadBytes(request.values());
}

uint64_t PayloadOut(const v1::TopKResponse& response) {
  return PayloadBytes(response.keys()) + PayloadBytes(response.values()) +
         8 * static_cast<uint64_t>(response.indices_size());
}

uint64_t InflightBytes(const v1::TopKRequest& request) {
  const uint64_t n = KeysOf(request);
  const uint64_t kept = KeptKeys(request);
  const uint64_t width = KeyWidth(request);
  // The words of converted keys, or the views of byte strings.
  uint64_t scratch = 0;
  if (IsConvertedArray(request.keys())) scratch = 8 * n;
  if (width == 0 && !request.has_keys_region()) scratch = 16 * n;
  // The response: kept keys and values (byte strings: at most all of
  // them), positions twice (in the segment, in the array), the heaps.
  const uint64_t kept_payload = width == 0 ? PayloadBytes(request.keys()) : kept * width;
  // The selection's own scratch (core/cpu/top_k.h), 16 bytes a (word,
  // position) pair: the parts' heaps of one array (k pairs a part; parts
  // only past kTopKParallelMinKeys, at most one a max(2^18, 4k) keys) and
  // the radix-select buffers of parts or segments of at most
  // kTopKSelectMaxKeys keys (a task at a time; counted for 64 tasks).
  const uint64_t k = request.k();
  const uint64_t heaps = kept + std::min(n / 4, n / std::max<uint64_t>(cpu::kTopKParallelMinKeys,
                                                                      std::min(k, n) * 4) *
                                                    std::min(k, n));
  const bool segmented = request.row_length() > 0 || request.segment_lengths_size() > 0;
  const uint64_t select =
      std::min<uint64_t>(n, (segmented ? 64 : 1) *
                                std::min<uint64_t>(cpu::kTopKSelectMaxKeys,
                                                   std::min(k, n) * cpu::kTopKSelectShare));
  return PayloadIn(request) + scratch + kept_payload + kept * (ValueWidth(request) + 40) +
         16 * (2 * heaps + select);  // the heaps, and their union merged
}

std::optional<DataType> KeyTypeOf(const v1::TopKRequest& request) {
  if (request.has_keys_region()) return RegionKeyType(request.keys_region());
  if (IsConvertedArray(request.keys())) return ConvertedSortType(request.keys());
  return TypeOf(request.keys());
}

void DescribeSuccess(const v1::TopKRequest& request, const v1::TopKResponse& response,
                     RequestRecord* record) {
  record->engine = FromProtoEngine(response.engine());
  record->bytes_sent = PayloadOut(response);
  record->keys_sorted = KeysOf(request);
}

namespace {

// The selection of slices in CUDA regions, on their GPU: the kept
// positions, keys and values come back into the response.
absl::Status RunTopKOnGpu(const v1::TopKRequest& request, const Slice& keys,
                          const std::optional<Slice>& values, Dispatcher& dispatcher,
                          v1::TopKResponse* response) {
  const std::vector<uint64_t> offsets =
      request.segment_lengths_size() > 0 ? SegmentOffsets(request) : std::vector<uint64_t>();
  const uint64_t kept = KeptKeys(request);
  std::vector<uint64_t> positions(kept);
  DeviceTopK job;
  job.keys = NumericSpan(keys.type, keys.data, keys.count);
  job.order = ToCoreOrder(request.order());
  job.k = request.k();
  job.row_length = request.row_length();
  job.offsets = offsets;
  job.kept = kept;
  job.positions = positions.data();
  VisitNumeric(keys.type, [&](auto t) {
    using T = decltype(t);
    auto* out = MutableNumericField<T>(response->mutable_keys());
    out->Resize(static_cast<int>(kept), T{});
    job.keys_out = out->mutable_data();
  });
  if (values) {
    job.values = values->data;
    job.value_width = ElementSize(values->type);
    VisitNumeric(values->type, [&](auto t) {
      using T = decltype(t);
      auto* out = MutableNumericField<T>(response->mutable_values());
      out->Resize(static_cast<int>(kept), T{});
      job.values_out = out->mutable_data();
    });
  }
  absl::Status status = dispatcher.TopKOnGpu(keys.region->device(), job);
  if (status.ok()) {
    std::vector<const Slice*> held = {&keys};
    if (values) held.push_back(&*values);
    status = CheckStillIntact(held, /*by_dma=*/true);
  }
  if (!status.ok()) {
    response->Clear();
    return status;
  }
  if (request.return_indices()) response->mutable_indices()->Assign(positions.begin(), positions.end());
  if (request.segment_lengths_size() > 0) {
    auto* counts = response->mutable_segment_counts();
    counts->Reserve(request.segment_lengths_size());
    for (uint64_t length : request.segment_lengths()) counts->Add(std::min<uint64_t>(length, request.k()));
  }
  response->set_request_id(EchoableRequestId(request.request_id()));
  response->set_engine(ToProtoEngine(EngineKind::kGpuRadix));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTopK(const v1::TopKRequest& request, v1::TopKResponse* response, int threads,
                     uint64_t max_response_bytes, RegionRegistry* regions, Dispatcher* dispatcher,
                     bool device_allowed) {
  const SortOrder order = ToCoreOrder(request.order());
  // Region slices, held (mapped) until the answer is gathered.
  std::optional<Slice> keys_slice, values_slice;
  if (UsesRegions(request)) {
    // Resolved again: a region may have been re-registered since admission.
    absl::Status enabled = CheckRegionsEnabled(regions);
    if (!enabled.ok()) return enabled;
    absl::Status status = ResolveSlices(*regions, request, &keys_slice, &values_slice);
    if (!status.ok()) return status;
    if (keys_slice->on_device()) {
      if (!device_allowed || dispatcher == nullptr) return DeviceMovedHere();
      return RunTopKOnGpu(request, *keys_slice, values_slice, *dispatcher, response);
    }
  }
  std::vector<uint32_t> narrow_words;
  std::vector<uint64_t> time_words;
  std::vector<std::string_view> views;
  const SelectFn select =
      keys_slice ? SelectOverNumeric(keys_slice->type, keys_slice->data, order)
                 : MakeSelector(request.keys(), order, ToCoreNulls(request.nulls()), &narrow_words,
                                &time_words, &views);
  const std::vector<uint64_t> offsets = SegmentOffsets(request);
  const size_t segments = offsets.size() - 1;
  const size_t n = offsets.back();
  const uint64_t k = request.k();
  // Where each segment's kept keys go in the response.
  std::vector<uint64_t> out_at(segments + 1, 0);
  for (size_t s = 0; s < segments; ++s) {
    out_at[s + 1] = out_at[s] + std::min<uint64_t>(k, offsets[s + 1] - offsets[s]);
  }
  std::vector<uint64_t> local(out_at.back());
  threads = std::max(threads, 1);
  if (segments == 1) {
    // One array: the selection itself runs on the threads.
    select(0, n, k, threads, local.data());
  } else {
    // Many segments: each task takes the segments starting in its share
    // of the keys, one thread each.
    const int parts = static_cast<int>(std::clamp<size_t>(
        n / cpu::kTopKParallelMinKeys, 1, std::min<size_t>(threads, std::max<size_t>(segments, 1))));
    cpu::RunTasks(parts, [&](int p) {
      const uint64_t from = cpu::PartBegin(n, parts, p);
      const uint64_t to = cpu::PartBegin(n, parts, p + 1);
      size_t s = std::lower_bound(offsets.begin(), offsets.end() - 1, from) - offsets.begin();
      // Empty segments at the end belong to the last task.
      for (; s < segments && (offsets[s] < to || (p == parts - 1)); ++s) {
        select(offsets[s], offsets[s + 1], k, 1, local.data() + out_at[s]);
      }
    });
  }
  // Positions in the whole array, to gather keys and values.
  std::vector<uint64_t> global(local.size());
  for (size_t s = 0; s < segments; ++s) {
    for (uint64_t j = out_at[s]; j < out_at[s + 1]; ++j) global[j] = offsets[s] + local[j];
  }
  absl::Status status = keys_slice
                            ? GatherSlice(*keys_slice, global, response->mutable_keys())
                            : GatherTypedArray(request.keys(), global, response->mutable_keys());
  if (status.ok() && values_slice) {
    status = GatherSlice(*values_slice, global, response->mutable_values());
  } else if (status.ok() && request.has_values()) {
    status = GatherTypedArray(request.values(), global, response->mutable_values());
  }
  if (status.ok() && keys_slice) {
    // A client that shrank its shm object meanwhile gets an error, not
    // keys read from lost pages.
    std::vector<const Slice*> held = {&*keys_slice};
    if (values_slice) held.push_back(&*values_slice);
    status = CheckStillIntact(held, /*by_dma=*/false);
  }
  if (!status.ok()) return status;
  if (request.return_indices()) {
    response->mutable_indices()->Assign(local.begin(), local.end());
  }
  if (request.segment_lengths_size() > 0) {
    auto* counts = response->mutable_segment_counts();
    counts->Reserve(static_cast<int>(segments));
    for (size_t s = 0; s < segments; ++s) counts->Add(out_at[s + 1] - out_at[s]);
  }
  response->set_request_id(EchoableRequestId(request.request_id()));
  response->set_engine(ToProtoEngine(EngineKind::kCpu));
  // Fixed-width answers were sized before any work (CheckResponseFits).
  const bool strings = request.keys().has_bytes() || request.values().has_bytes();
  if (strings && max_response_bytes > 0 && response->ByteSizeLong() > max_response_bytes) {
    const uint64_t bytes = response->ByteSizeLong();
    response->Clear();
    return TooLarge(bytes, max_response_bytes);
  }
  return absl::OkStatus();
}

}  // namespace sortd
