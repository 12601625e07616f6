#include "server/wire/converted_arrays.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine.h"

namespace sortd {
namespace {

using google::protobuf::RepeatedField;

// `dst` cleared and set to the narrow case `type`; returns its bytes.
std::string* MutableNarrowBytes(NarrowType type, v1::TypedArray* dst) {
  dst->Clear();
  switch (type) {
    case NarrowType::kInt8: return dst->mutable_int8()->mutable_values();
    case NarrowType::kUint8: return dst->mutable_uint8()->mutable_values();
    case NarrowType::kInt16: return dst->mutable_int16()->mutable_values();
    case NarrowType::kUint16: return dst->mutable_uint16()->mutable_values();
    case NarrowType::kFloat16: return dst->mutable_float16()->mutable_values();
    case NarrowType::kBFloat16: return dst->mutable_bfloat16()->mutable_values();
    case NarrowType::kBool: return dst->mutable_boolean()->mutable_values();
  }
  return nullptr;
}

// The values and unit of a time case; null when not one.
const RepeatedField<int64_t>* TimeValues(const v1::TypedArray& a, v1::TimeUnit* unit) {
  if (a.has_datetime64()) {
    *unit = a.datetime64().unit();
    return &a.datetime64().values();
  }
  if (a.has_timedelta64()) {
    *unit = a.timedelta64().unit();
    return &a.timedelta64().values();
  }
  return nullptr;
}

// `dst` set to the time case of `src` with its unit; returns its values.
RepeatedField<int64_t>* MutableTimeLike(const v1::TypedArray& src, v1::TypedArray* dst) {
  dst->Clear();
  if (src.has_datetime64()) {
    dst->mutable_datetime64()->set_unit(src.datetime64().unit());
    return dst->mutable_datetime64()->mutable_values();
  }
  dst->mutable_timedelta64()->set_unit(src.timedelta64().unit());
  return dst->mutable_timedelta64()->mutable_values();
}

void GatherBytes(const uint8_t* src, size_t width, absl::Span<const uint64_t> indices,
                 uint8_t* dst) {
  if (width == 1) {
    for (size_t i = 0; i < indices.size(); ++i) dst[i] = src[indices[i]];
  } else {
    for (size_t i = 0; i < indices.size(); ++i) std::memcpy(dst + 2 * i, src + 2 * indices[i], 2);
  }
}

const uint8_t* Bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

}  // namespace

const std::string* NarrowBytes(const v1::TypedArray& a, NarrowType* type) {
  switch (a.array_case()) {
    case v1::TypedArray::kInt8: *type = NarrowType::kInt8; return &a.int8().values();
    case v1::TypedArray::kUint8: *type = NarrowType::kUint8; return &a.uint8().values();
    case v1::TypedArray::kInt16: *type = NarrowType::kInt16; return &a.int16().values();
    case v1::TypedArray::kUint16: *type = NarrowType::kUint16; return &a.uint16().values();
    case v1::TypedArray::kFloat16: *type = NarrowType::kFloat16; return &a.float16().values();
    case v1::TypedArray::kBfloat16: *type = NarrowType::kBFloat16; return &a.bfloat16().values();
    case v1::TypedArray::kBoolean: *type = NarrowType::kBool; return &a.boolean().values();
    default: return nullptr;
  }
}

const RepeatedField<int64_t>* TimeValuesOf(const v1::TypedArray& array) {
  v1::TimeUnit unit;
  return TimeValues(array, &unit);
}

bool IsConvertedArray(const v1::TypedArray& array) {
  NarrowType type;
  v1::TimeUnit unit;
  return NarrowBytes(array, &type) != nullptr || TimeValues(array, &unit) != nullptr;
}

const char* ConvertedTypeName(const v1::TypedArray& array) {
  NarrowType type;
  if (NarrowBytes(array, &type) != nullptr) return NarrowTypeName(type);
  if (array.has_datetime64()) return "datetime64";
  if (array.has_timedelta64()) return "timedelta64";
  return "unknown";
}

std::optional<DataType> ConvertedSortType(const v1::TypedArray& array) {
  NarrowType type;
  v1::TimeUnit unit;
  if (NarrowBytes(array, &type) != nullptr) return DataType::kUint32;
  if (TimeValues(array, &unit) != nullptr) return DataType::kUint64;
  return std::nullopt;
}

size_t ConvertedLength(const v1::TypedArray& array) {
  NarrowType type;
  v1::TimeUnit unit;
  if (const std::string* bytes = NarrowBytes(array, &type)) return bytes->size() / NarrowWidth(type);
  if (const RepeatedField<int64_t>* values = TimeValues(array, &unit)) return values->size();
  return 0;
}

uint64_t ConvertedPayloadBytes(const v1::TypedArray& array) {
  NarrowType type;
  v1::TimeUnit unit;
  if (const std::string* bytes = NarrowBytes(array, &type)) return bytes->size();
  if (const RepeatedField<int64_t>* values = TimeValues(array, &unit)) return values->size() * 8;
  return 0;
}

absl::Status ValidateConvertedArray(const v1::TypedArray& array, absl::string_view field) {
  NarrowType type;
  v1::TimeUnit unit;
  if (const std::string* bytes = NarrowBytes(array, &type)) {
    const size_t width = NarrowWidth(type);
    if (bytes->size() % width != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".", NarrowTypeName(type), ": ", bytes->size(), " bytes is not a whole number of ",
          width, "-byte elements"));
    }
    if (type == NarrowType::kBool) {
      for (size_t i = 0; i < bytes->size(); ++i) {
        const uint8_t b = Bytes(*bytes)[i];
        if (b > 1) {
          return absl::InvalidArgumentError(absl::StrCat(field, ".boolean: element ", i, " is byte ",
                                                         b, " (expected 0 or 1)"));
        }
      }
    }
    return absl::OkStatus();
  }
  if (TimeValues(array, &unit) != nullptr) {
    const char* name = array.has_datetime64() ? "datetime64" : "timedelta64";
    if (unit == v1::TIME_UNIT_UNSPECIFIED) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".", name, ".unit: required (TIME_UNIT_SECOND, ...)"));
    }
    if (!v1::TimeUnit_IsValid(unit)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".", name, ".unit: unknown value ", static_cast<int>(unit)));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": not a converted type"));
}

