// SortStream: many independent requests over one bidirectional stream.
// Each request is validated and run on the worker pool as it arrives;
// responses are written in completion order. A failed request gets a
// response with `error` set and the stream goes on. The reactor stops
// reading while too many of its requests are pending (flow control).
#ifndef SORTD_SERVER_GRPC_STREAM_REACTOR_H_
#define SORTD_SERVER_GRPC_STREAM_REACTOR_H_

#include <deque>
#include <memory>
#include <mutex>

#include "server/grpc/service_context.h"
#include "sortd/v1/sort.grpc.pb.h"

namespace sortd {

// Registered raw: messages are parsed here, and one that does not parse
// stops reading; the stream then ends INVALID_ARGUMENT once the requests
// before it are answered.
class SortStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  SortStreamReactor(ServiceContext* context, grpc::CallbackServerContext* ctx);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override { delete this; }

 private:
  // gRPC operations decided under the lock and started after releasing it,
  // so that no reaction can re-enter while the lock is held.
  struct Next {
    const v1::SortResponse* write = nullptr;
    bool read = false;
    bool finish = false;
    grpc::Status status;
  };

  // A response waiting to be written, with the admitted bytes of its
  // request: held until the write completes, so that responses a client
  // does not read stay counted against --max_inflight_bytes (its request
  // slot is given back when it is answered).
  struct PendingWrite {
    std::unique_ptr<v1::SortResponse> response;
    Admitted admitted;
  };

  void Complete(std::unique_ptr<v1::SortResponse> response, Admitted admitted);
  // Sorts one admitted request on the calling thread (a pool worker, or
  // the gRPC thread for an inline request) and delivers the response with
  // the admission.
  void SortNow(const v1::SortRequest& request, RequestRecord record,
               SteadyClock::time_point arrival, Admitted admitted,
               bool on_grpc_thread);
  // Reports a finished request (metrics, log) and queues its response (an
  // error response when `result` is not OK) with its admission.
  void Deliver(const v1::SortRequest& request, std::unique_ptr<v1::SortResponse> response,
               absl::Status result, RequestRecord record, SteadyClock::time_point arrival,
               bool own_launch, Admitted admitted);
  void Submit(std::unique_ptr<v1::SortRequest> request);
  // No more reads: the client half-closed (OK) or a message did not parse
  // (the status the stream ends with once its requests are answered).
  void EndReads(absl::Status error);
  Next DecideLocked();
  void Start(const Next& next);

  ServiceContext* const context_;
  grpc::CallbackServerContext* const ctx_;
  grpc::ByteBuffer read_buffer_;
  grpc::ByteBuffer write_bytes_;  // the serialized writes_.front() while writing_
  uint64_t messages_read_ = 0;

  std::mutex mu_;
  std::deque<PendingWrite> writes_;  // front is in flight when writing_
  int jobs_ = 0;  // submitted to the pool, not yet completed
  bool read_in_flight_ = false;
  bool reads_done_ = false;
  bool writing_ = false;
  bool cancelled_ = false;
  bool write_failed_ = false;
  bool finished_ = false;
  absl::Status parse_error_;  // a message that did not parse ended reading
};

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_STREAM_REACTOR_H_
