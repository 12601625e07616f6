// SortChunked reactor: read header, read chunks into host columns, sort on
// the worker pool, write the result back in chunks of bounded size.
#include "server/grpc/chunked_reactor.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/grpc/guarded.h"
#include "server/grpc/raw_message.h"
#include "server/grpc/status_mapping.h"
#include "server/wire/sort_ops.h"

namespace sortd {
namespace {

constexpr uint64_t kResponseFramingBytes = ChunkedUpload::kResponseFramingBytes;
constexpr uint64_t kBytesElementFraming = ChunkedUpload::kBytesElementFraming;

}  // namespace
SortChunkedReactor::SortChunkedReactor(ServiceContext* context,
                                       grpc::CallbackServerContext* ctx)
    : context_(context),
      ctx_(ctx),
      upload_(context->limits.max_chunked_bytes, context->admission,
              context->limits.max_response_bytes, context->host_memory) {
  absl::Status status = context_->CheckNotDraining();
  if (!status.ok()) {
    Done(status);
    return;
  }
  StartRead(&read_bytes_);
}

void SortChunkedReactor::Fail(const absl::Status& status) { Done(status); }

void SortChunkedReactor::Done(const absl::Status& status) {
  final_status_ = status;
  record_.seconds = SecondsSince(arrival_);
  AddRetryHint(ctx_, status);
  Finish(ToGrpcStatus(status));
}

void SortChunkedReactor::OnDone() {
  // Counted as what the client saw. A cancellation can reach the reactor
  // as a read that fails like a half-close (OnCancel comes after it), which
  // leaves an upload short of its announcement: the client, gone, never
  // sees that error, so the call counts as cancelled. OnCancel precedes
  // OnDone, so cancelled_ is final here.
  if (cancelled_ || ctx_->IsCancelled()) {
    if (final_status_.ok() || final_status_.code() != absl::StatusCode::kCancelled) {
      final_status_ = absl::CancelledError(
          absl::StrCat("SortChunked cancelled (", final_status_.ToString(), ")"));
    }
  }
  record_.method = RpcMethod::kSortChunked;
  record_.key_type = upload_.keys().type();
  if (!final_status_.ok()) {
    record_.keys_sorted = 0;
    record_.engine.reset();
  }
  context_->Report(record_, upload_.header().request_id(), final_status_);
  delete this;
}

void SortChunkedReactor::OnReadDone(bool ok) {
  if (!ok) {
    if (cancelled_) {
      Fail(absl::CancelledError("SortChunked cancelled"));
      return;
    }
    // An upload accepted before draining began is completed, not refused.
    absl::Status status = upload_.Finish();
    if (!status.ok()) {
      Fail(status);
      return;
    }
    const SteadyClock::time_point queued = SteadyClock::now();
    context_->PoolFor(keys().type(), keys().size()).Submit([this, queued] {
      const double queue_seconds = SecondsSince(queued);
      absl::Status result = cancelled_ || ctx_->IsCancelled()
                                ? absl::CancelledError("SortChunked cancelled")
                                : Guarded("SortChunked: sort", [this] {
                                    context_->AtTestSite("chunked.sort");
                                    return SortAll();
                                  });
      if (!result.ok()) {
        Fail(result);
        return;
      }
      record_.queue_seconds = queue_seconds;
      if (context_->metrics != nullptr && keys().size() > 0) {
        context_->metrics->RecordBatch(engine_, 1);
      }
      WriteNext();
    });
    return;
  }
  absl::Status status = Guarded("SortChunked: upload", [this] {
    ++messages_read_;
    absl::Status parsed = ParseRawMessage(&read_bytes_, &read_buffer_,
                                          absl::StrCat("SortChunked message ", messages_read_));
    if (!parsed.ok()) {
      return ctx_->IsCancelled() ? absl::CancelledError("SortChunked cancelled") : parsed;
    }
    context_->AtTestSite(upload_.has_header() ? "chunked.chunk" : "chunked.header");
    return absl::OkStatus();
  });
  if (!status.ok()) {
    Fail(status);
    return;
  }
  if (upload_.needs_admission()) {
    AdmitFirstChunk();
    return;
  }
  AcceptRead();
}

void SortChunkedReactor::AcceptRead() {
  absl::Status status = Guarded("SortChunked: upload", [this] {
    absl::Status accepted = upload_.Accept(read_buffer_);
    record_.bytes_received = upload_.payload_bytes();
    return accepted;
  });
  if (!status.ok()) {
    Fail(status);
    return;
  }
  StartRead(&read_bytes_);
}

// The first chunk is here: the upload waits for admission (of all it
// announced) holding that chunk alone, and reads nothing more until then.
void SortChunkedReactor::AdmitFirstChunk() {
  const uint64_t bytes = upload_.FirstAdmissionBytes(read_buffer_);
  AdmissionControl::Wait wait;
  wait.bytes = bytes;
  wait.held_bytes = read_buffer_.ByteSizeLong();
  wait.lane = ctx_->peer();
  wait.deadline = ctx_->deadline();
  wait.cancelled = [this] { return cancelled_.load() || ctx_->IsCancelled(); };
  wait.done = [this, bytes](absl::Status admitted, double) {
    if (!admitted.ok()) {
      Fail(admitted);
      return;
    }
    upload_.Admit(Admitted(context_->admission, bytes));
    AcceptRead();
  };
  std::optional<absl::Status> decided = context_->admission->AcquireOrWait(std::move(wait));
  if (!decided) return;  // queued: `done` goes on
  if (!decided->ok()) {
    Fail(*decided);
    return;
  }
  upload_.Admit(Admitted(context_->admission, bytes));
  AcceptRead();
}

absl::Status SortChunkedReactor::SortAll() {
  const size_t n = keys().size();
  const SortOrder order = ToCoreOrder(header().order());
  const bool need_indices = header().return_indices() || header().with_values();
  if (keys().empty_type() || n == 0) return absl::OkStatus();
  if (need_indices) indices_.resize(n);
  if (*keys().type() == DataType::kBytes) {
    std::vector<std::string_view> views = keys().StringViews();
    indices_.resize(n);
    absl::StatusOr<EngineKind> ran =
        context_->dispatcher->ArgsortBytes(views, order, absl::MakeSpan(indices_));
    views.clear();
    if (!ran.ok()) return ran.status();
    engine_ = *ran;
    absl::Status status = keys().Permute(indices_);
    if (!status.ok()) return status;
  } else {
    absl::StatusOr<EngineKind> ran =
        context_->dispatcher->SortNumeric(keys().numeric(), order, absl::MakeSpan(indices_));
    if (!ran.ok()) return ran.status();
    engine_ = *ran;
  }
  if (header().with_values()) return values().Permute(indices_);
  return absl::OkStatus();
}

void SortChunkedReactor::WriteNext() {
  const size_t n = keys().size();
  if (!first_write_ && next_offset_ >= n) {
    record_.engine = engine_;
    record_.keys_sorted = n;
    Done(absl::OkStatus());
    return;
  }
  absl::Status status = Guarded("SortChunked: response", [this] {
    context_->AtTestSite("chunked.write");
    FillNextResponse();
    SerializeRawMessage(write_buffer_, &write_bytes_);
    return absl::OkStatus();
  });
  if (!status.ok()) {
    Fail(status);
    return;
  }
  StartWrite(&write_bytes_);
}

void SortChunkedReactor::FillNextResponse() {
  const size_t n = keys().size();
  // Take elements while the encoded message, framing included, stays within
  // --chunk_response_bytes (4 MiB by default: gRPC's default receive limit,
  // so that a stock client reads every response) and within the message
  // limit (--max_message_bytes). The first response shares both with the
  // request_id it echoes.
  const uint64_t limit = context_->limits.max_response_bytes;
  const uint64_t fixed = kResponseFramingBytes + (first_write_ ? header().request_id().size() : 0);
  auto room = [fixed](uint64_t bound) { return bound > fixed ? bound - fixed : 0; };
  const uint64_t message_budget = limit == 0 ? std::numeric_limits<uint64_t>::max() : room(limit);
  const uint64_t budget =
      std::min<uint64_t>(room(context_->limits.chunk_response_bytes), message_budget);
  auto encoded = [](size_t i, const HostColumn& column) -> uint64_t {
    // A byte string also costs its tag and length prefix.
    return column.ElementBytes(i) + (*column.type() == DataType::kBytes ? kBytesElementFraming : 0);
  };
  size_t end = next_offset_;
  uint64_t bytes = 0;    // encoded, against the budget
  uint64_t payload = 0;  // keys and values, for the metrics
  while (end < n) {
    const uint64_t cost = encoded(end, keys()) +
                          (header().with_values() ? encoded(end, values()) : 0) +
                          (header().return_indices() ? 8 : 0);
    // At least one element per message, except a first response whose
    // request_id leaves no room for one: it carries the metadata alone.
    if (end > next_offset_ ? bytes + cost > budget : first_write_ && cost > message_budget) break;
    bytes += cost;
    payload += keys().ElementBytes(end) + (header().with_values() ? values().ElementBytes(end) : 0);
    ++end;
  }
  write_buffer_.Clear();
  if (first_write_) {
    write_buffer_.set_total_keys(n);
    write_buffer_.set_request_id(upload_.header().request_id());
    write_buffer_.set_engine(ToProtoEngine(engine_));
    first_write_ = false;
  }
  write_buffer_.set_offset(next_offset_);
  keys().CopySlice(next_offset_, end, write_buffer_.mutable_chunk()->mutable_keys());
  if (header().with_values()) {
    values().CopySlice(next_offset_, end, write_buffer_.mutable_chunk()->mutable_values());
  }
  if (header().return_indices()) {
    write_buffer_.mutable_indices()->Add(indices_.begin() + next_offset_,
                                         indices_.begin() + end);
  }
  next_offset_ = end;
  record_.bytes_sent += payload;
}

void SortChunkedReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Fail(absl::CancelledError("SortChunked: client stopped reading"));
    return;
  }
  WriteNext();
}

}  // namespace sortd
