#!/usr/bin/env bash
# Device run for the radix core, able to fail: core-only build, the radix
# GPU tests, memcheck + racecheck on the sanitizer case, then the CUB
# comparison (TUNE=1 first the tuning sweep). Every check is one row of the
# summary table printed last (checks.sh); the exit status is 1 when any
# row did not pass: a failed build, a test binary missing, exiting nonzero,
# printing a FAILED test or skipping one (no GPU), a sanitizer error, or a
# bench that exits nonzero or prints a row whose output differed from
# CUB's ("NO"). The bench's throughput numbers are the report: printed,
# not judged (kernel_targets.sh judges targets).
#   BENCH=0 SANITIZE=0 skip parts; TUNE=1 adds the sweep; MAX_LOG2 (28);
#   BUILD_GPU (build-gpu); W=/tmp/sortd_radix_check work directory.
set -euo pipefail
CHECKS_NAME=radix_check.sh
W=${W:-/tmp/sortd_radix_check}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

targets=(sortd_gpu_radix_test)
if [ "${BENCH:-1}" = 1 ] || [ "${TUNE:-0}" = 1 ]; then targets+=(sortd_gpu_radix_bench); fi
core_build "${targets[@]}"
T=$BUILD_GPU/tests/gpu
# The radix tests take 246-258 s on the H200 (2026-11-28): room for slower GPUs.
gtest_check "radix tests" 480 - "$T/sortd_gpu_radix_test"
if [ "${SANITIZE:-1}" = 1 ]; then
  gtest_check "memcheck radix" 240 memcheck "$T/sortd_gpu_radix_test" --gtest_filter='RadixSortSanitizerTest.*'
  gtest_check "racecheck radix" 240 racecheck "$T/sortd_gpu_radix_test" --gtest_filter='RadixSortSanitizerTest.*'
fi
if [ "${TUNE:-0}" = 1 ]; then
  bench_check "radix tuning sweep vs CUB" 300 "$BENCH_MATCHED" "$BUILD_GPU/bench/sortd_gpu_radix_bench" \
    --tune --max_log2=28 --repeats=5
fi
if [ "${BENCH:-1}" = 1 ]; then
  bench_check "radix bench vs CUB" 400 "$BENCH_MATCHED" "$BUILD_GPU/bench/sortd_gpu_radix_bench" \
    --max_log2="${MAX_LOG2:-28}" --repeats=5
fi
finish
