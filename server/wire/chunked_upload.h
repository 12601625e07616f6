// The upload half of SortChunked, apart from gRPC: a header, then chunks,
// each checked against the header, the limits and admission before anything
// is sized from it, and appended to host columns. The reactor feeds it the
// messages it reads; the fuzzer (tests/fuzz) feeds it arbitrary ones.
#ifndef SORTD_SERVER_WIRE_CHUNKED_UPLOAD_H_
#define SORTD_SERVER_WIRE_CHUNKED_UPLOAD_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/runtime/admission.h"
#include "server/wire/typed_array.h"

namespace sortd {

class ChunkedUpload {
 public:
  // `max_bytes`: the largest payload one upload may carry
  // (--max_chunked_bytes). `max_response_bytes`: the largest message the
  // answer may use (--max_message_bytes; 0: unchecked): an element that
  // could not be sent back within it is refused on arrival, not after the
  // sort.
  // `memory` (may be null): where announced numeric keys are held (the
  // server's pinned pool, shared with sort sessions).
  ChunkedUpload(uint64_t max_bytes, AdmissionControl* admission, uint64_t max_response_bytes = 0,
                HostMemoryPool* memory = nullptr)
      : max_bytes_(max_bytes),
        max_response_bytes_(max_response_bytes),
        admission_(admission),
        memory_(memory) {}

  // What a response message costs beyond its elements (offset, total_keys,
  // engine, the request_id's tag and length, the nested chunk and arrays),
  // generously; and what a byte string costs beyond its bytes (tag and
  // length prefix, lengths below 2^35).
  static constexpr uint64_t kResponseFramingBytes = 256;
  static constexpr uint64_t kBytesElementFraming = 6;

  // The next message of the stream: the header first, chunks after it.
  // Any error ends the upload (the caller ends the RPC with it).
  absl::Status Accept(const v1::SortChunkedRequest& message);
  // At half-close: whether what arrived is a complete upload.
  absl::Status Finish() const;

  bool has_header() const { return have_header_; }
  const v1::ChunkedSortHeader& header() const { return header_; }
  HostColumn& keys() { return keys_; }
  HostColumn& values() { return values_; }
  const HostColumn& keys() const { return keys_; }
  // Payload bytes received so far (keys and values).
  uint64_t payload_bytes() const { return payload_bytes_; }
  // Gives the admission back early (the RPC's end releases it anyway).
  void Release() { admitted_.Reset(); }

  // The upload is admitted at its first chunk, before that chunk is taken
  // in: the reactor asks what it needs (the whole announced upload, else
  // the chunk's share), waits for it in the admission queue and hands the
  // admission over. Accept admits at once (or refuses) when nobody did.
  bool needs_admission() const { return have_header_ && !admitted_any_; }
  uint64_t FirstAdmissionBytes(const v1::SortChunkedRequest& message) const;
  void Admit(Admitted admitted) {
    prepaid_ = admitted.bytes();
    admitted_ = std::move(admitted);
    admitted_any_ = true;
  }

 private:
  absl::Status AcceptHeader(const v1::SortChunkedRequest& message);
  absl::Status AcceptChunk(const v1::SortChunkedRequest& message);
  // On the first chunk, when the header announced total_keys of numeric
  // types: checks the announced size against the limit, admits it whole and
  // reserves the columns (no growth, no per-chunk admission after that).
  absl::Status ReserveAnnounced(const v1::ArrayChunk& first);

  // Refuses a byte-string element too large to return in one response.
  absl::Status CheckReturnable(const v1::ArrayChunk& chunk) const;
  // What a chunk's columns hold once appended, without an announcement.
  uint64_t ChunkReserve(const v1::ArrayChunk& chunk) const;
  // What the whole announced upload holds (numeric types and total_keys
  // set), checked against the limit; nullopt: not announced.
  absl::StatusOr<std::optional<uint64_t>> AnnouncedReserve(const v1::ArrayChunk& first) const;
  // Holds `bytes` more with the admission: first from what was admitted
  // ahead (Admit), then from admission control, now or not at all.
  absl::Status Reserve(uint64_t bytes);

  const uint64_t max_bytes_;
  const uint64_t max_response_bytes_;
  AdmissionControl* const admission_;
  HostMemoryPool* const memory_;
  bool have_header_ = false;
  v1::ChunkedSortHeader header_;
  Admitted admitted_;
  bool admitted_any_ = false;  // admitted_ holds the upload's request slot
  uint64_t prepaid_ = 0;       // admitted ahead (Admit) and not yet used
  uint64_t payload_bytes_ = 0;
  bool announced_admitted_ = false;  // ReserveAnnounced admitted everything
  HostColumn keys_;
  HostColumn values_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_WIRE_CHUNKED_UPLOAD_H_
