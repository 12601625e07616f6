// Companion to the generated sort.pb.h: maps a C++ element type to its
// packed field of TypedArray, so that server and client code can be written
// once per type instead of once per oneof case. Header-only, no logic.
#ifndef SORTD_PROTO_SORTD_V1_TYPED_ARRAY_FIELDS_H_
#define SORTD_PROTO_SORTD_V1_TYPED_ARRAY_FIELDS_H_

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

}  // namespace sortd::v1

#endif  // SORTD_PROTO_SORTD_V1_TYPED_ARRAY_FIELDS_H_
