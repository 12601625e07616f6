#include "server/runtime/calls_in_flight.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/time/clock.h"

namespace sortd {

void CallsInFlight::End() {
  // The time first, so that a waiter that sees the count reach zero also
  // sees this end.
  last_end_ns_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
  count_.fetch_sub(1, std::memory_order_acq_rel);
}

bool CallsInFlight::WaitQuiet(absl::Time deadline, absl::Duration linger) {
  for (;;) {
    const absl::Time now = absl::Now();
    if (count_.load(std::memory_order_acquire) == 0) {
      const absl::Time last_end =
          absl::FromUnixNanos(last_end_ns_.load(std::memory_order_relaxed));
      if (now >= last_end + linger) return true;
      absl::SleepFor(std::min(last_end + linger - now, absl::Milliseconds(5)));
      continue;
    }
    if (now >= deadline) return false;
    absl::SleepFor(std::min(deadline - now, absl::Milliseconds(5)));
  }
}

namespace {

// Holds one count for the life of its call: gRPC destroys interceptors with
// the call, after its status has been sent.
class CountedCall : public grpc::experimental::Interceptor {
 public:
  explicit CountedCall(CallsInFlight* calls) : calls_(calls) { calls_->Begin(); }
  ~CountedCall() override { calls_->End(); }
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  CallsInFlight* calls_;
};

}  // namespace

grpc::experimental::Interceptor* CallsInFlightInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (draining_->load(std::memory_order_relaxed)) return nullptr;
  const char* method = info->method();
  if (method == nullptr || !absl::StartsWith(method, "/sortd.")) return nullptr;
  return new CountedCall(calls_);
}

}  // namespace sortd
