#include "core/table_keys.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include "core/cpu/parallel.h"
#include "core/key_transform.h"

namespace sortd {
namespace {

// Rows handled together: their words and null flags stay in L1/L2.
constexpr size_t kBlock = 2048;
// Below this many rows one thread does everything.
constexpr size_t kParallelRows = size_t{1} << 16;

int BitWidth(uint64_t v) {
  int bits = 0;
  while (v != 0) {
    ++bits;
    v >>= 1;
  }
  return bits;
}

template <typename T>
void EncodeRows(const void* data, const uint32_t* rows, size_t start, size_t n, uint64_t* out) {
  const T* src = static_cast<const T*>(data);
  if (rows == nullptr) {
    for (size_t i = 0; i < n; ++i) out[i] = OrderedBits<T>::Encode(src[start + i]);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = OrderedBits<T>::Encode(src[rows[i]]);
  }
}

// out[i] = the order-preserving word of row (rows ? rows[i] : start + i),
// null[i] = whether that row is null. n <= kBlock.
void ValueWords(const TableKey& key, const uint32_t* rows, size_t start, size_t n, uint64_t* out,
                uint8_t* null) {
  auto row = [&](size_t i) -> size_t { return rows == nullptr ? start + i : rows[i]; };
  switch (key.kind) {
    case TableKey::Kind::kNumeric:
      switch (key.type) {
        case DataType::kUint32: EncodeRows<uint32_t>(key.data, rows, start, n, out); break;
        case DataType::kInt32: EncodeRows<int32_t>(key.data, rows, start, n, out); break;
        case DataType::kFloat32: EncodeRows<float>(key.data, rows, start, n, out); break;
        case DataType::kUint64: EncodeRows<uint64_t>(key.data, rows, start, n, out); break;
        case DataType::kInt64: EncodeRows<int64_t>(key.data, rows, start, n, out); break;
        case DataType::kFloat64: EncodeRows<double>(key.data, rows, start, n, out); break;
        case DataType::kBytes: std::fill(out, out + n, 0); break;  // never planned
      }
      std::fill(null, null + n, 0);
      break;
    case TableKey::Kind::kNarrow: {
      // Gather the rows' bytes, then widen them as one run.
      const size_t width = NarrowWidth(key.narrow);
      const auto* src = static_cast<const uint8_t*>(key.data);
      uint8_t packed[kBlock * 2] = {};  // (zeroed only to quiet -Wmaybe-uninitialized)
      uint32_t words[kBlock];
      if (rows == nullptr) {
        std::memcpy(packed, src + start * width, n * width);
      } else {
        for (size_t i = 0; i < n; ++i) std::memcpy(packed + i * width, src + rows[i] * width, width);
      }
      WidenNarrow(key.narrow, packed, absl::MakeSpan(words, n));
      for (size_t i = 0; i < n; ++i) out[i] = words[i];
      std::fill(null, null + n, 0);
      break;
    }
    case TableKey::Kind::kTime: {
      const auto* src = static_cast<const int64_t*>(key.data);
      for (size_t i = 0; i < n; ++i) {
        const int64_t v = src[row(i)];
        out[i] = OrderedBits<int64_t>::Encode(v);
        null[i] = v == kNaT;
      }
      break;
    }
  }
  if (key.validity != nullptr) {
    for (size_t i = 0; i < n; ++i) {
      const size_t r = row(i);
      null[i] |= static_cast<uint8_t>(((key.validity[r / 8] >> (r % 8)) & 1) == 0);
    }
  }
}

// The threads ForBlocks runs on for n rows.
int PartsFor(size_t n, int threads) { return n < kParallelRows ? 1 : std::max(1, threads); }

// Runs fn(begin, end, part) over [0, n) in blocks, split across
// PartsFor(n, threads) parts.
template <typename Fn>
void ForBlocks(size_t n, int threads, Fn fn) {
  const int parts = PartsFor(n, threads);
  cpu::RunTasks(parts, [&](int p) {
    const size_t end = cpu::PartBegin(n, parts, p + 1);
    for (size_t b = cpu::PartBegin(n, parts, p); b < end; b += kBlock) {
      fn(b, std::min(end, b + kBlock), p);
    }
  });
}

}  // namespace

int DefaultPackingThreads() {
  return static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 32));
}

