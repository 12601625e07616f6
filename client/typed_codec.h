// Encoding of C++ arrays into sortd.v1.TypedArray and back, for the client.
// Numeric arrays are bulk copies of packed fields; std::string maps to bytes.
#ifndef SORTD_CLIENT_TYPED_CODEC_H_
#define SORTD_CLIENT_TYPED_CODEC_H_

#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "sortd/v1/sort.pb.h"
#include "sortd/v1/typed_array_fields.h"

namespace sortd::client {

// Payload bytes of an array (width times count, or total string length).
template <typename T>
size_t PayloadBytes(absl::Span<const T> in) {
  if constexpr (std::is_same_v<T, std::string>) {
    size_t total = 0;
    for (const std::string& s : in) total += s.size() + 2;  // + tag/length
    return total;
  } else {
    return in.size() * sizeof(T);
  }
}

// The sort-session element type of a numeric T (numbered as TypedArray's
// fields); UNSPECIFIED for byte strings.
template <typename T>
constexpr v1::ElementType ElementTypeOf() {
  if constexpr (std::is_same_v<T, std::string>) {
    return v1::ELEMENT_TYPE_UNSPECIFIED;
  } else {
    return static_cast<v1::ElementType>(v1::TypedArrayField<T>::kCase);
  }
}

// Appends `in` to `out` (which must be unset or of the same type).
template <typename T>
void EncodeTo(absl::Span<const T> in, v1::TypedArray* out) {
  if constexpr (std::is_same_v<T, std::string>) {
    auto* values = out->mutable_bytes()->mutable_values();
    for (const std::string& s : in) *values->Add() = s;
  } else {
    v1::TypedArrayField<T>::Mutable(out)->Add(in.begin(), in.end());
  }
}

// Appends the elements of `in` to `out`; fails if `in` holds another type.
template <typename T>
absl::Status AppendDecoded(const v1::TypedArray& in, std::vector<T>* out,
                           absl::string_view field) {
  if (in.array_case() == v1::TypedArray::ARRAY_NOT_SET) return absl::OkStatus();
  if constexpr (std::is_same_v<T, std::string>) {
    if (in.array_case() != v1::TypedArray::kBytes) {
      return absl::InternalError(absl::StrCat(field, ": server returned another type"));
    }
    out->insert(out->end(), in.bytes().values().begin(), in.bytes().values().end());
  } else {
    if (in.array_case() != v1::TypedArrayField<T>::kCase) {
      return absl::InternalError(absl::StrCat(field, ": server returned another type"));
    }
    const auto& values = v1::TypedArrayField<T>::Get(in);
    out->insert(out->end(), values.begin(), values.end());
  }
  return absl::OkStatus();
}

}  // namespace sortd::client

#endif  // SORTD_CLIENT_TYPED_CODEC_H_
