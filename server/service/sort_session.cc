#include "server/service/sort_session.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/cpu/parallel.h"
#include "core/engine.h"
#include "server/service/sort_ops.h"

namespace sortd {
namespace {

const char* ArrayName(int array) {
  switch (array) {
    case v1::SESSION_ARRAY_KEYS: return "keys";
    case v1::SESSION_ARRAY_VALUES: return "values";
    case v1::SESSION_ARRAY_INDICES: return "indices";
    default: return "unknown array";
  }
}

// Random 128-bit ids: a session's data is readable by whoever knows its id.
std::string NewSessionId() {
  static std::mutex* mu = new std::mutex;
  static absl::BitGen* gen = new absl::BitGen;
  std::lock_guard<std::mutex> lock(*mu);
  const uint64_t hi = absl::Uniform<uint64_t>(*gen);
  const uint64_t lo = absl::Uniform<uint64_t>(*gen);
  char raw[16];
  std::memcpy(raw, &hi, 8);
  std::memcpy(raw + 8, &lo, 8);
  return absl::BytesToHexString(absl::string_view(raw, 16));
}

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

std::string Cut(const std::string& id) {
  return absl::CEscape(id.size() > 64 ? id.substr(0, 64) + "..." : id);
}

}  // namespace

absl::StatusOr<std::optional<DataType>> SessionElementType(int type, absl::string_view field,
                                                           bool optional) {
  switch (type) {
    case v1::ELEMENT_TYPE_UINT32: return DataType::kUint32;
    case v1::ELEMENT_TYPE_INT32: return DataType::kInt32;
    case v1::ELEMENT_TYPE_FLOAT32: return DataType::kFloat32;
    case v1::ELEMENT_TYPE_UINT64: return DataType::kUint64;
    case v1::ELEMENT_TYPE_INT64: return DataType::kInt64;
    case v1::ELEMENT_TYPE_FLOAT64: return DataType::kFloat64;
    case v1::ELEMENT_TYPE_UNSPECIFIED:
      if (optional) return std::optional<DataType>();
      return absl::InvalidArgumentError(absl::StrCat(field, ": must be set (ELEMENT_TYPE_UINT32 ..."
                                                     " ELEMENT_TYPE_FLOAT64)"));
    default:
      return absl::InvalidArgumentError(absl::StrCat(field, ": unknown element type ", type));
  }
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

SortSession::SortSession(std::string id, const v1::StartSortSessionRequest& request,
                         DataType key_type, std::optional<DataType> value_type, Admitted admitted,
                         HostMemoryPool* memory)
    : id_(std::move(id)),
      request_(request),
      key_type_(key_type),
      value_type_(value_type),
      admitted_(std::move(admitted)),
      memory_(memory),
      keys_(request.total_keys(), ElementSize(key_type), memory) {
  // Values go to the GPU with the keys (an arriving sort) or are gathered
  // on the host; the indices a gather needs are made only then (RunSort).
  if (value_type_) {
    values_ = SessionBuffer(request.total_keys(), ElementSize(*value_type_), memory);
  }
  if (request.return_indices()) indices_ = SessionBuffer(request.total_keys(), 8, memory);
}

SortSession::~SortSession() {
  if (arrivals_ != nullptr) arrivals_->Abandon();
  if (arriving_.joinable()) arriving_.join();
}

void SortSession::StartArriving(Dispatcher& dispatcher) {
  const size_t n = keys_.elements();
  if (request_.transfer_only() || n == 0) return;
  if (!dispatcher.RoutesToGpu(key_type_, n)) {
    // The CPU engine takes keys only, and holds a pool about the keys' size
    // for the whole upload: reserved like the buffers (released with them),
    // else the sort waits for the upload, as it does without room.
    if (value_type_.has_value() || request_.return_indices()) return;
    if (!admitted_.AcquireMoreBytes(keys_.bytes()).ok()) return;
  }
  ArrivingSort sort;
  sort.keys = NumericSpan(key_type_, keys_.data(), n);
  sort.order = ToCoreOrder(request_.order());
  // Values without indices are permuted on the device; with indices, the
  // host gathers them by the indices after the sort.
  values_on_gpu_ = value_type_.has_value() && !request_.return_indices();
  if (values_on_gpu_) {
    sort.values = values_.data();
    sort.value_width = values_.width();
  }
  if (indices_.elements() > 0) {
    sort.indices = absl::MakeSpan(reinterpret_cast<uint64_t*>(indices_.data()), n);
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

SessionBuffer* SortSession::BufferFor(int array) {
  return const_cast<SessionBuffer*>(static_cast<const SortSession*>(this)->BufferFor(array));
}

const SessionBuffer* SortSession::BufferFor(int array) const {
  switch (array) {
    case v1::SESSION_ARRAY_KEYS: return &keys_;
    case v1::SESSION_ARRAY_VALUES: return value_type_ ? &values_ : nullptr;
    case v1::SESSION_ARRAY_INDICES: return request_.return_indices() ? &indices_ : nullptr;
    default: return nullptr;
  }
}

absl::StatusOr<uint64_t> SortSession::AcceptPart(v1::session_part::Reader& reader,
                                     const v1::session_part::Header& header,
                                     uint64_t message_bytes, uint64_t max_part_bytes) {
  const int array = header.array;
  if (array != v1::SESSION_ARRAY_KEYS && array != v1::SESSION_ARRAY_VALUES) {
    return absl::InvalidArgumentError(
        absl::StrCat("part.array: uploads carry SESSION_ARRAY_KEYS or SESSION_ARRAY_VALUES, got ",
                     array));
  }
  SessionBuffer* buffer = BufferFor(array);
  if (buffer == nullptr) {
    return absl::InvalidArgumentError(
        "part.array: SESSION_ARRAY_VALUES, but the session was started without value_type");
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
                                                   ArrayName(array), " past total_keys ", n));
  }
  const uint64_t begin = header.offset;
  const uint64_t end = begin + count;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ != State::kUploading) {
      return absl::FailedPreconditionError("part: the session is finished; uploads are closed");
    }
    std::map<uint64_t, uint64_t>& got = received_[array == v1::SESSION_ARRAY_KEYS ? 0 : 1];
    // The first range ending after `begin` overlaps if it starts before `end`.
    auto next = got.upper_bound(begin);
    if (next != got.begin()) {
      auto prev = std::prev(next);
      if (prev->second > begin) next = prev;
    }
    if (next != got.end() && next->first < end) {
      return absl::AlreadyExistsError(absl::StrCat(
          "part: ", ArrayName(array), " [", begin, ", ", end, ") overlaps elements already sent [",
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

std::string SortSession::MissingLocked(int array, const SessionBuffer& buffer) const {
  const std::map<uint64_t, uint64_t>& got = received_[array == v1::SESSION_ARRAY_KEYS ? 0 : 1];
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
  return absl::StrCat(missing, " ", ArrayName(array), " not received: ", out,
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
  std::string missing = MissingLocked(v1::SESSION_ARRAY_KEYS, keys_);
  if (missing.empty() && value_type_) missing = MissingLocked(v1::SESSION_ARRAY_VALUES, values_);
  if (!missing.empty()) return absl::FailedPreconditionError(absl::StrCat("FinishSortSession: ", missing));
  state_ = State::kSorting;
  if (arrivals_ != nullptr) arrivals_->Complete();
  return false;
}

absl::Status SortSession::RunSort(Dispatcher& dispatcher) {
  absl::Status status;
  std::optional<EngineKind> engine;
  const size_t n = keys_.elements();
  if (!request_.transfer_only() && n > 0) {
    bool values_sorted = false;
    if (arrivals_ != nullptr) {
      // UNAVAILABLE: the GPU did not take it, the arrays are as received.
      absl::StatusOr<EngineKind> ran = arrivals_->Result();
      if (ran.ok()) {
        engine = *ran;
        values_sorted = values_on_gpu_;
        std::lock_guard<std::mutex> lock(mu_);
        sorted_arriving_ = true;
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
          NumericSpan(key_type_, keys_.data(), n), ToCoreOrder(request_.order()), indices);
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

absl::StatusOr<SortSession::Range> SortSession::DownloadRange(int array, uint64_t offset,
                                                              uint64_t count) const {
  const SessionBuffer* buffer = BufferFor(array);
  if (buffer == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "array: ", ArrayName(array),
        array == v1::SESSION_ARRAY_VALUES    ? " (the session has no value_type)"
        : array == v1::SESSION_ARRAY_INDICES ? " (the session was started without return_indices)"
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

SessionStore::SessionStore(const SessionLimits& limits, AdmissionControl* admission,
                           Reporter reporter, HostMemoryPool* memory)
    : limits_(limits), admission_(admission), reporter_(std::move(reporter)), memory_(memory) {
  reaper_ = std::thread([this] { ReaperLoop(); });
}

SessionStore::~SessionStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  reaper_.join();
}

absl::StatusOr<std::shared_ptr<SortSession>> SessionStore::Start(
    const v1::StartSortSessionRequest& request) {
  absl::Status id_ok = ValidateRequestId(request.request_id());
  if (!id_ok.ok()) return id_ok;
  absl::Status order_ok = ValidateOrder(request.order());
  if (!order_ok.ok()) return order_ok;
  absl::StatusOr<std::optional<DataType>> key_type =
      SessionElementType(request.key_type(), "key_type", /*optional=*/false);
  if (!key_type.ok()) return key_type.status();
  absl::StatusOr<std::optional<DataType>> value_type =
      SessionElementType(request.value_type(), "value_type", /*optional=*/true);
  if (!value_type.ok()) return value_type.status();
  if (request.transfer_only() && !limits_.allow_transfer_only) {
    return absl::InvalidArgumentError(
        "transfer_only: only on a server started with --diagnostics");
  }
  const uint64_t n = request.total_keys();
  const uint64_t key_width = ElementSize(**key_type);
  const uint64_t value_width = *value_type ? ElementSize(**value_type) : 0;
  const uint64_t max_n = limits_.max_payload_bytes / (key_width + value_width);
  if (n > max_n) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "total_keys: ", n, " elements of ", key_width + value_width, " bytes exceed --max_chunked_bytes (",
        limits_.max_payload_bytes, " bytes)"));
  }
  // Keys, values and the gather's second values array, the permutation.
  const bool indices = request.return_indices() || value_width > 0;
  const uint64_t memory = n * (key_width + 2 * value_width + (indices ? 8 : 0));
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int open = static_cast<int>(sessions_.size()) + starting_;
    if (open >= limits_.max_sessions) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "sort sessions: ", open, " open (--max_sessions); end or let expire one first"));
    }
    ++starting_;
  }
  // Buffers are set up outside the lock (pinning memory takes a while).
  // Gives the reserved place back unless the session took it.
  struct Reservation {
    SessionStore* store;
    std::shared_ptr<SortSession> session;
    ~Reservation() {
      std::lock_guard<std::mutex> lock(store->mu_);
      --store->starting_;
      if (session != nullptr) store->sessions_.emplace(session->id(), session);
    }
  };
  Reservation reservation{this, nullptr};
  absl::Status admitted = admission_->Acquire(memory);
  if (!admitted.ok()) return admitted;
  Admitted held(admission_, memory);
  auto session = std::make_shared<SortSession>(NewSessionId(), request, **key_type, *value_type,
                                               std::move(held), memory_);
  reservation.session = session;
  return session;
}

absl::StatusOr<std::shared_ptr<SortSession>> SessionStore::Find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) {
    return absl::NotFoundError(absl::StrCat("session_id: no open session \"", Cut(id),
                                            "\" (never started, ended, or expired)"));
  }
  return it->second;
}

std::shared_ptr<SortSession> SessionStore::Take(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return nullptr;
  std::shared_ptr<SortSession> session = std::move(it->second);
  sessions_.erase(it);
  return session;
}

absl::Status SessionStore::End(const std::string& id) {
  std::shared_ptr<SortSession> session = Take(id);
  if (session == nullptr) return Find(id).status();
  // A session ended before its sort completed was abandoned by its client.
  const SortSession::State state = session->state();
  absl::Status status =
      state == SortSession::State::kSorted   ? absl::OkStatus()
      : state == SortSession::State::kFailed ? session->sort_status()
                                             : absl::CancelledError("sort session ended before it was sorted");
  if (reporter_) reporter_(*session, status);
  return absl::OkStatus();
}

void SessionStore::Fail(const std::string& id, const absl::Status& status) {
  std::shared_ptr<SortSession> session = Take(id);
  if (session != nullptr && reporter_) reporter_(*session, status);
}

size_t SessionStore::open_sessions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sessions_.size();
}

void SessionStore::ExpireIdle() {
  const SteadyClock::time_point now = SteadyClock::now();
  std::vector<std::shared_ptr<SortSession>> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second->IdleSince(now, limits_.idle_timeout)) {
        expired.push_back(std::move(it->second));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& session : expired) {
    if (reporter_) {
      reporter_(*session, absl::DeadlineExceededError(absl::StrCat(
                              "sort session idle for ", absl::FormatDuration(limits_.idle_timeout),
                              " (--session_idle_timeout): freed")));
    }
    // Counted once reported and freed: what the counter promises is done.
    session.reset();
    expired_.fetch_add(1);
  }
}

void SessionStore::ReaperLoop() {
  // Checks a few times per timeout (at least every second).
  const auto period = absl::ToChronoMilliseconds(
      std::clamp(limits_.idle_timeout / 4, absl::Milliseconds(10), absl::Seconds(1)));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, period);
    if (stopping_) break;
    lock.unlock();
    ExpireIdle();
    lock.lock();
  }
}

}  // namespace sortd
