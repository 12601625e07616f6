// The idle trimmer trims once after the server was used and is idle again,
// never while something is admitted, and not again until more work came.
//
// "Never" is observed, not slept for: the trimmer's thread ("sortd-trim")
// blocks once per interval, and the kernel counts each block as a voluntary
// context switch of that thread (/proc/self/task/<tid>/status). Two more
// blocks after a state was set mean the thread woke in between and looked
// at admission in that state; only then is "no trim" asserted.
#include "server/runtime/memory_trimmer.h"

#include <dirent.h>
#include <sys/types.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>

namespace sortd {
namespace {

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The threads of this process named sortd-trim.
std::set<int> TrimThreads() {
  std::set<int> tids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const std::string task = std::string("/proc/self/task/") + entry->d_name;
    if (ReadLine(task + "/comm") == "sortd-trim") tids.insert(std::stoi(entry->d_name));
  }
  closedir(dir);
  return tids;
}

// The voluntary context switches of thread `tid` so far, or -1.
long VoluntarySwitches(int tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/status");
  std::string line;
  const std::string key = "voluntary_ctxt_switches:";
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  }
  return -1;
}

// A trimmer and its thread's id (found as the one sortd-trim thread that
// was not there before it started).
struct Watched {
  Watched(const AdmissionControl* admission, absl::Duration interval) {
    const std::set<int> before = TrimThreads();
    trimmer = std::make_unique<MemoryTrimmer>(admission, interval);
    for (int i = 0; i < 2000 && tid < 0; ++i) {  // named as it starts: bounded poll
      for (int t : TrimThreads()) {
        if (!before.count(t)) tid = t;
      }
      if (tid < 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // Waits (bounded) until the trimmer's thread has woken and gone back to
  // sleep at least twice since the call: at least one whole check ran
  // after whatever the caller did before calling.
  bool WaitForChecks() {
    const long from = VoluntarySwitches(tid);
    if (from < 0) return false;
    for (int i = 0; i < 10000; ++i) {
      if (VoluntarySwitches(tid) >= from + 3) return true;  // 3: one to spare
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  std::unique_ptr<MemoryTrimmer> trimmer;
  int tid = -1;
};

// Waits (bounded) until `trimmer.trims()` reaches `want`.
bool WaitForTrims(const MemoryTrimmer& trimmer, uint64_t want) {
  for (int i = 0; i < 2000 && trimmer.trims() < want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return trimmer.trims() >= want;
}

TEST(MemoryTrimmerTest, TrimsOnceWhenIdleAfterWork) {
  AdmissionControl admission(1 << 20, 16);
  Watched watched(&admission, absl::Milliseconds(1));
  ASSERT_GE(watched.tid, 0) << "no sortd-trim thread started";
  const MemoryTrimmer& trimmer = *watched.trimmer;
  // Never used: nothing to give back, though it has looked.
  ASSERT_TRUE(watched.WaitForChecks());
  EXPECT_EQ(trimmer.trims(), 0u);

  // Busy: a request is admitted; no trim while it is in flight.
  ASSERT_TRUE(admission.Acquire(1000).ok());
  ASSERT_TRUE(watched.WaitForChecks());
  EXPECT_EQ(trimmer.trims(), 0u);

  // Idle again: one trim, and no more without new work.
  admission.Release(1000);
  ASSERT_TRUE(WaitForTrims(trimmer, 1));
  ASSERT_TRUE(watched.WaitForChecks());
  EXPECT_EQ(trimmer.trims(), 1u);

  ASSERT_TRUE(admission.Acquire(10).ok());
  admission.Release(10);
  EXPECT_TRUE(WaitForTrims(trimmer, 2));
}

}  // namespace
}  // namespace sortd
