// SortClient: channel setup, deadlines, chunking decision, health check.
#include "client/sortd_client.h"

#include <fstream>
#include <future>
#include <sstream>

#include <grpcpp/generic/generic_stub.h>

#include "absl/strings/str_cat.h"

namespace sortd::client {
namespace {

// Headroom for framing and the non-payload fields of a request.
constexpr size_t kMessageHeadroom = size_t{1} << 20;

// grpc.health.v1 messages are encoded by hand (field 1 in both), which
// spares the client a generated copy of health.proto.
std::string EncodeHealthRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0a);
  size_t len = service.size();
  while (len >= 0x80) {
    out.push_back(static_cast<char>((len & 0x7f) | 0x80));
    len >>= 7;
  }
  out.push_back(static_cast<char>(len));
  return out + service;
}

std::string HealthStatusName(uint64_t status) {
  switch (status) {
    case 0: return "UNKNOWN";
    case 1: return "SERVING";
    case 2: return "NOT_SERVING";
    case 3: return "SERVICE_UNKNOWN";
  }
  return absl::StrCat("STATUS_", status);
}

// A PEM file's contents, or INVALID_ARGUMENT naming the option.
absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view option) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(option, ": cannot read ", path));
  std::stringstream pem;
  pem << in.rdbuf();
  return pem.str();
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

grpc::ChannelArguments MakeChannelArguments(const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  if (!options.service_config_json.empty()) {
    std::string config = options.service_config_json;
    if (!options.retry_busy) {
      const std::string busy = kBusyRetryCodes;
      for (size_t at = config.find(busy); at != std::string::npos; at = config.find(busy)) {
        config.replace(at, busy.size(), R"json("UNAVAILABLE")json");
      }
    }
    args.SetServiceConfigJSON(config);
  }
  // A call is retried only while everything it has sent is still buffered;
  // gRPC buffers 256 KiB per call by default, so any larger request would
  // not be retried. One message's worth lets every unary request (and the
  // first message of a stream) be retried on UNAVAILABLE.
  args.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE, options.max_message_bytes);
  return args;
}

absl::StatusOr<std::unique_ptr<SortClient>> SortClient::Connect(
    const std::string& target, const ClientOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.tls_root_certs_file.empty()) {
    if (!options.tls_client_cert_file.empty() || !options.tls_client_key_file.empty()) {
      return absl::InvalidArgumentError(
          "tls_client_cert/tls_client_key: need tls_root_certs (TLS) as well");
    }
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions ssl;
    absl::StatusOr<std::string> roots = ReadPem(options.tls_root_certs_file, "tls_root_certs");
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *roots;
    if (options.tls_client_cert_file.empty() != options.tls_client_key_file.empty()) {
      return absl::InvalidArgumentError("tls_client_cert and tls_client_key must be set together");
    }
    if (!options.tls_client_cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadPem(options.tls_client_cert_file, "tls_client_cert");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadPem(options.tls_client_key_file, "tls_client_key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateCustomChannel(target, creds, MakeChannelArguments(options));
  auto client = std::make_unique<SortClient>(std::move(channel), options);
  client->target_ = target;
  client->credentials_ = std::move(creds);
  client->tls_ = !options.tls_root_certs_file.empty();
  return client;
}

SortClient::SortClient(std::shared_ptr<grpc::Channel> channel,
                       const ClientOptions& options)
    : channel_(std::move(channel)),
      stub_(v1::SortService::NewStub(channel_)),
      region_stub_(v1::RegionService::NewStub(channel_)),
      options_(options) {}

void SortClient::PrepareContext(grpc::ClientContext* ctx, absl::Duration timeout) {
  if (timeout != absl::InfiniteDuration()) {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
}

bool SortClient::NeedsChunking(size_t payload_bytes) const {
  const size_t limit = static_cast<size_t>(options_.max_message_bytes);
  return payload_bytes + kMessageHeadroom > limit;
}

std::shared_ptr<grpc::Channel> SortClient::HealthChannel() {
  // A client built on a caller's channel, or without a service config (so
  // without client-side health checking), probes over its own channel.
  if (credentials_ == nullptr || options_.service_config_json.empty()) return channel_;
  std::lock_guard<std::mutex> lock(health_mu_);
  if (health_channel_ == nullptr) {
    grpc::ChannelArguments args = MakeChannelArguments(options_);
    args.SetInt(GRPC_ARG_INHIBIT_HEALTH_CHECKING, 1);
    health_channel_ = grpc::CreateCustomChannel(target_, credentials_, args);
  }
  return health_channel_;
}

absl::StatusOr<std::string> SortClient::Health(const std::string& service) {
  grpc::GenericStub generic(HealthChannel());
  grpc::ClientContext ctx;
  PrepareContext(&ctx);
  const std::string request = EncodeHealthRequest(service);
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                    &request_buffer, &response_buffer,
                    [&done](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status rpc = done.get_future().get();
  if (!rpc.ok()) return FromGrpcStatus(rpc);
  std::vector<grpc::Slice> slices;
  response_buffer.Dump(&slices);
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // HealthCheckResponse { ServingStatus status = 1; } -> 0x08 <varint>.
  if (bytes.empty()) return HealthStatusName(0);
  if (bytes.size() < 2 || bytes[0] != 0x08) {
    return absl::InternalError("health: malformed HealthCheckResponse");
  }
  return HealthStatusName(static_cast<uint8_t>(bytes[1]));
}

}  // namespace sortd::client
