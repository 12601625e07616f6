#include "server/sessions/sort_session.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <numeric>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/cpu/parallel.h"
#include "core/engine.h"
#include "sortd/v1/sorted_blocks.h"

namespace sortd {
namespace {

uint64_t BitmapBytes(uint64_t rows) { return (rows + 7) / 8; }

// dst[i] = src[indices[i]] over several threads: a random gather of a large
// array is bound by memory latency, which threads overlap.
absl::Status ParallelGather(const SessionBuffer& src, absl::Span<const uint64_t> indices,
                            SessionBuffer* dst) {
  const size_t n = indices.size();
  const size_t width = src.width();
  const int tasks = static_cast<int>(std::clamp<size_t>(
      n / (size_t{1} << 20), 1, std::max(1u, std::thread::hardware_concurrency())));
  std::vector<absl::Status> results(tasks);
  cpu::RunTasks(tasks, [&](int t) {
    const size_t begin = cpu::PartBegin(n, tasks, t);
    const size_t end = cpu::PartBegin(n, tasks, t + 1);
    results[t] = GatherByIndex(src.data(), width, indices.subspan(begin, end - begin),
                               dst->data() + begin * width);
  });
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// The rows' bitmap in sorted order: out bit i = in bit perm[i].
void PermuteBitmap(const SessionBuffer& in, absl::Span<const uint64_t> perm, SessionBuffer* out) {
  if (out->bytes() == 0) return;  // no rows
  std::memset(out->data(), 0, out->bytes());
  const uint8_t* bits = in.data();
  uint8_t* dst = out->data();
  for (size_t i = 0; i < perm.size(); ++i) {
    const uint64_t r = perm[i];
    dst[i / 8] = static_cast<uint8_t>(dst[i / 8] | (((bits[r / 8] >> (r % 8)) & 1) << (i % 8)));
  }
}

}  // namespace

uint64_t SessionRowBytes(const SessionSpec& spec) {
  if (!spec.is_table()) {
    return ElementSize(spec.key_type) + (spec.value_type ? ElementSize(*spec.value_type) : 0);
  }
  uint64_t bytes = 0;
  for (const SessionColumnSpec& column : spec.columns) bytes += column.width;
  return bytes;
}

bool SessionSpec::sorts_column_as_keys() const {
  if (columns.size() != 1 || by.size() != 1 || by[0].column != 0 || return_indices ||
      !return_columns || columns[0].has_validity) {
    return false;
  }
  return columns[0].kind != TableKey::Kind::kNarrow || NarrowIsBijective(columns[0].narrow);
}

uint64_t SessionMemoryBytes(const SessionSpec& spec) {
  const uint64_t n = spec.total_keys;
  if (spec.sorts_column_as_keys()) {
    // The column, and the words a narrow type widens to.
    const bool narrow = spec.columns[0].kind == TableKey::Kind::kNarrow;
    return n * (spec.columns[0].width + (narrow ? 4 : 0)) + 512;
  }
  if (!spec.is_table()) {
    const uint64_t key_width = ElementSize(spec.key_type);
    const uint64_t value_width = spec.value_type ? ElementSize(*spec.value_type) : 0;
    // Keys, values and the gather's second values array, the permutation.
    const bool indices = spec.return_indices || value_width > 0;
    // The CPU radix sort ping-pongs the keys (and their row numbers).
    const uint64_t scratch = spec.sorted_on_host && !spec.transfer_only ? key_width + (indices ? 8 : 0) : 0;
    return n * (key_width + 2 * value_width + (indices ? 8 : 0) + scratch);
  }
  uint64_t bitmaps = 0;
  uint64_t widest = 0;
  for (const SessionColumnSpec& column : spec.columns) {
    if (column.has_validity) bitmaps += BitmapBytes(n);
    widest = std::max<uint64_t>(widest, column.width);
  }
  // The columns and bitmaps, the permutation (uint64), and while sorting the
  // packed words (uint64) with their row numbers (uint32); a reordered
  // column is gathered next to its original, one at a time.
  // Each column's bookkeeping (its spec, buffers, received ranges) too.
  constexpr uint64_t kColumnOverhead = 512;
  return n * (SessionRowBytes(spec) + 8 + 12) + bitmaps +
         (spec.return_columns ? n * widest + BitmapBytes(n) : 0) +
         kColumnOverhead * spec.columns.size();
}

bool GrantCodedKeys(KeyEncodingPolicy policy, bool same_host_peer, size_t key_width,
                    bool sorted_on_gpu, bool transfer_only) {
  switch (policy) {
    case KeyEncodingPolicy::kAlways:
      return true;
    case KeyEncodingPolicy::kNever:
      return false;
    case KeyEncodingPolicy::kAuto:
      break;
  }
  if (transfer_only) return false;
  // H200 host, 1 GiB, C++ client (docs/benchmarks.md, "Compressed sorted
  // keys"): at 10 Gbit/s coded keys took 0.66-0.86x of raw for both widths
  // and both engines; on loopback only 32-bit keys coded on the GPU won
  // (190 against 210 ms); 64-bit ones lost there (291 against 191), and the
  // CPU engine's coding on the way out lost too (561 against 523).
  if (!same_host_peer) return true;
  return sorted_on_gpu && key_width == 4;
}

absl::StatusOr<KeyEncodingPolicy> ParseKeyEncodingPolicy(absl::string_view text) {
  if (text == "auto") return KeyEncodingPolicy::kAuto;
  if (text == "always") return KeyEncodingPolicy::kAlways;
  if (text == "never") return KeyEncodingPolicy::kNever;
  return absl::InvalidArgumentError(
      absl::StrCat("--key_encoding: \"", text, "\" (auto, always or never)"));
}

SessionBuffer::SessionBuffer(size_t elements, size_t width, HostMemoryPool* pool)
    : elements_(elements), width_(width) {
  if (elements * width == 0) return;
  data_ = pool != nullptr ? pool->Allocate(elements * width) : HostBuffer::Heap(elements * width);
}

// The ranges a session received, handed to its arriving sort in the order
// they landed (core/arriving_input.h), and that sort's result.
class SortSession::Arrivals final : public ArrivingInput {
 public:
  void Add(const ArrivedRange& range) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_) return;  // the sort is over (it did not take the input)
      ranges_.push_back(range);
    }
    wake_.notify_all();
  }
  void Complete() { Set(&complete_); }
  void Abandon() { Set(&abandoned_); }

  Next Wait(ArrivedRange* range) override {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait(lock, [&] { return abandoned_ || complete_ || !ranges_.empty(); });
    if (abandoned_) return Next::kAbandoned;
    if (!ranges_.empty()) {
      *range = ranges_.front();
      ranges_.pop_front();
      return Next::kRange;
    }
    return Next::kComplete;
  }

  void Finish(absl::StatusOr<EngineKind> result) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      result_ = std::move(result);
      finished_ = true;
      ranges_.clear();
    }
    wake_.notify_all();
  }
  // Waits for the arriving sort to return.
  absl::StatusOr<EngineKind> Result() {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait(lock, [&] { return finished_; });
    return result_;
  }

 private:
  void Set(bool* flag) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      *flag = true;
    }
    wake_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<ArrivedRange> ranges_;
  bool complete_ = false;
  bool abandoned_ = false;
  bool finished_ = false;
  absl::StatusOr<EngineKind> result_ = absl::UnknownError("arriving sort still running");
};

