// libsortd_client_c: the C interface of client/sortd_client_c.h over
// SortClient. Exceptions never cross it (a binding's caller is C).
#include "client/sortd_client_c.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "client/sortd_client.h"

#define SORTD_EXPORT __attribute__((visibility("default")))

struct sortd_client {
  std::unique_ptr<sortd::client::SortClient> client;
};

namespace {

void SetError(char* error, size_t error_len, const std::string& text) {
  if (error == nullptr || error_len == 0) return;
  const size_t n = std::min(error_len - 1, text.size());
  std::memcpy(error, text.data(), n);
  error[n] = '\0';
}

constexpr int kInternal = 13;
constexpr int kInvalidArgument = 3;

}  // namespace

extern "C" {

SORTD_EXPORT int sortd_client_abi_version(void) { return SORTD_CLIENT_C_ABI_VERSION; }

SORTD_EXPORT sortd_client* sortd_client_open(const sortd_client_options* options, char* error,
                                             size_t error_len) {
  if (options == nullptr || options->target == nullptr || options->target[0] == '\0') {
    SetError(error, error_len, "target: required");
    return nullptr;
  }
  try {
    sortd::client::ClientOptions o;
    if (options->connections > 0) o.connections = options->connections;
    if (options->part_bytes > 0) o.part_bytes = options->part_bytes;
    if (options->max_message_bytes > 0) o.max_message_bytes = options->max_message_bytes;
    if (options->tls_root_certs_file != nullptr) o.tls_root_certs_file = options->tls_root_certs_file;
    if (options->tls_client_cert_file != nullptr) o.tls_client_cert_file = options->tls_client_cert_file;
    if (options->tls_client_key_file != nullptr) o.tls_client_key_file = options->tls_client_key_file;
    o.retry_busy = options->no_busy_retry == 0;
    auto client = sortd::client::SortClient::Connect(options->target, o);
    if (!client.ok()) {
      SetError(error, error_len, client.status().ToString());
      return nullptr;
    }
    return new sortd_client{std::move(*client)};
  } catch (const std::exception& e) {
    SetError(error, error_len, e.what());
    return nullptr;
  }
}

SORTD_EXPORT int sortd_client_sort_session(sortd_client* client, const sortd_session_sort* sort,
                                           int* engine, char* error, size_t error_len) {
  if (client == nullptr || sort == nullptr) {
    SetError(error, error_len, "client and sort: required");
    return kInvalidArgument;
  }
  try {
    sortd::client::SortClient::SessionSort s;
    s.key_type = static_cast<sortd::v1::ElementType>(sort->key_type);
    s.count = sort->count;
    s.keys = sort->keys;
    s.keys_out = sort->keys_out;
    s.value_type = static_cast<sortd::v1::ElementType>(sort->value_type);
    s.values = sort->values;
    s.values_out = sort->values_out;
    s.indices_out = sort->indices_out;
    s.order = sort->descending ? sortd::v1::SORT_ORDER_DESCENDING : sortd::v1::SORT_ORDER_ASCENDING;
    s.transfer_only = sort->transfer_only != 0;
    s.connections = sort->connections;
    if (sort->request_id != nullptr) s.request_id = sort->request_id;
    if (sort->compress_keys == 1) s.compress_keys = true;
    if (sort->compress_keys == 2) s.compress_keys = false;
    if (sort->timeout_seconds > 0) s.timeout = absl::Seconds(sort->timeout_seconds);
    if (sort->progress != nullptr) {
      const sortd_progress_fn fn = sort->progress;
      void* const user = sort->progress_user;
      s.progress = [fn, user](const sortd::client::TransferProgress& p) {
        fn(user, static_cast<int>(p.phase), p.bytes_done, p.bytes_total);
      };
    }
    absl::StatusOr<sortd::v1::Engine> sorted = client->client->SortInSession(s);
    if (!sorted.ok()) {
      SetError(error, error_len, std::string(sorted.status().message()));
      return static_cast<int>(sorted.status().code());
    }
    if (engine != nullptr) *engine = static_cast<int>(*sorted);
    return 0;
  } catch (const std::exception& e) {
    SetError(error, error_len, e.what());
    return kInternal;
  }
}

SORTD_EXPORT void sortd_client_close(sortd_client* client) { delete client; }

}  // extern "C"
