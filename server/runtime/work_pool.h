// A fixed pool of worker threads that runs sort jobs off the gRPC threads,
// so that handlers only validate and enqueue.
#ifndef SORTD_SERVER_RUNTIME_WORK_POOL_H_
#define SORTD_SERVER_RUNTIME_WORK_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sortd {

class WorkPool {
 public:
  // `name` (at most 15 characters, Linux's limit) labels the threads in
  // top -H, /proc/<pid>/task/*/comm and debuggers.
  explicit WorkPool(int threads, std::string name = "sortd-pool");
  // Runs every job already submitted, then joins the threads.
  ~WorkPool();

  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  void Submit(std::function<void()> job);
  int threads() const { return static_cast<int>(threads_.size()); }

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace sortd

#endif  // SORTD_SERVER_RUNTIME_WORK_POOL_H_