SortSession::SortSession(std::string id, SessionSpec spec, Admitted admitted,
                         HostMemoryPool* memory)
    : id_(std::move(id)),
      spec_(std::move(spec)),
      key_type_(spec_.key_type),
      value_type_(spec_.value_type),
      admitted_(std::move(admitted)),
      memory_(memory),
      keys_(spec_.is_table() ? 0 : spec_.total_keys, ElementSize(key_type_), memory) {
  // Values go to the GPU with the keys (an arriving sort) or are gathered
  // on the host; the indices a gather needs are made only then (RunSort).
  if (value_type_) {
    values_ = SessionBuffer(spec_.total_keys, ElementSize(*value_type_), memory);
  }
  if (spec_.return_indices || (spec_.is_table() && !spec_.sorts_column_as_keys())) {
    indices_ = SessionBuffer(spec_.total_keys, 8, memory);
  }
  for (const SessionColumnSpec& column : spec_.columns) {
    columns_.emplace_back(spec_.total_keys, column.width, memory);
    validity_.emplace_back(column.has_validity ? BitmapBytes(spec_.total_keys) : 0, 1, memory);
  }
  received_.resize(2 + 2 * spec_.columns.size());
}

SortSession::~SortSession() {
  if (arrivals_ != nullptr) arrivals_->Abandon();
  if (arriving_.joinable()) arriving_.join();
}

