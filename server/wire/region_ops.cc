// Region references -> checked slices -> dispatcher calls.
#include "server/wire/region_ops.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/gpu_info.h"
#include "server/wire/region_slices.h"
#include "server/wire/request_checks.h"
#include "server/wire/typed_array.h"

namespace sortd {
namespace {

absl::Status DeviceNotHere() {
  return absl::UnavailableError(
      "a region this request names became a CUDA region after the request was routed (it was "
      "unregistered and registered again); retry");
}

bool NotSet(const v1::TypedArray& array) { return array.array_case() == v1::TypedArray::ARRAY_NOT_SET; }

}  // namespace

bool UsesRegions(const v1::SortRequest& request) {
  return request.has_keys_region() || request.has_keys_out_region() || request.has_indices_region();
}

bool UsesRegions(const v1::SortPairsRequest& request) {
  return request.has_keys_region() || request.has_values_region() ||
         request.has_keys_out_region() || request.has_values_out_region();
}

absl::Status ValidateRegionSort(const v1::SortRequest& request) {
  absl::Status status = ValidateRequestId(request.request_id());
  if (!status.ok()) return status;
  if (!request.has_keys_region()) {
    return absl::InvalidArgumentError("keys_region: required when keys_out_region or "
                                      "indices_region is set");
  }
  if (request.has_keys() && !NotSet(request.keys())) {
    return absl::InvalidArgumentError("keys: leave unset when keys_region is set");
  }
  if (request.has_indices_region() && !request.return_indices()) {
    return absl::InvalidArgumentError("indices_region: set only together with return_indices");
  }
  return ValidateOrder(request.order());
}

absl::Status ValidateRegionSortPairs(const v1::SortPairsRequest& request) {
  absl::Status status = ValidateRequestId(request.request_id());
  if (!status.ok()) return status;
  if (!request.has_keys_region()) return absl::InvalidArgumentError("keys_region: required");
  if (!request.has_values_region()) {
    return absl::InvalidArgumentError("values_region: required together with keys_region");
  }
  if (request.has_keys() && !NotSet(request.keys())) {
    return absl::InvalidArgumentError("keys: leave unset when keys_region is set");
  }
  if (request.has_values() && !NotSet(request.values())) {
    return absl::InvalidArgumentError("values: leave unset when values_region is set");
  }
  return ValidateOrder(request.order());
}

absl::Status CheckRegionsEnabled(const RegionRegistry* regions) {
  if (regions == nullptr || !regions->any_enabled()) {
    if (regions != nullptr && !regions->limits().cuda_off_reason.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shared-memory regions are off on this server: ", regions->limits().cuda_off_reason));
    }
    return absl::FailedPreconditionError(
        "shared-memory regions are off on this server (start sortd with "
        "--shared_memory=system, cuda or system,cuda)");
  }
  return absl::OkStatus();
}

absl::Status CheckRegionAccess(const RegionRegistry* regions, absl::string_view peer) {
  absl::Status enabled = CheckRegionsEnabled(regions);
  if (!enabled.ok()) return enabled;
  const bool unix_only = regions->limits().unix_socket_only;
  if (!IsSameHostPeer(peer, unix_only)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "shared-memory regions serve clients on the server's host only (",
        unix_only ? "its Unix socket, --shared_memory_peers=unix" : "a Unix socket or loopback",
        "); this call came from ", peer));
  }
  return absl::OkStatus();
}

