// Sort-session handlers. Uploads copy each part once, from the received
// slices into the session's buffer, on the gRPC thread that read it (parts
// on several connections copy in parallel). Downloads send slices over the
// session's buffer: no copy before the socket; each slice keeps the session
// alive until gRPC lets go of it.
#include "server/grpc/session_handlers.h"


#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "server/grpc/guarded.h"
#include "server/grpc/raw_message.h"
#include "server/grpc/status_mapping.h"
#include "server/regions/regions.h"
#include "server/runtime/host_resources.h"
#include "server/sessions/session_store.h"
#include "server/wire/session_spec.h"
#include "server/wire/typed_array.h"
#include "sortd/v1/session_part_codec.h"
#include "sortd/v1/sorted_blocks.h"

namespace sortd {
namespace {

namespace part = v1::session_part;

// Connections a client is told to use, by the session's payload: one
// HTTP/2 connection moves about 1-2 GB/s, so even mid-size arrays go faster
// split. Measured on the H200 host (C++ client, u32 keys, best of 15;
// docs/benchmarks.md, "Mid-size arrays"): 1 MiB best over 4 (3.1 ms, 3.5 over
// 1), 4 MiB over 4-8 (4.2 ms, 6.4 over 1), 16 MiB over 8 (7.3 ms, 8.9 over 4,
// 20.2 over 1); 16 is slower than 8 at every size.
// Sessions open at once share a budget of streams (`streams`, 0: one a
// usable core (UsableCpus: affinity and cgroup quota), at least 8): a burst
// of large sessions at 8 each runs more transfer threads than there are
// cores, which makes every other call wait for one.
// H200 host, 16 cores, 16 x 1 GiB against a 4 GiB limit (docs/benchmarks.md,
// "Load bursts"): a budget of 8 streams cut the 1024-key p99 to 3.8x idle
// but made the burst 1.23x of by hand; 16: 7.1x and 1.01x; unbounded:
// 9-11x and 0.8-1.0x.
uint32_t SuggestedConnections(uint64_t bytes, size_t open_sessions, uint32_t streams) {
  constexpr uint64_t kKiB = 1024;
  uint32_t by_size = 8;
  if (bytes < 512 * kKiB) {
    by_size = 1;
  } else if (bytes < 1024 * kKiB) {
    by_size = 2;
  } else if (bytes < 4096 * kKiB) {
    by_size = 4;
  }
  if (streams == 0) streams = static_cast<uint32_t>(std::max(8, UsableCpus()));
  const uint64_t share = streams / std::max<size_t>(open_sessions, 1);
  return static_cast<uint32_t>(std::clamp<uint64_t>(share, 1, by_size));
}

// A use of a session for the length of one call (idle expiry skips it).
class SessionUse {
 public:
  SessionUse() = default;
  explicit SessionUse(std::shared_ptr<SortSession> session) : session_(std::move(session)) {
    session_->BeginUse();
  }
  SessionUse(SessionUse&&) = default;
  SessionUse& operator=(SessionUse&& other) {
    Reset();
    session_ = std::move(other.session_);
    return *this;
  }
  ~SessionUse() { Reset(); }
  void Reset() {
    if (session_ != nullptr) session_->EndUse();
    session_.reset();
  }
  SortSession* get() const { return session_.get(); }
  const std::shared_ptr<SortSession>& shared() const { return session_; }

