#!/usr/bin/env bash
# Device run for the GPU merge sort (#4), able to fail, from binaries
# bundled on the dev VM (../shared/tools/bundle-libs .device/bundle
# build/tests/gpu/sortd_gpu_merge_test build/bench/sortd_gpu_merge_bench
# build/bench/sortd_cpu_bench [...]; carry .device/bundle.tar.xz, unpacked
# by checks.sh): merge tests, sanitizers on small sizes, the CPU engine's
# string rate and the merge benchmark (vs CUB, argsort vs radix, strings).
# Every check is one row of the summary table printed last (checks.sh);
# the exit status is 1 when any row did not pass: a binary missing, a test
# failing or skipping (no GPU), a sanitizer error, a bench exiting nonzero
# or printing a row whose output differed ("NO"). The benches' rates are
# the report: printed, not judged.
#   TESTS=0 SANITIZE=0 BENCH=0 CPU=0 skip parts; EXTRA="cmd" runs a command
#   first; REPEATS (7), BENCH_ARGS (split on spaces); B: the bundle's bin
#   directory (.device/bundle/bin); W=/tmp/sortd_merge_check.
set -euo pipefail
CHECKS_NAME=merge_check.sh
W=${W:-/tmp/sortd_merge_check}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

if [ -n "${EXTRA:-}" ]; then eval "$EXTRA"; fi
if [ "${TESTS:-1}" = 1 ]; then
  gtest_check "merge tests" 400 - "$B/sortd_gpu_merge_test"
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  gtest_check "memcheck merge" 240 memcheck "$B/sortd_gpu_merge_test" --gtest_filter='MergeSortSanitizer.*'
  gtest_check "racecheck merge" 240 racecheck "$B/sortd_gpu_merge_test" --gtest_filter='MergeSortSanitizer.*'
fi
if [ "${CPU:-1}" = 1 ]; then
  # Google Benchmark: no match column; its rows are the bytes/ cases.
  bench_check "CPU engine byte strings" 200 '^bytes/' "$B/sortd_cpu_bench" --benchmark_filter='bytes/'
fi
if [ "${BENCH:-1}" = 1 ]; then
  read -r -a bench_args <<< "${BENCH_ARGS:-}"
  bench_check "merge bench vs CUB" 300 "$BENCH_MATCHED" "$B/sortd_gpu_merge_bench" \
    --repeats="${REPEATS:-7}" "${bench_args[@]+"${bench_args[@]}"}"
fi
finish
