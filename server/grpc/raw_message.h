// SortService methods are registered raw (grpc::ByteBuffer in and out) so
// that the server, not gRPC, parses requests: a message that does not parse
// gets INVALID_ARGUMENT naming what was expected, on every RPC. (With typed
// handlers gRPC answers such a unary call UNIMPLEMENTED and ends a stream as
// if the client had half-closed, so the request is lost without an error.)
#ifndef SORTD_SERVER_GRPC_RAW_MESSAGE_H_
#define SORTD_SERVER_GRPC_RAW_MESSAGE_H_

#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/byte_buffer.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace sortd {

// Parses `bytes` into `message` and empties `bytes` (the payload is then
// held once, in the message). `what` names the message for the error, e.g.
// "request" or "SortStream message 3".
template <typename Message>
absl::Status ParseRawMessage(grpc::ByteBuffer* bytes, Message* message, absl::string_view what) {
  // gRPC starts a unary handler even when the call ended (the client
  // cancelled, or its deadline passed) before the request message arrived;
  // the buffer is then not valid. That is a cancellation, not bad input.
  if (!bytes->Valid()) {
    return absl::CancelledError(
        absl::StrCat(what, ": no message arrived (the call was cancelled or ended first)"));
  }
  const grpc::Status parsed = grpc::SerializationTraits<Message>::Deserialize(bytes, message);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": not a valid ", Message::descriptor()->full_name(),
                     " (the bytes do not parse as protobuf)"));
  }
  return absl::OkStatus();
}

// Serializes `message` into `out` (replacing its contents).
template <typename Message>
void SerializeRawMessage(const Message& message, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  grpc::ByteBuffer serialized;
  grpc::SerializationTraits<Message>::Serialize(message, &serialized, &own_buffer);
  out->Swap(&serialized);
}

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_RAW_MESSAGE_H_
