#!/usr/bin/env bash
# Final device run, able to fail: radix_check.sh (core-only build, radix
# tests, sanitizers, CUB comparison; its own table, its exit status one row
# here), then the GPU worker tests and memcheck over worker cases. The
# summary table is printed last (checks.sh); the exit status is 1 when any
# row did not pass (radix_check.sh failing, a worker test failing or
# skipping, a sanitizer error, a missing binary).
#   Same environment as radix_check.sh (BENCH, SANITIZE, TUNE, MAX_LOG2,
#   BUILD_GPU); W=/tmp/sortd_final_check (radix_check.sh's under it).
set -euo pipefail
CHECKS_NAME=final_check.sh
W=${W:-/tmp/sortd_final_check}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

start=$SECONDS rc=0
W=$W/radix_check bash "$HERE/radix_check.sh" || rc=$?
if [ "$rc" = 0 ]; then
  record PASS "radix_check.sh" $((SECONDS - start)) "exit 0 (its table above)"
else
  record FAIL "radix_check.sh" $((SECONDS - start)) \
    "exit $rc; not passed: $(awk -F'\t' '$1 != "PASS" {print $2}' "$W/radix_check/rows.tsv" 2> /dev/null | head -4 | tr '\n' ';')"
fi
core_build sortd_gpu_worker_test
T=$BUILD_GPU/tests/gpu
gtest_check "worker tests" 300 - "$T/sortd_gpu_worker_test"
if [ "${SANITIZE:-1}" = 1 ]; then
  gtest_check "memcheck worker" 240 memcheck "$T/sortd_gpu_worker_test" --gtest_filter='GpuWorker.JobLarger*:GpuWorkerTest/0.*'
fi
finish
