// TypedArray plumbing. Numeric copies are memcpy of packed fields; byte
// strings are copied once into their destination.
#include "server/wire/typed_array.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/engine.h"
#include "server/wire/converted_arrays.h"

namespace sortd {

using google::protobuf::RepeatedField;


std::optional<DataType> TypeOf(const v1::TypedArray& array) {
  switch (array.array_case()) {
    case v1::TypedArray::kUint32: return DataType::kUint32;
    case v1::TypedArray::kInt32: return DataType::kInt32;
    case v1::TypedArray::kFloat32: return DataType::kFloat32;
    case v1::TypedArray::kUint64: return DataType::kUint64;
    case v1::TypedArray::kInt64: return DataType::kInt64;
    case v1::TypedArray::kFloat64: return DataType::kFloat64;
    case v1::TypedArray::kBytes: return DataType::kBytes;
    // Sorted by conversion (converted_arrays.h), not a core type.
    default: break;
  }
  return std::nullopt;
}

size_t LengthOf(const v1::TypedArray& array) {
  std::optional<DataType> type = TypeOf(array);
  if (!type) return ConvertedLength(array);
  if (*type == DataType::kBytes) return array.bytes().values_size();
  size_t n = 0;
  VisitNumeric(*type, [&](auto t) {
    n = NumericField<decltype(t)>(array).size();
  });
  return n;
}

uint64_t PayloadBytes(const v1::TypedArray& array) {
  std::optional<DataType> type = TypeOf(array);
  if (!type) return ConvertedPayloadBytes(array);
  if (*type != DataType::kBytes) return LengthOf(array) * ElementSize(*type);
  uint64_t total = 0;
  for (const std::string& s : array.bytes().values()) total += s.size();
  return total;
}

uint64_t FieldBytes(uint64_t body) {
  uint64_t varint = 1;
  for (uint64_t v = body; v >= 0x80; v >>= 7) ++varint;
  return 1 + varint + body;
}

v1::Engine ToProtoEngine(EngineKind kind) {
  switch (kind) {
    case EngineKind::kCpu: return v1::ENGINE_CPU;
    case EngineKind::kGpuRadix: return v1::ENGINE_GPU_RADIX;
    case EngineKind::kGpuMerge: return v1::ENGINE_GPU_MERGE;
    case EngineKind::kGpuSegmented: return v1::ENGINE_GPU_SEGMENTED;
  }
  return v1::ENGINE_UNSPECIFIED;
}

absl::Status GatherTypedArray(const v1::TypedArray& src,
                              absl::Span<const uint64_t> indices,
                              v1::TypedArray* dst) {
  if (IsConvertedArray(src)) return GatherConvertedArray(src, indices, dst);
  std::optional<DataType> type = TypeOf(src);
  if (!type) return absl::InvalidArgumentError("values: required");
  dst->Clear();
  if (*type == DataType::kBytes) {
    auto* out = dst->mutable_bytes()->mutable_values();
    out->Reserve(static_cast<int>(indices.size()));
    for (uint64_t i : indices) out->Add()->assign(src.bytes().values(static_cast<int>(i)));
    return absl::OkStatus();
  }
  absl::Status status;
  VisitNumeric(*type, [&](auto t) {
    using T = decltype(t);
    const RepeatedField<T>& in = NumericField<T>(src);
    RepeatedField<T>* out = MutableNumericField<T>(dst);
    out->Resize(static_cast<int>(indices.size()), T{});
    status = GatherByIndex(in.data(), sizeof(T), indices, out->mutable_data());
  });
  return status;
}

void AppendSlice(const v1::TypedArray& src, size_t begin, size_t end,
                 v1::TypedArray* dst) {
  std::optional<DataType> type = TypeOf(src);
  if (!type || end <= begin) return;
  if (*type == DataType::kBytes) {
    auto* out = dst->mutable_bytes()->mutable_values();
    for (size_t i = begin; i < end; ++i) *out->Add() = src.bytes().values(static_cast<int>(i));
    return;
  }
  VisitNumeric(*type, [&](auto t) {
    using T = decltype(t);
    const RepeatedField<T>& in = NumericField<T>(src);
    MutableNumericField<T>(dst)->Add(in.begin() + begin, in.begin() + end);
  });
}

void HostColumn::Reserve(DataType type, size_t n, HostMemoryPool* pool) {
  type_ = type;
  if (type == DataType::kBytes) {
    strings_.reserve(n);
  } else if (pool != nullptr && size_ == 0 && n > 0) {
    pooled_bytes_ = n * ElementSize(type);
    pooled_ = pool->Allocate(pooled_bytes_);
  } else {
    raw_.reserve(n * ElementSize(type));
  }
}

absl::Status HostColumn::Append(const v1::TypedArray& chunk,
                                absl::string_view field) {
  std::optional<DataType> type = TypeOf(chunk);
  if (!type) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  if (type_ && *type_ != *type) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": element type ", DataTypeName(*type),
        " differs from earlier chunks (", DataTypeName(*type_), ")"));
  }
  type_ = type;
  if (*type == DataType::kBytes) {
    for (const std::string& s : chunk.bytes().values()) strings_.push_back(s);
    size_ += chunk.bytes().values_size();
    return absl::OkStatus();
  }
  VisitNumeric(*type, [&](auto t) {
    using T = decltype(t);
    const RepeatedField<T>& in = NumericField<T>(chunk);
    const size_t old_bytes = size_ * sizeof(T);
    const size_t add = static_cast<size_t>(in.size()) * sizeof(T);
    if (pooled_.data() != nullptr && old_bytes + add > pooled_bytes_) {
      // More than was reserved: continue on the heap.
      raw_.assign(pooled_.data(), pooled_.data() + old_bytes);
      pooled_.Reset();
    }
    if (pooled_.data() == nullptr) raw_.resize(old_bytes + add);
    if (add > 0) std::memcpy(data() + old_bytes, in.data(), add);
    size_ += in.size();
  });
  return absl::OkStatus();
}

std::vector<std::string_view> HostColumn::StringViews() const {
  return std::vector<std::string_view>(strings_.begin(), strings_.end());
}

absl::Status HostColumn::Permute(absl::Span<const uint64_t> indices) {
  if (!type_) return absl::OkStatus();
  if (*type_ == DataType::kBytes) {
    std::vector<std::string> permuted(indices.size());
    for (size_t i = 0; i < indices.size(); ++i) permuted[i] = std::move(strings_[indices[i]]);
    strings_.swap(permuted);
    return absl::OkStatus();
  }
  std::vector<uint8_t> permuted(size_ * ElementSize(*type_));
  absl::Status status = GatherByIndex(data(), ElementSize(*type_), indices, permuted.data());
  raw_.swap(permuted);
  pooled_.Reset();
  return status;
}

void HostColumn::CopySlice(size_t begin, size_t end, v1::TypedArray* dst) const {
  dst->Clear();
  if (!type_) return;
  if (*type_ == DataType::kBytes) {
    auto* out = dst->mutable_bytes()->mutable_values();
    for (size_t i = begin; i < end; ++i) *out->Add() = strings_[i];
    return;
  }
  VisitNumeric(*type_, [&](auto t) {
    using T = decltype(t);
    const T* elements = reinterpret_cast<const T*>(data());
    MutableNumericField<T>(dst)->Add(elements + begin, elements + end);
  });
}

size_t HostColumn::ElementBytes(size_t i) const {
  if (!type_) return 0;
  if (*type_ == DataType::kBytes) return strings_[i].size();
  return ElementSize(*type_);
}

}  // namespace sortd
