#!/usr/bin/env bash
# Device run for the segmented sort (#6), able to fail: core-only build,
# segmented + worker tests (RADIX=1: also the radix tests), sanitizers on
# small sizes, then the cub::DeviceSegmentedSort comparison. Every check is
# one row of the summary table printed last (checks.sh); the exit status is
# 1 when any row did not pass: a failed build, a binary missing, a test
# failing or skipping (no GPU), a sanitizer error, the bench exiting
# nonzero or printing a row whose output differed from CUB's ("NO"). The
# bench's rates are the report: printed, not judged.
#   RADIX=1, SANITIZE=0, BENCH=0, REPEATS (9), BUILD_GPU (build-gpu),
#   W=/tmp/sortd_segmented_check.
set -euo pipefail
CHECKS_NAME=segmented_check.sh
W=${W:-/tmp/sortd_segmented_check}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

targets=(sortd_gpu_segmented_test sortd_gpu_worker_test)
[ "${RADIX:-0}" = 1 ] && targets+=(sortd_gpu_radix_test)
[ "${BENCH:-1}" = 1 ] && targets+=(sortd_gpu_segmented_bench)
core_build "${targets[@]}"
T=$BUILD_GPU/tests/gpu
gtest_check "segmented tests" 300 - "$T/sortd_gpu_segmented_test"
gtest_check "worker tests" 300 - "$T/sortd_gpu_worker_test"
if [ "${RADIX:-0}" = 1 ]; then
  gtest_check "radix tests" 480 - "$T/sortd_gpu_radix_test"
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  gtest_check "memcheck segmented" 240 memcheck "$T/sortd_gpu_segmented_test" --gtest_filter='SegmentedSortSanitizer.*'
  gtest_check "racecheck segmented" 240 racecheck "$T/sortd_gpu_segmented_test" --gtest_filter='SegmentedSortSanitizer.*'
  gtest_check "memcheck worker batches" 240 memcheck "$T/sortd_gpu_worker_test" --gtest_filter='GpuWorker.Batch*'
fi
if [ "${BENCH:-1}" = 1 ]; then
  bench_check "segmented bench vs CUB" 300 "$BENCH_MATCHED" "$BUILD_GPU/bench/sortd_gpu_segmented_bench" \
    --repeats="${REPEATS:-9}"
fi
finish
