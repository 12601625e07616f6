// Reference orders of table sorts for the fuzzers (request_fuzzer's
// SortTable, session_fuzzer's table sessions): element comparisons by each
// type's own rules, computed from the values (not from sortd's words), and
// the stable lexicographic order of a table's rows.
#ifndef SORTD_TESTS_FUZZ_TABLE_ORACLE_H_
#define SORTD_TESTS_FUZZ_TABLE_ORACLE_H_

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "server/wire/table_ops.h"
#include "server/wire/typed_array.h"
#include "sortd/v1/sort.pb.h"
#include "tests/fuzz/fuzz_oracle.h"

namespace sortd::fuzz {

// The packed bytes of a narrow (8/16-bit, bool) array and its width;
// null when `a` is not one.
inline const std::string* NarrowPayload(const v1::TypedArray& a, size_t* width) {
  *width = 1;
  switch (a.array_case()) {
    case v1::TypedArray::kInt8: return &a.int8().values();
    case v1::TypedArray::kUint8: return &a.uint8().values();
    case v1::TypedArray::kBoolean: return &a.boolean().values();
    default: break;
  }
  *width = 2;
  switch (a.array_case()) {
    case v1::TypedArray::kInt16: return &a.int16().values();
    case v1::TypedArray::kUint16: return &a.uint16().values();
    case v1::TypedArray::kFloat16: return &a.float16().values();
    case v1::TypedArray::kBfloat16: return &a.bfloat16().values();
    default: return nullptr;
  }
}

// Element i of a narrow array as a double, by the type's own rules (exact
// for every 8- and 16-bit value; the 16-bit floats decoded by hand).
inline double NarrowValue(const v1::TypedArray& a, const std::string& bytes, size_t width, size_t i) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data()) + i * width;
  const uint32_t v = width == 1 ? p[0] : uint32_t(p[0] | (p[1] << 8));
  switch (a.array_case()) {
    case v1::TypedArray::kInt8: return int8_t(v);
    case v1::TypedArray::kInt16: return int16_t(v);
    case v1::TypedArray::kFloat16: {
      const int exponent = (v >> 10) & 0x1F, mantissa = v & 0x3FF;
      double m = exponent == 0x1F ? (mantissa ? std::nan("") : HUGE_VAL)
                 : exponent == 0  ? std::ldexp(mantissa, -24)
                                  : std::ldexp(1024 + mantissa, exponent - 25);
      return (v & 0x8000) ? -m : m;
    }
    case v1::TypedArray::kBfloat16: {
      const uint32_t bits = v << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    default: return v;  // uint8, uint16, bool
  }
}

// datetime64 / timedelta64 values; null when `a` is neither.
inline const google::protobuf::RepeatedField<int64_t>* TimeValues(const v1::TypedArray& a) {
  if (a.has_datetime64()) return &a.datetime64().values();
  if (a.has_timedelta64()) return &a.timedelta64().values();
  return nullptr;
}

// Whether element i of `a` sorts before element j (reference order of its
// type: floats NaN last, -0.0 before +0.0; byte strings unsigned; times as
// int64).
inline bool LessAt(const v1::TypedArray& a, size_t i, size_t j) {
  size_t width = 0;
  if (const std::string* bytes = NarrowPayload(a, &width)) {
    return ::sortd::testing::RefLess(NarrowValue(a, *bytes, width, i), NarrowValue(a, *bytes, width, j));
  }
  if (const auto* times = TimeValues(a)) return times->Get(int(i)) < times->Get(int(j));
  const DataType type = *TypeOf(a);
  if (type == DataType::kBytes) return a.bytes().values(int(i)) < a.bytes().values(int(j));
  bool less = false;
  VisitNumeric(type, [&](auto tag) {
    using T = decltype(tag);
    less = ::sortd::testing::RefLess(NumericField<T>(a).Get(int(i)), NumericField<T>(a).Get(int(j)));
  });
  return less;
}

inline bool IsNullAt(const v1::TableColumn& column, size_t row) {
  const std::string& v = column.validity();
  if (!v.empty() && ((uint8_t(v[row / 8]) >> (row % 8)) & 1) == 0) return true;
  const auto* times = TimeValues(column.values());
  return times != nullptr && times->Get(int(row)) == std::numeric_limits<int64_t>::min();
}

// The stable lexicographic order of a table's rows by its keys.
inline std::vector<uint64_t> TablePermutation(const v1::SortTableRequest& request) {
  std::vector<uint64_t> perm(KeysOf(request));
  std::iota(perm.begin(), perm.end(), uint64_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](uint64_t x, uint64_t y) {
    for (const v1::SortKey& key : request.by()) {
      const v1::TableColumn& column = request.columns(int(key.column()));
      const bool nx = IsNullAt(column, x), ny = IsNullAt(column, y);
      if (nx != ny) return key.nulls() == v1::NULL_PLACEMENT_FIRST ? nx : ny;
      if (nx) continue;
      const bool ascending = key.order() == v1::SORT_ORDER_ASCENDING;
      if (LessAt(column.values(), x, y)) return ascending;
      if (LessAt(column.values(), y, x)) return !ascending;
    }
    return false;
  });
  return perm;
}

}  // namespace sortd::fuzz

#endif  // SORTD_TESTS_FUZZ_TABLE_ORACLE_H_
