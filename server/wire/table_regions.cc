#include "server/wire/table_regions.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "server/wire/region_ops.h"
#include "server/wire/table_column_types.h"

namespace sortd {
namespace {

bool NotSet(const v1::TypedArray& array) { return array.array_case() == v1::TypedArray::ARRAY_NOT_SET; }

uint64_t BitmapBytes(uint64_t rows) { return (rows + 7) / 8; }

}  // namespace

bool UsesRegions(const v1::SortTableRequest& request) {
  if (request.has_indices_region()) return true;
  for (const v1::TableColumn& column : request.columns()) {
    if (column.has_values_region() || column.has_validity_region()) return true;
  }
  return false;
}

absl::Status ValidateColumnRegions(const v1::TableColumn& column, uint64_t rows,
                                   const std::string& field) {
  if (column.has_validity_region() && !column.has_values_region()) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".validity_region: only with values_region (a column's values in the message "
               "carry their bitmap in `validity`)"));
  }
  if (!column.has_values_region()) return absl::OkStatus();
  if (!NotSet(column.values())) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".values: leave unset when values_region is set"));
  }
  const v1::RegionSlice& values = column.values_region();
  absl::StatusOr<TableColumnType> type =
      TableColumnTypeOf(values.type(), column.unit(), absl::StrCat(field, ".values_region.type"),
                        absl::StrCat(field, ".unit"));
  if (!type.ok()) return type.status();
  if (values.count() != rows) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".values_region.count: ", values.count(),
                                                   " rows, but the table has ", rows));
  }
  if (!column.has_validity_region()) return absl::OkStatus();
  if (!column.validity().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".validity: leave empty when validity_region is set"));
  }
  const v1::RegionSlice& validity = column.validity_region();
  if (validity.type() != v1::ELEMENT_TYPE_UINT8) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".validity_region.type: ",
                                                   v1::ElementType_Name(validity.type()),
                                                   ", expected ELEMENT_TYPE_UINT8 (bitmap bytes)"));
  }
  if (validity.count() < BitmapBytes(rows)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".validity_region.count: ", validity.count(), " bytes for ", rows, " rows (needs ",
        BitmapBytes(rows), ", a bit a row)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateIndicesRegion(const v1::SortTableRequest& request, uint64_t rows) {
  if (!request.has_indices_region()) return absl::OkStatus();
  const v1::RegionSlice& indices = request.indices_region();
  if (indices.type() != v1::ELEMENT_TYPE_UINT64) {
    return absl::InvalidArgumentError(absl::StrCat("indices_region.type: ",
                                                   v1::ElementType_Name(indices.type()),
                                                   ", expected ELEMENT_TYPE_UINT64"));
  }
  if (indices.count() != rows) {
    return absl::InvalidArgumentError(absl::StrCat("indices_region.count: ", indices.count(),
                                                   ", but the table has ", rows, " rows"));
  }
  return absl::OkStatus();
}

std::vector<const Slice*> TableSlices::all() const {
  std::vector<const Slice*> out;
  for (const std::optional<Slice>& s : values) {
    if (s) out.push_back(&*s);
  }
  for (const std::optional<Slice>& s : validity) {
    if (s) out.push_back(&*s);
  }
  if (indices) out.push_back(&*indices);
  return out;
}

absl::StatusOr<TableSlices> ResolveTableSlices(const RegionRegistry* regions,
                                               const v1::SortTableRequest& request) {
  absl::Status enabled = CheckRegionsEnabled(regions);
  if (!enabled.ok()) return enabled;
  TableSlices out;
  out.values.resize(request.columns_size());
  out.validity.resize(request.columns_size());
  auto resolve = [&](const v1::RegionSlice& ref, const std::string& field,
                     std::optional<Slice>* slot) -> absl::Status {
    absl::StatusOr<Slice> slice = Resolve(*regions, ref, field, SliceTypes::kFixedWidth);
    if (!slice.ok()) return slice.status();
    if (slice->on_device() && request.return_columns()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": region '", ref.region(), "' is a CUDA region; columns in device memory "
          "are not reordered (ask for the permutation, without return_columns)"));
    }
    if (slice->on_device()) {
      if (out.device < 0) out.device = slice->region->device();
      if (slice->region->device() != out.device) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": region '", ref.region(), "' is on GPU ", slice->region->device(),
            ", another slice of this table on GPU ", out.device, " (one GPU a table)"));
      }
    }
    *slot = *std::move(slice);
    return absl::OkStatus();
  };
  for (int c = 0; c < request.columns_size(); ++c) {
    const v1::TableColumn& column = request.columns(c);
    const std::string field = absl::StrCat("columns[", c, "]");
    if (column.has_values_region()) {
      absl::Status status =
          resolve(column.values_region(), absl::StrCat(field, ".values_region"), &out.values[c]);
      if (!status.ok()) return status;
    }
    if (column.has_validity_region()) {
      absl::Status status = resolve(column.validity_region(),
                                    absl::StrCat(field, ".validity_region"), &out.validity[c]);
      if (!status.ok()) return status;
    }
  }
  if (request.has_indices_region()) {
    absl::Status status = resolve(request.indices_region(), "indices_region", &out.indices);
    if (!status.ok()) return status;
  }
  // What is written must not share bytes with anything else: the
  // permutation always, the columns too when they are reordered in place.
  // Columns only read may share memory (the same array named twice).
  const std::vector<const Slice*> all = out.all();
  if (request.return_columns()) {
    absl::Status status = CheckDisjoint(all, {});
    if (!status.ok()) return status;
  } else if (out.indices) {
    for (const Slice* s : all) {
      if (s != &*out.indices && s->Overlaps(*out.indices)) {
        return absl::InvalidArgumentError(
            absl::StrCat("indices_region: overlaps ", s->field, " (the permutation is written there)"));
      }
    }
  }
  return out;
}

absl::StatusOr<bool> CheckRegionReferences(const RegionRegistry* regions,
                                           const v1::SortTableRequest& request) {
  absl::StatusOr<TableSlices> slices = ResolveTableSlices(regions, request);
  if (!slices.ok()) return slices.status();
  return slices->device >= 0;
}

}  // namespace sortd
