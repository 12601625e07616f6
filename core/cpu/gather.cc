// Permutation gather for numeric value arrays (pairs sorts), and the
// default SortEngine::SortBatch (arrays one by one), SortPairsNumeric
// (argsort, then gather) and SortArriving (none).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/cpu/scratch_lease.h"
#include "core/engine.h"

namespace sortd {
namespace {

template <typename T>
void Gather(const T* src, absl::Span<const uint64_t> indices, T* dst) {
  for (size_t i = 0; i < indices.size(); ++i) dst[i] = src[indices[i]];
}

}  // namespace

absl::Status GatherByIndex(const void* src, size_t element_size,
                           absl::Span<const uint64_t> indices, void* dst) {
  switch (element_size) {
    case 4:
      Gather(static_cast<const uint32_t*>(src), indices, static_cast<uint32_t*>(dst));
      return absl::OkStatus();
    case 8:
      Gather(static_cast<const uint64_t*>(src), indices, static_cast<uint64_t*>(dst));
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("values: unsupported element size ", element_size));
  }
}

absl::Status SortEngine::SortPairsNumeric(NumericSpan keys, void* values, size_t value_width,
                                          SortOrder order) {
  if (value_width != 4 && value_width != 8) {
    return absl::InvalidArgumentError(absl::StrCat("values: unsupported element size ", value_width));
  }
  // The indices, then a copy of the values (the gather reads them as they
  // were), in memory the thread keeps: fresh memory per call cost more than
  // the sort itself up to 2^17 keys (page faults; docs/benchmarks.md).
  const size_t index_bytes = keys.size * sizeof(uint64_t);
  const cpu::ScratchLease scratch(index_bytes + keys.size * value_width);
  const absl::Span<uint64_t> indices(scratch.as<uint64_t>(), keys.size);
  absl::Status status = SortNumeric(keys, order, indices);
  if (!status.ok() || keys.size == 0) return status;
  char* before = scratch.as<char>() + index_bytes;
  std::memcpy(before, values, keys.size * value_width);
  return GatherByIndex(before, value_width, indices, values);
}

absl::Status SortEngine::SortArriving(const ArrivingSort&) {
  return absl::UnavailableError("this engine sorts only complete input");
}

absl::Status SortEngine::SortBatch(DataType type, SortOrder order,
                                   absl::Span<const BatchItem> items) {
  const size_t width = ElementSize(type);
  if (width == 0) return absl::InvalidArgumentError("batches hold numeric keys only");
  for (const BatchItem& item : items) {
    if (item.keys_out != item.keys_in && item.size > 0) {
      std::memcpy(item.keys_out, item.keys_in, item.size * width);
    }
    absl::Status status = SortNumeric(NumericSpan(type, item.keys_out, item.size), order, item.indices);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace sortd