namespace {

// The region slices a request names, with their field names.
using NamedSlices = std::vector<std::pair<const v1::RegionSlice*, absl::string_view>>;

NamedSlices SlicesOf(const v1::SortRequest& r) {
  NamedSlices slices;
  if (r.has_keys_region()) slices.emplace_back(&r.keys_region(), "keys_region");
  if (r.has_keys_out_region()) slices.emplace_back(&r.keys_out_region(), "keys_out_region");
  if (r.has_indices_region()) slices.emplace_back(&r.indices_region(), "indices_region");
  return slices;
}

NamedSlices SlicesOf(const v1::SortPairsRequest& r) {
  NamedSlices slices;
  if (r.has_keys_region()) slices.emplace_back(&r.keys_region(), "keys_region");
  if (r.has_values_region()) slices.emplace_back(&r.values_region(), "values_region");
  if (r.has_keys_out_region()) slices.emplace_back(&r.keys_out_region(), "keys_out_region");
  if (r.has_values_out_region()) slices.emplace_back(&r.values_out_region(), "values_out_region");
  return slices;
}

absl::StatusOr<bool> CheckSlices(const RegionRegistry* regions, const NamedSlices& slices) {
  absl::Status enabled = CheckRegionsEnabled(regions);
  if (!enabled.ok()) return enabled;
  bool on_device = false;
  for (const auto& [slice, field] : slices) {
    absl::StatusOr<Slice> resolved = Resolve(*regions, *slice, field);
    if (!resolved.ok()) return resolved.status();
    on_device = on_device || resolved->on_device();
  }
  return on_device;
}

}  // namespace

absl::StatusOr<bool> CheckRegionReferences(const RegionRegistry* regions,
                                           const v1::SortRequest& request) {
  return CheckSlices(regions, SlicesOf(request));
}

absl::StatusOr<bool> CheckRegionReferences(const RegionRegistry* regions,
                                           const v1::SortPairsRequest& request) {
  return CheckSlices(regions, SlicesOf(request));
}

std::optional<DataType> RegionKeyType(const v1::RegionSlice& slice) {
  absl::StatusOr<std::optional<DataType>> type = ValidateElementType(slice.type(), "", true);
  if (!type.ok()) return std::nullopt;
  return *type;
}

absl::Status RunRegionSort(RegionRegistry& regions, Dispatcher& dispatcher,
                           const v1::SortRequest& request, v1::SortResponse* response,
                           bool device_allowed) {
  response->set_request_id(request.request_id());
  absl::StatusOr<Slice> keys = Resolve(regions, request.keys_region(), "keys_region");
  if (!keys.ok()) return keys.status();
  Slice out = *keys;
  if (request.has_keys_out_region()) {
    absl::StatusOr<Slice> resolved = Resolve(regions, request.keys_out_region(), "keys_out_region");
    if (!resolved.ok()) return resolved.status();
    out = *std::move(resolved);
    absl::Status status = CheckMatches(out, *keys);
    if (!status.ok()) return status;
  }
  std::optional<Slice> indices;
  if (request.has_indices_region()) {
    absl::StatusOr<Slice> resolved = Resolve(regions, request.indices_region(), "indices_region");
    if (!resolved.ok()) return resolved.status();
    indices = *std::move(resolved);
    if (indices->type != DataType::kUint64) {
      return absl::InvalidArgumentError(absl::StrCat(
          "indices_region.type: ", DataTypeName(indices->type), ", expected ELEMENT_TYPE_UINT64"));
    }
    if (indices->count != keys->count) {
      return absl::InvalidArgumentError(absl::StrCat("indices_region.count: ", indices->count,
                                                     " does not match keys_region.count ",
                                                     keys->count));
    }
  }
  std::vector<const Slice*> all = {&*keys};
  if (request.has_keys_out_region()) all.push_back(&out);
  if (indices) all.push_back(&*indices);
  absl::Status status = CheckDisjoint(all, {{&*keys, &out}});
  if (!status.ok()) return status;

  absl::Span<uint64_t> permutation;
  if (indices) {
    permutation = absl::MakeSpan(reinterpret_cast<uint64_t*>(indices->data), indices->count);
  } else if (request.return_indices()) {
    auto* field = response->mutable_indices();
    field->Resize(static_cast<int>(keys->count), 0);
    permutation = absl::MakeSpan(field->mutable_data(), field->size());
  }
  regions.CountRequest(keys->region->kind());
  regions.AtTestSite("region.resolved");
  status = CopyInto(out, *keys);
  if (!status.ok()) return status;
  const NumericSpan span(out.type, out.data, out.count);
  const bool on_device = out.on_device() || (indices && indices->on_device());
  if (!device_allowed && (on_device || keys->on_device())) return DeviceNotHere();
  const int device = out.on_device() ? out.region->device() : indices ? indices->region->device() : -1;
  const SortOrder order = ToCoreOrder(request.order());
  absl::StatusOr<EngineKind> ran =
      on_device ? dispatcher.SortOnGpu(device, span, nullptr, 0, order, permutation)
                : dispatcher.SortNumeric(span, order, permutation);
  if (!ran.ok()) return ran.status();
  status = CheckStillIntact(all, *ran != EngineKind::kCpu);
  if (!status.ok()) return status;
  response->set_engine(ToProtoEngine(*ran));
  return absl::OkStatus();
}

