// SortClient::SortInSession: one large sort over several connections.
// Parts go out as slices over the caller's memory (no copy before the
// socket) and come back straight into the caller's output (one copy, from
// gRPC's receive buffers); every connection carries a contiguous range of
// every array.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/sortd_client.h"
#include "sortd/v1/session_part_codec.h"
#include "sortd/v1/sorted_blocks.h"

namespace sortd::client {
namespace {

namespace part = v1::session_part;
namespace blocks = v1::blocks;

const grpc::internal::RpcMethod kUploadParts("/sortd.v1.SortService/UploadParts",
                                             grpc::internal::RpcMethod::CLIENT_STREAMING);
const grpc::internal::RpcMethod kDownloadParts("/sortd.v1.SortService/DownloadParts",
                                               grpc::internal::RpcMethod::SERVER_STREAMING);

size_t WidthOf(v1::ElementType type) {
  switch (type) {
    case v1::ELEMENT_TYPE_UINT32:
    case v1::ELEMENT_TYPE_INT32:
    case v1::ELEMENT_TYPE_FLOAT32: return 4;
    case v1::ELEMENT_TYPE_UINT64:
    case v1::ELEMENT_TYPE_INT64:
    case v1::ELEMENT_TYPE_FLOAT64: return 8;
    default: return 0;
  }
}

// Counts the slices gRPC still holds over the caller's memory: the call
// returns only when it holds none (it may keep one past the end of the RPC
// that sent it, until the socket write is done).
class LentSlices {
 public:
  void* Lend() {
    std::lock_guard<std::mutex> lock(mu_);
    ++lent_;
    return this;
  }
  static void Return(void* arg) {
    auto* self = static_cast<LentSlices*>(arg);
    std::lock_guard<std::mutex> lock(self->mu_);
    if (--self->lent_ == 0) self->all_back_.notify_all();
  }
  void WaitAllBack() {
    std::unique_lock<std::mutex> lock(mu_);
    all_back_.wait(lock, [this] { return lent_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable all_back_;
  int lent_ = 0;
};



// Serialized progress reports for one phase.
class Progress {
 public:
  Progress(const std::function<void(const TransferProgress&)>& callback,
           TransferProgress::Phase phase, uint64_t total)
      : callback_(callback), phase_(phase), total_(total) {}
  void Add(uint64_t bytes) {
    if (!callback_) return;
    const uint64_t done = done_.fetch_add(bytes) + bytes;
    std::lock_guard<std::mutex> lock(mu_);
    if (done <= reported_) return;  // a later report already went out
    reported_ = done;
    callback_(TransferProgress{phase_, done, total_});
  }

 private:
  const std::function<void(const TransferProgress&)>& callback_;
  const TransferProgress::Phase phase_;
  const uint64_t total_;
  std::atomic<uint64_t> done_{0};
  std::mutex mu_;
  uint64_t reported_ = 0;
};

// Runs `work(c)` for c in [0, count) on count threads (c = 0 on this one)
// and returns the first failure, preferring a cause over CANCELLED.
template <typename Work>
absl::Status RunParallel(int count, Work work) {
  std::vector<absl::Status> results(count);
  std::vector<std::thread> threads;
  for (int c = 1; c < count; ++c) threads.emplace_back([&, c] { results[c] = work(c); });
  results[0] = work(0);
  for (std::thread& t : threads) t.join();
  absl::Status first;
  for (const absl::Status& s : results) {
    if (s.ok()) continue;
    if (first.ok() || (first.code() == absl::StatusCode::kCancelled &&
                       s.code() != absl::StatusCode::kCancelled)) {
      first = s;
    }
  }
  return first;
}

}  // namespace

std::vector<std::shared_ptr<grpc::Channel>> SortClient::TransferChannels(
    const std::string& target, int count) {
  std::lock_guard<std::mutex> lock(transfer_mu_);
  if (credentials_ == nullptr) {
    // Built on a caller's channel: no way to open more; parts share it.
    return std::vector<std::shared_ptr<grpc::Channel>>(count, channel_);
  }
  if (target != transfer_target_) {
    transfer_channels_.clear();
    transfer_target_ = target;
  }
  while (static_cast<int>(transfer_channels_.size()) < count) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(options_.max_message_bytes);
    args.SetMaxSendMessageSize(options_.max_message_bytes);
    // Each channel its own connection (channels with equal arguments would
    // share one), and no retries (they would hold every part sent).
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("sortd.transfer_connection", static_cast<int>(transfer_channels_.size()));
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    if (options_.receive_window_bytes > 0) {
      args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, options_.receive_window_bytes);
    }
    if (tls_) {
      // The server's certificate names the host the client was given, not
      // the address that answered.
      args.SetSslTargetNameOverride(TlsHostName());
    }
    transfer_channels_.push_back(grpc::CreateCustomChannel(target, credentials_, args));
  }
  return std::vector<std::shared_ptr<grpc::Channel>>(transfer_channels_.begin(),
                                                     transfer_channels_.begin() + count);
}

std::string SortClient::TlsHostName() const {
  // "dns:///host:port", "dns://authority/host:port", "host:port", "host".
  std::string host = target_;
  const size_t slash = host.rfind('/');
  if (slash != std::string::npos) host = host.substr(slash + 1);
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    return host.substr(1, close == std::string::npos ? std::string::npos : close - 1);
  }
  const size_t colon = host.find(':');
  return colon == std::string::npos ? host : host.substr(0, colon);
}

namespace {

// How the keys of a session become order words (proto/sortd/v1/sorted_blocks.h).
blocks::KeyCoding CodingOf(const v1::StartSortSessionRequest& start) {
  using Kind = blocks::KeyCoding::Kind;
  blocks::KeyCoding coding;
  switch (start.key_type()) {
    case v1::ELEMENT_TYPE_INT32: coding.kind = Kind::kSigned; break;
    case v1::ELEMENT_TYPE_INT64: coding.kind = Kind::kSigned; coding.width = 8; break;
    case v1::ELEMENT_TYPE_FLOAT32: coding.kind = Kind::kFloat; break;
    case v1::ELEMENT_TYPE_FLOAT64: coding.kind = Kind::kFloat; coding.width = 8; break;
    case v1::ELEMENT_TYPE_UINT64: coding.width = 8; break;
    default: break;
  }
  coding.descending = start.order() == v1::SORT_ORDER_DESCENDING;
  return coding;
}

// A delta-coded part of the keys at `next`, decoded into plan.out: its
// blocks must be whole and start where the stream stands.
absl::Status ReadDeltaPart(part::Reader& in, const part::Header& header, int array,
                           size_t width, uint8_t* out, const blocks::KeyCoding& coding,
                           uint64_t next, uint64_t end, std::vector<uint8_t>* coded) {
  if (header.array != array || header.offset != next || header.elements > end - next ||
      next % blocks::kBlockKeys != 0 || width != static_cast<size_t>(coding.width)) {
    return absl::InternalError(absl::StrCat(
        "DownloadParts: unexpected delta part at ", header.offset, " (", header.elements,
        " keys) while expecting ", next));
  }
  coded->resize(in.body_bytes());
  if (!in.ReadBody(coded->data())) {
    return absl::InternalError(absl::StrCat("DownloadParts: ", in.error()));
  }
  absl::Status decoded =
      blocks::DecodeBlocks(coded->data(), coded->size(), coding, next / blocks::kBlockKeys,
                           header.elements, out + next * width);
  if (!decoded.ok()) {
    return absl::Status(decoded.code(), absl::StrCat("DownloadParts: keys at ", next, ": ",
                                                     decoded.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::Engine> SortClient::SortInSession(const SessionSort& sort) {
  // Per-call overrides of the client's options (SessionSort).
  const std::function<void(const TransferProgress&)>& progress =
      sort.progress ? sort.progress : options_.progress;
  const absl::Duration timeout = sort.timeout.value_or(options_.timeout);
  const size_t key_width = WidthOf(sort.key_type);
  if (key_width == 0) return absl::InvalidArgumentError("key_type: a numeric element type");
  const bool with_values = sort.value_type != v1::ELEMENT_TYPE_UNSPECIFIED;
  const size_t value_width = with_values ? WidthOf(sort.value_type) : 0;
  if (with_values && value_width == 0) {
    return absl::InvalidArgumentError("value_type: a numeric element type");
  }
  const uint64_t n = sort.count;

  v1::StartSortSessionRequest start;
  start.set_key_type(sort.key_type);
  start.set_total_keys(n);
  start.set_value_type(sort.value_type);
  start.set_order(sort.order);
  start.set_return_indices(sort.indices_out != nullptr);
  start.set_transfer_only(sort.transfer_only);
  start.set_request_id(sort.request_id);
  const bool compress = sort.compress_keys.value_or(
      options_.compress_min_bytes > 0 && n * key_width >= options_.compress_min_bytes);
  if (compress) start.set_key_encoding(v1::PART_ENCODING_DELTA_BLOCKS);
  std::vector<ArrayPlan> uploads = {{v1::SESSION_ARRAY_KEYS, key_width,
                                     static_cast<const uint8_t*>(sort.keys),
                                     static_cast<uint8_t*>(sort.keys_out)}};
  if (with_values) {
    uploads.push_back({v1::SESSION_ARRAY_VALUES, value_width,
                       static_cast<const uint8_t*>(sort.values),
                       static_cast<uint8_t*>(sort.values_out)});
  }

  std::vector<ArrayPlan> downloads = uploads;
  downloads[0].delta = true;  // the keys, if the server agrees
  if (sort.indices_out != nullptr) {
    downloads.push_back({v1::SESSION_ARRAY_INDICES, 8, nullptr,
                         reinterpret_cast<uint8_t*>(sort.indices_out)});
  }
  absl::StatusOr<v1::FinishSortSessionResponse> finished =
      RunSession(start, uploads, downloads, sort.connections, timeout, progress);
  if (!finished.ok()) return finished.status();
  return finished->engine();
}

absl::StatusOr<v1::FinishSortSessionResponse> SortClient::RunSession(
    const v1::StartSortSessionRequest& start, const std::vector<ArrayPlan>& uploads,
    const std::vector<ArrayPlan>& downloads, int requested_connections, absl::Duration timeout,
    const std::function<void(const TransferProgress&)>& progress) {
  auto prepare = [timeout](grpc::ClientContext* ctx) { PrepareContext(ctx, timeout); };
  const uint64_t n = start.total_keys();
  v1::StartSortSessionResponse started;
  std::string peer;
  {
    grpc::ClientContext ctx;
    prepare(&ctx);
    grpc::Status rpc = stub_->StartSortSession(&ctx, start, &started);
    if (!rpc.ok()) return FromGrpcStatus(rpc);
    peer = ctx.peer();
  }
  // Every connection must reach the server holding the session.
  const std::string target = !started.direct_target().empty() ? started.direct_target() : peer;
  int connections = requested_connections > 0 ? requested_connections : options_.connections;
  if (connections <= 0) connections = static_cast<int>(std::max<uint32_t>(1, started.suggested_connections()));
  connections = static_cast<int>(std::clamp<uint64_t>(connections, 1, std::max<uint64_t>(n, 1)));
  connections = std::min(connections, 64);
  const std::vector<std::shared_ptr<grpc::Channel>> channels = TransferChannels(target, connections);
  {
    // Connected before the first part: a connection attempt that fails once
    // (loopback under load does) is retried by gRPC within the wait, instead
    // of failing the part that found it down.
    for (const auto& channel : channels) channel->GetState(/*try_to_connect=*/true);
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(20);
    for (const auto& channel : channels) {
      if (!channel->WaitForConnected(deadline)) {
        grpc::ClientContext ctx;
        prepare(&ctx);
        v1::EndSortSessionRequest request;
        request.set_session_id(started.session_id());
        v1::EndSortSessionResponse response;
        stub_->EndSortSession(&ctx, request, &response);  // best effort
        return absl::UnavailableError(absl::StrCat(
            "sort session: cannot connect to ", target,
            " (the server holding the session; see --advertise_address)"));
      }
    }
  }
  auto control = v1::SortService::NewStub(channels[0]);
  const std::string& id = started.session_id();
  // Within both ends' message limits (less room for a part's header).
  const size_t part_bytes = std::max<size_t>(
      16, std::min<uint64_t>({options_.part_bytes, started.max_part_bytes(),
                              static_cast<uint64_t>(std::max(options_.max_message_bytes - 1024, 16))}));

  auto end_session = [&] {
    grpc::ClientContext ctx;
    prepare(&ctx);
    v1::EndSortSessionRequest request;
    request.set_session_id(id);
    v1::EndSortSessionResponse response;
    control->EndSortSession(&ctx, request, &response);  // best effort: it expires anyway
  };
  // Connection c's share of an array: its elements (a table's bitmap has
  // its own count) split evenly, on block boundaries for delta blocks.
  const bool delta_keys = started.key_encoding() == v1::PART_ENCODING_DELTA_BLOCKS;
  auto range_of = [&](int c, const ArrayPlan& plan) {
    const uint64_t count = plan.elements > 0 ? plan.elements : n;
    if (plan.delta && delta_keys) {
      const uint64_t blocks = (count + blocks::kBlockKeys - 1) / blocks::kBlockKeys;
      return std::pair<uint64_t, uint64_t>(
          std::min(count, blocks * c / connections * blocks::kBlockKeys),
          std::min(count, blocks * (c + 1) / connections * blocks::kBlockKeys));
    }
    return std::pair<uint64_t, uint64_t>(count * c / connections, count * (c + 1) / connections);
  };
  const blocks::KeyCoding coding = CodingOf(start);
  auto elements_of = [&](const ArrayPlan& plan) { return plan.elements > 0 ? plan.elements : n; };

  // Upload: each connection streams its range of every array.
  LentSlices lent;
  uint64_t upload_total = 0;
  for (const ArrayPlan& plan : uploads) upload_total += elements_of(plan) * plan.width;
  Progress up(progress, TransferProgress::Phase::kUpload, upload_total);
  absl::Status status = RunParallel(connections, [&](int c) -> absl::Status {
    bool any = false;
    for (const ArrayPlan& plan : uploads) any = any || range_of(c, plan).first < range_of(c, plan).second;
    if (!any) return absl::OkStatus();
    grpc::ClientContext ctx;
    prepare(&ctx);
    grpc::ByteBuffer response;
    std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channels[c].get(),
                                                                      kUploadParts, &ctx,
                                                                      &response));
    auto send_all = [&] {
      bool first = true;
      for (const ArrayPlan& plan : uploads) {
        // Plain variables: C++17 lambdas cannot capture structured bindings.
        const std::pair<uint64_t, uint64_t> range = range_of(c, plan);
        const uint64_t begin = range.first, end = range.second;
        const uint64_t per_part = std::max<uint64_t>(1, part_bytes / plan.width);
        for (uint64_t at = begin; at < end; at += per_part) {
          const uint64_t count = std::min(per_part, end - at);
          part::Header header;
          if (first) header.session_id = id;  // the stream's later parts inherit it
          first = false;
          header.array = plan.array;
          header.offset = at;
          header.column = plan.column;
          grpc::ByteBuffer message =
              part::Encode(header, plan.in + at * plan.width, count * plan.width,
                           &LentSlices::Return, lent.Lend());
          if (!writer->Write(message)) return false;  // the stream broke; Finish says why
          up.Add(count * plan.width);
        }
      }
      return true;
    };
    if (send_all()) writer->WritesDone();
    return FromGrpcStatus(writer->Finish());
  });
  lent.WaitAllBack();
  if (!status.ok()) {
    end_session();
    return status;
  }

  // Sort.
  v1::FinishSortSessionResponse finished;
  {
    if (progress) progress({TransferProgress::Phase::kSort, 0, 1});
    grpc::ClientContext ctx;
    prepare(&ctx);
    v1::FinishSortSessionRequest request;
    request.set_session_id(id);
    grpc::Status rpc = control->FinishSortSession(&ctx, request, &finished);
    if (!rpc.ok()) {
      end_session();
      return FromGrpcStatus(rpc);
    }
    if (finished.total_keys() != n) {
      end_session();
      return absl::InternalError(absl::StrCat("FinishSortSession: server sorted ",
                                              finished.total_keys(), " keys, sent ", n));
    }
    if (progress) progress({TransferProgress::Phase::kSort, 1, 1});
  }

  // Download: each connection reads its range of every array.
  uint64_t download_total = 0;
  for (const ArrayPlan& plan : downloads) download_total += elements_of(plan) * plan.width;
  Progress down(progress, TransferProgress::Phase::kDownload, download_total);
  status = RunParallel(connections, [&](int c) -> absl::Status {
    for (const ArrayPlan& plan : downloads) {
      // Plain variables: C++17 lambdas cannot capture structured bindings.
      const std::pair<uint64_t, uint64_t> range = range_of(c, plan);
      const uint64_t begin = range.first, end = range.second;
      if (begin == end) continue;
      grpc::ClientContext ctx;
      prepare(&ctx);
      v1::DownloadPartsRequest request;
      request.set_session_id(id);
      request.set_array(plan.array);
      request.set_column(plan.column);
      request.set_offset(begin);
      request.set_count(end - begin);
      request.set_part_bytes(part_bytes);
      grpc::ByteBuffer request_bytes;
      bool own = false;
      grpc::SerializationTraits<v1::DownloadPartsRequest>::Serialize(request, &request_bytes, &own);
      std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
          grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
              channels[c].get(), kDownloadParts, &ctx, request_bytes));
      uint64_t next = begin;
      grpc::ByteBuffer message;
      absl::Status bad;
      std::vector<uint8_t> coded;  // a delta part's body, decoded from here
      while (bad.ok() && reader->Read(&message)) {
        part::Reader in(&message);
        part::Header header;
        if (!in.Start(&header)) {
          bad = absl::InternalError(absl::StrCat("DownloadParts: bad part (", in.error(), ")"));
          break;
        }
        const uint64_t bytes = in.body_bytes();
        if (header.encoding == v1::PART_ENCODING_DELTA_BLOCKS) {
          if (!plan.delta || !delta_keys) {
            bad = absl::InternalError("DownloadParts: a delta part the session did not agree to");
            break;
          }
          bad = ReadDeltaPart(in, header, plan.array, plan.width, plan.out, coding, next, end,
                              &coded);
          if (!bad.ok()) break;
          next += header.elements;
          down.Add(header.elements * plan.width);
          continue;
        }
        if (header.array != plan.array || header.offset != next || bytes % plan.width != 0 ||
            bytes / plan.width > end - next) {
          bad = absl::InternalError(absl::StrCat("DownloadParts: unexpected part at ", header.offset,
                                                 " (", bytes, " bytes) while expecting ", next));
          break;
        }
        if (!in.ReadBody(plan.out + next * plan.width)) {
          bad = absl::InternalError(absl::StrCat("DownloadParts: ", in.error()));
          break;
        }
        next += bytes / plan.width;
        down.Add(bytes);
      }
      if (!bad.ok()) {
        ctx.TryCancel();
        reader->Finish();
        return bad;
      }
      absl::Status rpc = FromGrpcStatus(reader->Finish());
      if (!rpc.ok()) return rpc;
      if (next != end) {
        return absl::InternalError(absl::StrCat("DownloadParts: stream ended at element ", next,
                                                " of [", begin, ", ", end, ")"));
      }
    }
    return absl::OkStatus();
  });
  end_session();
  if (!status.ok()) return status;
  return finished;
}

}  // namespace sortd::client
