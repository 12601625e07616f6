// The session store: names sort sessions by unguessable ids, admits each
// session's memory whole at its start, and frees sessions left idle.
#ifndef SORTD_SERVER_SESSIONS_SESSION_STORE_H_
#define SORTD_SERVER_SESSIONS_SESSION_STORE_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/host_memory.h"
#include "server/runtime/admission.h"
#include "server/sessions/sort_session.h"

namespace sortd {

class SessionStore {
 public:
  // Called once per session when it ends (ended, expired, failed to sort).
  using Reporter = std::function<void(const SortSession& session, const absl::Status& status)>;

  // `memory` (optional, outlives the store): where session buffers come from.
  SessionStore(const SessionLimits& limits, AdmissionControl* admission, Reporter reporter,
               HostMemoryPool* memory = nullptr);
  ~SessionStore();

  const SessionLimits& limits() const { return limits_; }

  // Checks the spec against the limits (size, transfer_only): the bytes
  // its session holds (SessionMemoryBytes), to be admitted before Start.
  absl::StatusOr<uint64_t> Check(const SessionSpec& spec) const;
  // Opens a session holding `admitted` (Check's bytes, admitted; the
  // handler waits for them in the admission queue). RESOURCE_EXHAUSTED
  // when --max_sessions are open.
  absl::StatusOr<std::shared_ptr<SortSession>> Start(const SessionSpec& spec, Admitted admitted);
  // Check, admit at once (or refuse), Start.
  absl::StatusOr<std::shared_ptr<SortSession>> Start(const SessionSpec& spec);
  // NOT_FOUND (naming the id, cut) for a session that ended or never was.
  absl::StatusOr<std::shared_ptr<SortSession>> Find(const std::string& id) const;
  // Ends a session: forgets it and reports it (its memory goes once the
  // last call using it returns). NOT_FOUND if unknown.
  absl::Status End(const std::string& id);
  // Ends a session whose sort failed (reported with that status).
  void Fail(const std::string& id, const absl::Status& status);

  size_t open_sessions() const;
  uint64_t expired_total() const { return expired_.load(); }
  // Counts a completed sort (FinishSortSession's handler).
  void NoteSorted(const SortSession& session) {
    if (session.sorted_arriving()) sorted_arriving_.fetch_add(1);
  }
  uint64_t sorted_arriving_total() const { return sorted_arriving_.load(); }
  // Ends sessions idle past the timeout (the store's thread calls this).
  void ExpireIdle();

 private:
  void ReaperLoop();
  std::shared_ptr<SortSession> Take(const std::string& id);

  const SessionLimits limits_;
  AdmissionControl* const admission_;
  const Reporter reporter_;
  HostMemoryPool* const memory_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<SortSession>> sessions_;
  int starting_ = 0;  // sessions being set up outside the lock (they count)
  std::atomic<uint64_t> expired_{0};
  std::atomic<uint64_t> sorted_arriving_{0};
  bool stopping_ = false;
  std::condition_variable wake_;
  std::thread reaper_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_SESSIONS_SESSION_STORE_H_
