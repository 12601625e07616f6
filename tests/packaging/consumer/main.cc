// consumer TARGET: sorts small random int64 arrays descending with indices
// through the installed sortd C++ client and checks every result against
// std::stable_sort here. Exits non-zero on a mismatch or an RPC error.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "client/sortd_client.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s TARGET (e.g. 127.0.0.1:50051)\n", argv[0]);
    return 2;
  }
  sortd::client::ClientOptions options;
  options.timeout = absl::Seconds(30);
  auto client = sortd::client::SortClient::Connect(argv[1], options);
  if (!client.ok()) {
    std::fprintf(stderr, "consumer: connect %s: %s\n", argv[1],
                 client.status().ToString().c_str());
    return 1;
  }
  std::mt19937_64 rng(42);
  // Several calls, so that round_robin over several addresses reaches each.
  for (int round = 0; round < 8; ++round) {
    const size_t n = 1 + rng() % 1000;
    std::vector<int64_t> keys(n);
    // Few distinct values: many ties, so stability is checked too.
    for (int64_t& k : keys) k = static_cast<int64_t>(rng() % 64) - 32;

    auto result = (*client)->Sort<int64_t>(keys, sortd::v1::SORT_ORDER_DESCENDING,
                                           /*return_indices=*/true);
    if (!result.ok()) {
      std::fprintf(stderr, "consumer: round %d: Sort of %zu keys failed: %s\n", round, n,
                   result.status().ToString().c_str());
      return 1;
    }
    std::vector<uint64_t> want_indices(n);
    std::iota(want_indices.begin(), want_indices.end(), uint64_t{0});
    std::stable_sort(want_indices.begin(), want_indices.end(),
                     [&](uint64_t a, uint64_t b) { return keys[a] > keys[b]; });
    std::vector<int64_t> want_keys(n);
    for (size_t i = 0; i < n; ++i) want_keys[i] = keys[want_indices[i]];
    if (result->keys != want_keys || result->indices != want_indices) {
      size_t i = 0;
      while (i < n && i < result->keys.size() && i < result->indices.size() &&
             result->keys[i] == want_keys[i] && result->indices[i] == want_indices[i]) {
        ++i;
      }
      std::fprintf(stderr,
                   "consumer: round %d: wrong result for %zu keys (got %zu keys, %zu indices); "
                   "first difference at %zu\n",
                   round, n, result->keys.size(), result->indices.size(), i);
      return 1;
    }
    std::printf("consumer: round %d: %zu int64 keys sorted descending with indices on %s: ok\n",
                round, n, sortd::v1::Engine_Name(result->engine).c_str());
  }
  std::printf("consumer: OK\n");
  return 0;
}