void SortSession::StartArriving(Dispatcher& dispatcher) {
  const size_t n = keys_.elements();
  if (spec_.transfer_only || n == 0 || spec_.is_table()) return;
  if (!dispatcher.RoutesToGpu(key_type_, n)) {
    // The CPU engine takes keys only, and holds a pool about the keys' size
    // for the whole upload: admitted with the session when it was to be
    // sorted on the host (SessionMemoryBytes counts that scratch), else
    // reserved now (released with the buffers), or the sort waits for the
    // upload.
    if (value_type_.has_value() || spec_.return_indices) return;
    if (!spec_.sorted_on_host && !admitted_.AcquireMoreBytes(keys_.bytes()).ok()) return;
  }
  ArrivingSort sort;
  sort.keys = NumericSpan(key_type_, keys_.data(), n);
  sort.order = spec_.order;
  // Values without indices are permuted on the device; with indices, the
  // host gathers them by the indices after the sort.
  values_on_gpu_ = value_type_.has_value() && !spec_.return_indices;
  if (values_on_gpu_) {
    sort.values = values_.data();
    sort.value_width = values_.width();
  }
  if (indices_.elements() > 0) {
    sort.indices = absl::MakeSpan(reinterpret_cast<uint64_t*>(indices_.data()), n);
  }
  if (spec_.delta_keys) {
    // Coded over the keys themselves: no memory beyond the session's.
    const bool is_signed = key_type_ == DataType::kInt32 || key_type_ == DataType::kInt64;
    const bool is_float = key_type_ == DataType::kFloat32 || key_type_ == DataType::kFloat64;
    key_blocks_.kind = is_signed  ? SortedKeyBlocks::kSigned
                       : is_float ? SortedKeyBlocks::kFloat
                                  : SortedKeyBlocks::kUnsigned;
    key_blocks_.body = keys_.data();
    key_blocks_.capacity = keys_.bytes();
    sort.key_blocks = &key_blocks_;
  }
  auto arrivals = std::make_unique<Arrivals>();
  sort.input = arrivals.get();
  {
    // No part can have arrived yet (the client learns the id from the
    // answer that follows), so the sort is handed every range.
    std::lock_guard<std::mutex> lock(mu_);
    arrivals_ = std::move(arrivals);
  }
  arriving_ = std::thread([this, &dispatcher, sort] { arrivals_->Finish(dispatcher.SortArriving(sort)); });
}

SessionBuffer* SortSession::BufferFor(int array, uint32_t column, int* slot) {
  return const_cast<SessionBuffer*>(static_cast<const SortSession*>(this)->BufferFor(array, column, slot));
}

