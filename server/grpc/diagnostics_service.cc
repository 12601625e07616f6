// Echo: one copy of the keys into the response, as Sort makes before it
// sorts in place. EchoStream: reads ahead while fewer than kWindow echoes
// and kWindowBytes are pending, writes them in order, one write in flight
// (gRPC's limit).
#include "server/grpc/diagnostics_service.h"

#include <deque>
#include <memory>
#include <mutex>

#include "server/runtime/calls_in_flight.h"

namespace sortd {
namespace {

void EchoInto(const v1::SortRequest& request, v1::SortResponse* response) {
  *response->mutable_keys() = request.keys();
  response->set_request_id(request.request_id());
}

class EchoStreamReactor final : public grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse> {
 public:
  // Echoes (and their bytes) queued or being written before reading pauses;
  // one message over the byte window is still taken, so any size passes.
  static constexpr size_t kWindow = 64;
  static constexpr size_t kWindowBytes = size_t{64} << 20;

  EchoStreamReactor() { StartRead(&read_buffer_); }

  void OnReadDone(bool ok) override {
    Next next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (ok) {
        auto response = std::make_unique<v1::SortResponse>();
        EchoInto(read_buffer_, response.get());
        queued_bytes_ += response->ByteSizeLong();
        queue_.push_back(std::move(response));
      } else {
        reads_done_ = true;
      }
      read_in_flight_ = false;
      next = DecideLocked();
    }
    Act(next);
  }

  void OnWriteDone(bool ok) override {
    Next next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      queued_bytes_ -= queue_.front()->ByteSizeLong();
      queue_.pop_front();
      if (!ok) failed_ = true;
      next = DecideLocked();
    }
    Act(next);
  }

  void OnDone() override { delete this; }

 private:
  struct Next {
    const v1::SortResponse* write = nullptr;
    bool read = false;
    bool finish = false;
    grpc::Status status;
  };

  Next DecideLocked() {
    Next next;
    if (finished_) return next;
    if (failed_) {
      if (!writing_ && !read_in_flight_) {
        finished_ = true;
        next.finish = true;
        next.status = grpc::Status(grpc::StatusCode::CANCELLED, "EchoStream: write failed");
      }
      return next;
    }
    if (!writing_ && !queue_.empty()) {
      writing_ = true;
      next.write = queue_.front().get();
    }
    if (!reads_done_ && !read_in_flight_ && queue_.size() < kWindow &&
        queued_bytes_ < kWindowBytes) {
      read_in_flight_ = true;
      next.read = true;
    }
    if (reads_done_ && queue_.empty() && !writing_ && !read_in_flight_) {
      finished_ = true;
      next.finish = true;
      next.status = grpc::Status::OK;
    }
    return next;
  }

  void Act(const Next& next) {
    if (next.write != nullptr) StartWrite(next.write);
    if (next.read) StartRead(&read_buffer_);
    if (next.finish) Finish(next.status);
  }

  v1::SortRequest read_buffer_;
  std::mutex mu_;
  std::deque<std::unique_ptr<v1::SortResponse>> queue_;  // front is being written when writing_
  size_t queued_bytes_ = 0;
  bool read_in_flight_ = true;  // the constructor's read
  bool reads_done_ = false;
  bool writing_ = false;
  bool failed_ = false;
  bool finished_ = false;
};

const grpc::Status kDraining(grpc::StatusCode::UNAVAILABLE, "server is shutting down (draining)");

// A stream refused at once (the server is draining).
class RefusedStream final : public grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse> {
 public:
  RefusedStream() { Finish(kDraining); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* DiagnosticsServiceImpl::Echo(grpc::CallbackServerContext* ctx,
                                                       const v1::SortRequest* request,
                                                       v1::SortResponse* response) {
  CountCallForDrain(ctx);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (draining_->load(std::memory_order_relaxed)) {
    reactor->Finish(kDraining);
    return reactor;
  }
  EchoInto(*request, response);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerBidiReactor<v1::SortRequest, v1::SortResponse>* DiagnosticsServiceImpl::EchoStream(
    grpc::CallbackServerContext* ctx) {
  CountCallForDrain(ctx);
  if (draining_->load(std::memory_order_relaxed)) return new RefusedStream();
  return new EchoStreamReactor();
}

}  // namespace sortd
