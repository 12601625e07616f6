// sortd's command line: every flag, checked, as the options the server
// starts with (server/sortd_server.h) and the port files main() writes.
#ifndef SORTD_SERVER_SERVER_FLAGS_H_
#define SORTD_SERVER_SERVER_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/sortd_server.h"

namespace sortd {

struct SortdFlags {
  ServerOptions server;
  // Where to write the bound gRPC / metrics port once serving (empty: none).
  std::string port_file;
  std::string metrics_port_file;
};

// glibc malloc's arena count and fixed mmap/trim thresholds from the flags.
// Call after absl::ParseCommandLine and before any thread starts.
void ApplyMallocFlags();

// The parsed flags; an error (its message names the flag and what it must
// be) for a value the server cannot run with. Call after ParseCommandLine.
absl::StatusOr<SortdFlags> ParseSortdFlags();

}  // namespace sortd

#endif  // SORTD_SERVER_SERVER_FLAGS_H_
