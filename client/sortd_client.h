// C++ client for sortd. Typed calls for every key type; arrays larger than
// one message go through the SortChunked RPC transparently.
#ifndef SORTD_CLIENT_SORTD_CLIENT_H_
#define SORTD_CLIENT_SORTD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/shared_region.h"
#include "sortd/v1/sort.grpc.pb.h"

namespace sortd::client {

// Default gRPC service config of channels made by SortClient::Connect (the
// Python client uses the same): round_robin over every address the target
// resolves to (a Kubernetes headless Service `dns:///sortd-headless:50051`,
// or `ipv4:127.0.0.1:5001,127.0.0.1:5002`), client-side health checking of
// "sortd.v1.SortService" (a draining replica, NOT_SERVING, gets no new calls),
// and SortService calls retried up to 5 attempts in all, within the call's
// deadline: on UNAVAILABLE with exponential backoff from 50 ms to 1 s
// (jittered by gRPC), and on RESOURCE_EXHAUSTED when the server sent a retry
// hint (its admission queue full, or waited out: grpc-retry-pushback-ms,
// waited as said); a refusal that can never succeed carries -1, which gRPC
// does not retry. Only refused calls are retried: nothing the server
// accepted is sent again (docs/operations.md, "Admission").
inline constexpr char kDefaultServiceConfig[] =
    R"json({"loadBalancingConfig":[{"round_robin":{}}],)json"
    R"json("healthCheckConfig":{"serviceName":"sortd.v1.SortService"},)json"
    R"json("methodConfig":[{"name":[{"service":"sortd.v1.SortService"}],)json"
    R"json("retryPolicy":{"maxAttempts":5,"initialBackoff":"0.05s","maxBackoff":"1s",)json"
    R"json("backoffMultiplier":2,"retryableStatusCodes":["UNAVAILABLE","RESOURCE_EXHAUSTED"]}}]})json";

// What ClientOptions::retry_busy = false removes from a service config.
inline constexpr char kBusyRetryCodes[] = R"json("UNAVAILABLE","RESOURCE_EXHAUSTED")json";

// Where a large sort stands, for ClientOptions::progress.
struct TransferProgress {
  enum class Phase { kUpload, kSort, kDownload };
  Phase phase = Phase::kUpload;
  uint64_t bytes_done = 0;   // of this phase
  uint64_t bytes_total = 0;  // of this phase
};

struct ClientOptions {
  // Largest message sent or received; a request whose payload would exceed
  // it (less headroom) is sent through SortChunked instead.
  int max_message_bytes = 64 << 20;
  // Payload bytes per SortChunked upload message.
  size_t chunk_bytes = size_t{4} << 20;
  // Numeric sorts with at least this many payload bytes (keys + values) go
  // through a sort session: raw parts over several connections in parallel
  // (docs/api.md, "Choosing the path"). 0: never; byte strings never do.
  // From 1 MiB a session beats one message, whose every copy lands in fresh
  // pages (H200 host: 1 MiB in 2.1 ms against 4.6 as one Sort, 4 MiB in 3.2
  // against 21; docs/benchmarks.md, "Mid-size arrays").
  size_t session_min_bytes = size_t{1} << 20;
  // Connections a session's parts travel over; 0: as the server suggests
  // (about one per 32 MiB, up to 8).
  int connections = 0;
  // Body bytes per uploaded and downloaded part.
  size_t part_bytes = size_t{4} << 20;
  // HTTP/2 receive window per stream of a session's connections, with
  // gRPC's bandwidth probe off: bounds the downloaded bytes gRPC holds
  // ahead of the client (the server does the same with
  // --receive_window_bytes); 0: gRPC's own window, grown by its probe.
  int receive_window_bytes = 8 << 20;
  // Sessions with at least this many bytes of keys ask for their sorted keys
  // as delta-coded blocks (PART_ENCODING_DELTA_BLOCKS), decoded here as the
  // parts arrive; 0: never. The server grants it where it pays (its
  // --key_encoding=auto: clients on other hosts; on its own host 32-bit keys
  // sorted on the GPU) and otherwise, like servers that do not offer it,
  // sends raw parts. From 1 MiB, where sessions start: at 10 Gbit/s 1 GiB
  // came back in 0.66-0.86x of the raw time for every key width and engine
  // (H200 host; docs/benchmarks.md, "Compressed sorted keys").
  size_t compress_min_bytes = size_t{1} << 20;
  // Called from the calling thread's helpers as a session's parts move
  // (upload, sort, download); may be empty. Must be thread-safe.
  std::function<void(const TransferProgress&)> progress;
  // Per-call deadline; infinite means none.
  absl::Duration timeout = absl::InfiniteDuration();
  // TLS: when set, connect with TLS using these root certificates (PEM file).
  std::string tls_root_certs_file;
  // Mutual TLS: this client's certificate chain and private key (PEM files),
  // for servers started with --tls_client_ca. Both or neither.
  std::string tls_client_cert_file;
  std::string tls_client_key_file;
  // gRPC service config (JSON) of the channel: load balancing, health
  // checking, retries. Empty = gRPC's defaults (pick_first, no retries).
  std::string service_config_json = kDefaultServiceConfig;
  // Retry calls the server refused as busy (RESOURCE_EXHAUSTED with a retry
  // hint), as the service config says; false: such refusals come back at
  // once (the config's RESOURCE_EXHAUSTED entry is dropped).
  bool retry_busy = true;
};

// The channel arguments SortClient::Connect uses: message size limits, the
// service config and a retry buffer as large as one message. For callers that
// make their own channels (sortctl bench) and want the same behaviour.
grpc::ChannelArguments MakeChannelArguments(const ClientOptions& options);

// Empty value type for keys-only sorts.
struct NoValues {};

template <typename T>
struct SortResult {
  std::vector<T> keys;
  std::vector<uint64_t> indices;  // when requested
  v1::Engine engine = v1::ENGINE_UNSPECIFIED;
};

// TopK's answer: the kept keys of every segment in turn (each segment's
// in sorted order), their positions within the segment when asked for, and
// with segment lengths, how many each segment kept.
template <typename T>
struct TopKResult {
  std::vector<T> keys;
  std::vector<uint64_t> indices;
  std::vector<uint64_t> segment_counts;
  v1::Engine engine = v1::ENGINE_UNSPECIFIED;
};

// How TopK cuts the keys: one array (both empty), rows of row_length keys,
// or consecutive segments of these lengths (summing to the keys' length).
struct TopKSegments {
  uint64_t row_length = 0;
  std::vector<uint64_t> lengths;
};

template <typename K, typename V>
struct PairsResult {
  std::vector<K> keys;
  std::vector<V> values;
  v1::Engine engine = v1::ENGINE_UNSPECIFIED;
};

class SortClient {
 public:
  static absl::StatusOr<std::unique_ptr<SortClient>> Connect(
      const std::string& target, const ClientOptions& options = {});
  SortClient(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options);

