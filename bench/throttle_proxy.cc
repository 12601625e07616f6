// A TCP proxy that holds the traffic between the benchmark clients and
// sortd to a link's rate, so that the end-to-end benchmarks can report
// what a 10 or 25 Gbit/s network would show besides loopback (issue #50,
// "Measure beyond loopback"), and counts the bytes on the wire.
//
//   sortd_throttle_proxy --listen_port_file F --target 127.0.0.1:50051
//       --gbit 10 [--stats_file S] [--burst_bytes 262144]
//
// Each direction is one full-duplex link's worth: every connection's
// client-to-server bytes share one token bucket of --gbit, the
// server-to-client bytes another (a NIC's two directions; a session's
// several connections share it as they would a real link). A pump reserves
// its bytes on its direction's virtual clock and sleeps until they are
// due, less --burst_bytes of slack (a NIC's queue). No latency is added:
// loopback's round trip (~20 us) stands in for a data centre's.
// --stats_file is rewritten every 20 ms with "up_bytes down_bytes
// connections" (up: towards the server), so a benchmark can read the bytes
// a request put on the wire.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// One direction of the link: bytes are due at a virtual clock that
// advances by bytes / rate.
class Link {
 public:
  Link(double bytes_per_second, double burst_bytes)
      : rate_(bytes_per_second), slack_(burst_bytes / bytes_per_second) {}

  // Blocks until `bytes` may go (no wait when the rate is 0: unlimited).
  void Take(size_t bytes) {
    total_.fetch_add(bytes, std::memory_order_relaxed);
    if (rate_ <= 0) return;
    Clock::time_point due;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const Clock::time_point now = Clock::now();
      // An idle link does not bank more than its slack.
      const auto earliest = now - std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(slack_));
      if (next_ < earliest) next_ = earliest;
      next_ += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(bytes / rate_));
      due = next_ - std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(slack_));
    }
    std::this_thread::sleep_until(due);
  }

  uint64_t total() const { return total_.load(std::memory_order_relaxed); }

 private:
  const double rate_;
  const double slack_;  // seconds of burst
  std::mutex mu_;
  Clock::time_point next_ = Clock::now();
  std::atomic<uint64_t> total_{0};
};

bool WriteAll(int fd, const char* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = send(fd, data, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// Copies from -> to through `link`. At the sender's end of stream the
// half-close is passed on (the other direction keeps flowing); on an error
// both sockets are shut, so that the other pump ends too.
void Pump(int from, int to, Link* link) {
  std::vector<char> buffer(64 << 10);
  for (;;) {
    const ssize_t n = recv(from, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      shutdown(to, SHUT_WR);
      return;
    }
    if (n < 0) break;
    link->Take(static_cast<size_t>(n));
    if (!WriteAll(to, buffer.data(), static_cast<size_t>(n))) break;
  }
  shutdown(from, SHUT_RDWR);
  shutdown(to, SHUT_RDWR);
}

int Connect(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos) return -1;
  const std::string host = target.substr(0, colon), port = target.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  return fd;
}

void NoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

int main(int argc, char** argv) {
  std::string target = "127.0.0.1:50051", port_file, stats_file;
  double gbit = 0, burst = 256 << 10;
  int listen_port = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--target") target = value;
    else if (flag == "--gbit") gbit = std::atof(value.c_str());
    else if (flag == "--burst_bytes") burst = std::atof(value.c_str());
    else if (flag == "--listen_port") listen_port = std::atoi(value.c_str());
    else if (flag == "--listen_port_file") port_file = value;
    else if (flag == "--stats_file") stats_file = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  const double rate = gbit * 1e9 / 8;
  Link up(rate, burst), down(rate, burst);
  std::atomic<uint64_t> connections{0};

  const int server = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(server, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(listen_port));
  if (bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(server, 128) != 0) {
    std::perror("listen");
    return 1;
  }
  socklen_t len = sizeof(addr);
  getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  std::fprintf(stderr, "throttle proxy: 127.0.0.1:%d -> %s at %s\n", port, target.c_str(),
               gbit > 0 ? (std::to_string(gbit) + " Gbit/s each way").c_str() : "full speed");
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }
  if (!stats_file.empty()) {
    std::thread([&] {
      for (;;) {
        const std::string tmp = stats_file + ".tmp";
        std::ofstream(tmp) << up.total() << " " << down.total() << " " << connections.load() << "\n";
        std::rename(tmp.c_str(), stats_file.c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }).detach();
  }
  for (;;) {
    const int client = accept(server, nullptr, nullptr);
    if (client < 0) {
      if (errno == EINTR) continue;
      std::perror("accept");
      return 1;
    }
    const int upstream = Connect(target);
    if (upstream < 0) {
      std::fprintf(stderr, "throttle proxy: cannot reach %s\n", target.c_str());
      close(client);
      continue;
    }
    NoDelay(client);
    NoDelay(upstream);
    connections.fetch_add(1);
    // Both pumps share the sockets; the second to finish closes them.
    auto* finished = new std::atomic<int>(0);
    auto run = [client, upstream, finished](int from, int to, Link* link) {
      Pump(from, to, link);
      if (finished->fetch_add(1) == 1) {
        close(client);
        close(upstream);
        delete finished;
      }
    };
    std::thread(run, client, upstream, &up).detach();
    std::thread(run, upstream, client, &down).detach();
  }
}