absl::StatusOr<EngineKind> SortConvertedKeys(Dispatcher& dispatcher, const v1::TypedArray& keys,
                                             SortOrder order, NullPlacement nulls,
                                             v1::TypedArray* out_keys,
                                             absl::Span<uint64_t> indices) {
  NarrowType type;
  v1::TimeUnit unit;
  if (const std::string* bytes = NarrowBytes(keys, &type)) {
    const size_t n = bytes->size() / NarrowWidth(type);
    std::vector<uint32_t> words(n);
    WidenNarrow(type, Bytes(*bytes), absl::MakeSpan(words));
    // The 16-bit floats restore their elements by the permutation.
    std::vector<uint64_t> local;
    absl::Span<uint64_t> perm = indices;
    if (!NarrowIsBijective(type) && perm.empty() && n > 0) {
      local.resize(n);
      perm = absl::MakeSpan(local);
    }
    absl::StatusOr<EngineKind> ran = dispatcher.SortNumeric(NumericSpan(words.data(), n), order, perm);
    if (!ran.ok()) return ran.status();
    std::string* out = MutableNarrowBytes(type, out_keys);
    out->resize(bytes->size());
    uint8_t* dst = reinterpret_cast<uint8_t*>(out->data());
    if (NarrowIsBijective(type)) {
      NarrowWords(type, words, dst);
    } else {
      GatherBytes(Bytes(*bytes), NarrowWidth(type), perm, dst);
    }
    return ran;
  }
  if (const RepeatedField<int64_t>* values = TimeValues(keys, &unit)) {
    const size_t n = values->size();
    RepeatedField<int64_t>* out = MutableTimeLike(keys, out_keys);
    out->Resize(static_cast<int>(n), 0);
    // The words are sorted in the response's own buffer (same width).
    static_assert(sizeof(int64_t) == sizeof(uint64_t));
    absl::Span<uint64_t> words(reinterpret_cast<uint64_t*>(out->mutable_data()), n);
    TimeToWords(absl::MakeConstSpan(values->data(), n), order, nulls, words);
    absl::StatusOr<EngineKind> ran = dispatcher.SortNumeric(NumericSpan(words.data(), n), order, indices);
    if (!ran.ok()) return ran.status();
    TimeFromWords(words, order, nulls, absl::MakeSpan(out->mutable_data(), n));
    return ran;
  }
  return absl::InvalidArgumentError("keys: not a converted type");
}

absl::Status GatherConvertedArray(const v1::TypedArray& src, absl::Span<const uint64_t> indices,
                                  v1::TypedArray* dst) {
  NarrowType type;
  v1::TimeUnit unit;
  if (const std::string* bytes = NarrowBytes(src, &type)) {
    const size_t width = NarrowWidth(type);
    std::string* out = MutableNarrowBytes(type, dst);
    out->resize(indices.size() * width);
    GatherBytes(Bytes(*bytes), width, indices, reinterpret_cast<uint8_t*>(out->data()));
    return absl::OkStatus();
  }
  if (const RepeatedField<int64_t>* values = TimeValues(src, &unit)) {
    RepeatedField<int64_t>* out = MutableTimeLike(src, dst);
    out->Resize(static_cast<int>(indices.size()), 0);
    return GatherByIndex(values->data(), 8, indices, out->mutable_data());
  }
  return absl::InvalidArgumentError("values: not a converted type");
}

}  // namespace sortd
