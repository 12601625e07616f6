// Sort sessions (docs/api.md, "Sort sessions"): one large numeric sort
// whose arrays arrive as raw parts over any number of connections, are
// sorted in place once complete, and are read back in parts. A session owns
// its host buffers (admitted whole at start: session_store.h).
#ifndef SORTD_SERVER_SESSIONS_SORT_SESSION_H_
#define SORTD_SERVER_SESSIONS_SORT_SESSION_H_

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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/arriving_input.h"
#include "core/dispatcher.h"
#include "core/host_memory.h"
#include "core/sortable_keys.h"
#include "core/table_keys.h"
#include "server/runtime/admission.h"
#include "sortd/v1/session_part_codec.h"
#include "sortd/v1/sort.pb.h"

namespace sortd {

using SteadyClock = std::chrono::steady_clock;

// A column of a table session: fixed width, viewed by the packed-key sort
// as a TableKey of this kind.
struct SessionColumnSpec {
  std::string name;
  TableKey::Kind kind = TableKey::Kind::kNumeric;
  DataType type = DataType::kUint32;       // kNumeric
  NarrowType narrow = NarrowType::kUint8;  // kNarrow
  size_t width = 4;                        // bytes an element
  bool has_validity = false;
};

// A key of a table session: a column, its order and null placement.
struct SessionKeySpec {
  uint32_t column = 0;
  SortOrder order = SortOrder::kAscending;
  NullPlacement nulls = NullPlacement::kLast;
};

// What a session sorts, checked and in core terms (server/wire/session_spec.h
// makes one from a StartSortSessionRequest).
struct SessionSpec {
  std::string request_id;
  DataType key_type = DataType::kUint32;
  std::optional<DataType> value_type;  // none: keys only
  SortOrder order = SortOrder::kAscending;
  bool return_indices = false;
  // Move the arrays, sort nothing (--diagnostics only).
  bool transfer_only = false;
  // Plain sessions: the keys go down as delta-coded blocks
  // (PART_ENCODING_DELTA_BLOCKS; proto/sortd/v1/sorted_blocks.h).
  bool delta_keys = false;
  uint64_t total_keys = 0;
  // Sorted by the CPU engine (not routed to a GPU): its radix scratch is
  // on the host and counts against admission (SessionMemoryBytes).
  bool sorted_on_host = true;
  // Set by the handler: the time from StartSortSession's arrival to its
  // admission (sortd_queue_duration_seconds{method="SortSession"}).
  double admission_wait_seconds = 0;
  // A table session (docs/api.md, "Table sessions"): rows of `columns`
  // sorted by `by`; key_type and value_type are unused, the permutation is
  // kept when return_indices (unless the client said without_permutation),
  // and with return_columns the columns are reordered.
  std::vector<SessionColumnSpec> columns;
  std::vector<SessionKeySpec> by;
  bool return_columns = false;
  bool is_table() const { return !columns.empty(); }
  // A table of one column, its one key, no bitmap, a type whose elements
  // its sort words give back exactly (not float16/bfloat16), reordered
  // and no permutation kept: sorted as keys alone.
  bool sorts_column_as_keys() const;
};

// Bytes a session holds from its start to its end: every array, and the
// sort's scratch on the host (the gather's second array, the permutation;
// for a table, its packed words and row numbers; sorted on the host, the
// radix sort's ping-pong copy).
uint64_t SessionMemoryBytes(const SessionSpec& spec);
// Payload bytes a row (a key and its value; a table row's columns).
uint64_t SessionRowBytes(const SessionSpec& spec);

// When a session that asks for delta-coded keys gets them
// (--key_encoding; docs/api.md, "Compressed downloads").
enum class KeyEncodingPolicy {
  // Where it was measured to pay: to peers on other hosts (any link slower
  // than this host's loopback), and on this host only for 32-bit keys
  // sorted on the GPU (coded there at ~1 TB/s).
  kAuto,
  kAlways,  // whenever asked
  kNever,   // raw keys always
};

// Whether a session asking for coded keys gets them under `policy`: a
// client on this host (`same_host_peer`), keys of `key_width` bytes, sorted
// (and so coded) on a GPU or not, or not sorted at all (`transfer_only`:
// unsorted keys do not shrink, so only `always` codes them).
bool GrantCodedKeys(KeyEncodingPolicy policy, bool same_host_peer, size_t key_width,
                    bool sorted_on_gpu, bool transfer_only = false);

// "auto", "always", "never"; INVALID_ARGUMENT otherwise.
absl::StatusOr<KeyEncodingPolicy> ParseKeyEncodingPolicy(absl::string_view text);

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
  // --key_encoding: which requests for coded keys are granted.
  KeyEncodingPolicy key_encoding = KeyEncodingPolicy::kAuto;
  // --transfer_streams: connections suggested to all open sessions
  // together (0: one a core, at least 8).
  uint32_t transfer_streams = 0;
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

