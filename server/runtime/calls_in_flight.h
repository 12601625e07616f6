// The calls a drain owes a complete response, and when the last of them
// ended. gRPC closes a connection as soon as its last call has ended once
// Shutdown has sent GOAWAY; a client still reading the end of a response
// then sends flow-control frames to a closed socket, the reset that answers
// them discards what it had not read yet, and the call fails UNAVAILABLE
// after the server finished it. So the drain keeps the connections open
// until these calls have ended and a linger has passed (SortdServer::Shutdown,
// docs/operations.md "Drain on SIGTERM").
//
// How calls are counted: gRPC allocates each callback call's context from
// the server's ContextAllocator when the call arrives and releases it after
// the call's OnDone, status sent. sortd's allocator hands out
// DrainCountedContexts; each sortd handler marks its call counted on entry
// (CountCallForDrain), and the release ends the count. gRPC's own services
// (health watches, which last as long as their client; reflection) never
// mark theirs. An interceptor would see the same events, but with one
// registered gRPC runs its hooks on every operation of every call, which
// cost small calls 15-30% of their throughput (docs/hardening.md).
#ifndef SORTD_SERVER_RUNTIME_CALLS_IN_FLIGHT_H_
#define SORTD_SERVER_RUNTIME_CALLS_IN_FLIGHT_H_

#include <atomic>
#include <cstdint>

#include <grpcpp/server_context.h>

#include "absl/time/time.h"

namespace sortd {

class CallsInFlight {
 public:
  void Begin() { count_.fetch_add(1, std::memory_order_relaxed); }
  void End();

  // Waits until no call is in flight and `linger` has passed since the last
  // one ended (at once when none ended that recently), or until `timeout`
  // passes with a call still in flight. Whether the calls ended. Polls: a
  // drain happens once.
  bool WaitQuiet(absl::Duration timeout, absl::Duration linger);

 private:
  std::atomic<int64_t> count_{0};
  // The latest End(), in steady_clock nanoseconds; far in the past until
  // a call ends.
  std::atomic<int64_t> last_end_ns_{INT64_MIN / 2};
};

// A call's context that the drain can count (see above).
class DrainCountedContext final : public grpc::CallbackServerContext {
 public:
  DrainCountedContext(CallsInFlight* calls, const std::atomic<bool>* draining)
      : calls_(calls), draining_(draining) {}
  ~DrainCountedContext() override {
    if (counted_) calls_->End();
  }

  // Counts this call unless the drain has begun: work that arrives during
  // the drain is refused at once, and counting it would let a busy client
  // hold the drain open. Once per call.
  void Count();

 private:
  CallsInFlight* const calls_;
  const std::atomic<bool>* const draining_;
  bool counted_ = false;
};

// gRPC's ContextAllocator for sortd's server: every callback call gets a
// DrainCountedContext, released (and the count ended) after its OnDone.
class DrainCountingContextAllocator final : public grpc::ContextAllocator {
 public:
  DrainCountingContextAllocator(CallsInFlight* calls, const std::atomic<bool>* draining)
      : calls_(calls), draining_(draining) {}

  grpc::CallbackServerContext* NewCallbackServerContext() override {
    return new DrainCountedContext(calls_, draining_);
  }
  // gRPC hands every callback call's context here when the call is done,
  // also the ones it made itself: for calls to methods no service
  // registered (answered UNIMPLEMENTED), which NewGenericCallbackServerContext
  // leaves to gRPC; those it destroys itself.
  void Release(grpc::CallbackServerContext* ctx) override {
    delete dynamic_cast<DrainCountedContext*>(ctx);
  }

 private:
  CallsInFlight* const calls_;
  const std::atomic<bool>* const draining_;
};

// Marks a sortd call counted for the drain. A no-op for a context that no
// DrainCountingContextAllocator made (the services registered on a server
// that SortdServer did not build).
inline void CountCallForDrain(grpc::CallbackServerContext* ctx) {
  if (auto* counted = dynamic_cast<DrainCountedContext*>(ctx)) counted->Count();
}

}  // namespace sortd

#endif  // SORTD_SERVER_RUNTIME_CALLS_IN_FLIGHT_H_