absl::Status RunRegionSortPairs(RegionRegistry& regions, Dispatcher& dispatcher,
                                const v1::SortPairsRequest& request,
                                v1::SortPairsResponse* response, bool device_allowed) {
  response->set_request_id(request.request_id());
  absl::StatusOr<Slice> keys = Resolve(regions, request.keys_region(), "keys_region");
  if (!keys.ok()) return keys.status();
  absl::StatusOr<Slice> values = Resolve(regions, request.values_region(), "values_region");
  if (!values.ok()) return values.status();
  if (values->count != keys->count) {
    return absl::InvalidArgumentError(absl::StrCat("values_region.count: ", values->count,
                                                   " does not match keys_region.count ",
                                                   keys->count));
  }
  Slice keys_out = *keys;
  Slice values_out = *values;
  std::vector<const Slice*> all = {&*keys, &*values};
  if (request.has_keys_out_region()) {
    absl::StatusOr<Slice> resolved = Resolve(regions, request.keys_out_region(), "keys_out_region");
    if (!resolved.ok()) return resolved.status();
    keys_out = *std::move(resolved);
    absl::Status status = CheckMatches(keys_out, *keys);
    if (!status.ok()) return status;
    all.push_back(&keys_out);
  }
  if (request.has_values_out_region()) {
    absl::StatusOr<Slice> resolved =
        Resolve(regions, request.values_out_region(), "values_out_region");
    if (!resolved.ok()) return resolved.status();
    values_out = *std::move(resolved);
    absl::Status status = CheckMatches(values_out, *values);
    if (!status.ok()) return status;
    all.push_back(&values_out);
  }
  absl::Status status = CheckDisjoint(all, {{&*keys, &keys_out}, {&*values, &values_out}});
  if (!status.ok()) return status;
  if (!device_allowed) {
    for (const Slice* s : all) {
      if (s->on_device()) return DeviceNotHere();
    }
  }
  regions.CountRequest(keys->region->kind());
  regions.AtTestSite("region.resolved");
  status = CopyInto(keys_out, *keys);
  if (status.ok()) status = CopyInto(values_out, *values);
  if (!status.ok()) return status;
  const NumericSpan span(keys_out.type, keys_out.data, keys_out.count);
  const size_t width = ElementSize(values_out.type);
  const SortOrder order = ToCoreOrder(request.order());
  absl::StatusOr<EngineKind> ran =
      keys_out.on_device() || values_out.on_device()
          ? dispatcher.SortOnGpu(
                keys_out.on_device() ? keys_out.region->device() : values_out.region->device(),
                span, values_out.data, width, order, {})
          : dispatcher.SortPairsNumeric(span, values_out.data, width, order);
  if (!ran.ok()) return ran.status();
  status = CheckStillIntact(all, *ran != EngineKind::kCpu);
  if (!status.ok()) return status;
  response->set_engine(ToProtoEngine(*ran));
  return absl::OkStatus();
}

}  // namespace sortd
