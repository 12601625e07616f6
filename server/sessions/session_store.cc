// The session store: names sessions by unguessable ids, admits each
// session's memory whole at its start, and frees sessions left idle.
#include "server/sessions/session_store.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace sortd {
namespace {

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

std::string Cut(const std::string& id) {
  return absl::CEscape(id.size() > 64 ? id.substr(0, 64) + "..." : id);
}

}  // namespace

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

absl::StatusOr<uint64_t> SessionStore::Check(const SessionSpec& spec) const {
  if (spec.transfer_only && !limits_.allow_transfer_only) {
    return absl::InvalidArgumentError(
        "transfer_only: only on a server started with --diagnostics");
  }
  const uint64_t n = spec.total_keys;
  const uint64_t row_bytes = std::max<uint64_t>(1, SessionRowBytes(spec));
  const uint64_t max_n = limits_.max_payload_bytes / row_bytes;
  if (n > max_n) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "total_keys: ", n, spec.is_table() ? " rows of " : " elements of ", row_bytes,
        " bytes exceed --max_chunked_bytes (", limits_.max_payload_bytes, " bytes)"));
  }
  return SessionMemoryBytes(spec);
}

absl::StatusOr<std::shared_ptr<SortSession>> SessionStore::Start(const SessionSpec& spec) {
  absl::StatusOr<uint64_t> memory = Check(spec);
  if (!memory.ok()) return memory.status();
  absl::Status admitted = admission_->Acquire(*memory);
  if (!admitted.ok()) return admitted;
  return Start(spec, Admitted(admission_, *memory));
}

absl::StatusOr<std::shared_ptr<SortSession>> SessionStore::Start(const SessionSpec& spec,
                                                                 Admitted admitted) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int open = static_cast<int>(sessions_.size()) + starting_;
    if (open >= limits_.max_sessions) {
      absl::Status busy = absl::ResourceExhaustedError(absl::StrCat(
          "sort sessions: ", open, " open (--max_sessions); end or let expire one first"));
      busy.SetPayload(kRetryPushbackPayload, absl::Cord("1000"));  // sessions end or expire
      return busy;
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
  auto session =
      std::make_shared<SortSession>(NewSessionId(), spec, std::move(admitted), memory_);
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