 private:
  std::shared_ptr<SortSession> session_;
};

absl::StatusOr<SessionUse> UseSession(const ServiceContext* context, const std::string& id) {
  absl::StatusOr<std::shared_ptr<SortSession>> found = context->sessions->Find(id);
  if (!found.ok()) return found.status();
  return SessionUse(*std::move(found));
}

template <typename Request>
absl::Status ParseUnary(const grpc::ByteBuffer* raw, Request* request) {
  return Guarded("request", [&] {
    return ParseRawMessage(const_cast<grpc::ByteBuffer*>(raw), request, "request");
  });
}

template <typename Response>
void FinishUnary(grpc::ServerUnaryReactor* reactor, absl::Status status, const Response& response,
                 grpc::ByteBuffer* raw_response) {
  if (status.ok()) {
    status = Guarded("response", [&] {
      SerializeRawMessage(response, raw_response);
      return absl::OkStatus();
    });
  }
  reactor->Finish(ToGrpcStatus(status));
}

// Reads parts until the client half-closes; any bad part ends the stream
// with its error (parts accepted before it stay in the session).
class UploadReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  UploadReactor(ServiceContext* context, grpc::CallbackServerContext* ctx,
                grpc::ByteBuffer* response)
      : context_(context), ctx_(ctx), response_(response) {
    StartRead(&read_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      session_.Reset();
      if (ctx_->IsCancelled()) {
        Finish(ToGrpcStatus(absl::CancelledError("UploadParts cancelled")));
        return;
      }
      v1::UploadPartsResponse answer;
      answer.set_parts(parts_);
      answer.set_elements(elements_);
      absl::Status status = Guarded("response", [&] {
        SerializeRawMessage(answer, response_);
        return absl::OkStatus();
      });
      Finish(ToGrpcStatus(status));
      return;
    }
    absl::Status status = Guarded("UploadParts", [this] { return Accept(); });
    if (!status.ok()) {
      session_.Reset();
      Finish(ToGrpcStatus(status));
      return;
    }
    StartRead(&read_);
  }

  void OnDone() override { delete this; }

 private:
  absl::Status Accept() {
    ++parts_;
    const uint64_t message_bytes = read_.Length();
    part::Reader reader(&read_);
    part::Header header;
    if (!reader.Start(&header)) {
      return absl::InvalidArgumentError(
          absl::StrCat("UploadParts message ", parts_, ": not a SessionPart (", reader.error(), ")"));
    }
    if (session_.get() == nullptr) {
      absl::StatusOr<SessionUse> use = UseSession(context_, header.session_id);
      if (!use.ok()) return use.status();
      session_ = *std::move(use);
    } else if (!header.session_id.empty() && header.session_id != session_.get()->id()) {
      return absl::InvalidArgumentError(
          "session_id: one UploadParts stream carries parts of one session");
    }
    context_->AtTestSite("session.part");
    absl::StatusOr<uint64_t> accepted = session_.get()->AcceptPart(
        reader, header, message_bytes, context_->sessions->limits().max_part_bytes);
    if (!accepted.ok()) {
      return absl::Status(accepted.status().code(), absl::StrCat("UploadParts message ", parts_,
                                                                 ": ", accepted.status().message()));
    }
    elements_ += *accepted;
    read_.Clear();
    return absl::OkStatus();
  }

