// Companion to the generated sort.pb.h: maps a C++ element type to its
// packed field of TypedArray, so that server and client code can be written
// once per type instead of once per oneof case, and gives each
// ElementType's width. Header-only.
#ifndef SORTD_PROTO_SORTD_V1_TYPED_ARRAY_FIELDS_H_
#define SORTD_PROTO_SORTD_V1_TYPED_ARRAY_FIELDS_H_

#include <cstddef>
#include <cstdint>

#include "sortd/v1/sort.pb.h"

namespace sortd::v1 {

template <typename T>
struct TypedArrayField;

#define SORTD_TYPED_ARRAY_FIELD(CppType, name, Case)                                      \
  template <>                                                                             \
  struct TypedArrayField<CppType> {                                                       \
    static constexpr TypedArray::ArrayCase kCase = TypedArray::Case;                      \
    static const google::protobuf::RepeatedField<CppType>& Get(const TypedArray& a) {     \
      return a.name().values();                                                           \
    }                                                                                     \
    static google::protobuf::RepeatedField<CppType>* Mutable(TypedArray* a) {             \
      return a->mutable_##name()->mutable_values();                                       \
    }                                                                                     \
  };

SORTD_TYPED_ARRAY_FIELD(uint32_t, uint32, kUint32)
SORTD_TYPED_ARRAY_FIELD(int32_t, int32, kInt32)
SORTD_TYPED_ARRAY_FIELD(float, float32, kFloat32)
SORTD_TYPED_ARRAY_FIELD(uint64_t, uint64, kUint64)
SORTD_TYPED_ARRAY_FIELD(int64_t, int64, kInt64)
SORTD_TYPED_ARRAY_FIELD(double, float64, kFloat64)
#undef SORTD_TYPED_ARRAY_FIELD

// Bytes an element of `type` (any fixed-width ElementType: the six numeric
// types, and a table column's narrow types, bool and times); 0 for
// UNSPECIFIED or an unknown value.
inline constexpr size_t ElementTypeWidth(int type) {
  switch (type) {
    case ELEMENT_TYPE_UINT32:
    case ELEMENT_TYPE_INT32:
    case ELEMENT_TYPE_FLOAT32: return 4;
    case ELEMENT_TYPE_UINT64:
    case ELEMENT_TYPE_INT64:
    case ELEMENT_TYPE_FLOAT64:
    case ELEMENT_TYPE_DATETIME64:
    case ELEMENT_TYPE_TIMEDELTA64: return 8;
    case ELEMENT_TYPE_INT8:
    case ELEMENT_TYPE_UINT8:
    case ELEMENT_TYPE_BOOL: return 1;
    case ELEMENT_TYPE_INT16:
    case ELEMENT_TYPE_UINT16:
    case ELEMENT_TYPE_FLOAT16:
    case ELEMENT_TYPE_BFLOAT16: return 2;
    default: return 0;
  }
}

}  // namespace sortd::v1

#endif  // SORTD_PROTO_SORTD_V1_TYPED_ARRAY_FIELDS_H_
