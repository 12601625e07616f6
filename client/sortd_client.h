// C++ client for sortd. Typed calls for every key type; arrays larger than
// one message go through the SortChunked RPC transparently.
#ifndef SORTD_CLIENT_SORTD_CLIENT_H_
#define SORTD_CLIENT_SORTD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "sortd/v1/sort.grpc.pb.h"

namespace sortd::client {

struct ClientOptions {
  // Largest message sent or received; a request whose payload would exceed
  // it (less headroom) is sent through SortChunked instead.
  int max_message_bytes = 64 << 20;
  // Payload bytes per SortChunked upload message.
  size_t chunk_bytes = size_t{4} << 20;
  // Per-call deadline; infinite means none.
  absl::Duration timeout = absl::InfiniteDuration();
  // TLS: when set, connect with TLS using these root certificates (PEM file).
  std::string tls_root_certs_file;
};

// Empty value type for keys-only sorts.
struct NoValues {};

template <typename T>
struct SortResult {
  std::vector<T> keys;
  std::vector<uint64_t> indices;  // when requested
  v1::Engine engine = v1::ENGINE_UNSPECIFIED;
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

  // Sorts keys and carries values (any supported type) along.
  template <typename K, typename V>
  absl::StatusOr<PairsResult<K, V>> SortPairs(
      absl::Span<const K> keys, absl::Span<const V> values,
      v1::SortOrder order = v1::SORT_ORDER_ASCENDING);

  // grpc.health.v1 status of `service` ("" = the whole server):
  // "SERVING", "NOT_SERVING", ...
  absl::StatusOr<std::string> Health(const std::string& service = "");

  v1::SortService::Stub& stub() { return *stub_; }
  const ClientOptions& options() const { return options_; }
  // Applies the configured deadline to a context.
  void PrepareContext(grpc::ClientContext* ctx) const;
  // Whether a payload of this many bytes must go through SortChunked.
  bool NeedsChunking(size_t payload_bytes) const;

 private:
  template <typename K, typename V>
  absl::Status SortChunked(absl::Span<const K> keys, const absl::Span<const V>* values,
                           v1::SortOrder order, bool return_indices,
                           std::vector<K>* out_keys, std::vector<V>* out_values,
                           std::vector<uint64_t>* out_indices, v1::Engine* engine);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SortService::Stub> stub_;
  ClientOptions options_;
};

// The grpc::Status of a failed call as an absl::Status (same code).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace sortd::client

#include "client/sortd_client_impl.h"  // template definitions

#endif  // SORTD_CLIENT_SORTD_CLIENT_H_