  ServiceContext* const context_;
  grpc::CallbackServerContext* const ctx_;
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer read_;
  SessionUse session_;
  uint64_t parts_ = 0;
  uint64_t elements_ = 0;
};

// How a session's keys become order words for the delta blocks.
v1::blocks::KeyCoding CodingOf(const SessionSpec& spec) {
  using Kind = v1::blocks::KeyCoding::Kind;
  v1::blocks::KeyCoding coding;
  coding.width = static_cast<int>(ElementSize(spec.key_type));
  switch (spec.key_type) {
    case DataType::kInt32:
    case DataType::kInt64: coding.kind = Kind::kSigned; break;
    case DataType::kFloat32:
    case DataType::kFloat64: coding.kind = Kind::kFloat; break;
    default: coding.kind = Kind::kUnsigned; break;
  }
  coding.descending = spec.order == SortOrder::kDescending;
  return coding;
}

// A delta-coded part's body and the session it came from, freed once gRPC
// has sent it.
struct EncodedPart {
  std::shared_ptr<SortSession> session;
  std::unique_ptr<uint8_t[]> body;
};

// Writes [offset, offset + count) of one array in parts of part_bytes: as
// the elements are, or (keys of a session started with key_encoding
// DELTA_BLOCKS) as delta-coded blocks covering the keys a raw part would,
// encoded here on the way out.
class DownloadReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  DownloadReactor(ServiceContext* context, const grpc::ByteBuffer* raw_request)
      : context_(context) {
    v1::DownloadPartsRequest request;
    absl::Status status = ParseUnary(raw_request, &request);
    if (status.ok()) {
      absl::StatusOr<SessionUse> use = UseSession(context_, request.session_id());
      status = use.status();
      if (use.ok()) session_ = *std::move(use);
    }
    if (status.ok()) {
      absl::StatusOr<SortSession::Range> range =
          session_.get()->DownloadRange(request.array(), request.column(), request.offset(),
                                        request.count());
      status = range.status();
      if (range.ok()) range_ = *range;
    }
    if (status.ok() && request.array() == v1::SESSION_ARRAY_KEYS &&
        session_.get()->spec().delta_keys) {
      delta_ = true;
      coding_ = CodingOf(session_.get()->spec());
      if (range_.offset % v1::blocks::kBlockKeys != 0) {
        status = absl::InvalidArgumentError(absl::StrCat(
            "offset: ", range_.offset, " is not a multiple of ", v1::blocks::kBlockKeys,
            " keys (the session's keys travel as delta blocks of that many)"));
      }
    }
    if (!status.ok()) {
      session_.Reset();
      Finish(ToGrpcStatus(status));
      return;
    }
    array_ = request.array();
    column_ = request.column();
    const SessionLimits& limits = context_->sessions->limits();
    uint64_t part_bytes = request.part_bytes() > 0 ? request.part_bytes() : limits.download_part_bytes;
    part_bytes = std::min(part_bytes, limits.max_part_bytes);
    per_part_ = std::max<uint64_t>(1, part_bytes / range_.width);
    if (delta_) {
      per_part_ = std::max<uint64_t>(1, per_part_ / v1::blocks::kBlockKeys) * v1::blocks::kBlockKeys;
    }
    next_ = range_.offset;
    WriteNext();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      session_.Reset();
      Finish(ToGrpcStatus(absl::CancelledError("DownloadParts: the client stopped reading")));
      return;
    }
    WriteNext();
  }

  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    const uint64_t end = range_.offset + range_.count;
    if (next_ >= end && wrote_any_) {
      session_.Reset();
      Finish(grpc::Status::OK);
      return;
    }
    const uint64_t count = std::min(per_part_, end - next_);
    part::Header header;
    header.array = array_;
    header.column = column_;
    header.offset = next_;
    if (delta_ && StartDeltaWrite(header, count)) return;
    // Raw elements (also keys whose delta blocks would not be smaller).
    // The slice holds the session until gRPC has sent it.
    auto* hold = new std::shared_ptr<SortSession>(session_.shared());
    buffer_ = part::Encode(
        header, range_.data + next_ * range_.width, count * range_.width,
        [](void* arg) { delete static_cast<std::shared_ptr<SortSession>*>(arg); }, hold);
    session_.get()->AddBytesSent(count * range_.width);
    next_ += count;
    wrote_any_ = true;
    StartWrite(&buffer_);
  }

  // Sends [next_, next_ + count) of a coded session's keys as delta blocks:
  // as the GPU coded them, or coded here. False, with nothing sent, when
  // coding here would not shrink them (gaps as wide as the keys): the part
  // then goes raw (parts say their encoding; the client reads either).
  bool StartDeltaWrite(part::Header header, uint64_t count) {
    header.encoding = v1::PART_ENCODING_DELTA_BLOCKS;
    header.elements = count;
    size_t bytes = 0;
    const SortSession::Range part_range{range_.data, range_.width, next_, count};
    if (std::optional<SortSession::CodedRange> coded = session_.get()->CodedKeys(part_range)) {
      // Coded where the keys were sorted (the GPU): sent as they lie.
      bytes = coded->bytes;
      auto* hold = new std::shared_ptr<SortSession>(session_.shared());
      buffer_ = part::Encode(
          header, coded->data, bytes,
          [](void* arg) { delete static_cast<std::shared_ptr<SortSession>*>(arg); }, hold);
    } else {
      // Uninitialised (make_unique would zero it: a wasted pass per part).
      auto encoded = std::make_unique<EncodedPart>(EncodedPart{
          session_.shared(),
          std::unique_ptr<uint8_t[]>(new uint8_t[v1::blocks::MaxEncodedBytes(count, coding_.width)])});
      bytes = v1::blocks::EncodeBlocks(range_.data + next_ * range_.width, count, coding_,
                                       encoded->body.get());
      if (bytes >= count * range_.width) return false;
      EncodedPart* body = encoded.release();
      buffer_ = part::Encode(header, body->body.get(), bytes,
                             [](void* arg) { delete static_cast<EncodedPart*>(arg); }, body);
    }
    session_.get()->AddBytesSent(bytes);
    next_ += count;
    wrote_any_ = true;
    StartWrite(&buffer_);
    return true;
  }

  ServiceContext* const context_;
  SessionUse session_;
  SortSession::Range range_;
  int array_ = 0;
  uint32_t column_ = 0;
  uint64_t per_part_ = 1;
  uint64_t next_ = 0;
  bool delta_ = false;
  v1::blocks::KeyCoding coding_;
  bool wrote_any_ = false;  // an empty range still gets one (empty) part
  grpc::ByteBuffer buffer_;
};

}  // namespace

