// SortChunked reactor: read header, read chunks into host columns, sort on
// the worker pool, write the result back in chunks of bounded size.
#include "server/service/chunked_reactor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/service/guarded.h"
#include "server/service/raw_message.h"
#include "server/service/sort_ops.h"
#include "server/service/status_mapping.h"

namespace sortd {
namespace {

// The narrowest numeric key (uint32/int32/float32), which bounds how many
// keys an upload of --max_chunked_bytes can announce.
constexpr uint64_t kMinNumericKeyBytes = 4;
// What one byte-string element costs the server beyond its bytes.
constexpr uint64_t kStringBytes = sizeof(std::string);

}  // namespace

SortChunkedReactor::SortChunkedReactor(ServiceContext* context,
                                       grpc::CallbackServerContext* ctx)
    : context_(context), ctx_(ctx) {
  absl::Status status = context_->CheckNotDraining();
  if (!status.ok()) {
    Done(status);
    return;
  }
  StartRead(&read_bytes_);
}

void SortChunkedReactor::Fail(const absl::Status& status) { Done(status); }

void SortChunkedReactor::Done(const absl::Status& status) {
  record_.method = RpcMethod::kSortChunked;
  record_.key_type = keys_.type();
  record_.seconds = SecondsSince(arrival_);
  context_->Report(record_, header_.request_id(), status);
  Finish(ToGrpcStatus(status));
}

void SortChunkedReactor::OnReadDone(bool ok) {
  if (!ok) {
    if (cancelled_) {
      Fail(absl::CancelledError("SortChunked cancelled"));
      return;
    }
    absl::Status status = FinishUpload();
    if (!status.ok()) {
      Fail(status);
      return;
    }
    const SteadyClock::time_point queued = SteadyClock::now();
    context_->PoolFor(keys_.type(), keys_.size()).Submit([this, queued] {
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
      if (context_->metrics != nullptr && keys_.size() > 0) {
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
    if (!have_header_) {
      context_->AtTestSite("chunked.header");
      return AcceptHeader(read_buffer_);
    }
    context_->AtTestSite("chunked.chunk");
    return AcceptChunk(read_buffer_);
  });
  if (!status.ok()) {
    Fail(status);
    return;
  }
  StartRead(&read_bytes_);
}

absl::Status SortChunkedReactor::AcceptHeader(const v1::SortChunkedRequest& request) {
  if (!request.has_header()) {
    return absl::InvalidArgumentError(
        "header: the first SortChunked message must carry a header");
  }
  header_ = request.header();
  absl::Status status = ValidateOrder(header_.order(), "header.order");
  if (!status.ok()) return status;
  // The announcement is checked before anything is sized from it: the
  // narrowest keys take 4 bytes, so no larger count can fit the limit.
  const uint64_t max_keys = context_->limits.max_chunked_bytes / kMinNumericKeyBytes;
  if (header_.total_keys() > max_keys) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "header.total_keys: ", header_.total_keys(), " keys announced, more than an upload of ",
        context_->limits.max_chunked_bytes, " bytes (--max_chunked_bytes) can hold (",
        max_keys, " keys of 4 bytes)"));
  }
  status = context_->admission->Acquire(0);
  if (!status.ok()) return status;
  admitted_ = Admitted(context_->admission, 0);
  have_header_ = true;
  return absl::OkStatus();
}

absl::Status SortChunkedReactor::AcceptChunk(const v1::SortChunkedRequest& request) {
  if (!request.has_chunk()) {
    return absl::InvalidArgumentError(
        "chunk: every SortChunked message after the header must carry a chunk");
  }
  const v1::ArrayChunk& chunk = request.chunk();
  if (!chunk.has_keys() || !TypeOf(chunk.keys())) {
    return absl::InvalidArgumentError("chunk.keys: required");
  }
  const size_t n = LengthOf(chunk.keys());
  if (header_.with_values()) {
    if (!chunk.has_values() || !TypeOf(chunk.values())) {
      return absl::InvalidArgumentError(
          "chunk.values: required (header.with_values is set)");
    }
    if (LengthOf(chunk.values()) != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "chunk.values: length ", LengthOf(chunk.values()),
          " does not match chunk.keys length ", n));
    }
  } else if (chunk.has_values() && TypeOf(chunk.values())) {
    return absl::InvalidArgumentError(
        "chunk.values: set but header.with_values is false");
  }
  if (header_.total_keys() > 0 && keys_.size() + n > header_.total_keys()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk.keys: more keys than header.total_keys (", header_.total_keys(), ")"));
  }
  const uint64_t bytes = PayloadBytes(chunk.keys()) +
                         (header_.with_values() ? PayloadBytes(chunk.values()) : 0);
  if (payload_bytes_ + bytes > context_->limits.max_chunked_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "SortChunked: upload exceeds the limit of ",
        context_->limits.max_chunked_bytes, " bytes (--max_chunked_bytes)"));
  }
  if (keys_.empty_type()) {
    absl::Status status = ReserveAnnounced(chunk);
    if (!status.ok()) return status;
  }
  if (!announced_admitted_) {
    // The column, its permuted copy and the permutation are held at once;
    // a byte string also costs its std::string.
    uint64_t reserve = 2 * bytes + 8 * n;
    if (*TypeOf(chunk.keys()) == DataType::kBytes) reserve += kStringBytes * n;
    if (header_.with_values() && *TypeOf(chunk.values()) == DataType::kBytes) {
      reserve += kStringBytes * n;
    }
    absl::Status status = context_->admission->AcquireMoreBytes(reserve);
    if (!status.ok()) return status;
    admitted_.AddBytes(reserve);
  }
  payload_bytes_ += bytes;
  record_.bytes_received += bytes;

  absl::Status status = keys_.Append(chunk.keys(), "chunk.keys");
  if (!status.ok()) return status;
  if (header_.with_values()) status = values_.Append(chunk.values(), "chunk.values");
  return status;
}

