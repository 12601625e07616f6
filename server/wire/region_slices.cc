#include "server/wire/region_slices.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "core/gpu_info.h"
#include "server/wire/request_checks.h"
#include "sortd/v1/typed_array_fields.h"

namespace sortd {

absl::StatusOr<Slice> Resolve(const RegionRegistry& regions, const v1::RegionSlice& ref,
                              absl::string_view field, SliceTypes types) {
  Slice s;
  s.field = std::string(field);
  if (ref.region().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".region: required"));
  }
  // Messages are built only for refusals: this runs for every request.
  absl::StatusOr<std::optional<DataType>> numeric = ValidateElementType(ref.type(), "", true);
  if (numeric.ok() && numeric->has_value()) {
    s.type = **numeric;
    s.width = ElementSize(s.type);
  } else if (types == SliceTypes::kFixedWidth && v1::ElementTypeWidth(ref.type()) > 0) {
    s.width = v1::ElementTypeWidth(ref.type());
  } else if (types == SliceTypes::kFixedWidth && ref.type() == v1::ELEMENT_TYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".type: must be set (ELEMENT_TYPE_UINT32 ... TIMEDELTA64)"));
  } else if (types == SliceTypes::kFixedWidth) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".type: unknown element type ", ref.type()));
  } else {
    return ValidateElementType(ref.type(), absl::StrCat(field, ".type"), /*optional=*/false).status();
  }
  s.element = static_cast<v1::ElementType>(ref.type());
  const uint64_t width = s.width;
  s.region = regions.Lookup(ref.region());
  if (s.region == nullptr) return RegionNotFound(ref.region(), absl::StrCat(field, ".region"));
  const uint64_t size = s.region->byte_size();
  if (ref.offset() % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".offset: ", ref.offset(),
                                                   " is not a multiple of the element width ",
                                                   width));
  }
  if (ref.offset() > size || ref.count() > (size - ref.offset()) / width) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", ref.count(), " elements of ", width, " bytes from offset ", ref.offset(),
        " lie outside region '", ref.region(), "' of ", size, " bytes"));
  }
  s.count = static_cast<size_t>(ref.count());
  absl::Status intact = s.region->CheckIntact(field, s.count * width >= Region::kStatBytes);
  if (!intact.ok()) return intact;
  s.data = s.region->data() + ref.offset();
  s.begin = s.region->backing_offset() + ref.offset();
  s.end = s.begin + s.count * width;
  return s;
}

namespace {

// "uint32" for the numeric types (as the other messages spell them), else
// the enum's name.
std::string TypeName(const Slice& s) {
  if (ValidateElementType(s.element, "", true).ok()) return DataTypeName(s.type);
  return v1::ElementType_Name(s.element);
}

}  // namespace

absl::Status CheckMatches(const Slice& out, const Slice& in) {
  if (out.element != in.element) {
    return absl::InvalidArgumentError(absl::StrCat(out.field, ".type: ", TypeName(out),
                                                   " does not match ", in.field, ".type ",
                                                   TypeName(in)));
  }
  if (out.count != in.count) {
    return absl::InvalidArgumentError(absl::StrCat(out.field, ".count: ", out.count,
                                                   " does not match ", in.field, ".count ",
                                                   in.count));
  }
  return absl::OkStatus();
}

absl::Status CheckDisjoint(const std::vector<const Slice*>& slices,
                           const std::vector<std::pair<const Slice*, const Slice*>>& same) {
  for (size_t i = 0; i < slices.size(); ++i) {
    for (size_t j = i + 1; j < slices.size(); ++j) {
      const Slice& a = *slices[i];
      const Slice& b = *slices[j];
      if (!a.Overlaps(b)) continue;
      bool allowed = false;
      for (const auto& [x, y] : same) {
        allowed = allowed || (((x == &a && y == &b) || (x == &b && y == &a)) && a.Identical(b));
      }
      if (!allowed) {
        return absl::InvalidArgumentError(absl::StrCat(
            b.field, ": overlaps ", a.field,
            " (an output may only be identical to its own input, for an in-place sort)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CopyInto(const Slice& out, const Slice& in) {
  if (out.Identical(in) || in.bytes() == 0) return absl::OkStatus();
  std::string error;
  if (!CopyAnyMemory(out.data, in.data, in.bytes(), &error)) {
    return absl::InternalError(absl::StrCat("copying ", in.field, " into ", out.field, ": ", error));
  }
  return absl::OkStatus();
}

absl::Status CheckStillIntact(const std::vector<const Slice*>& slices, bool by_dma) {
  for (const Slice* s : slices) {
    const bool read_size = s->bytes() >= Region::kStatBytes || (by_dma && s->region->pinned());
    absl::Status intact = s->region->CheckIntact(s->field, read_size);
    if (!intact.ok()) return intact;
  }
  return absl::OkStatus();
}

}  // namespace sortd
