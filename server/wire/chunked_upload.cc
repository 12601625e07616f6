#include "server/wire/chunked_upload.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/wire/converted_arrays.h"
#include "server/wire/sort_ops.h"

namespace sortd {
namespace {

// The narrowest numeric key (uint32/int32/float32), which bounds how many
// keys an upload of --max_chunked_bytes can announce.
constexpr uint64_t kMinNumericKeyBytes = 4;
// What one byte-string element costs the server beyond its bytes.
constexpr uint64_t kStringBytes = sizeof(std::string);

}  // namespace

absl::Status ChunkedUpload::Accept(const v1::SortChunkedRequest& message) {
  return have_header_ ? AcceptChunk(message) : AcceptHeader(message);
}

absl::Status ChunkedUpload::AcceptHeader(const v1::SortChunkedRequest& message) {
  if (!message.has_header()) {
    return absl::InvalidArgumentError(
        "header: the first SortChunked message must carry a header");
  }
  header_ = message.header();
  absl::Status status = ValidateRequestId(header_.request_id(), "header.request_id");
  if (!status.ok()) {
    header_.clear_request_id();  // not echoed, nor logged, at that length
    return status;
  }
  status = ValidateOrder(header_.order(), "header.order");
  if (!status.ok()) return status;
  // The announcement is checked before anything is sized from it: the
  // narrowest keys take 4 bytes, so no larger count can fit the limit.
  const uint64_t max_keys = max_bytes_ / kMinNumericKeyBytes;
  if (header_.total_keys() > max_keys) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "header.total_keys: ", header_.total_keys(), " keys announced, more than an upload of ",
        max_bytes_, " bytes (--max_chunked_bytes) can hold (", max_keys, " keys of 4 bytes)"));
  }
  have_header_ = true;
  return absl::OkStatus();
}

absl::Status ChunkedUpload::AcceptChunk(const v1::SortChunkedRequest& message) {
  if (!message.has_chunk()) {
    return absl::InvalidArgumentError(
        "chunk: every SortChunked message after the header must carry a chunk");
  }
  const v1::ArrayChunk& chunk = message.chunk();
  for (const auto& [array, field] :
       {std::pair{&chunk.keys(), "chunk.keys"}, std::pair{&chunk.values(), "chunk.values"}}) {
    if (IsConvertedArray(*array)) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": ", ConvertedTypeName(*array),
          " arrays are sorted by Sort, SortPairs and SortStream (not yet by SortChunked)"));
    }
  }
  if (!chunk.has_keys() || !TypeOf(chunk.keys())) {
    return absl::InvalidArgumentError("chunk.keys: required");
  }
  const size_t n = LengthOf(chunk.keys());
  if (header_.with_values()) {
    if (!chunk.has_values() || !TypeOf(chunk.values())) {
      return absl::InvalidArgumentError("chunk.values: required (header.with_values is set)");
    }
    if (LengthOf(chunk.values()) != n) {
      return absl::InvalidArgumentError(absl::StrCat("chunk.values: length ",
                                                     LengthOf(chunk.values()),
                                                     " does not match chunk.keys length ", n));
    }
  } else if (chunk.has_values() && TypeOf(chunk.values())) {
    return absl::InvalidArgumentError("chunk.values: set but header.with_values is false");
  }
  if (header_.total_keys() > 0 && keys_.size() + n > header_.total_keys()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk.keys: more keys than header.total_keys (", header_.total_keys(), ")"));
  }
  const uint64_t bytes =
      PayloadBytes(chunk.keys()) + (header_.with_values() ? PayloadBytes(chunk.values()) : 0);
  if (payload_bytes_ + bytes > max_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat("SortChunked: upload exceeds the limit of ",
                                                     max_bytes_, " bytes (--max_chunked_bytes)"));
  }
  if (absl::Status returnable = CheckReturnable(chunk); !returnable.ok()) return returnable;
  if (!admitted_any_) {
    // Nobody admitted the upload ahead: its request slot now, or refused.
    absl::Status status = admission_->Acquire(0);
    if (!status.ok()) return status;
    admitted_ = Admitted(admission_, 0);
    admitted_any_ = true;
  }
  if (keys_.empty_type()) {
    absl::Status status = ReserveAnnounced(chunk);
    if (!status.ok()) return status;
  }
  if (!announced_admitted_) {
    absl::Status status = Reserve(ChunkReserve(chunk));
    if (!status.ok()) return status;
  }
  payload_bytes_ += bytes;

  absl::Status status = keys_.Append(chunk.keys(), "chunk.keys");
  if (!status.ok()) return status;
  if (header_.with_values()) status = values_.Append(chunk.values(), "chunk.values");
  return status;
}