absl::Status SortChunkedReactor::ReserveAnnounced(const v1::ArrayChunk& first) {
  const uint64_t total = header_.total_keys();
  const DataType key_type = *TypeOf(first.keys());
  const std::optional<DataType> value_type =
      header_.with_values() ? TypeOf(first.values()) : std::nullopt;
  // Byte strings have no size per key to announce: their columns grow
  // chunk by chunk, admitted as they arrive.
  if (total == 0 || key_type == DataType::kBytes ||
      (value_type && *value_type == DataType::kBytes)) {
    return absl::OkStatus();
  }
  const uint64_t payload =
      total * (ElementSize(key_type) + (value_type ? ElementSize(*value_type) : 0));
  if (payload > context_->limits.max_chunked_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "header.total_keys: ", total, " keys announced (", payload,
        " bytes of these types), over the upload limit of ", context_->limits.max_chunked_bytes,
        " bytes (--max_chunked_bytes)"));
  }
  // Admit the whole announced upload before sizing anything from it.
  const uint64_t reserve = 2 * payload + 8 * total;
  absl::Status status = context_->admission->AcquireMoreBytes(reserve);
  if (!status.ok()) return status;
  admitted_.AddBytes(reserve);
  announced_admitted_ = true;
  keys_.Reserve(key_type, total);
  if (value_type) values_.Reserve(*value_type, total);
  return absl::OkStatus();
}

absl::Status SortChunkedReactor::FinishUpload() {
  if (!have_header_) {
    return absl::InvalidArgumentError(
        "header: SortChunked stream closed without a header");
  }
  if (header_.total_keys() > 0 && keys_.size() != header_.total_keys()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "header.total_keys: ", header_.total_keys(), " announced but ",
        keys_.size(), " keys received"));
  }
  // An upload accepted before draining began is completed, not refused.
  return absl::OkStatus();
}

absl::Status SortChunkedReactor::SortAll() {
  const size_t n = keys_.size();
  const SortOrder order = ToCoreOrder(header_.order());
  const bool need_indices = header_.return_indices() || header_.with_values();
  if (keys_.empty_type() || n == 0) return absl::OkStatus();
  if (need_indices) indices_.resize(n);
  if (*keys_.type() == DataType::kBytes) {
    std::vector<std::string_view> views = keys_.StringViews();
    indices_.resize(n);
    absl::StatusOr<EngineKind> ran =
        context_->dispatcher->ArgsortBytes(views, order, absl::MakeSpan(indices_));
    views.clear();
    if (!ran.ok()) return ran.status();
    engine_ = *ran;
    absl::Status status = keys_.Permute(indices_);
    if (!status.ok()) return status;
  } else {
    absl::StatusOr<EngineKind> ran =
        context_->dispatcher->SortNumeric(keys_.numeric(), order, absl::MakeSpan(indices_));
    if (!ran.ok()) return ran.status();
    engine_ = *ran;
  }
  if (header_.with_values()) return values_.Permute(indices_);
  return absl::OkStatus();
}

void SortChunkedReactor::WriteNext() {
  const size_t n = keys_.size();
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
  const size_t n = keys_.size();
  // Take keys until the message reaches the configured payload size.
  const size_t budget = context_->limits.chunk_response_bytes;
  size_t end = next_offset_;
  size_t bytes = 0;
  while (end < n && (end == next_offset_ || bytes < budget)) {
    bytes += keys_.ElementBytes(end) +
             (header_.with_values() ? values_.ElementBytes(end) : 0) +
             (header_.return_indices() ? 8 : 0);
    ++end;
  }
  write_buffer_.Clear();
  if (first_write_) {
    write_buffer_.set_total_keys(n);
    write_buffer_.set_request_id(header_.request_id());
    write_buffer_.set_engine(ToProtoEngine(engine_));
    first_write_ = false;
  }
  write_buffer_.set_offset(next_offset_);
  keys_.CopySlice(next_offset_, end, write_buffer_.mutable_chunk()->mutable_keys());
  if (header_.with_values()) {
    values_.CopySlice(next_offset_, end, write_buffer_.mutable_chunk()->mutable_values());
  }
  if (header_.return_indices()) {
    write_buffer_.mutable_indices()->Add(indices_.begin() + next_offset_,
                                         indices_.begin() + end);
  }
  next_offset_ = end;
  record_.bytes_sent += bytes;
}

void SortChunkedReactor::OnWriteDone(bool ok) {
  if (!ok) {
    Fail(absl::CancelledError("SortChunked: client stopped reading"));
    return;
  }
  WriteNext();
}

}  // namespace sortd
