// A gate for tests that hold work in flight at a named test site
// (ServerOptions::test_site_hook): calls reaching the site block until the
// test opens the gate.
#ifndef SORTD_TESTS_SERVICE_GATE_H_
#define SORTD_TESTS_SERVICE_GATE_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "absl/strings/string_view.h"

namespace sortd::testing {

// Blocks every call reaching `site` until Open(); counts arrivals.
class Gate {
 public:
  explicit Gate(std::string site) : site_(std::move(site)) {}

  std::function<bool(absl::string_view)> Hook() {
    return [this](absl::string_view at) {
      if (at != site_) return false;
      std::unique_lock<std::mutex> lock(mu_);
      ++arrived_;
      cv_.notify_all();
      cv_.wait(lock, [this] { return open_; });
      return false;
    };
  }
  // Waits (bounded) until `n` calls are held at the gate. On timeout the
  // gate opens, so that a failing test never leaves a call held (the
  // server's destructor would wait for it).
  bool WaitForArrivals(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::seconds(30), [&] { return arrived_ >= n; })) return true;
    open_ = true;
    cv_.notify_all();
    return false;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  int arrived() {
    std::lock_guard<std::mutex> lock(mu_);
    return arrived_;
  }

 private:
  const std::string site_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  bool open_ = false;
};

// Opens the gate when the test leaves its scope, also through a failed
// ASSERT (declare it after the server: the server's destructor would
// otherwise wait forever for the calls the gate holds).
class OpenOnExit {
 public:
  explicit OpenOnExit(Gate& gate) : gate_(gate) {}
  ~OpenOnExit() { gate_.Open(); }

 private:
  Gate& gate_;
};

}  // namespace sortd::testing

#endif  // SORTD_TESTS_SERVICE_GATE_H_