grpc::ServerUnaryReactor* HandleStartSortSession(ServiceContext* context,
                                                 grpc::CallbackServerContext* ctx,
                                                 const grpc::ByteBuffer* raw_request,
                                                 grpc::ByteBuffer* raw_response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const SteadyClock::time_point arrival = SteadyClock::now();
  auto request = std::make_shared<v1::StartSortSessionRequest>();
  absl::Status status = ParseUnary(raw_request, request.get());
  if (status.ok()) status = context->CheckNotDraining();
  auto spec = std::make_shared<SessionSpec>();
  uint64_t memory = 0;
  if (status.ok()) {
    status = Guarded("StartSortSession", [&]() -> absl::Status {
      absl::StatusOr<SessionSpec> parsed = SessionSpecFromProto(*request);
      if (!parsed.ok()) return parsed.status();
      *spec = *std::move(parsed);
      const bool on_gpu = !spec->is_table() &&
                          context->dispatcher->RoutesToGpu(spec->key_type, spec->total_keys);
      spec->sorted_on_host = !on_gpu;
      if (spec->delta_keys) {
        // Asked for; granted where it pays (the response says which).
        spec->delta_keys = GrantCodedKeys(context->sessions->limits().key_encoding,
                                          IsSameHostPeer(ctx->peer()), ElementSize(spec->key_type),
                                          on_gpu, spec->transfer_only);
      }
      absl::StatusOr<uint64_t> bytes = context->sessions->Check(*spec);
      if (!bytes.ok()) return bytes.status();
      memory = *bytes;
      return absl::OkStatus();
    });
  }
  auto finish = [=](absl::Status result, const v1::StartSortSessionResponse& response) {
    AddRetryHint(ctx, result);
    FinishUnary(reactor, std::move(result), response, raw_response);
  };
  // Opens the session on the memory admitted for it (before any upload:
  // a session waits for admission holding nothing).
  auto open = [=](Admitted admitted) {
    v1::StartSortSessionResponse response;
    absl::Status result = Guarded("StartSortSession", [&]() -> absl::Status {
      spec->admission_wait_seconds = SecondsSince(arrival);
      absl::StatusOr<std::shared_ptr<SortSession>> started =
          context->sessions->Start(*spec, std::move(admitted));
      if (!started.ok()) return started.status();
      (*started)->StartArriving(*context->dispatcher);
      const SessionLimits& limits = context->sessions->limits();
      response.set_session_id((*started)->id());
      response.set_max_part_bytes(limits.max_part_bytes);
      response.set_suggested_connections(
          SuggestedConnections(request->total_keys() * SessionRowBytes(*spec),
                               context->sessions->open_sessions(), limits.transfer_streams));
      response.set_idle_timeout_ms(absl::ToInt64Milliseconds(limits.idle_timeout));
      response.set_direct_target(limits.direct_target);
      if (spec->delta_keys) response.set_key_encoding(v1::PART_ENCODING_DELTA_BLOCKS);
      return absl::OkStatus();
    });
    finish(std::move(result), response);
  };
  if (!status.ok()) {
    finish(std::move(status), v1::StartSortSessionResponse());
    return reactor;
  }
  AdmissionControl::Wait wait;
  wait.bytes = memory;
  wait.lane = ctx->peer();
  wait.deadline = ctx->deadline();
  wait.cancelled = [ctx] { return ctx->IsCancelled(); };
  wait.done = [=](absl::Status admitted, double) {
    if (admitted.ok()) {
      open(Admitted(context->admission, memory));
    } else {
      finish(std::move(admitted), v1::StartSortSessionResponse());
    }
  };
  std::optional<absl::Status> decided = context->admission->AcquireOrWait(std::move(wait));
  if (!decided) return reactor;  // queued: `done` goes on
  if (!decided->ok()) {
    finish(*std::move(decided), v1::StartSortSessionResponse());
    return reactor;
  }
  open(Admitted(context->admission, memory));
  return reactor;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* HandleUploadParts(ServiceContext* context,
                                                             grpc::CallbackServerContext* ctx,
                                                             grpc::ByteBuffer* response) {
  return new UploadReactor(context, ctx, response);
}

grpc::ServerUnaryReactor* HandleFinishSortSession(ServiceContext* context,
                                                  grpc::CallbackServerContext* ctx,
                                                  const grpc::ByteBuffer* raw_request,
                                                  grpc::ByteBuffer* raw_response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  v1::FinishSortSessionRequest request;
  absl::Status status = ParseUnary(raw_request, &request);
  absl::StatusOr<SessionUse> use = status.ok() ? UseSession(context, request.session_id())
                                               : absl::StatusOr<SessionUse>(status);
  absl::StatusOr<bool> already_sorted = use.ok() ? use->get()->BeginSort() : use.status();
  auto answer = [reactor, raw_response](SortSession& session) {
    v1::FinishSortSessionResponse response;
    if (std::optional<EngineKind> engine = session.engine()) {
      response.set_engine(ToProtoEngine(*engine));
    }
    response.set_total_keys(session.total_keys());
    FinishUnary(reactor, absl::OkStatus(), response, raw_response);
  };
  if (!already_sorted.ok()) {
    FinishUnary(reactor, already_sorted.status(), v1::FinishSortSessionResponse(), raw_response);
    return reactor;
  }
  if (*already_sorted) {
    answer(*use->get());
    return reactor;
  }
  auto session = std::make_shared<SessionUse>(*std::move(use));
  SortSession& s = *session->get();
  context->PoolFor(s.key_type(), s.total_keys()).Submit([context, session, reactor, raw_response,
                                                         answer] {
    SortSession& s = *session->get();
    absl::Status status = Guarded("FinishSortSession: sort", [&] {
      context->AtTestSite("session.sort");
      return s.RunSort(*context->dispatcher);
    });
    if (!status.ok()) {
      // A failed sort ends the session (its memory goes back now).
      context->sessions->Fail(s.id(), status);
      FinishUnary(reactor, status, v1::FinishSortSessionResponse(), raw_response);
      return;
    }
    if (context->metrics != nullptr && s.engine()) context->metrics->RecordBatch(*s.engine(), 1);
    context->sessions->NoteSorted(s);
    answer(s);
  });
  return reactor;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* HandleDownloadParts(ServiceContext* context,
                                                                grpc::CallbackServerContext*,
                                                                const grpc::ByteBuffer* request) {
  return new DownloadReactor(context, request);
}

grpc::ServerUnaryReactor* HandleEndSortSession(ServiceContext* context,
                                               grpc::CallbackServerContext* ctx,
                                               const grpc::ByteBuffer* raw_request,
                                               grpc::ByteBuffer* raw_response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  v1::EndSortSessionRequest request;
  absl::Status status = ParseUnary(raw_request, &request);
  if (status.ok()) status = context->sessions->End(request.session_id());
  FinishUnary(reactor, status, v1::EndSortSessionResponse(), raw_response);
  return reactor;
}

}  // namespace sortd
