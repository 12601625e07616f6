// Unary handlers finish through the default reactor from a worker thread;
// the streaming RPCs are reactor classes of their own.
#include "server/grpc/sort_service.h"

#include <memory>
#include <type_traits>

#include "absl/strings/str_cat.h"

#include "server/grpc/batched_call.h"
#include "server/grpc/chunked_reactor.h"
#include "server/grpc/guarded.h"
#include "server/grpc/raw_message.h"
#include "server/grpc/session_handlers.h"
#include "server/grpc/status_mapping.h"
#include "server/grpc/stream_reactor.h"
#include "server/runtime/calls_in_flight.h"
#include "server/wire/region_ops.h"
#include "server/wire/sort_ops.h"
#include "server/wire/table_ops.h"
#include "server/wire/top_k_ops.h"
#include "server/wire/typed_array.h"

namespace sortd {
namespace {

// Checks that a call is still wanted: when a worker picks it up, and again
// once it is sorted.
absl::Status CheckCallAlive(grpc::CallbackServerContext* ctx,
                            absl::string_view when = "before it ran") {
  // The deadline is checked too: a call that arrives with its deadline
  // already past is not yet marked cancelled when an inline sort reaches
  // this point (gRPC's timer fires a moment later).
  if (ctx->IsCancelled() || ctx->deadline() <= std::chrono::system_clock::now()) {
    return absl::CancelledError(
        absl::StrCat("request cancelled or deadline exceeded ", when));
  }
  return absl::OkStatus();
}

// gRPC's default unary reactor, plus a "unary.cancelled" test site when the
// call is cancelled (client gone, deadline passed), so that tests can wait
// for the server to have seen a cancellation instead of guessing when.
class UnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit UnaryReactor(const ServiceContext* context) : context_(context) {}
  void OnCancel() override {
    if (context_->test_site_hook) context_->test_site_hook("unary.cancelled");
  }
  void OnDone() override { delete this; }

