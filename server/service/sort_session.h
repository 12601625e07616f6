// Sort sessions (docs/api.md, "Sort sessions"): one large numeric sort
// whose arrays arrive as raw parts over any number of connections, are
// sorted in place once complete, and are read back in parts. A session owns
// its host buffers (admitted whole at start); the store names sessions by
// unguessable ids and frees those left idle.
#ifndef SORTD_SERVER_SERVICE_SORT_SESSION_H_
#define SORTD_SERVER_SERVICE_SORT_SESSION_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/arriving_input.h"
#include "core/dispatcher.h"
#include "core/host_memory.h"
#include "server/metrics/metrics.h"
#include "server/runtime/admission.h"
#include "sortd/v1/session_part_codec.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

using SteadyClock = std::chrono::steady_clock;

struct SessionLimits {
  // A session with no call in progress for this long is freed.
  absl::Duration idle_timeout = absl::Seconds(60);
  // Sessions open at once (StartSortSession beyond: RESOURCE_EXHAUSTED).
  int max_sessions = 64;
  // Largest payload (keys + values) of one session (--max_chunked_bytes).
  uint64_t max_payload_bytes = uint64_t{8} << 30;
  // Largest body of one part (within the message limit).
  uint64_t max_part_bytes = uint64_t{60} << 20;
  // Default body of a downloaded part: 1 KiB under 4 MiB, so that a part
  // with its framing fits gRPC's default receive limit (stock clients).
  uint64_t download_part_bytes = (uint64_t{4} << 20) - 1024;
  // Whether transfer_only sessions are allowed (--diagnostics).
  bool allow_transfer_only = false;
  // --advertise_address: a gRPC target reaching this server itself, sent to
  // clients so that every connection of a session lands here (empty: they
  // use the address that answered).
  std::string direct_target;
};

// A contiguous host array of one element width, uninitialized on creation
// (every element is written by an upload before it is read); pinned where
// the pool pins, so the GPU engine moves it by DMA without staging copies.
class SessionBuffer {
 public:
  SessionBuffer() = default;
  // `pool` null: heap memory.
  SessionBuffer(size_t elements, size_t width, HostMemoryPool* pool);
  uint8_t* data() { return data_.data(); }
  const uint8_t* data() const { return data_.data(); }
  size_t elements() const { return elements_; }
  size_t width() const { return width_; }
  size_t bytes() const { return elements_ * width_; }
  void Swap(SessionBuffer& other) {
    std::swap(data_, other.data_);
    std::swap(elements_, other.elements_);
    std::swap(width_, other.width_);
  }

 private:
  HostBuffer data_;
  size_t elements_ = 0;
  size_t width_ = 0;
};

class SortSession {
 public:
  enum class State { kUploading, kSorting, kSorted, kFailed };

  SortSession(std::string id, const v1::StartSortSessionRequest& request, DataType key_type,
              std::optional<DataType> value_type, Admitted admitted, HostMemoryPool* memory);
  // Abandons a sort still waiting for parts (and waits for it to let go).
  ~SortSession();
  SortSession(const SortSession&) = delete;
  SortSession& operator=(const SortSession&) = delete;

  // Starts the sort while the parts still arrive (Dispatcher::SortArriving)
  // where the engine takes it: a GPU with an arriving slot free copies each
  // part to the device as it lands, so the copy overlaps the network, and
  // sorts values on the device with the keys; the CPU engine
  // partitions keys-only arrays into buckets as they land. Otherwise RunSort sorts
  // once the upload is complete. Call once, before any part is accepted
  // (StartSortSession's handler).
  void StartArriving(Dispatcher& dispatcher);

  const std::string& id() const { return id_; }
  const v1::StartSortSessionRequest& request() const { return request_; }
  DataType key_type() const { return key_type_; }
  size_t total_keys() const { return keys_.elements(); }

  // Copies one uploaded part into place and returns its element count.
  // `reader` has read the header (`header`); `message_bytes` is the whole
  // message's size. INVALID_ARGUMENT for a part that does not fit the
  // session, ALREADY_EXISTS for one that overlaps elements already
  // received, FAILED_PRECONDITION after finish.
  absl::StatusOr<uint64_t> AcceptPart(v1::session_part::Reader& reader, const v1::session_part::Header& header,
                          uint64_t message_bytes, uint64_t max_part_bytes);