const SessionBuffer* SortSession::BufferFor(int array, uint32_t column, int* slot) const {
  int unused;
  if (slot == nullptr) slot = &unused;
  const bool table = spec_.is_table();
  switch (array) {
    case v1::SESSION_ARRAY_KEYS: *slot = 0; return table ? nullptr : &keys_;
    case v1::SESSION_ARRAY_VALUES: *slot = 1; return !table && value_type_ ? &values_ : nullptr;
    case v1::SESSION_ARRAY_INDICES: *slot = -1; return spec_.return_indices ? &indices_ : nullptr;
    case v1::SESSION_ARRAY_COLUMN:
      if (column >= columns_.size()) return nullptr;
      *slot = 2 + 2 * static_cast<int>(column);
      return &columns_[column];
    case v1::SESSION_ARRAY_VALIDITY:
      if (column >= validity_.size() || !spec_.columns[column].has_validity) return nullptr;
      *slot = 3 + 2 * static_cast<int>(column);
      return &validity_[column];
    default: return nullptr;
  }
}

std::string SortSession::ArrayName(int array, uint32_t column) const {
  auto named = [&](const char* what) {
    std::string out = absl::StrCat(what, " ", column);
    if (column < spec_.columns.size() && !spec_.columns[column].name.empty()) {
      absl::StrAppend(&out, " (\"", absl::CEscape(spec_.columns[column].name.substr(0, 64)), "\")");
    }
    return out;
  };
  switch (array) {
    case v1::SESSION_ARRAY_KEYS: return "keys";
    case v1::SESSION_ARRAY_VALUES: return "values";
    case v1::SESSION_ARRAY_INDICES: return "indices";
    case v1::SESSION_ARRAY_COLUMN: return named("column");
    case v1::SESSION_ARRAY_VALIDITY: return named("the validity bitmap of column");
    default: return absl::StrCat("unknown array ", array);
  }
}

