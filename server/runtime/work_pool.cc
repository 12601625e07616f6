// Worker threads draining one FIFO queue. Queue length is bounded by
// admission control before Submit, not here.
#include "server/runtime/work_pool.h"

#include <pthread.h>

#include <algorithm>

namespace sortd {

WorkPool::WorkPool(int threads, std::string name) {
  threads = std::max(1, threads);
  name.resize(std::min<size_t>(name.size(), 15));
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, name] {
      pthread_setname_np(pthread_self(), name.c_str());
      Run();
    });
  }
}

WorkPool::~WorkPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void WorkPool::Submit(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void WorkPool::Run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace sortd
