// Helpers over sortd.v1.TypedArray: its element type, length and payload
// size, and typed access to its packed fields. The only code that knows how
// the proto oneof maps to core DataType.
#ifndef SORTD_SERVER_WIRE_TYPED_ARRAY_H_
#define SORTD_SERVER_WIRE_TYPED_ARRAY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/host_memory.h"
#include "core/types.h"
#include "sortd/v1/sort.pb.h"
#include "sortd/v1/typed_array_fields.h"

namespace sortd {

// The element type, or nullopt when no array is set.
std::optional<DataType> TypeOf(const v1::TypedArray& array);
// Number of elements (0 when unset).
size_t LengthOf(const v1::TypedArray& array);
// Payload bytes: elements times width, or the sum of string lengths.
uint64_t PayloadBytes(const v1::TypedArray& array);
// Encoded size of a length-delimited field (tag + length varint + body), for
// the response-size checks.
uint64_t FieldBytes(uint64_t body);

v1::Engine ToProtoEngine(EngineKind kind);

// Typed access to the packed field of a numeric TypedArray.
template <typename T>
const google::protobuf::RepeatedField<T>& NumericField(const v1::TypedArray& a) {
  return v1::TypedArrayField<T>::Get(a);
}
template <typename T>
google::protobuf::RepeatedField<T>* MutableNumericField(v1::TypedArray* a) {
  return v1::TypedArrayField<T>::Mutable(a);
}

// dst = src permuted: dst[i] = src[indices[i]]. dst is replaced and gets
// src's element type.
absl::Status GatherTypedArray(const v1::TypedArray& src,
                              absl::Span<const uint64_t> indices,
                              v1::TypedArray* dst);

// Appends src[begin, end) to dst (of the same type, or unset).
void AppendSlice(const v1::TypedArray& src, size_t begin, size_t end,
                 v1::TypedArray* dst);

// A growable host array of one element type, used to assemble chunked
// uploads larger than one message (and larger than 2 GiB). Numeric columns
// of a known length may take their memory from a HostMemoryPool: pinned
// where a GPU serves, so that the engine copies it by DMA without staging
// (the buffers sort sessions use).
class HostColumn {
 public:
  bool empty_type() const { return !type_.has_value(); }
  std::optional<DataType> type() const { return type_; }
  size_t size() const { return size_; }

  // Reserves room for `n` elements of `type` (a hint from the header);
  // numeric ones from `pool` when given (appends beyond `n` still work:
  // they move the column to the heap).
  void Reserve(DataType type, size_t n, HostMemoryPool* pool = nullptr);
  // Whether the numeric elements lie in page-locked memory.
  bool pinned() const { return pooled_.data() != nullptr && pooled_.pinned(); }
  // Appends a chunk; `field` names the array in error messages.
  absl::Status Append(const v1::TypedArray& chunk, absl::string_view field);

  // Numeric view for in-place sorting.
  NumericSpan numeric() { return NumericSpan(*type_, data(), size_); }
  // Views of the byte strings (valid until the column changes).
  std::vector<std::string_view> StringViews() const;
  // Reorders elements: new[i] = old[indices[i]].
  absl::Status Permute(absl::Span<const uint64_t> indices);
  // Copies elements [begin, end) into dst (replacing its array).
  void CopySlice(size_t begin, size_t end, v1::TypedArray* dst) const;
  // Payload bytes of element i (width, or string length).
  size_t ElementBytes(size_t i) const;

 private:
  std::optional<DataType> type_;
  size_t size_ = 0;
  uint8_t* data() { return pooled_.data() != nullptr ? pooled_.data() : raw_.data(); }
  const uint8_t* data() const {
    return pooled_.data() != nullptr ? pooled_.data() : raw_.data();
  }
  // Numeric elements: in pooled_ (pooled_bytes_ of them room) when the
  // length was reserved from a pool, else in raw_.
  HostBuffer pooled_;
  size_t pooled_bytes_ = 0;
  std::vector<uint8_t> raw_;
  std::vector<std::string> strings_;    // kBytes elements
};

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_TYPED_ARRAY_H_
