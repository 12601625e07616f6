// sortd: the gRPC sorting server. Parses flags (server/server_flags.h),
// starts the server, and drains on SIGTERM/SIGINT.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "server/runtime/protobuf_log.h"
#include "server/server_flags.h"
#include "server/sortd_server.h"

namespace {

// Blocks SIGTERM/SIGINT in every thread (call before any thread starts) and
// returns the set, so one thread can wait for them with sigwait.
sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Writes `port` to `path` atomically (write, then rename); empty path: no
// file. Returns what went wrong, if anything.
std::string WritePortFile(const std::string& flag, const std::string& path, int port) {
  if (path.empty()) return "";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    out.flush();
    if (!out) return absl::StrCat("--", flag, "=", path, ": cannot write ", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return absl::StrCat("--", flag, "=", path, ": cannot rename ", tmp, " to it (", why, ")");
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("sortd: gRPC service that sorts arrays on GPUs and CPUs");
  absl::ParseCommandLine(argc, argv);
  // Before any thread runs (the handler is a process-wide pointer).
  sortd::LimitProtobufLogging();
  sortd::ApplyMallocFlags();
  const sigset_t signals = BlockShutdownSignals();
  // Exit codes (docs/operations.md): 2 for a flag value sortd refuses, 1
  // when the server cannot start (abseil also exits 1 for a value that does
  // not parse or an unknown flag).
  absl::StatusOr<sortd::SortdFlags> flags = sortd::ParseSortdFlags();
  if (!flags.ok()) {
    std::cerr << "sortd: " << flags.status().message() << "\n";
    return 2;
  }

  sortd::ServerOptions& options = flags->server;
  // SERVING once the port files are written (below): a server that is
  // about to exit because one cannot be written never reports ready.
  options.serving_at_start = false;
  absl::StatusOr<std::unique_ptr<sortd::SortdServer>> server =
      sortd::SortdServer::Start(options);
  if (!server.ok()) {
    std::cerr << "sortd: " << server.status() << "\n";
    return 1;
  }
  std::cout << "sortd listening on " << options.listen_address
            << " (port " << (*server)->port() << "), "
            << (*server)->engine_description() << std::endl;
  if (!options.unix_socket.empty()) {
    std::cout << "sortd also listening on unix:" << options.unix_socket << std::endl;
  }
  if ((*server)->metrics_port() != 0) {
    std::cout << "sortd metrics on " << options.metrics_listen << " (port "
              << (*server)->metrics_port() << ") at /metrics" << std::endl;
  }
  // The metrics port file is written first: tests wait for the gRPC one.
  // A port file that cannot be written stops the server: whoever asked for
  // it would otherwise wait for it forever.
  // One at a time, the gRPC one last (whoever waits for it may then
  // connect); on a failure the files already written are removed.
  std::vector<std::string> written;
  for (const auto& [flag, path, port] :
       {std::make_tuple("metrics_port_file", flags->metrics_port_file,
                        (*server)->metrics_port()),
        std::make_tuple("port_file", flags->port_file, (*server)->port())}) {
    const std::string failed = WritePortFile(flag, path, port);
    if (failed.empty()) {
      if (!path.empty()) written.push_back(path);
      continue;
    }
    std::cerr << "sortd: " << failed << "\n";
    for (const std::string& done : written) std::remove(done.c_str());
    (*server)->Shutdown();
    server->reset();
    return 1;
  }
  (*server)->MarkServing();

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::cout << "sortd: received signal " << signal_number
            << ", draining (health NOT_SERVING, new work refused)" << std::endl;
  (*server)->Shutdown();
  server->reset();
  std::cout << "sortd: drained, exiting" << std::endl;
  return 0;
}
