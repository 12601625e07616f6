#!/usr/bin/env bash
# Radix core on the GPU host from binaries built on the dev VM (no build
# there), able to fail: bundle `build/tests/gpu/sortd_gpu_radix_test
# build/bench/sortd_gpu_radix_bench` into .device/bundle.tar.xz (see
# README.md; checks.sh unpacks it). Radix tests, memcheck + racecheck, the
# tuning sweep and the CUB comparison. Every check is one row of the summary
# table printed last (checks.sh); the exit status is 1 when any row did not
# pass: a binary missing, a test failing or skipping (no GPU), a sanitizer
# error, a bench exiting nonzero or printing a row whose output differed
# from CUB's ("NO"). The rates are the report: printed, not judged.
#   TESTS=0 SANITIZE=0 TUNE=0 BENCH=0 to leave parts out; MAX_LOG2 (28);
#   TUNE_ONLY / BENCH_ONLY: a case name for --only; W=/tmp/sortd_radix_bundled.
set -euo pipefail
CHECKS_NAME=radix_bundled.sh
W=${W:-/tmp/sortd_radix_bundled}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

if [ "${TESTS:-1}" = 1 ]; then
  gtest_check "radix tests" 480 - "$B/sortd_gpu_radix_test"
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  for tool in memcheck racecheck; do
    gtest_check "$tool radix" 240 "$tool" "$B/sortd_gpu_radix_test" --gtest_filter='RadixSortSanitizerTest.*'
  done
fi
if [ "${TUNE:-1}" = 1 ]; then
  bench_check "radix tuning sweep vs CUB" 400 "$BENCH_MATCHED" "$B/sortd_gpu_radix_bench" \
    --tune --max_log2="${MAX_LOG2:-28}" --repeats=5 ${TUNE_ONLY:+--only="$TUNE_ONLY"}
fi
if [ "${BENCH:-1}" = 1 ]; then
  bench_check "radix bench vs CUB" 400 "$BENCH_MATCHED" "$B/sortd_gpu_radix_bench" \
    --max_log2="${MAX_LOG2:-28}" --repeats=5 ${BENCH_ONLY:+--only="$BENCH_ONLY"}
fi
finish