absl::Status ChunkedUpload::CheckReturnable(const v1::ArrayChunk& chunk) const {
  const bool byte_keys = TypeOf(chunk.keys()) == DataType::kBytes;
  const bool byte_values =
      header_.with_values() && TypeOf(chunk.values()) == DataType::kBytes;
  if (max_response_bytes_ == 0 || (!byte_keys && !byte_values)) return absl::OkStatus();
  // The most one element may take: the limit less the message's framing
  // and an 8-byte index.
  const uint64_t room = max_response_bytes_ > kResponseFramingBytes + 8
                            ? max_response_bytes_ - kResponseFramingBytes - 8
                            : 0;
  const size_t n = LengthOf(chunk.keys());
  const std::optional<DataType> value_type =
      header_.with_values() ? TypeOf(chunk.values()) : std::nullopt;
  for (size_t i = 0; i < n; ++i) {
    uint64_t bytes = byte_keys ? chunk.keys().bytes().values(static_cast<int>(i)).size() +
                                     kBytesElementFraming
                               : ElementSize(*TypeOf(chunk.keys()));
    if (value_type) {
      bytes += byte_values ? chunk.values().bytes().values(static_cast<int>(i)).size() +
                                 kBytesElementFraming
                           : ElementSize(*value_type);
    }
    if (bytes > room) {
      return absl::ResourceExhaustedError(absl::StrCat(
          byte_keys ? "chunk.keys" : "chunk.values", ": element ", keys_.size() + i, " takes ",
          bytes, " bytes with its framing, more than one response of ", max_response_bytes_,
          " bytes (--max_message_bytes) can return"));
    }
  }
  return absl::OkStatus();
}

uint64_t ChunkedUpload::ChunkReserve(const v1::ArrayChunk& chunk) const {
  const size_t n = LengthOf(chunk.keys());
  const uint64_t bytes =
      PayloadBytes(chunk.keys()) + (header_.with_values() ? PayloadBytes(chunk.values()) : 0);
  // The column, its permuted copy and the permutation are held at once;
  // a byte string also costs its std::string.
  uint64_t reserve = 2 * bytes + 8 * n;
  if (TypeOf(chunk.keys()) == DataType::kBytes) reserve += kStringBytes * n;
  if (header_.with_values() && TypeOf(chunk.values()) == DataType::kBytes) {
    reserve += kStringBytes * n;
  }
  return reserve;
}

absl::StatusOr<std::optional<uint64_t>> ChunkedUpload::AnnouncedReserve(
    const v1::ArrayChunk& first) const {
  const uint64_t total = header_.total_keys();
  const std::optional<DataType> key_type = TypeOf(first.keys());
  const std::optional<DataType> value_type =
      header_.with_values() ? TypeOf(first.values()) : std::nullopt;
  // Byte strings have no size per key to announce: their columns grow
  // chunk by chunk, admitted as they arrive.
  if (total == 0 || !key_type || *key_type == DataType::kBytes ||
      (header_.with_values() && (!value_type || *value_type == DataType::kBytes))) {
    return std::nullopt;
  }
  const uint64_t payload =
      total * (ElementSize(*key_type) + (value_type ? ElementSize(*value_type) : 0));
  if (payload > max_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "header.total_keys: ", total, " keys announced (", payload,
        " bytes of these types), over the upload limit of ", max_bytes_,
        " bytes (--max_chunked_bytes)"));
  }
  return 2 * payload + 8 * total;
}

uint64_t ChunkedUpload::FirstAdmissionBytes(const v1::SortChunkedRequest& message) const {
  if (!message.has_chunk() || !TypeOf(message.chunk().keys())) return 0;
  absl::StatusOr<std::optional<uint64_t>> announced = AnnouncedReserve(message.chunk());
  if (!announced.ok()) return 0;  // Accept refuses it
  return announced->has_value() ? **announced : ChunkReserve(message.chunk());
}

absl::Status ChunkedUpload::Reserve(uint64_t bytes) {
  if (prepaid_ >= bytes) {
    prepaid_ -= bytes;
    return absl::OkStatus();
  }
  const uint64_t more = bytes - prepaid_;
  prepaid_ = 0;
  return admitted_.AcquireMoreBytes(more);
}

absl::Status ChunkedUpload::ReserveAnnounced(const v1::ArrayChunk& first) {
  absl::StatusOr<std::optional<uint64_t>> announced = AnnouncedReserve(first);
  if (!announced.ok()) return announced.status();
  if (!announced->has_value()) return absl::OkStatus();
  const uint64_t total = header_.total_keys();
  const DataType key_type = *TypeOf(first.keys());
  const std::optional<DataType> value_type =
      header_.with_values() ? TypeOf(first.values()) : std::nullopt;
  // Admit the whole announced upload before sizing anything from it.
  absl::Status status = Reserve(**announced);
  if (!status.ok()) return status;
  announced_admitted_ = true;
  // The keys are what a GPU engine copies to the device: from the pool.
  // The values are only gathered here on the host.
  keys_.Reserve(key_type, total, memory_);
  if (value_type) values_.Reserve(*value_type, total);
  return absl::OkStatus();
}

absl::Status ChunkedUpload::Finish() const {
  if (!have_header_) {
    return absl::InvalidArgumentError("header: SortChunked stream closed without a header");
  }
  if (header_.total_keys() > 0 && keys_.size() != header_.total_keys()) {
    return absl::InvalidArgumentError(absl::StrCat("header.total_keys: ", header_.total_keys(),
                                                   " announced but ", keys_.size(),
                                                   " keys received"));
  }
  return absl::OkStatus();
}

}  // namespace sortd
