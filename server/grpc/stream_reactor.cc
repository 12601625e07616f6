// SortStream reactor. Invariant: Finish is started only when no read, no
// write and no job is outstanding, so OnDone (which deletes the reactor)
// cannot race with a worker still holding `this`.
#include "server/grpc/stream_reactor.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "server/grpc/batched_call.h"
#include "server/grpc/guarded.h"
#include "server/grpc/raw_message.h"
#include "server/grpc/status_mapping.h"
#include "server/wire/region_ops.h"
#include "server/wire/sort_ops.h"
#include "server/wire/typed_array.h"

namespace sortd {

SortStreamReactor::SortStreamReactor(ServiceContext* context,
                                     grpc::CallbackServerContext* ctx)
    : context_(context), ctx_(ctx) {
  read_in_flight_ = true;
  StartRead(&read_buffer_);
}

void SortStreamReactor::EndReads(absl::Status error) {
  std::unique_lock<std::mutex> lock(mu_);
  read_in_flight_ = false;
  reads_done_ = true;
  parse_error_ = std::move(error);
  Next next = DecideLocked();
  lock.unlock();
  Start(next);
}

void SortStreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    EndReads(absl::OkStatus());
    return;
  }
  auto request = std::make_unique<v1::SortRequest>();
  ++messages_read_;
  absl::Status parsed = Guarded("SortStream", [&] {
    return ParseRawMessage(&read_buffer_, request.get(),
                           absl::StrCat("SortStream message ", messages_read_));
  });
  if (!parsed.ok() && ctx_->IsCancelled()) parsed = absl::CancelledError("stream cancelled");
  if (!parsed.ok()) {
    RequestRecord record;
    record.method = RpcMethod::kSortStream;
    context_->Report(record, "", parsed);
    EndReads(parsed);
    return;
  }
  Submit(std::move(request));
}

void SortStreamReactor::Submit(std::unique_ptr<v1::SortRequest> request) {
  const SteadyClock::time_point arrival = SteadyClock::now();
  RequestRecord record;
  record.method = RpcMethod::kSortStream;
  record.key_type = KeyTypeOf(*request);
  record.bytes_received = PayloadIn(*request);
  absl::Status status = context_->CheckNotDraining();
  const bool regions = status.ok() && UsesRegions(*request);
  if (regions) status = CheckRegionAccess(context_->regions, ctx_->peer());
  if (status.ok()) status = ValidateSortRequest(*request);
  bool on_device = false;  // device memory: sorted on a GPU whatever the size
  if (status.ok() && regions) {
    absl::StatusOr<bool> device = CheckRegionReferences(context_->regions, *request);
    status = device.status();
    on_device = device.value_or(false);
  }
  if (status.ok()) status = CheckResponseFits(*request, context_->limits.max_response_bytes);
  const uint64_t bytes = status.ok() ? InflightBytes(*request) : 0;
  if (status.ok()) status = context_->admission->Acquire(bytes);
  if (!status.ok()) {
    record.seconds = SecondsSince(arrival);
    context_->Report(record, request->request_id(), status);
  }

  std::unique_lock<std::mutex> lock(mu_);
  read_in_flight_ = false;
  if (!status.ok()) {
    auto response = std::make_unique<v1::SortResponse>();
    // An id refused for its length is echoed cut to the longest allowed (on
    // a character boundary), so that the error itself fits the limit.
    response->set_request_id(EchoableRequestId(request->request_id()));
    response->mutable_error()->set_code(static_cast<int>(status.code()));
    response->mutable_error()->set_message(std::string(status.message()));
    if (!cancelled_ && !write_failed_) writes_.push_back({std::move(response), Admitted()});
  } else {
    ++jobs_;
    lock.unlock();
    if (!on_device && context_->SortsInline(record.key_type, KeysOf(*request))) {
      // On this gRPC thread, as the pool would, without the hand-off.
      SortNow(*request, record, arrival, Admitted(context_->admission, bytes),
              /*on_grpc_thread=*/true);
    } else {
      auto admitted = std::make_shared<Admitted>(context_->admission, bytes);
      std::shared_ptr<v1::SortRequest> shared(std::move(request));
      if (!regions && context_->Batches(record.key_type, KeysOf(*shared)) && Batchable(*shared)) {
        auto response = std::make_shared<std::unique_ptr<v1::SortResponse>>(
            std::make_unique<v1::SortResponse>());
        absl::Status queued = Guarded("SortStream", [&] {
          return EnqueueBatched(
              *context_, shared.get(), response->get(), [this] { return ctx_->IsCancelled(); },
              [this, shared, admitted, record, arrival, response](const absl::Status& result,
                                                                  double queue_seconds) mutable {
                record.queue_seconds = queue_seconds;
                Deliver(*shared, std::move(*response), result, record, arrival,
                        /*own_launch=*/false, std::move(*admitted));
              });
        });
        if (!queued.ok()) {
          Deliver(*shared, std::move(*response), queued, record, arrival, /*own_launch=*/false,
                  std::move(*admitted));
        }
      } else {
        WorkPool& pool = on_device && context_->gpu_pool != nullptr
                             ? *context_->gpu_pool
                             : context_->PoolFor(record.key_type, KeysOf(*shared));
        pool.Submit([this, shared, admitted, record, arrival] {
          SortNow(*shared, record, arrival, std::move(*admitted), /*on_grpc_thread=*/false);
        });
      }
    }
    lock.lock();
  }
  Next next = DecideLocked();
  lock.unlock();
  Start(next);
}

