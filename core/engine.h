// The interface every sorting engine (CPU, GPU) implements. The server talks
// to engines only through this header.
#ifndef SORTD_CORE_ENGINE_H_
#define SORTD_CORE_ENGINE_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "core/arriving_input.h"
#include "core/types.h"

namespace sortd {

// One array of a batch (core/engine.h SortBatch): `size` keys read from
// keys_in, sorted into keys_out (may equal keys_in); `indices` (empty, or
// `size` slots) receives the permutation of this array.
struct BatchItem {
  const void* keys_in = nullptr;
  void* keys_out = nullptr;
  size_t size = 0;
  absl::Span<uint64_t> indices;
};

// A numeric sort whose arrays land in host memory while it runs (sort
// sessions; core/arriving_input.h says how ranges are handed out).
struct ArrivingSort {
  NumericSpan keys;  // filling; sorted in place
  SortOrder order = SortOrder::kAscending;
  // Optional values of `value_width` (4 or 8) bytes, filling; permuted in
  // place with the keys. Not together with indices.
  void* values = nullptr;
  size_t value_width = 0;
  absl::Span<uint64_t> indices;  // optional: receives the permutation
  ArrivingInput* input = nullptr;
  // Optional: the sorted keys delta-coded instead (SortedKeyBlocks says
  // when an engine writes them).
  SortedKeyBlocks* key_blocks = nullptr;
};

class SortEngine {
 public:
  virtual ~SortEngine() = default;

  // Which engine this is (reported to clients and in metrics).
  virtual EngineKind kind() const = 0;

  // Sorts `keys` in place, stably, in `order`. If `indices` is non-empty it
  // must have keys.size elements and receives the permutation: indices[i] is
  // the input position of the i-th sorted key.
  virtual absl::Status SortNumeric(NumericSpan keys, SortOrder order,
                                   absl::Span<uint64_t> indices) = 0;

  // Sorts `keys` in place, stably, and permutes `values` (keys.size
  // elements of `value_width` bytes, 4 or 8) in place with them. The
  // default argsorts and gathers through a scratch copy of the values.
  virtual absl::Status SortPairsNumeric(NumericSpan keys, void* values, size_t value_width,
                                        SortOrder order);

  // Sorts input that is still arriving (sort sessions; ArrivingSort says
  // how), returning once it is sorted. The default takes none: UNAVAILABLE,
  // the arrays untouched, sort them once complete. CANCELLED when the input
  // was abandoned.
  virtual absl::Status SortArriving(const ArrivingSort& sort);

  // Sorts many independent arrays of one numeric type in one go (the
  // batcher's launch). The default sorts them one by one.
  virtual absl::Status SortBatch(DataType type, SortOrder order, absl::Span<const BatchItem> items);
  // Stable argsort of byte strings (unsigned lexicographic, shorter prefix
  // first): fills `indices` (same size as `keys`) with the permutation.
  virtual absl::Status ArgsortBytes(absl::Span<const std::string_view> keys,
                                    SortOrder order,
                                    absl::Span<uint64_t> indices) = 0;
};

// dst[i] = src[indices[i]] for numeric arrays of `element_size` 4 or 8 bytes.
// `dst` must not alias `src`. Indices must be < the length of src (checked by
// the caller, which produced them).
absl::Status GatherByIndex(const void* src, size_t element_size,
                           absl::Span<const uint64_t> indices, void* dst);

}  // namespace sortd

#endif  // SORTD_CORE_ENGINE_H_
