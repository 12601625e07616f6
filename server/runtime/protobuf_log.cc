#include "server/runtime/protobuf_log.h"

#include <google/protobuf/stubs/logging.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace sortd {
namespace {

std::mutex mu;
double interval = 10;
bool have_written = false;
std::chrono::steady_clock::time_point last_written;
uint64_t suppressed_since_last = 0;
std::atomic<uint64_t> suppressed_total{0};

void LimitedHandler(google::protobuf::LogLevel level, const char* filename, int line,
                    const std::string& message) {
  static const char* const kNames[] = {"INFO", "WARNING", "ERROR", "FATAL"};
  uint64_t suppressed = 0;
  if (level != google::protobuf::LOGLEVEL_FATAL) {
    std::lock_guard<std::mutex> lock(mu);
    const auto now = std::chrono::steady_clock::now();
    if (have_written && std::chrono::duration<double>(now - last_written).count() < interval) {
      ++suppressed_since_last;
      suppressed_total.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    have_written = true;
    last_written = now;
    suppressed = suppressed_since_last;
    suppressed_since_last = 0;
  }
  std::fprintf(stderr, "[libprotobuf %s %s:%d] %s", kNames[level], filename, line,
               message.c_str());
  if (suppressed > 0) {
    std::fprintf(stderr, " (%llu similar libprotobuf lines suppressed)",
                 static_cast<unsigned long long>(suppressed));
  }
  std::fputc('\n', stderr);
}

}  // namespace

void LimitProtobufLogging(double interval_seconds) {
  {
    std::lock_guard<std::mutex> lock(mu);
    interval = interval_seconds;
  }
  google::protobuf::SetLogHandler(&LimitedHandler);
}

uint64_t SuppressedProtobufLogLines() { return suppressed_total.load(); }

}  // namespace sortd