void SortStreamReactor::SortNow(const v1::SortRequest& request, RequestRecord record,
                                SteadyClock::time_point arrival, Admitted admitted,
                                bool on_grpc_thread) {
  record.queue_seconds = SecondsSince(arrival);
  auto response = std::make_unique<v1::SortResponse>();
  absl::Status result = ctx_->IsCancelled()
                            ? absl::CancelledError("stream cancelled")
                            : Guarded("SortStream", [&] {
                                context_->AtTestSite("stream.run");
                                return RunSort(*context_->dispatcher, request, response.get(),
                                               context_->regions,
                                               /*device_allowed=*/!on_grpc_thread);
                              });
  Deliver(request, std::move(response), result, record, arrival, /*own_launch=*/true,
          std::move(admitted));
}

void SortStreamReactor::Deliver(const v1::SortRequest& request,
                                std::unique_ptr<v1::SortResponse> response, absl::Status result,
                                RequestRecord record, SteadyClock::time_point arrival,
                                bool own_launch, Admitted admitted) {
  // Counted as what the client saw: a request sorted after its stream was
  // cancelled is never delivered.
  if (result.ok() && ctx_->IsCancelled()) {
    result = absl::CancelledError("stream cancelled while the request was sorted");
  }
  if (result.ok()) {
    DescribeSuccess(request, *response, &record);
    // Batched requests: the batcher counts the launch once per batch.
    if (own_launch) context_->RecordLaunch(record);
  }
  record.seconds = SecondsSince(arrival);
  context_->Report(record, request.request_id(), result);
  if (!result.ok()) {
    response->Clear();
    response->set_request_id(request.request_id());
    response->mutable_error()->set_code(static_cast<int>(result.code()));
    response->mutable_error()->set_message(std::string(result.message()));
  }
  Complete(std::move(response), std::move(admitted));
}

void SortStreamReactor::Complete(std::unique_ptr<v1::SortResponse> response, Admitted admitted) {
  // Answered: no longer queued (--max_queued_requests), but its bytes stay
  // admitted until written (--max_inflight_bytes), so that streams nobody
  // reads cannot take every request slot of the server.
  admitted.ReleaseRequestSlot();
  std::unique_lock<std::mutex> lock(mu_);
  --jobs_;
  // Dropped (and released) when nothing more can be delivered.
  if (!cancelled_ && !write_failed_) writes_.push_back({std::move(response), std::move(admitted)});
  Next next = DecideLocked();
  lock.unlock();
  Start(next);
}

void SortStreamReactor::OnWriteDone(bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  writing_ = false;
  writes_.pop_front();
  if (!ok) {
    write_failed_ = true;
    writes_.clear();
  }
  Next next = DecideLocked();
  lock.unlock();
  Start(next);
}

void SortStreamReactor::OnCancel() {
  if (context_->test_site_hook) context_->test_site_hook("stream.cancelled");
  std::unique_lock<std::mutex> lock(mu_);
  cancelled_ = true;
  // Nothing more can be delivered; keep only the message of a write in
  // flight, which gRPC may still be reading until OnWriteDone.
  std::optional<PendingWrite> in_flight;
  if (writing_) in_flight = std::move(writes_.front());
  writes_.clear();
  if (in_flight) writes_.push_back(std::move(*in_flight));
  Next next = DecideLocked();
  lock.unlock();
  Start(next);
}

SortStreamReactor::Next SortStreamReactor::DecideLocked() {
  Next next;
  if (finished_) return next;
  const bool stopped = cancelled_ || write_failed_;
  if (!writing_ && !writes_.empty() && !stopped) {
    writing_ = true;
    next.write = writes_.front().response.get();
  }
  const int pending = jobs_ + static_cast<int>(writes_.size());
  if (!read_in_flight_ && !reads_done_ && !stopped &&
      pending < context_->limits.max_stream_pending) {
    read_in_flight_ = true;
    next.read = true;
  }
  const bool idle = !read_in_flight_ && !writing_ && jobs_ == 0;
  if (idle && (stopped || (reads_done_ && writes_.empty()))) {
    finished_ = true;
    next.finish = true;
    next.status = stopped ? grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled")
                          : ToGrpcStatus(parse_error_);
  }
  return next;
}

void SortStreamReactor::Start(const Next& next) {
  if (next.write != nullptr) {
    // The front response stays put while it is being written.
    absl::Status serialized = Guarded("SortStream: response", [&] {
      SerializeRawMessage(*next.write, &write_bytes_);
      return absl::OkStatus();
    });
    if (!serialized.ok()) {
      v1::SortResponse error;
      error.set_request_id(next.write->request_id());
      error.mutable_error()->set_code(static_cast<int>(serialized.code()));
      error.mutable_error()->set_message(std::string(serialized.message()));
      SerializeRawMessage(error, &write_bytes_);
    }
    StartWrite(&write_bytes_);
  }
  if (next.read) StartRead(&read_buffer_);
  if (next.finish) Finish(next.status);  // last: `this` may be deleted after
}

}  // namespace sortd