  // Sorts keys (uint32_t, int32_t, float, uint64_t, int64_t, double or
  // std::string for byte strings).
  template <typename T>
  absl::StatusOr<SortResult<T>> Sort(absl::Span<const T> keys,
                                     v1::SortOrder order = v1::SORT_ORDER_ASCENDING,
                                     bool return_indices = false);

  // The first k keys of the stable sort in `order` (ascending: the k
  // smallest; descending: the k largest), of the array or of each segment
  // (docs/api.md, "Top-k"). k must be at least 1; a k past a segment's
  // length keeps the whole segment, sorted. Numeric keys over 8 MiB
  // (kTopKPieceBytes) go as several TopK calls of about that, four in
  // flight, none over max_message_bytes: groups of rows or segments, or
  // pieces of the array whose first k are merged by one more call (an
  // answer over one message is INVALID_ARGUMENT); byte strings in one.
  template <typename T>
  absl::StatusOr<TopKResult<T>> TopK(absl::Span<const T> keys, uint64_t k,
                                     v1::SortOrder order = v1::SORT_ORDER_ASCENDING,
                                     bool return_indices = false,
                                     const TopKSegments& segments = {});
  static constexpr size_t kTopKPieceBytes = size_t{8} << 20;

  // Sorts numeric keys into `out` (same length; may be `keys` itself, for an
  // in place sort) and, when `indices` is not empty (same length), writes the
  // permutation there: no vectors in between. Large arrays go through a
  // sort session, the others through Sort or SortChunked.
  template <typename T>
  absl::StatusOr<v1::Engine> SortInto(absl::Span<const T> keys, absl::Span<T> out,
                                      v1::SortOrder order = v1::SORT_ORDER_ASCENDING,
                                      absl::Span<uint64_t> indices = {});