absl::StatusOr<uint64_t> SortSession::AcceptPart(v1::session_part::Reader& reader,
                                     const v1::session_part::Header& header,
                                     uint64_t message_bytes, uint64_t max_part_bytes) {
  const int array = header.array;
  const uint32_t column = header.column;
  if (spec_.is_table()) {
    if (array != v1::SESSION_ARRAY_COLUMN && array != v1::SESSION_ARRAY_VALIDITY) {
      return absl::InvalidArgumentError(absl::StrCat(
          "part.array: a table session's uploads carry SESSION_ARRAY_COLUMN or "
          "SESSION_ARRAY_VALIDITY, got ", array));
    }
    if (column >= columns_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("part.column: ", column, ", but the table has ",
                                                     columns_.size(), " columns"));
    }
  } else if (array != v1::SESSION_ARRAY_KEYS && array != v1::SESSION_ARRAY_VALUES) {
    return absl::InvalidArgumentError(
        absl::StrCat("part.array: uploads carry SESSION_ARRAY_KEYS or SESSION_ARRAY_VALUES, got ",
                     array));
  }
  int slot = 0;
  SessionBuffer* buffer = BufferFor(array, column, &slot);
  if (buffer == nullptr) {
    return absl::InvalidArgumentError(
        array == v1::SESSION_ARRAY_VALIDITY
            ? absl::StrCat("part.array: SESSION_ARRAY_VALIDITY, but column ", column,
                           " was started without has_validity")
            : std::string("part.array: SESSION_ARRAY_VALUES, but the session was started without "
                          "value_type"));
  }
  if (!reader.has_body()) return absl::InvalidArgumentError("part.body: missing (an empty part)");
  const uint64_t bytes = reader.body_bytes();
  if (bytes > max_part_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("part.body: ", bytes, " bytes, over max_part_bytes ", max_part_bytes));
  }
  // The body must end the message: then the copy below cannot come up short.
  if (reader.position() + bytes != message_bytes) {
    return absl::InvalidArgumentError(
        "part.body: must be the last field and end the message (length does not match)");
  }
  const size_t width = buffer->width();
  if (bytes == 0 || bytes % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat("part.body: ", bytes,
                                                   " bytes is not a positive multiple of the ",
                                                   width, "-byte element"));
  }
  const uint64_t count = bytes / width;
  const uint64_t n = buffer->elements();
  if (header.offset > n || count > n - header.offset) {
    return absl::InvalidArgumentError(absl::StrCat("part.offset: elements [", header.offset, ", ",
                                                   header.offset + count, ") of ",
                                                   ArrayName(array, column),
                                                   spec_.is_table() ? " past its " : " past total_keys ",
                                                   n, spec_.is_table() ? " elements" : ""));
  }
  const uint64_t begin = header.offset;
  const uint64_t end = begin + count;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kUploading) {
      return absl::FailedPreconditionError("part: the session is finished; uploads are closed");
    }
    std::map<uint64_t, uint64_t>& got = received_[slot];
    // The first range ending after `begin` overlaps if it starts before `end`.
    auto next = got.upper_bound(begin);
    if (next != got.begin()) {
      auto prev = std::prev(next);
      if (prev->second > begin) next = prev;
    }
    if (next != got.end() && next->first < end) {
      return absl::AlreadyExistsError(absl::StrCat(
          "part: ", ArrayName(array, column), " [", begin, ", ", end, ") overlaps elements already sent [",
          std::max(begin, next->first), ", ", std::min(end, next->second), ")"));
    }
    // Claim the range now (a concurrent part overlapping it is refused),
    // merged with its neighbours.
    uint64_t merged_begin = begin, merged_end = end;
    auto after = got.lower_bound(end);
    if (after != got.end() && after->first == end) {
      merged_end = after->second;
      got.erase(after);
    }
    auto before = got.lower_bound(begin);
    if (before != got.begin()) {
      auto prev = std::prev(before);
      if (prev->second == begin) {
        merged_begin = prev->first;
        got.erase(prev);
      }
    }
    got[merged_begin] = merged_end;
    ++copying_;
    last_activity_ = SteadyClock::now();
  }
  const bool copied = reader.ReadBody(buffer->data() + begin * width);
  std::lock_guard<std::mutex> lock(mu_);
  --copying_;
  if (!copied) {
    // Cannot happen after the length check above; never leave a claimed
    // range unwritten behind a successful answer.
    state_ = State::kFailed;
    sort_status_ = absl::InternalError(absl::StrCat("part: ", reader.error()));
    return sort_status_;
  }
  bytes_received_.fetch_add(bytes);
  if (arrivals_ != nullptr) {
    arrivals_->Add({array == v1::SESSION_ARRAY_KEYS ? ArrivedRange::kKeys : ArrivedRange::kValues,
                    begin, end});
  }
  return count;
}

std::string SortSession::MissingLocked(int slot, const std::string& name,
                                       const SessionBuffer& buffer) const {
  const std::map<uint64_t, uint64_t>& got = received_[slot];
  std::string out;
  int listed = 0;
  uint64_t missing = 0;
  uint64_t at = 0;
  auto note = [&](uint64_t b, uint64_t e) {
    missing += e - b;
    if (listed++ < 4) absl::StrAppend(&out, out.empty() ? "" : " ", "[", b, ", ", e, ")");
  };
  for (const auto& [b, e] : got) {
    if (b > at) note(at, b);
    at = e;
  }
  if (at < buffer.elements()) note(at, buffer.elements());
  if (missing == 0) return "";
  return absl::StrCat(missing, " ", name, " not received: ", out,
                      listed > 4 ? " ..." : "");
}

