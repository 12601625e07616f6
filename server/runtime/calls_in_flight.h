// The calls a drain owes a complete response, and when the last of them
// ended. gRPC closes a connection as soon as its last call has ended once
// Shutdown has sent GOAWAY; a client still reading the end of a response
// then sends flow-control frames to a closed socket, the reset that answers
// them discards what it had not read yet, and the call fails UNAVAILABLE
// after the server finished it. So the drain keeps the connections open
// until these calls have ended and a linger has passed (SortdServer::Shutdown,
// docs/operations.md "Drain on SIGTERM").
#ifndef SORTD_SERVER_RUNTIME_CALLS_IN_FLIGHT_H_
#define SORTD_SERVER_RUNTIME_CALLS_IN_FLIGHT_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"
#include "grpcpp/support/server_interceptor.h"

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

// Counts each call of a sortd service (methods under /sortd.) that starts
// while `draining` is false; gRPC's own services (health watches, which
// last as long as their client, and reflection) are not counted, nor is
// work that arrives during the drain (it is refused at once, and counting
// it would let a busy client hold the drain open).
class CallsInFlightInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  CallsInFlightInterceptorFactory(CallsInFlight* calls, const std::atomic<bool>* draining)
      : calls_(calls), draining_(draining) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  CallsInFlight* calls_;
  const std::atomic<bool>* draining_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_RUNTIME_CALLS_IN_FLIGHT_H_
