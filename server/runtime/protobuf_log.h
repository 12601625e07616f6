// libprotobuf writes an ERROR line to stderr for every message a client
// sends with invalid UTF-8 in a string field (which then fails to parse and
// is answered INVALID_ARGUMENT). Unbounded, that lets any client flood the
// server's log; this routes those lines through a rate limit.
#ifndef SORTD_SERVER_RUNTIME_PROTOBUF_LOG_H_
#define SORTD_SERVER_RUNTIME_PROTOBUF_LOG_H_

#include <cstdint>

namespace sortd {

// Installs the limited handler (process-wide; idempotent): at most one
// libprotobuf line per `interval_seconds`, the next one saying how many
// were suppressed. FATAL lines always pass.
void LimitProtobufLogging(double interval_seconds = 10);

// Lines suppressed since start (for tests).
uint64_t SuppressedProtobufLogLines();

}  // namespace sortd

#endif  // SORTD_SERVER_RUNTIME_PROTOBUF_LOG_H_