absl::StatusOr<bool> SortSession::BeginSort() {
  std::lock_guard<std::mutex> lock(mu_);
  switch (state_) {
    case State::kSorted: return true;
    case State::kSorting:
      return absl::FailedPreconditionError("FinishSortSession: the session is already sorting");
    case State::kFailed: return sort_status_;
    case State::kUploading: break;
  }
  if (copying_ > 0) {
    return absl::FailedPreconditionError(
        "FinishSortSession: parts are still arriving (finish after every UploadParts returned)");
  }
  std::string missing;
  if (spec_.is_table()) {
    for (uint32_t c = 0; c < columns_.size() && missing.empty(); ++c) {
      missing = MissingLocked(2 + 2 * c, "rows of " + ArrayName(v1::SESSION_ARRAY_COLUMN, c),
                              columns_[c]);
      if (missing.empty() && spec_.columns[c].has_validity) {
        missing = MissingLocked(3 + 2 * c, "bytes of " + ArrayName(v1::SESSION_ARRAY_VALIDITY, c),
                                validity_[c]);
      }
    }
  } else {
    missing = MissingLocked(0, "keys", keys_);
    if (missing.empty() && value_type_) missing = MissingLocked(1, "values", values_);
  }
  if (!missing.empty()) return absl::FailedPreconditionError(absl::StrCat("FinishSortSession: ", missing));
  state_ = State::kSorting;
  if (arrivals_ != nullptr) arrivals_->Complete();
  return false;
}

