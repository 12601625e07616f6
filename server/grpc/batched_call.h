// Hands a validated, admitted Sort/SortPairs request to the batcher; the
// caller's `finish` runs on a pool thread once its batch has sorted it (or
// dropped it as cancelled) - but not when Enqueue refuses it: that status is
// returned instead, and the caller finishes the call itself.
#ifndef SORTD_SERVER_GRPC_BATCHED_CALL_H_
#define SORTD_SERVER_GRPC_BATCHED_CALL_H_

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "server/grpc/service_context.h"
#include "server/wire/sort_ops.h"
#include "server/wire/typed_array.h"

namespace sortd {

template <typename Request, typename Response>
absl::Status EnqueueBatched(ServiceContext& context, const Request* request, Response* response,
                            std::function<bool()> cancelled,
                            std::function<void(const absl::Status&, double queue_seconds)> finish) {
  // Pairs sort a permutation into scratch and gather the values from it;
  // keys-only requests need none (one allocation less per request).
  std::shared_ptr<std::vector<uint64_t>> scratch;
  if constexpr (std::is_same_v<Request, v1::SortPairsRequest>) {
    scratch = std::make_shared<std::vector<uint64_t>>();
  }
  Batcher::Request batched;
  PrepareBatched(*request, response, &batched, scratch.get());
  batched.cancelled = std::move(cancelled);
  batched.done = [request, response, scratch, finish = std::move(finish)](
                     const absl::Status& status, EngineKind engine, double queue_seconds, size_t) {
    absl::Status result = status;
    if (result.ok()) {
      response->set_engine(ToProtoEngine(engine));
      result = CompleteBatched(*request, response, scratch.get());
    }
    finish(result, queue_seconds);
  };
  return context.batcher->Enqueue(std::move(batched));
}

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_BATCHED_CALL_H_