  // Moves an upload to sorting: FAILED_PRECONDITION naming what is missing
  // (or a part still being copied). Returns true when the session was
  // already sorted (a repeated finish: nothing to run).
  absl::StatusOr<bool> BeginSort();
  // Sorts in place (runs on a worker thread after BeginSort): waits for the
  // arriving sort, if one started, else (or when it could not run) sorts
  // now.
  absl::Status RunSort(Dispatcher& dispatcher);
  // The outcome of the sort (OK once sorted).
  absl::Status sort_status() const;
  std::optional<EngineKind> engine() const;
  // Whether the sort ran while the parts arrived (StartArriving took it).
  bool sorted_arriving() const;

  // The memory of elements [offset, offset + count) of a sorted array;
  // INVALID_ARGUMENT / FAILED_PRECONDITION naming the problem.
  struct Range {
    const uint8_t* data = nullptr;
    size_t width = 0;
    uint64_t offset = 0;
    uint64_t count = 0;
  };
  absl::StatusOr<Range> DownloadRange(int array, uint64_t offset, uint64_t count) const;

  // Activity, for idle expiry: calls in progress hold a use.
  void BeginUse();
  void EndUse();
  bool IdleSince(SteadyClock::time_point now, absl::Duration timeout) const;

  // For the metrics record at the session's end.
  SteadyClock::time_point started() const { return started_; }
  uint64_t bytes_received() const { return bytes_received_.load(); }
  void AddBytesSent(uint64_t bytes) { bytes_sent_.fetch_add(bytes); }
  uint64_t bytes_sent() const { return bytes_sent_.load(); }
  State state() const;

 private:
  SessionBuffer* BufferFor(int array);
  const SessionBuffer* BufferFor(int array) const;
  // Elements of `array` not yet received, as "[a, b)" ranges (the first few).
  std::string MissingLocked(int array, const SessionBuffer& buffer) const;

  const std::string id_;
  const v1::StartSortSessionRequest request_;
  const DataType key_type_;
  const std::optional<DataType> value_type_;
  const SteadyClock::time_point started_ = SteadyClock::now();
  Admitted admitted_;
  HostMemoryPool* const memory_;  // may be null (heap buffers)
  SessionBuffer keys_;
  SessionBuffer values_;
  SessionBuffer indices_;
  // The arriving sort (StartArriving): the ranges it is handed, and the
  // thread that runs it.
  class Arrivals;
  std::unique_ptr<Arrivals> arrivals_;
  bool values_on_gpu_ = false;  // the arriving sort permutes the values
  bool sorted_arriving_ = false;  // guarded by mu_
  std::thread arriving_;

  mutable std::mutex mu_;
  State state_ = State::kUploading;
  absl::Status sort_status_;
  std::optional<EngineKind> engine_;
  // Received element ranges per array (begin -> end, merged), and parts
  // claimed whose bytes are still being copied.
  std::map<uint64_t, uint64_t> received_[2];
  int copying_ = 0;
  int uses_ = 0;
  SteadyClock::time_point last_activity_ = SteadyClock::now();
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> bytes_sent_{0};
};

class SessionStore {
 public:
  // Called once per session when it ends (ended, expired, failed to sort).
  using Reporter = std::function<void(const SortSession& session, const absl::Status& status)>;

  // `memory` (optional, outlives the store): where session buffers come from.
  SessionStore(const SessionLimits& limits, AdmissionControl* admission, Reporter reporter,
               HostMemoryPool* memory = nullptr);
  ~SessionStore();

  const SessionLimits& limits() const { return limits_; }

  // Validates the request, admits its memory and opens a session.
  absl::StatusOr<std::shared_ptr<SortSession>> Start(const v1::StartSortSessionRequest& request);
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

// Validates the element type of a session array (UNSPECIFIED allowed when
// `optional`).
absl::StatusOr<std::optional<DataType>> SessionElementType(int type, absl::string_view field,
                                                           bool optional);

}  // namespace sortd

#endif  // SORTD_SERVER_SERVICE_SORT_SESSION_H_