absl::Status SortSession::RunSort(Dispatcher& dispatcher) {
  absl::Status status;
  std::optional<EngineKind> engine;
  const size_t n = keys_.elements();
  if (spec_.is_table() && !spec_.transfer_only) {
    status = RunTableSort(dispatcher, &engine);
  } else if (!spec_.transfer_only && n > 0) {
    bool values_sorted = false;
    if (arrivals_ != nullptr) {
      // UNAVAILABLE: the GPU did not take it, the arrays are as received.
      absl::StatusOr<EngineKind> ran = arrivals_->Result();
      if (ran.ok()) {
        engine = *ran;
        values_sorted = values_on_gpu_;
        std::lock_guard<std::mutex> lock(mu_);
        sorted_arriving_ = true;
        keys_coded_ = key_blocks_.written;
      } else if (!absl::IsUnavailable(ran.status())) {
        status = ran.status();
      }
    }
    // A gather of the values needs the permutation.
    if (value_type_ && !values_sorted && indices_.elements() == 0) {
      indices_ = SessionBuffer(n, 8, memory_);
    }
    absl::Span<uint64_t> indices;
    if (indices_.elements() > 0) indices = absl::MakeSpan(reinterpret_cast<uint64_t*>(indices_.data()), n);
    if (status.ok() && !engine) {
      absl::StatusOr<EngineKind> ran = dispatcher.SortNumeric(
          NumericSpan(key_type_, keys_.data(), n), spec_.order, indices);
      status = ran.status();
      if (ran.ok()) engine = *ran;
    }
    if (status.ok() && value_type_ && !values_sorted) {
      SessionBuffer gathered(n, values_.width(), nullptr);
      status = ParallelGather(values_, indices, &gathered);
      if (status.ok()) values_.Swap(gathered);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  state_ = status.ok() ? State::kSorted : State::kFailed;
  sort_status_ = status;
  engine_ = engine;
  last_activity_ = SteadyClock::now();
  return status;
}

absl::Status SortSession::RunTableSort(Dispatcher& dispatcher, std::optional<EngineKind>* engine) {
  const size_t n = spec_.total_keys;
  if (n > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("total_keys: ", n, " rows; a table session sorts fewer than 2^32"));
  }
  // Bools are 0 or 1, as in one SortTable message (a byte is no bool).
  for (size_t c = 0; c < columns_.size(); ++c) {
    if (spec_.columns[c].kind != TableKey::Kind::kNarrow || spec_.columns[c].narrow != NarrowType::kBool) {
      continue;
    }
    const uint8_t* bytes = columns_[c].data();
    for (size_t r = 0; r < n; ++r) {
      if (bytes[r] > 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            ArrayName(v1::SESSION_ARRAY_COLUMN, static_cast<uint32_t>(c)), ": bool byte ",
            bytes[r], " at row ", r, " (bools are 0 or 1)"));
      }
    }
  }
  if (spec_.sorts_column_as_keys()) {
    absl::StatusOr<EngineKind> ran = SortColumnAsKeys(dispatcher);
    if (!ran.ok()) return ran.status();
    *engine = *ran;
    return absl::OkStatus();
  }
  std::vector<TableKey> keys;
  for (const SessionKeySpec& by : spec_.by) {
    const SessionColumnSpec& column = spec_.columns[by.column];
    TableKey key;
    key.kind = column.kind;
    key.type = column.type;
    key.narrow = column.narrow;
    key.data = columns_[by.column].data();
    key.validity = column.has_validity ? validity_[by.column].data() : nullptr;
    key.order = by.order;
    key.nulls = by.nulls;
    keys.push_back(key);
  }
  // The row numbers live in the first half of the permutation's (pinned)
  // buffer, the packed words in a pinned buffer of the session's pool: the
  // GPU engine moves both by DMA.
  auto* perm = reinterpret_cast<uint64_t*>(indices_.data());
  auto* rows = reinterpret_cast<uint32_t*>(indices_.data());
  std::iota(rows, rows + n, uint32_t{0});
  const int threads = DefaultPackingThreads();
  {
    SessionBuffer words(n, 8, memory_);
    absl::StatusOr<EngineKind> ran =
        SortRowsByPackedKeys(dispatcher, keys, absl::MakeSpan(rows, n), threads,
                             absl::MakeSpan(reinterpret_cast<uint64_t*>(words.data()), n));
    if (!ran.ok()) return ran.status();
    *engine = *ran;
  }
  // Widened in place from the end: slot i holds row numbers 2i and 2i + 1,
  // read (as slots 2i and 2i + 1) before slot i is written; through memcpy,
  // the bytes being read as both widths.
  uint8_t* bytes = indices_.data();
  for (size_t i = n; i-- > 0;) {
    uint32_t row;
    std::memcpy(&row, bytes + 4 * i, 4);
    const uint64_t wide = row;
    std::memcpy(bytes + 8 * i, &wide, 8);
  }
  if (!spec_.return_columns) return absl::OkStatus();
  const absl::Span<const uint64_t> order(perm, n);
  for (size_t c = 0; c < columns_.size(); ++c) {
    SessionBuffer gathered(n, columns_[c].width(), memory_);
    if (columns_[c].width() == 4 || columns_[c].width() == 8) {
      absl::Status status = ParallelGather(columns_[c], order, &gathered);
      if (!status.ok()) return status;
    } else {
      const size_t w = columns_[c].width();
      for (size_t i = 0; i < n; ++i) std::memcpy(gathered.data() + i * w, columns_[c].data() + perm[i] * w, w);
    }
    columns_[c].Swap(gathered);
    if (spec_.columns[c].has_validity) {
      SessionBuffer bits(validity_[c].elements(), 1, memory_);
      PermuteBitmap(validity_[c], order, &bits);
      validity_[c].Swap(bits);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<EngineKind> SortSession::SortColumnAsKeys(Dispatcher& dispatcher) {
  const size_t n = spec_.total_keys;
  const SessionColumnSpec& column = spec_.columns[0];
  const SessionKeySpec& key = spec_.by[0];
  uint8_t* data = columns_[0].data();
  switch (column.kind) {
    case TableKey::Kind::kNumeric:
      return dispatcher.SortNumeric(NumericSpan(column.type, data, n), key.order, {});
    case TableKey::Kind::kTime: {
      // In place: NaT placed by the words, as Sort does a datetime64 array.
      absl::Span<uint64_t> words(reinterpret_cast<uint64_t*>(data), n);
      TimeToWords(absl::MakeConstSpan(reinterpret_cast<const int64_t*>(data), n), key.order,
                  key.nulls, words);
      absl::StatusOr<EngineKind> ran =
          dispatcher.SortNumeric(NumericSpan(words.data(), n), key.order, {});
      TimeFromWords(words, key.order, key.nulls, absl::MakeSpan(reinterpret_cast<int64_t*>(data), n));
      return ran;
    }
    case TableKey::Kind::kNarrow: {
      SessionBuffer words(n, 4, memory_);
      absl::Span<uint32_t> span(reinterpret_cast<uint32_t*>(words.data()), n);
      WidenNarrow(column.narrow, data, span);
      absl::StatusOr<EngineKind> ran = dispatcher.SortNumeric(NumericSpan(span.data(), n), key.order, {});
      if (ran.ok()) NarrowWords(column.narrow, span, data);
      return ran;
    }
  }
  return absl::InternalError("unknown column kind");
}

absl::Status SortSession::sort_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sort_status_;
}

bool SortSession::sorted_arriving() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sorted_arriving_;
}

