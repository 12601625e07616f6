// SortChunked: one array uploaded as a header plus chunks, sorted when the
// client half-closes, and streamed back in order as chunks. Lets clients sort
// more than the message limit and more than 2 GiB.
#ifndef SORTD_SERVER_GRPC_CHUNKED_REACTOR_H_
#define SORTD_SERVER_GRPC_CHUNKED_REACTOR_H_

#include <atomic>
#include <vector>

#include "server/grpc/service_context.h"
#include "server/wire/chunked_upload.h"
#include "server/wire/typed_array.h"
#include "sortd/v1/sort.grpc.pb.h"

namespace sortd {

// Registered raw: messages are parsed here (one that does not parse ends
// the RPC with INVALID_ARGUMENT) and responses serialized here.
class SortChunkedReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  SortChunkedReactor(ServiceContext* context, grpc::CallbackServerContext* ctx);

  // Only one operation is outstanding at any time (reads, then the sort
  // job, then writes), so the reactor needs no lock.
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override { cancelled_ = true; }
  // Records the RPC (metrics, request log) now that its outcome is final.
  void OnDone() override;

 private:
  // Takes the message just read into the upload, then reads the next.
  void AcceptRead();
  // Admits the upload at its first chunk, waiting in the queue if it must.
  void AdmitFirstChunk();
  absl::Status SortAll();
  void WriteNext();
  // Builds the next response message in write_buffer_ (may throw bad_alloc).
  void FillNextResponse();
  void Fail(const absl::Status& status);
  // Finishes the RPC with `status`; OnDone records it.
  void Done(const absl::Status& status);
  const v1::ChunkedSortHeader& header() const { return upload_.header(); }
  HostColumn& keys() { return upload_.keys(); }
  HostColumn& values() { return upload_.values(); }

  ServiceContext* const context_;
  grpc::CallbackServerContext* const ctx_;
  std::atomic<bool> cancelled_{false};
  const SteadyClock::time_point arrival_ = SteadyClock::now();
  RequestRecord record_;
  absl::Status final_status_;

  grpc::ByteBuffer read_bytes_;
  grpc::ByteBuffer write_bytes_;
  uint64_t messages_read_ = 0;
  v1::SortChunkedRequest read_buffer_;
  v1::SortChunkedResponse write_buffer_;
  ChunkedUpload upload_;

  std::vector<uint64_t> indices_;
  EngineKind engine_ = EngineKind::kCpu;
  size_t next_offset_ = 0;
  bool first_write_ = true;
};

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_CHUNKED_REACTOR_H_