std::vector<KeyRange> TableKeyPacking::ScanRanges(absl::Span<const TableKey> keys, size_t rows,
                                                  int threads) {
  std::vector<KeyRange> out(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    std::vector<KeyRange> ranges(PartsFor(rows, threads));
    ForBlocks(rows, threads, [&](size_t begin, size_t end, int p) {
      uint64_t words[kBlock];
      uint8_t null[kBlock];
      ValueWords(keys[k], nullptr, begin, end - begin, words, null);
      // Branch-free, so that the loop vectorises (nulls are random).
      uint64_t lo = ranges[p].lo, hi = ranges[p].hi, nulls = 0;
      for (size_t i = 0; i < end - begin; ++i) {
        const uint64_t is_null = null[i];
        nulls += is_null;
        lo = std::min(lo, is_null ? ~uint64_t{0} : words[i]);
        hi = std::max(hi, is_null ? 0 : words[i]);
      }
      ranges[p].lo = lo;
      ranges[p].hi = hi;
      ranges[p].nulls += nulls;
      ranges[p].valid += (end - begin) - nulls;
    });
    for (const KeyRange& r : ranges) {
      out[k].lo = std::min(out[k].lo, r.lo);
      out[k].hi = std::max(out[k].hi, r.hi);
      out[k].nulls += r.nulls;
      out[k].valid += r.valid;
    }
  }
  return out;
}

TableKeyPacking TableKeyPacking::Plan(absl::Span<const TableKey> keys, size_t rows, int threads) {
  return FromRanges(keys, ScanRanges(keys, rows, threads));
}

TableKeyPacking TableKeyPacking::FromRanges(absl::Span<const TableKey> keys,
                                            absl::Span<const KeyRange> ranges) {
  TableKeyPacking packing;
  packing.keys_.assign(keys.begin(), keys.end());
  int used = 64;  // bits of the current word (64: open a new one)
  for (size_t k = 0; k < keys.size(); ++k) {
    const KeyRange& all = ranges[k];
    std::vector<PackedField> fields;
    if (all.nulls > 0 && all.valid > 0) {
      PackedField f;
      f.null_bit = true;
      f.bits = 1;
      fields.push_back(f);
    }
    if (all.valid > 0 && all.hi > all.lo) {
      PackedField f;
      f.bits = BitWidth(all.hi - all.lo);
      f.base = keys[k].order == SortOrder::kAscending ? all.lo : all.hi;
      fields.push_back(f);
    }
    for (PackedField& f : fields) {
      f.key = static_cast<int>(k);
      if (used + f.bits > 64) {
        packing.word_bits_.push_back(0);
        used = 0;
      }
      f.word = packing.words() - 1;
      used += f.bits;
      packing.word_bits_.back() = used;
      packing.fields_.push_back(f);
    }
  }
  // Shifts: the first field of a word takes its highest bits.
  std::vector<int> filled(packing.word_bits_.size(), 0);
  for (PackedField& f : packing.fields_) {
    filled[f.word] += f.bits;
    f.shift = packing.word_bits_[f.word] - filled[f.word];
  }
  return packing;
}