 private:
  const ServiceContext* const context_;
};

// Parse, validate, admit, run on the pool, finish, record. Shared by Sort
// and SortPairs, which are registered raw: the handler parses the request
// itself (INVALID_ARGUMENT when it does not parse) and serializes the
// response on the thread that finishes the call.
template <typename Request, typename Response, typename Validate, typename Run>
grpc::ServerUnaryReactor* HandleUnary(ServiceContext* context, RpcMethod method,
                                      grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* raw_request,
                                      grpc::ByteBuffer* raw_response, Validate validate,
                                      Run run) {
  const SteadyClock::time_point arrival = SteadyClock::now();
  // gRPC runs its default reactor's reactions inline and a custom one's on
  // another thread: the custom one only where a test watches cancellations.
  grpc::ServerUnaryReactor* reactor =
      context->test_site_hook ? new UnaryReactor(context) : ctx->DefaultReactor();
  // The call's messages live as long as any step of it (pool job, batch).
  struct Call {
    Request request;
    Response response;
  };
  auto call = std::make_shared<Call>();
  // Mutable: Sort and SortPairs move the request's arrays into the response.
  Request* request = &call->request;
  Response* response = &call->response;
  auto finish = [reactor, raw_response, call, method, ctx](absl::Status result) {
    if (result.ok()) {
      result = Guarded(RpcMethodName(method), [&] {
        SerializeRawMessage(call->response, raw_response);
        return absl::OkStatus();
      });
    }
    AddRetryHint(ctx, result);
    reactor->Finish(ToGrpcStatus(result));
  };
  RequestRecord record;
  record.method = method;
  // Counted before the run, which may move the keys out of the request.
  size_t keys_in = 0;
  // gRPC owns the request bytes; parsing empties them, so the payload is
  // held once, in the message.
  absl::Status status = Guarded(RpcMethodName(method), [&] {
    return ParseRawMessage(const_cast<grpc::ByteBuffer*>(raw_request), &call->request, "request");
  });
  // A call cancelled while its request was arriving reaches the handler
  // with what had arrived: that is a cancellation, not a bad request.
  if (!status.ok() && ctx->IsCancelled()) status = CheckCallAlive(ctx, "before its request arrived");
  if (status.ok()) {
    record.key_type = KeyTypeOf(*request);
    record.bytes_received = PayloadIn(*request);
    keys_in = KeysOf(*request);
    status = context->CheckNotDraining();
  }
  // Region requests: only where enabled, only from this host (checked
  // first: a caller without access learns nothing about its request).
  const bool regions = status.ok() && UsesRegions(*request);
  if (regions) status = CheckRegionAccess(context->regions, ctx->peer());
  if (status.ok()) status = validate(*request);
  // Device memory is sorted on a GPU whatever the size.
  bool on_device = false;
  if (status.ok() && regions) {
    absl::StatusOr<bool> device = CheckRegionReferences(context->regions, *request);
    status = device.status();
    on_device = device.value_or(false);
  }
  if (status.ok()) status = CheckResponseFits(*request, context->limits.max_response_bytes);
  const uint64_t bytes = status.ok() ? InflightBytes(*request) : 0;
  auto refuse = [=](absl::Status refusal) mutable {
    record.seconds = SecondsSince(arrival);
    context->Report(record, request->request_id(), refusal);
    finish(std::move(refusal));
  };
  if (!status.ok()) {
    refuse(status);
    return reactor;
  }
  // Sorts on the calling thread and finishes the call: a pool worker's
  // job, or the whole of an inline request on this gRPC thread.
  // `on_grpc_thread`: device memory must not be sorted here (a region
  // re-registered as a CUDA region since routing is refused, not sorted).
  auto sort_now = [=](Admitted& admitted, bool on_grpc_thread) mutable {
    // From arrival: the time in the admission queue counts too.
    record.queue_seconds = SecondsSince(arrival);
    absl::Status result = CheckCallAlive(ctx);
    if (result.ok()) {
      result = Guarded(RpcMethodName(method), [&] {
        context->AtTestSite("unary.run");
        return run(*context->dispatcher, *request, response, /*device_allowed=*/!on_grpc_thread);
      });
      // Counted as what the client saw: a call cancelled (or past its
      // deadline) while it was sorted gets no response.
      if (result.ok()) result = CheckCallAlive(ctx, "while it was sorted");
    }
    admitted.Reset();
    if (result.ok()) {
      DescribeSuccess(*request, *response, &record);
      record.keys_sorted = keys_in;
      context->RecordLaunch(record);
    }
    record.seconds = SecondsSince(arrival);
    context->Report(record, request->request_id(), result);
    finish(result);
  };
  // Runs an admitted request: inline, batched or on a pool. `queued`: it
  // waited and this is the admission thread, which must not sort.
  auto dispatch = [=](bool queued) mutable {
    if (!queued && !on_device && context->SortsInline(record.key_type, KeysOf(*request))) {
      Admitted admitted(context->admission, bytes);
      sort_now(admitted, /*on_grpc_thread=*/true);
      return;
    }
    auto admitted = std::make_shared<Admitted>(context->admission, bytes);
    // Only Sort and SortPairs join batches (a batch sorts one column of a
    // core type).
    if constexpr (std::is_same_v<Request, v1::SortRequest> ||
                  std::is_same_v<Request, v1::SortPairsRequest>) {
      if (!regions && context->Batches(record.key_type, KeysOf(*request)) && Batchable(*request)) {
        absl::Status batched = Guarded(RpcMethodName(method), [&] {
          return EnqueueBatched(
              *context, request, response, [ctx] { return ctx->IsCancelled(); },
              [=](absl::Status result, double queue_seconds) mutable {
                if (result.ok()) result = CheckCallAlive(ctx, "while it was sorted");
                record.queue_seconds = queue_seconds;
                admitted->Reset();
                if (result.ok()) DescribeSuccess(*request, *response, &record);
                record.seconds = SecondsSince(arrival);
                context->Report(record, request->request_id(), result);
                finish(result);
              });
        });
        if (!batched.ok()) {
          admitted->Reset();
          refuse(batched);
        }
        return;
      }
    }
    // Selections of host memory run on the CPU pool at every size, of
    // device memory on the GPU pool (server/wire/top_k_ops.h).
    constexpr bool kCpuOnly = std::is_same_v<Request, v1::TopKRequest>;
    WorkPool& pool = on_device && context->gpu_pool != nullptr ? *context->gpu_pool
                     : kCpuOnly                                ? *context->pool
                                : context->PoolFor(record.key_type, KeysOf(*request));
    pool.Submit([sort_now, admitted]() mutable {
      sort_now(*admitted, /*on_grpc_thread=*/false);
    });
  };
  // Most requests are decided at once: the Wait (its callbacks, the
  // peer's name) is built only for one that queues. The payload has
  // arrived: a request that waits holds it, against the queue's bound on
  // received bytes (--max_waiting_bytes).
  std::optional<absl::Status> decided =
      context->admission->TryAcquire(bytes, record.bytes_received);
  if (decided && decided->ok()) {
    dispatch(/*queued=*/false);
    return reactor;
  }
  if (decided) {
    refuse(*std::move(decided));
    return reactor;
  }
  AdmissionControl::Wait wait;
  wait.bytes = bytes;
  wait.held_bytes = record.bytes_received;
  wait.lane = ctx->peer();
  wait.deadline = ctx->deadline();
  wait.cancelled = [ctx] { return ctx->IsCancelled(); };
  wait.done = [=](absl::Status admitted, double) mutable {
    if (admitted.ok()) {
      dispatch(/*queued=*/true);
    } else {
      refuse(std::move(admitted));
    }
  };
  decided = context->admission->AcquireOrWait(std::move(wait));
  if (!decided) return reactor;  // queued: `done` goes on
  if (!decided->ok()) {
    refuse(*std::move(decided));
    return reactor;
  }
  dispatch(/*queued=*/false);
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* SortServiceImpl::Sort(grpc::CallbackServerContext* ctx,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) {
  CountCallForDrain(ctx);
  return HandleUnary<v1::SortRequest, v1::SortResponse>(
      context_, RpcMethod::kSort, ctx, request, response, ValidateSortRequest,
      [regions = context_->regions](Dispatcher& dispatcher, v1::SortRequest& request,
                                    v1::SortResponse* response, bool device_allowed) {
        return RunSort(dispatcher, &request, response, regions, device_allowed);
      });
}

grpc::ServerUnaryReactor* SortServiceImpl::SortPairs(grpc::CallbackServerContext* ctx,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  CountCallForDrain(ctx);
  return HandleUnary<v1::SortPairsRequest, v1::SortPairsResponse>(
      context_, RpcMethod::kSortPairs, ctx, request, response, ValidateSortPairsRequest,
      [regions = context_->regions](Dispatcher& dispatcher, v1::SortPairsRequest& request,
                                    v1::SortPairsResponse* response, bool device_allowed) {
        return RunSortPairs(dispatcher, &request, response, regions, device_allowed);
      });
}

grpc::ServerUnaryReactor* SortServiceImpl::SortTable(grpc::CallbackServerContext* ctx,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  CountCallForDrain(ctx);
  return HandleUnary<v1::SortTableRequest, v1::SortTableResponse>(
      context_, RpcMethod::kSortTable, ctx, request, response, ValidateSortTableRequest,
      [regions = context_->regions](Dispatcher& dispatcher, const v1::SortTableRequest& request,
                                    v1::SortTableResponse* response, bool device_allowed) {
        return RunSortTable(dispatcher, request, response, regions, device_allowed);
      });
}

grpc::ServerUnaryReactor* SortServiceImpl::TopK(grpc::CallbackServerContext* ctx,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) {
  CountCallForDrain(ctx);
  return HandleUnary<v1::TopKRequest, v1::TopKResponse>(
      context_, RpcMethod::kTopK, ctx, request, response, ValidateTopKRequest,
      [threads = context_->cpu_threads, limit = context_->limits.max_response_bytes,
       regions = context_->regions](Dispatcher& dispatcher, const v1::TopKRequest& request,
                                    v1::TopKResponse* response, bool device_allowed) {
        return RunTopK(request, response, threads, limit, regions, &dispatcher, device_allowed);
      });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SortServiceImpl::SortStream(
    grpc::CallbackServerContext* ctx) {
  CountCallForDrain(ctx);
  return new SortStreamReactor(context_, ctx);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SortServiceImpl::SortChunked(
    grpc::CallbackServerContext* ctx) {
  CountCallForDrain(ctx);
  return new SortChunkedReactor(context_, ctx);
}

grpc::ServerUnaryReactor* SortServiceImpl::StartSortSession(grpc::CallbackServerContext* ctx,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  CountCallForDrain(ctx);
  return HandleStartSortSession(context_, ctx, request, response);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* SortServiceImpl::UploadParts(
    grpc::CallbackServerContext* ctx, grpc::ByteBuffer* response) {
  CountCallForDrain(ctx);
  return HandleUploadParts(context_, ctx, response);
}

grpc::ServerUnaryReactor* SortServiceImpl::FinishSortSession(grpc::CallbackServerContext* ctx,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  CountCallForDrain(ctx);
  return HandleFinishSortSession(context_, ctx, request, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* SortServiceImpl::DownloadParts(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request) {
  CountCallForDrain(ctx);
  return HandleDownloadParts(context_, ctx, request);
}

grpc::ServerUnaryReactor* SortServiceImpl::EndSortSession(grpc::CallbackServerContext* ctx,
                                                          const grpc::ByteBuffer* request,
                                                          grpc::ByteBuffer* response) {
  CountCallForDrain(ctx);
  return HandleEndSortSession(context_, ctx, request, response);
}

}  // namespace sortd
