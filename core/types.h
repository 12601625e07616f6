// Plain C++ vocabulary shared by every sortd engine: key types, sort order,
// and mutable views of host arrays. No CUDA, gRPC or protobuf types here.
#ifndef SORTD_CORE_TYPES_H_
#define SORTD_CORE_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sortd {

// Element types a key (or value) array can have.
enum class DataType {
  kUint32,
  kInt32,
  kFloat32,
  kUint64,
  kInt64,
  kFloat64,
  kBytes,  // variable-length byte strings
};

enum class SortOrder { kAscending, kDescending };

// Which engine ran a request (mirrors sortd.v1.Engine).
enum class EngineKind { kCpu, kGpuRadix, kGpuMerge, kGpuSegmented };

// Bytes per element of a numeric type; 0 for kBytes.
constexpr size_t ElementSize(DataType type) {
  switch (type) {
    case DataType::kUint32:
    case DataType::kInt32:
    case DataType::kFloat32:
      return 4;
    case DataType::kUint64:
    case DataType::kInt64:
    case DataType::kFloat64:
      return 8;
    case DataType::kBytes:
      return 0;
  }
  return 0;
}

// Short lowercase name ("uint32", ..., "bytes"); used in messages and labels.
const char* DataTypeName(DataType type);
const char* EngineKindName(EngineKind kind);

template <typename T>
struct DataTypeOf;
template <> struct DataTypeOf<uint32_t> { static constexpr DataType value = DataType::kUint32; };
template <> struct DataTypeOf<int32_t> { static constexpr DataType value = DataType::kInt32; };
template <> struct DataTypeOf<float> { static constexpr DataType value = DataType::kFloat32; };
template <> struct DataTypeOf<uint64_t> { static constexpr DataType value = DataType::kUint64; };
template <> struct DataTypeOf<int64_t> { static constexpr DataType value = DataType::kInt64; };
template <> struct DataTypeOf<double> { static constexpr DataType value = DataType::kFloat64; };

// A mutable view of a host array of numeric keys: `size` elements of `type`
// at `data`. The engine sorts it in place.
// Calls fn(T{}) with the C++ type of a numeric DataType (nothing for bytes).
template <typename Fn>
void VisitNumeric(DataType type, Fn&& fn) {
  switch (type) {
    case DataType::kUint32: fn(uint32_t{}); return;
    case DataType::kInt32: fn(int32_t{}); return;
    case DataType::kFloat32: fn(float{}); return;
    case DataType::kUint64: fn(uint64_t{}); return;
    case DataType::kInt64: fn(int64_t{}); return;
    case DataType::kFloat64: fn(double{}); return;
    case DataType::kBytes: return;
  }
}

struct NumericSpan {
  DataType type = DataType::kUint32;
  void* data = nullptr;
  size_t size = 0;

  NumericSpan() = default;
  NumericSpan(DataType t, void* d, size_t n) : type(t), data(d), size(n) {}
  template <typename T>
  NumericSpan(T* d, size_t n) : type(DataTypeOf<T>::value), data(d), size(n) {}

  size_t size_bytes() const { return size * ElementSize(type); }
};

}  // namespace sortd

#endif  // SORTD_CORE_TYPES_H_
