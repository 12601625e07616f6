// Differential fuzzer of the CPU engine: arrays of every key type, both
// orders, keys-only and with indices, one at a time (single-threaded and
// the parallel path) and as a batch, each compared bit for bit with the
// reference stable sort (fuzz_oracle.h).
//
// Input: byte 0 picks the key type (mod 7: the six numeric types, then
// byte strings); byte 1 holds flags (bit 0 descending, bit 1 indices, bit 2
// parallel engine, bit 3 batch); byte 2 the number of batch segments. The
// rest is the keys: raw little-endian elements, or byte strings as
// (length mod 32, bytes) records.
#include <cstring>
#include <memory>

#include "absl/types/span.h"
#include "core/cpu/cpu_engine.h"
#include "tests/fuzz/fuzz_oracle.h"

namespace sortd::fuzz {
namespace {

SortEngine& SingleThreaded() {
  static SortEngine* engine = CreateCpuEngine(CpuEngineOptions{1, size_t{1} << 40}).release();
  return *engine;
}

// Multi-threaded from 32 keys, so that small inputs reach the parallel path.
SortEngine& Parallel() {
  static SortEngine* engine = CreateCpuEngine(CpuEngineOptions{4, 32}).release();
  return *engine;
}

template <typename T>
void CheckOne(SortEngine& engine, const std::vector<T>& input, SortOrder order,
              bool with_indices) {
  std::vector<T> keys = input;
  std::vector<uint64_t> indices(with_indices ? input.size() : 0, ~uint64_t{0});
  const absl::Status status =
      engine.SortNumeric(NumericSpan(keys.data(), keys.size()), order, absl::MakeSpan(indices));
  Check(status.ok(), "SortNumeric failed: " + status.ToString());
  const auto ref = ::sortd::testing::ReferenceSort(input, order);
  Check(::sortd::testing::SameBits(keys, ref.keys), "SortNumeric keys");
  if (with_indices) Check(::sortd::testing::SameIndices(indices, ref.indices), "SortNumeric indices");
}

template <typename T>
void CheckBatch(SortEngine& engine, const std::vector<T>& input, SortOrder order,
                bool with_indices, const uint8_t* cuts, size_t num_cuts) {
  // Segment lengths from the cut bytes; the last segment takes the rest.
  std::vector<size_t> lengths;
  size_t used = 0;
  for (size_t i = 0; i < num_cuts && used < input.size(); ++i) {
    const size_t len = std::min<size_t>(cuts[i] % 64, input.size() - used);
    lengths.push_back(len);
    used += len;
  }
  lengths.push_back(input.size() - used);

  std::vector<T> out(input.size());
  std::vector<uint64_t> indices(with_indices ? input.size() : 0, ~uint64_t{0});
  std::vector<BatchItem> items;
  size_t begin = 0;
  for (size_t len : lengths) {
    BatchItem item;
    item.keys_in = input.data() + begin;
    item.keys_out = out.data() + begin;
    item.size = len;
    if (with_indices) item.indices = absl::MakeSpan(indices.data() + begin, len);
    items.push_back(item);
    begin += len;
  }
  const absl::Status status = engine.SortBatch(DataTypeOf<T>::value, order, items);
  Check(status.ok(), "SortBatch failed: " + status.ToString());
  begin = 0;
  for (size_t len : lengths) {
    const std::vector<T> segment(input.begin() + begin, input.begin() + begin + len);
    const auto ref = ::sortd::testing::ReferenceSort(segment, order);
    Check(::sortd::testing::SameBits(std::vector<T>(out.begin() + begin, out.begin() + begin + len),
                                     ref.keys),
          "SortBatch keys of a segment");
    if (with_indices) {
      Check(::sortd::testing::SameIndices(
                std::vector<uint64_t>(indices.begin() + begin, indices.begin() + begin + len),
                ref.indices),
            "SortBatch indices of a segment (segment positions)");
    }
    begin += len;
  }
}

template <typename T>
void FuzzNumeric(const uint8_t* data, size_t size, SortOrder order, bool with_indices,
                 bool parallel, bool batch, size_t segments) {
  const uint8_t* cuts = data;
  const size_t num_cuts = batch ? std::min(segments, size) : 0;
  data += num_cuts;
  size -= num_cuts;
  std::vector<T> input(size / sizeof(T));
  if (!input.empty()) std::memcpy(input.data(), data, input.size() * sizeof(T));
  SortEngine& engine = parallel ? Parallel() : SingleThreaded();
  if (batch) {
    CheckBatch(engine, input, order, with_indices, cuts, num_cuts);
  } else {
    CheckOne(engine, input, order, with_indices);
  }
}

void FuzzBytes(const uint8_t* data, size_t size, SortOrder order, bool parallel) {
  std::vector<std::string> strings;
  while (size > 0) {
    const size_t len = std::min<size_t>(data[0] % 32, size - 1);
    strings.emplace_back(reinterpret_cast<const char*>(data + 1), len);
    data += 1 + len;
    size -= 1 + len;
  }
  std::vector<std::string_view> views(strings.begin(), strings.end());
  std::vector<uint64_t> indices(strings.size(), ~uint64_t{0});
  SortEngine& engine = parallel ? Parallel() : SingleThreaded();
  const absl::Status status = engine.ArgsortBytes(views, order, absl::MakeSpan(indices));
  Check(status.ok(), "ArgsortBytes failed: " + status.ToString());
  Check(::sortd::testing::SameIndices(indices, ReferencePermutation(strings, order)),
        "ArgsortBytes indices");
}

}  // namespace
}  // namespace sortd::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sortd;
  using namespace sortd::fuzz;
  if (size < 3) return 0;
  const int type = data[0] % 7;
  const uint8_t flags = data[1];
  const size_t segments = data[2] % 8;
  const SortOrder order = (flags & 1) ? SortOrder::kDescending : SortOrder::kAscending;
  const bool with_indices = flags & 2;
  const bool parallel = flags & 4;
  const bool batch = flags & 8;
  data += 3;
  size -= 3;
  if (type == 6) {
    FuzzBytes(data, size, order, parallel);
  } else {
    VisitNumeric(static_cast<DataType>(type), [&](auto tag) {
      using T = decltype(tag);
      FuzzNumeric<T>(data, size, order, with_indices, parallel, batch, segments);
    });
  }
  return 0;
}
