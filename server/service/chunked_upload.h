// The upload half of SortChunked, apart from gRPC: a header, then chunks,
// each checked against the header, the limits and admission before anything
// is sized from it, and appended to host columns. The reactor feeds it the
// messages it reads; the fuzzer (tests/fuzz) feeds it arbitrary ones.
#ifndef SORTD_SERVER_SERVICE_CHUNKED_UPLOAD_H_
#define SORTD_SERVER_SERVICE_CHUNKED_UPLOAD_H_

#include <cstdint>

#include "absl/status/status.h"
#include "server/runtime/admission.h"
#include "server/service/typed_array.h"

namespace sortd {

class ChunkedUpload {
 public:
  // `max_bytes`: the largest payload one upload may carry
  // (--max_chunked_bytes).
  ChunkedUpload(uint64_t max_bytes, AdmissionControl* admission)
      : max_bytes_(max_bytes), admission_(admission) {}

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

 private:
  absl::Status AcceptHeader(const v1::SortChunkedRequest& message);
  absl::Status AcceptChunk(const v1::SortChunkedRequest& message);
  // On the first chunk, when the header announced total_keys of numeric
  // types: checks the announced size against the limit, admits it whole and
  // reserves the columns (no growth, no per-chunk admission after that).
  absl::Status ReserveAnnounced(const v1::ArrayChunk& first);

  const uint64_t max_bytes_;
  AdmissionControl* const admission_;
  bool have_header_ = false;
  v1::ChunkedSortHeader header_;
  Admitted admitted_;
  uint64_t payload_bytes_ = 0;
  bool announced_admitted_ = false;  // ReserveAnnounced admitted everything
  HostColumn keys_;
  HostColumn values_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_SERVICE_CHUNKED_UPLOAD_H_
