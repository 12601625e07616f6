// The TypedArray cases sortd sorts by conversion (core/sortable_keys.h):
// int8, uint8, int16, uint16, float16, bfloat16 and bool, packed in a bytes
// field, sorted as uint32 words; datetime64 and timedelta64, sorted as
// uint64 words with NaT placed as a null. Keys are converted into a word
// buffer, sorted by the dispatcher like any uint32/uint64 array, and
// converted back (or, for the 16-bit floats, gathered from the request so
// NaN payloads come back unchanged). Values of these types are gathered.
#ifndef SORTD_SERVER_WIRE_CONVERTED_ARRAYS_H_
#define SORTD_SERVER_WIRE_CONVERTED_ARRAYS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/dispatcher.h"
#include "core/sortable_keys.h"
#include "core/types.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

// Whether `array` holds one of the converted types.
bool IsConvertedArray(const v1::TypedArray& array);
// The type name as the proto spells it ("int8", ..., "datetime64").
const char* ConvertedTypeName(const v1::TypedArray& array);
// The core type the keys are sorted as (uint32 or uint64), for routing and
// metrics; nullopt when not a converted type.
std::optional<DataType> ConvertedSortType(const v1::TypedArray& array);
// The packed bytes of a narrow case (int8 .. bool) and its type; null when
// `array` is not one.
const std::string* NarrowBytes(const v1::TypedArray& array, NarrowType* type);
// The values of a datetime64 / timedelta64 array (NaT, core/sortable_keys.h
// kNaT, is a null there); null when `array` is neither.
const google::protobuf::RepeatedField<int64_t>* TimeValuesOf(const v1::TypedArray& array);
// Elements, and payload bytes, of a converted array (0 when not one).
size_t ConvertedLength(const v1::TypedArray& array);
uint64_t ConvertedPayloadBytes(const v1::TypedArray& array);

// INVALID_ARGUMENT naming `field`: packed bytes not a multiple of the
// width, a bool byte other than 0 or 1, a time unit unset or unknown.
absl::Status ValidateConvertedArray(const v1::TypedArray& array, absl::string_view field);

// Sorts the converted `keys` into `out_keys` (same case, and unit) and
// fills `indices` (when not empty; one slot per key) with the permutation.
absl::StatusOr<EngineKind> SortConvertedKeys(Dispatcher& dispatcher, const v1::TypedArray& keys,
                                             SortOrder order, NullPlacement nulls,
                                             v1::TypedArray* out_keys,
                                             absl::Span<uint64_t> indices);

// dst = src permuted (dst[i] = src[indices[i]]) for a converted `src`;
// `dst` (replaced) must not be `src`.
absl::Status GatherConvertedArray(const v1::TypedArray& src, absl::Span<const uint64_t> indices,
                                  v1::TypedArray* dst);

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_CONVERTED_ARRAYS_H_