void TableKeyPacking::Build(int w, absl::Span<const uint32_t> rows, void* out, int threads,
                            bool in_order) const {
  const bool narrow = bits(w) <= 32;
  ForBlocks(rows.size(), threads, [&](size_t begin, size_t end, int) {
    const size_t n = end - begin;
    uint64_t acc[kBlock] = {};
    uint64_t words[kBlock];
    uint8_t null[kBlock];
    int loaded = -1;  // the key whose words are in `words`
    for (const PackedField& f : fields_) {
      if (f.word != w) continue;
      const TableKey& key = keys_[f.key];
      if (loaded != f.key) {
        ValueWords(key, in_order ? nullptr : rows.data() + begin, begin, n, words, null);
        loaded = f.key;
      }
      if (f.null_bit) {
        // Set for the rows that go later: nulls when they go last.
        const uint8_t late = key.nulls == NullPlacement::kLast ? 1 : 0;
        for (size_t i = 0; i < n; ++i) acc[i] |= uint64_t{static_cast<uint8_t>(null[i] == late)} << f.shift;
      } else if (key.order == SortOrder::kAscending) {
        for (size_t i = 0; i < n; ++i) acc[i] |= null[i] ? 0 : (words[i] - f.base) << f.shift;
      } else {
        for (size_t i = 0; i < n; ++i) acc[i] |= null[i] ? 0 : (f.base - words[i]) << f.shift;
      }
    }
    if (narrow) {
      auto* dst = static_cast<uint32_t*>(out) + begin;
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<uint32_t>(acc[i]);
    } else {
      std::memcpy(static_cast<uint64_t*>(out) + begin, acc, n * sizeof(uint64_t));
    }
  });
}

absl::StatusOr<EngineKind> SortRowsOnGpu(Dispatcher& dispatcher, absl::Span<const TableKey> keys,
                                         absl::Span<uint32_t> rows, int device) {
  return dispatcher.SortTableOnGpu(
      keys, rows,
      [keys](absl::Span<const KeyRange> ranges) { return TableKeyPacking::FromRanges(keys, ranges).layout(); },
      device);
}

absl::StatusOr<EngineKind> SortRowsByPackedKeys(Dispatcher& dispatcher,
                                                absl::Span<const TableKey> keys,
                                                absl::Span<uint32_t> rows, int threads,
                                                absl::Span<uint64_t> words) {
  if (rows.size() < 2) return EngineKind::kCpu;
  // The first pass reads the columns straight when the rows come in order
  // (a table's first sort); later passes gather by the permutation.
  bool in_order = true;
  for (size_t i = 0; i < rows.size() && in_order; ++i) in_order = rows[i] == i;
  if (in_order) {
    // On a GPU the columns go up unpacked and only the rows come back.
    absl::StatusOr<EngineKind> gpu = SortRowsOnGpu(dispatcher, keys, rows, -1);
    if (gpu.ok() || !absl::IsUnavailable(gpu.status())) return gpu;
  }
  const TableKeyPacking packing = TableKeyPacking::Plan(keys, rows.size(), threads);
  EngineKind engine = EngineKind::kCpu;
  if (packing.words() == 0) return engine;
  // Huge pages where the kernel gives them: first touches of a fresh
  // buffer, page by page, cost more than the packing itself.
  std::unique_ptr<uint64_t, void (*)(void*)> owned(nullptr, std::free);
  if (words.size() < rows.size()) {
    owned.reset(static_cast<uint64_t*>(cpu::AllocateScratch(rows.size() * sizeof(uint64_t))));
    words = absl::MakeSpan(owned.get(), rows.size());
  }
  for (int w = packing.words() - 1; w >= 0; --w) {
    packing.Build(w, rows, words.data(), threads, in_order);
    in_order = false;
    const NumericSpan span = packing.bits(w) <= 32
                                 ? NumericSpan(reinterpret_cast<uint32_t*>(words.data()), rows.size())
                                 : NumericSpan(words.data(), rows.size());
    absl::StatusOr<EngineKind> ran =
        dispatcher.SortPairsNumeric(span, rows.data(), sizeof(uint32_t), SortOrder::kAscending);
    if (!ran.ok()) return ran.status();
    engine = *ran;
  }
  return engine;
}

}  // namespace sortd
