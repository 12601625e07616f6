// Table sorts by packed keys (docs/api.md, "Tables"): the key columns of a
// table sort, most significant first, become one or a few unsigned words a
// row, compared as plain integers, so that one stable radix sort of
// (word, row) pairs orders the rows by every column packed into the word.
//
// Each key contributes up to two fields, most significant first: a null bit
// (only where the key has both nulls and non-nulls; set for the rows that
// go later) and its value, as an order-preserving unsigned word less the
// column's smallest (ascending) or subtracted from its largest
// (descending), so the field takes only the bits its range needs (a column
// of equal values takes none). Null rows' value fields are 0: nulls are
// equal. The fields are laid into 64-bit words from the most significant;
// a word of 32 bits or fewer is sorted as uint32. A row's words compared
// from the first are its keys compared lexicographically, so stable passes
// over the words from the last to the first give the stable order.
//
// Int32 + float32 in [0, 1) with nulls in both fits one word (1 + 32 + 1 +
// 30 bits); small codes and flags pack many to a word.
#ifndef SORTD_CORE_TABLE_KEYS_H_
#define SORTD_CORE_TABLE_KEYS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/dispatcher.h"
#include "core/table_layout.h"
#include "core/sortable_keys.h"
#include "core/types.h"

namespace sortd {

// Threads for packing on this machine: every core, at most 32.
int DefaultPackingThreads();

// Where the fields of the keys lie in the packed words.
class TableKeyPacking {
 public:
  // Scans the columns (which rows are null, the range of the rest) on up
  // to `threads` threads and lays out the fields.
  static TableKeyPacking Plan(absl::Span<const TableKey> keys, size_t rows, int threads);
  // The two halves of Plan: the scan, and the layout from its ranges (one
  // a key; the GPU engine scans on the device and lays out with this).
  static std::vector<KeyRange> ScanRanges(absl::Span<const TableKey> keys, size_t rows, int threads);
  static TableKeyPacking FromRanges(absl::Span<const TableKey> keys,
                                    absl::Span<const KeyRange> ranges);
  PackedLayout layout() const { return {word_bits_, fields_}; }

  // Words a row (0 when every key is constant: the order is the input's).
  int words() const { return static_cast<int>(word_bits_.size()); }
  // Bits used by word `w` (1..64); at most 32: sort it as uint32.
  int bits(int w) const { return word_bits_[w]; }

  // out[i] = word `w` of row rows[i]; `out` holds uint32 when bits(w) <= 32,
  // else uint64, rows.size() of them. `in_order`: rows[i] == i (the columns
  // are read straight, not gathered).
  void Build(int w, absl::Span<const uint32_t> rows, void* out, int threads,
             bool in_order = false) const;

 private:
  std::vector<TableKey> keys_;
  std::vector<PackedField> fields_;
  std::vector<int> word_bits_;
};

// Orders `rows` (a permutation of the table's rows, fewer than 2^32; its
// current order breaks ties) stably by `keys`: one stable pairs sort on the
// dispatcher per packed word, from the last word to the first. Rows in
// their input order that the dispatcher sends to a GPU are scanned, packed
// and sorted there from the columns (Dispatcher::SortTableOnGpu), the
// host path only when the GPU does not take them. Returns the
// engine of the last (most significant) pass; CPU when nothing was sorted.
// `words` (rows.size() slots, optional) holds the packed words: pass pinned
// memory (a session's pool) and the GPU engine moves them by DMA; empty, a
// buffer is allocated here.
// Rows in input order (rows[i] == i) ordered by `keys` on a GPU
// (Dispatcher::SortTableOnGpu): `device` >= 0, on that GPU whatever their
// count (columns in its memory, which the host cannot read); -1, where the
// dispatcher would send a pairs sort of as many rows. UNAVAILABLE when not
// taken (`rows` untouched).
absl::StatusOr<EngineKind> SortRowsOnGpu(Dispatcher& dispatcher, absl::Span<const TableKey> keys,
                                         absl::Span<uint32_t> rows, int device);

absl::StatusOr<EngineKind> SortRowsByPackedKeys(Dispatcher& dispatcher,
                                                absl::Span<const TableKey> keys,
                                                absl::Span<uint32_t> rows, int threads,
                                                absl::Span<uint64_t> words = {});

}  // namespace sortd

#endif  // SORTD_CORE_TABLE_KEYS_H_
