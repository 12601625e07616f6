// What the fuzzers check answers against: the reference order of the
// product contract (tests/core/sort_test_util.h, written from docs/api.md,
// not from the engine's key transforms), applied to arrays in any of
// sortd's key types. A fuzzer that finds a difference aborts with a
// description, which libFuzzer reports as a crash with the input saved.
#ifndef SORTD_TESTS_FUZZ_FUZZ_ORACLE_H_
#define SORTD_TESTS_FUZZ_FUZZ_ORACLE_H_

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/dispatcher.h"
#include "core/types.h"
#include "tests/core/sort_test_util.h"

namespace sortd::fuzz {

[[noreturn]] inline void Finding(absl::string_view what) {
  std::fprintf(stderr, "FUZZ FINDING: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

inline void Check(bool ok, absl::string_view what) {
  if (!ok) Finding(what);
}

inline void Check(const ::testing::AssertionResult& result, absl::string_view what) {
  if (!result) Finding(std::string(what) + ": " + result.message());
}

// A refusal: one of the `allowed` codes, and a message that names what is
// wrong ("field: problem").
inline void CheckRefusal(const absl::Status& status, absl::string_view step,
                         std::initializer_list<absl::StatusCode> allowed) {
  Check(std::find(allowed.begin(), allowed.end(), status.code()) != allowed.end(),
        std::string(step) + " gave " + status.ToString());
  Check(status.message().find(':') != absl::string_view::npos,
        std::string(step) + " message names no field: " + status.ToString());
}

// The CPU engine's dispatcher, made once per fuzzing process.
inline Dispatcher& CpuDispatcher() {
  static Dispatcher* dispatcher = [] {
    DispatcherOptions options;
    options.engine = EngineChoice::kCpu;
    auto created = Dispatcher::Create(options);
    if (!created.ok()) Finding("Dispatcher::Create: " + created.status().ToString());
    return created->release();
  }();
  return *dispatcher;
}

// The stable permutation that sorts `keys` in `order` (reference order).
template <typename T>
std::vector<uint64_t> ReferencePermutation(const std::vector<T>& keys, SortOrder order) {
  return ::sortd::testing::ReferenceSort(keys, order).indices;
}

// Byte strings: unsigned lexicographic, a prefix before its extensions;
// stable in both orders.
inline std::vector<uint64_t> ReferencePermutation(const std::vector<std::string>& keys,
                                                  SortOrder order) {
  std::vector<uint64_t> perm(keys.size());
  std::iota(perm.begin(), perm.end(), uint64_t{0});
  std::stable_sort(perm.begin(), perm.end(), [&](uint64_t a, uint64_t b) {
    // std::string compares through char_traits<char>, i.e. as unsigned bytes.
    return order == SortOrder::kAscending ? keys[a] < keys[b] : keys[b] < keys[a];
  });
  return perm;
}

template <typename T>
std::vector<T> Gather(const std::vector<T>& in, const std::vector<uint64_t>& perm) {
  std::vector<T> out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in[perm[i]];
  return out;
}

}  // namespace sortd::fuzz

#endif  // SORTD_TESTS_FUZZ_FUZZ_ORACLE_H_
