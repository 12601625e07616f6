// The wire form of sortd.v1.SessionPart without protobuf's copies: a part's
// body is read from the received gRPC slices straight into its destination,
// and sent from the caller's memory as a slice of its own (no copy before
// the socket). Header fields are ordinary protobuf; the body is field 15,
// last. Shared by the server and the C++ client (installed with the dev
// headers); the Python client writes the same bytes (sortd_client/wire.py).
#ifndef SORTD_PROTO_SORTD_V1_SESSION_PART_CODEC_H_
#define SORTD_PROTO_SORTD_V1_SESSION_PART_CODEC_H_

#include <cstdint>
#include <limits>
#include <string>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

namespace sortd::v1::session_part {

inline constexpr int kSessionIdField = 1;
inline constexpr int kArrayField = 2;
inline constexpr int kOffsetField = 3;
inline constexpr int kColumnField = 4;
inline constexpr int kEncodingField = 5;
inline constexpr int kElementsField = 6;
inline constexpr int kBodyField = 15;

// What precedes the body.
struct Header {
  std::string session_id;
  int array = 0;  // a SessionArray value
  uint64_t offset = 0;
  uint32_t column = 0;  // table sessions' column arrays
  int encoding = 0;      // a PartEncoding value (downloads)
  uint64_t elements = 0;  // DELTA_BLOCKS: the elements the body's blocks hold
};

// Reads one SessionPart message: Start() parses the header fields and stops
// at the body, whose length body_bytes() then tells; ReadBody() copies it
// to its destination (once, from the received slices). The buffer must
// outlive the reader.
class Reader {
 public:
  explicit Reader(grpc::ByteBuffer* buffer) : stream_(buffer), in_(&stream_) {
    in_.SetTotalBytesLimit(std::numeric_limits<int>::max());
  }

  // False when the bytes are not a SessionPart (error() says why).
  bool Start(Header* header) {
    using google::protobuf::internal::WireFormatLite;
    while (true) {
      const uint32_t tag = in_.ReadTag();
      if (tag == 0) {
        // No body: an empty part (valid protobuf; callers decide).
        if (!in_.ConsumedEntireMessage()) return Fail("truncated or malformed field");
        has_body_ = false;
        return true;
      }
      const int field = WireFormatLite::GetTagFieldNumber(tag);
      const auto wire_type = WireFormatLite::GetTagWireType(tag);
      if (field == kBodyField) {
        if (wire_type != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) return Fail("body: wrong wire type");
        uint32_t length = 0;
        if (!in_.ReadVarint32(&length)) return Fail("body: bad length");
        body_bytes_ = length;
        has_body_ = true;
        return true;
      }
      bool ok = true;
      if (field == kSessionIdField && wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
        uint32_t length = 0;
        ok = in_.ReadVarint32(&length) && length <= kMaxSessionIdBytes &&
             in_.ReadString(&header->session_id, static_cast<int>(length));
      } else if (field == kArrayField && wire_type == WireFormatLite::WIRETYPE_VARINT) {
        uint64_t value = 0;
        ok = in_.ReadVarint64(&value);
        header->array = static_cast<int>(value > 1000 ? 1000 : value);
      } else if (field == kOffsetField && wire_type == WireFormatLite::WIRETYPE_VARINT) {
        ok = in_.ReadVarint64(&header->offset);
      } else if (field == kColumnField && wire_type == WireFormatLite::WIRETYPE_VARINT) {
        ok = in_.ReadVarint32(&header->column);
      } else if (field == kEncodingField && wire_type == WireFormatLite::WIRETYPE_VARINT) {
        uint64_t value = 0;
        ok = in_.ReadVarint64(&value);
        header->encoding = static_cast<int>(value > 1000 ? 1000 : value);
      } else if (field == kElementsField && wire_type == WireFormatLite::WIRETYPE_VARINT) {
        ok = in_.ReadVarint64(&header->elements);
      } else {
        ok = WireFormatLite::SkipField(&in_, tag);  // unknown fields are ignored
      }
      if (!ok) return Fail("malformed header field");
    }
  }

  bool has_body() const { return has_body_; }
  // Bytes of the message read so far (at the body's first byte after Start).
  uint64_t position() const { return static_cast<uint64_t>(in_.CurrentPosition()); }
  uint64_t body_bytes() const { return body_bytes_; }

  // Copies the body to `destination` (body_bytes() bytes) and checks that
  // nothing follows it.
  bool ReadBody(void* destination) {
    if (!has_body_) return true;
    if (body_bytes_ > 0 && !in_.ReadRaw(destination, static_cast<int>(body_bytes_))) {
      return Fail("body: shorter than its length");
    }
    if (in_.ReadTag() != 0 || !in_.ConsumedEntireMessage()) {
      return Fail("body must be the last field of a SessionPart");
    }
    return true;
  }

  const char* error() const { return error_; }

  // A session id longer than this is not one the server made.
  static constexpr uint32_t kMaxSessionIdBytes = 256;

 private:
  bool Fail(const char* why) {
    error_ = why;
    return false;
  }

  grpc::ProtoBufferReader stream_;
  google::protobuf::io::CodedInputStream in_;
  bool has_body_ = false;
  uint64_t body_bytes_ = 0;
  const char* error_ = "";
};

// Encodes a SessionPart whose body is `body_bytes` at `body`, without
// copying the body: it travels as a slice over the caller's memory, and
// `release(release_arg)` is called once gRPC no longer needs it (possibly
// after the call that sent it has returned).
inline grpc::ByteBuffer Encode(const Header& header, const void* body, size_t body_bytes,
                               void (*release)(void*), void* release_arg) {
  using google::protobuf::internal::WireFormatLite;
  std::string head;
  {
    google::protobuf::io::StringOutputStream raw(&head);
    google::protobuf::io::CodedOutputStream out(&raw);
    if (!header.session_id.empty()) {
      WireFormatLite::WriteString(kSessionIdField, header.session_id, &out);
    }
    if (header.array != 0) WireFormatLite::WriteEnum(kArrayField, header.array, &out);
    if (header.offset != 0) WireFormatLite::WriteUInt64(kOffsetField, header.offset, &out);
    if (header.column != 0) WireFormatLite::WriteUInt32(kColumnField, header.column, &out);
    if (header.encoding != 0) WireFormatLite::WriteEnum(kEncodingField, header.encoding, &out);
    if (header.elements != 0) WireFormatLite::WriteUInt64(kElementsField, header.elements, &out);
    WireFormatLite::WriteTag(kBodyField, WireFormatLite::WIRETYPE_LENGTH_DELIMITED, &out);
    out.WriteVarint64(body_bytes);
  }
  if (body_bytes == 0) {
    release(release_arg);
    grpc::Slice only(head);
    return grpc::ByteBuffer(&only, 1);
  }
  grpc::Slice slices[2] = {
      grpc::Slice(head),
      grpc::Slice(const_cast<void*>(body), body_bytes, release, release_arg),
  };
  return grpc::ByteBuffer(slices, 2);
}

}  // namespace sortd::v1::session_part

#endif  // SORTD_PROTO_SORTD_V1_SESSION_PART_CODEC_H_
