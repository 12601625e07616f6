// Turns exceptions thrown while serving one RPC (allocation failures above
// all: a std::vector sized from a client's numbers) into a status, so that
// every handler and reactor finishes its RPC and releases its admission
// instead of letting the exception escape into gRPC's threads.
#ifndef SORTD_SERVER_GRPC_GUARDED_H_
#define SORTD_SERVER_GRPC_GUARDED_H_

#include <exception>
#include <new>
#include <stdexcept>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace sortd {

// Runs `body` (returning absl::Status); bad_alloc and length_error become
// RESOURCE_EXHAUSTED, any other exception INTERNAL, both naming `what`.
template <typename Body>
absl::Status Guarded(absl::string_view what, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": out of memory"));
  } catch (const std::length_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": too large (", e.what(), ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace sortd

#endif  // SORTD_SERVER_GRPC_GUARDED_H_