  // `spec` is checked (SessionStore::Start); `admitted` holds its memory.
  SortSession(std::string id, SessionSpec spec, Admitted admitted, HostMemoryPool* memory);
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
  const SessionSpec& spec() const { return spec_; }
  DataType key_type() const { return key_type_; }
  size_t total_keys() const { return spec_.total_keys; }

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
  // `column`: for SESSION_ARRAY_COLUMN / SESSION_ARRAY_VALIDITY.
  absl::StatusOr<Range> DownloadRange(int array, uint32_t column, uint64_t offset,
                                      uint64_t count) const;

  // The keys as the engine delta-coded them where it sorted them (a
  // session started with key_encoding DELTA_BLOCKS and sorted on the GPU):
  // the bytes of the blocks covering `range` (DownloadRange of the keys;
  // its offset a multiple of the block size). nullopt when the engine did
  // not code them: the download encodes them from the sorted keys.
  struct CodedRange {
    const uint8_t* data = nullptr;
    size_t bytes = 0;
  };
  std::optional<CodedRange> CodedKeys(const Range& range) const;

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
  // The buffer of an array (and column), and its slot in received_; null
  // when the session has no such array.
  SessionBuffer* BufferFor(int array, uint32_t column, int* slot = nullptr);
  const SessionBuffer* BufferFor(int array, uint32_t column, int* slot = nullptr) const;
  // "keys", "values", "column 3 (\"ts\")", ...
  std::string ArrayName(int array, uint32_t column) const;
  // Elements of a slot's array not yet received, as "[a, b)" ranges (the
  // first few).
  std::string MissingLocked(int slot, const std::string& name, const SessionBuffer& buffer) const;
  // A table session's sort: packed keys, then the permutation, then the
  // columns reordered on request.
  absl::Status RunTableSort(Dispatcher& dispatcher, std::optional<EngineKind>* engine);
  // spec_.sorts_column_as_keys(): the column sorted as keys where it lies
  // (a narrow type through uint32 words).
  absl::StatusOr<EngineKind> SortColumnAsKeys(Dispatcher& dispatcher);

  const std::string id_;
  const SessionSpec spec_;
  const DataType key_type_;
  const std::optional<DataType> value_type_;
  const SteadyClock::time_point started_ = SteadyClock::now();
  Admitted admitted_;
  HostMemoryPool* const memory_;  // may be null (heap buffers)
  SessionBuffer keys_;
  SessionBuffer values_;
  SessionBuffer indices_;
  // A table session's columns and bitmaps (an empty buffer: no bitmap).
  std::vector<SessionBuffer> columns_;
  std::vector<SessionBuffer> validity_;
  // The arriving sort (StartArriving): the ranges it is handed, and the
  // thread that runs it.
  class Arrivals;
  std::unique_ptr<Arrivals> arrivals_;
  bool values_on_gpu_ = false;  // the arriving sort permutes the values
  // Where the arriving sort may delta-code the keys (into keys_ itself);
  // keys_coded_ (guarded by mu_) once it did.
  SortedKeyBlocks key_blocks_;
  bool keys_coded_ = false;
  bool sorted_arriving_ = false;  // guarded by mu_
  std::thread arriving_;

  mutable std::mutex mu_;
  State state_ = State::kUploading;
  absl::Status sort_status_;
  std::optional<EngineKind> engine_;
  // Received element ranges per array (begin -> end, merged), and parts
  // claimed whose bytes are still being copied.
  // Slots: 0 keys, 1 values, then 2 + 2c column c and 3 + 2c its bitmap.
  std::vector<std::map<uint64_t, uint64_t>> received_;
  int copying_ = 0;
  int uses_ = 0;
  SteadyClock::time_point last_activity_ = SteadyClock::now();
  std::atomic<uint64_t> bytes_received_{0};
  std::atomic<uint64_t> bytes_sent_{0};
};

}  // namespace sortd

#endif  // SORTD_SERVER_SESSIONS_SORT_SESSION_H_