  // One sort session, type-erased (SortInto and Sort/SortPairs use it above
  // session_min_bytes, and fall back to SortChunked when a server answers
  // UNIMPLEMENTED: one older than sessions; benchmarks call it directly).
  // Outputs may alias their inputs.
  struct SessionSort {
    v1::ElementType key_type = v1::ELEMENT_TYPE_UNSPECIFIED;
    size_t count = 0;
    const void* keys = nullptr;
    void* keys_out = nullptr;
    v1::ElementType value_type = v1::ELEMENT_TYPE_UNSPECIFIED;  // unset: keys only
    const void* values = nullptr;
    void* values_out = nullptr;
    uint64_t* indices_out = nullptr;  // null: no permutation wanted
    v1::SortOrder order = v1::SORT_ORDER_ASCENDING;
    // Upload and download without sorting (servers with --diagnostics):
    // what moving the bytes alone costs.
    bool transfer_only = false;
    int connections = 0;  // 0: ClientOptions::connections
    std::string request_id;  // echoed in the server's logs and records
    // Per-call overrides of ClientOptions::timeout and ::progress (for
    // bindings that share one client between calls with their own).
    std::optional<absl::Duration> timeout;
    std::function<void(const TransferProgress&)> progress;  // empty: the client's
    // The sorted keys as delta-coded blocks (docs/api.md, "Compressed
    // downloads"): unset, from ClientOptions::compress_min_bytes of keys.
    std::optional<bool> compress_keys;
  };
  absl::StatusOr<v1::Engine> SortInSession(const SessionSort& sort);

  // Sorts keys and carries values (any supported type) along.
  template <typename K, typename V>
  absl::StatusOr<PairsResult<K, V>> SortPairs(
      absl::Span<const K> keys, absl::Span<const V> values,
      v1::SortOrder order = v1::SORT_ORDER_ASCENDING);

  // Same-host regions (RegionService; client/shared_region.h). Registers
  // [offset, offset + byte_size) of the shm_open object `shm_key` as
  // `name`; returns whether the server pinned it.
  absl::StatusOr<bool> RegisterSystemRegion(const std::string& name, const std::string& shm_key,
                                            uint64_t byte_size, uint64_t offset = 0);
  // Registers device memory: `ipc_handle` is the kCudaIpcHandleBytes of a
  // cudaIpcMemHandle_t, `device_id` the server's ordinal of its GPU.
  static constexpr size_t kCudaIpcHandleBytes = 64;
  absl::Status RegisterCudaRegion(const std::string& name, const void* ipc_handle, int device_id,
                                  uint64_t byte_size);
  absl::Status UnregisterRegion(const std::string& name);
  absl::StatusOr<std::vector<v1::RegionStatus>> ListRegions();
  // A Sort (or, with values, SortPairs) of arrays in registered regions;
  // `indices` receives the permutation when return_indices is set without
  // indices_out.
  absl::StatusOr<v1::Engine> SortRegion(const RegionSort& sort,
                                        std::vector<uint64_t>* indices = nullptr);
  // Sorts numeric `keys`, which lie in `region`, in place (and `values`,
  // for SortPairsInRegion, likewise): only the reference travels.
  template <typename T>
  absl::StatusOr<v1::Engine> SortInRegion(const SharedRegion& region, absl::Span<T> keys,
                                          v1::SortOrder order = v1::SORT_ORDER_ASCENDING);
  template <typename K, typename V>
  absl::StatusOr<v1::Engine> SortPairsInRegion(const SharedRegion& region, absl::Span<K> keys,
                                               absl::Span<V> values,
                                               v1::SortOrder order = v1::SORT_ORDER_ASCENDING);

  // grpc.health.v1 status of `service` ("" = the whole server):
  // "SERVING", "NOT_SERVING", ... With several addresses, one replica answers.
  // On a client made by Connect the probe goes over a second channel (made
  // on first use) without client-side health checking: on the main channel a
  // draining server would be skipped and the probe fail UNAVAILABLE instead
  // of answering NOT_SERVING.
  absl::StatusOr<std::string> Health(const std::string& service = "");