std::optional<EngineKind> SortSession::engine() const {
  std::lock_guard<std::mutex> lock(mu_);
  return engine_;
}

SortSession::State SortSession::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_;
}

absl::StatusOr<SortSession::Range> SortSession::DownloadRange(int array, uint32_t column,
                                                              uint64_t offset,
                                                              uint64_t count) const {
  const SessionBuffer* buffer = BufferFor(array, column);
  const bool table_column = array == v1::SESSION_ARRAY_COLUMN || array == v1::SESSION_ARRAY_VALIDITY;
  if (buffer != nullptr && table_column && !spec_.return_columns) {
    return absl::InvalidArgumentError(absl::StrCat(
        "array: ", ArrayName(array, column), " (the session was started without return_columns)"));
  }
  if (buffer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "array: ", ArrayName(array, column),
        array == v1::SESSION_ARRAY_VALUES    ? " (the session has no value_type)"
        : array == v1::SESSION_ARRAY_INDICES && spec_.is_table() ? " (the session was started without_permutation)"
        : array == v1::SESSION_ARRAY_INDICES ? " (the session was started without return_indices)"
        : table_column && spec_.is_table() && column >= columns_.size()
            ? absl::StrCat(": the table has ", columns_.size(), " columns")
        : array == v1::SESSION_ARRAY_VALIDITY && spec_.is_table() ? " (the column has no bitmap)"
                                             : " is not downloadable"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kSorted) {
      return absl::FailedPreconditionError(
          "DownloadParts: the session is not sorted yet (FinishSortSession first)");
    }
  }
  const uint64_t n = buffer->elements();
  if (offset > n) {
    return absl::InvalidArgumentError(absl::StrCat("offset: ", offset, " past total_keys ", n));
  }
  if (count == 0) count = n - offset;
  if (count > n - offset) {
    return absl::InvalidArgumentError(absl::StrCat("count: elements [", offset, ", ",
                                                   offset + count, ") past total_keys ", n));
  }
  return Range{buffer->data(), buffer->width(), offset, count};
}

std::optional<SortSession::CodedRange> SortSession::CodedKeys(const Range& range) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!keys_coded_ || state_ != State::kSorted) return std::nullopt;
  }
  const std::vector<uint64_t>& at = key_blocks_.offsets;
  const uint64_t first = range.offset / v1::blocks::kBlockKeys;
  const uint64_t end = (range.offset + range.count + v1::blocks::kBlockKeys - 1) / v1::blocks::kBlockKeys;
  if (end >= at.size() || first > end) return std::nullopt;
  return CodedRange{key_blocks_.body + at[first], at[end] - at[first]};
}

void SortSession::BeginUse() {
  std::lock_guard<std::mutex> lock(mu_);
  ++uses_;
  last_activity_ = SteadyClock::now();
}

void SortSession::EndUse() {
  std::lock_guard<std::mutex> lock(mu_);
  --uses_;
  last_activity_ = SteadyClock::now();
}

bool SortSession::IdleSince(SteadyClock::time_point now, absl::Duration timeout) const {
  std::lock_guard<std::mutex> lock(mu_);
  return uses_ == 0 && state_ != State::kSorting &&
         now - last_activity_ >= absl::ToChronoNanoseconds(timeout);
}

}  // namespace sortd