  // Sorts a table's rows by its key columns (SortTable; docs/api.md,
  // "Tables"): the columns (any TypedArray type, optional Arrow validity
  // bitmaps) and keys as the request gives them; the response holds the
  // permutation and, with return_columns, the reordered columns. Tables of
  // fixed-width columns from session_min_bytes on, or too large for one
  // message, travel as a table session (docs/api.md, "Table sessions"; one
  // message again against a server older than them, where the table fits);
  // tables with byte strings in one message. Columns in system regions
  // (TableColumn.values_region, validity_region; indices_region for the
  // permutation; client::ToProto makes the slices) go in one message and
  // are read, and with return_columns reordered, where they lie.
  absl::StatusOr<v1::SortTableResponse> SortTable(const v1::SortTableRequest& request);

  v1::SortService::Stub& stub() { return *stub_; }
  const ClientOptions& options() const { return options_; }
  // Applies the configured deadline (or `timeout`) to a context.
  void PrepareContext(grpc::ClientContext* ctx) const { PrepareContext(ctx, options_.timeout); }
  static void PrepareContext(grpc::ClientContext* ctx, absl::Duration timeout);
  // Whether a payload of this many bytes must go through SortChunked.
  bool NeedsChunking(size_t payload_bytes) const;
  // Whether a numeric payload of this many bytes goes through a session.
  bool UsesSession(size_t payload_bytes) const {
    return options_.session_min_bytes > 0 && payload_bytes >= options_.session_min_bytes;
  }

 private:
  // One array of a session as the client sees it.
  struct ArrayPlan {
    v1::SessionArray array;
    size_t width;
    const uint8_t* in;  // upload source (null: download only)
    uint8_t* out;       // download destination
    uint64_t elements = 0;  // 0: the session's count
    uint32_t column = 0;    // table sessions' column arrays
    // Downloads: whether the server sends this array as delta blocks (the
    // keys of a session that agreed to); connections then split it on
    // block boundaries.
    bool delta = false;
  };
  // One session from its start request: uploads every plan's array, sorts,
  // downloads every plan into its `out` (client/sort_session.cc).
  absl::StatusOr<v1::FinishSortSessionResponse> RunSession(
      const v1::StartSortSessionRequest& start, const std::vector<ArrayPlan>& uploads,
      const std::vector<ArrayPlan>& downloads, int connections, absl::Duration timeout,
      const std::function<void(const TransferProgress&)>& progress);
  // One TopK message.
  template <typename T>
  absl::StatusOr<TopKResult<T>> TopKOne(absl::Span<const T> keys, uint64_t k,
                                        v1::SortOrder order, bool return_indices,
                                        const TopKSegments& segments);
  // TopK of numeric keys as pieces (TopK's comment); `budget`: the bytes
  // of arrays one message holds.
  template <typename T>
  absl::StatusOr<TopKResult<T>> TopKInPieces(absl::Span<const T> keys, uint64_t k,
                                             v1::SortOrder order, bool return_indices,
                                             const TopKSegments& segments, size_t budget);

  // SortTable through a table session (fixed-width columns only).
  absl::StatusOr<v1::SortTableResponse> SortTableInSession(const v1::SortTableRequest& request);

  template <typename K, typename V>
  absl::Status SortChunked(absl::Span<const K> keys, const absl::Span<const V>* values,
                           v1::SortOrder order, bool return_indices,
                           std::vector<K>* out_keys, std::vector<V>* out_values,
                           std::vector<uint64_t>* out_indices, v1::Engine* engine);

  std::shared_ptr<grpc::Channel> HealthChannel();
  // `count` channels, each its own connection, to `target` (reused while
  // the target stays the same).
  std::vector<std::shared_ptr<grpc::Channel>> TransferChannels(const std::string& target,
                                                               int count);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SortService::Stub> stub_;
  std::unique_ptr<v1::RegionService::Stub> region_stub_;
  ClientOptions options_;
  // Set by Connect: what HealthChannel() needs to open the probe channel.
  std::string target_;
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::mutex health_mu_;
  std::shared_ptr<grpc::Channel> health_channel_;  // guarded by health_mu_
  // The host name a TLS server's certificate is checked against.
  std::string TlsHostName() const;
  bool tls_ = false;
  std::mutex transfer_mu_;
  std::string transfer_target_;                                // guarded by transfer_mu_
  std::vector<std::shared_ptr<grpc::Channel>> transfer_channels_;  // guarded by transfer_mu_
};

// The grpc::Status of a failed call as an absl::Status (same code).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace sortd::client

#include "client/sortd_client_impl.h"  // template definitions

#endif  // SORTD_CLIENT_SORTD_CLIENT_H_
