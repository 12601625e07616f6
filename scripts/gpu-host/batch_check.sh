#!/usr/bin/env bash
# Device run for batching (#6), able to fail, from bundled binaries (no
# build on the host): segmented/worker/merge GPU tests, the bundled GPU
# service tests, compute-sanitizer on small sizes, the service benchmark
# (batch_bench.sh) for each GPU wait mode, then the segmented kernel vs
# cub::DeviceSegmentedSort. Every check is one row of the summary table
# printed last (checks.sh); the exit status is 1 when any row did not pass:
# a binary missing, a test failing or skipping (no GPU), a sanitizer error,
# batch_bench.sh exiting nonzero (its last sortd not exiting 0 after
# SIGTERM), the kernel bench exiting nonzero or printing a row whose output
# differed from CUB's ("NO"). The rates are the report: printed, not judged.
# Bundle (dev VM): bundle-libs .device/bundle sortd sortctl
#   sortd_gpu_service_test sortd_gpu_segmented_test sortd_gpu_worker_test
#   sortd_gpu_merge_test sortd_gpu_segmented_bench; strip; tar cJf
#   .device/bundle.tar.xz; carry that (checks.sh unpacks it).
# Env: TESTS=0, SANITIZE=0, KERNEL_BENCH=0, SERVICE_BENCH=0, WAITS="true false",
#      SIZES, REPEATS. Logs go to W (default $OUT/sortd_batch_check when OUT
#      is set, else /tmp/sortd_batch_check).
set -euo pipefail
CHECKS_NAME=batch_check.sh
W=${W:-${OUT:-/tmp}/sortd_batch_check}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
if [ "${TESTS:-1}" = 1 ]; then
  for t in segmented worker merge; do
    gtest_check "$t tests" 300 - "$B/sortd_gpu_${t}_test"
  done
  # The two-GPU tests skip on one GPU (a skip fails gtest_check): left out there.
  gtest_check "service tests (bundled)" 300 - "$B/sortd_gpu_service_test" \
    "${SERVICE_GPU_FILTER[@]+"${SERVICE_GPU_FILTER[@]}"}"
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  gtest_check "memcheck segmented (bins + merge path)" 240 memcheck "$B/sortd_gpu_segmented_test" \
    --gtest_filter='SegmentedSortSanitizer.*'
  gtest_check "racecheck segmented" 240 racecheck "$B/sortd_gpu_segmented_test" \
    --gtest_filter='SegmentedSortSanitizer.*'
  gtest_check "memcheck worker batches" 240 memcheck "$B/sortd_gpu_worker_test" \
    --gtest_filter='GpuWorker*Batch*'
fi
if [ "${SERVICE_BENCH:-1}" = 1 ]; then
  for wait in ${WAITS:-true false}; do
    # A report (throughput vs echo); only its exit status is checked.
    echo "== service bench, --gpu_blocking_wait=$wait"
    start=$SECONDS rc=0
    SORTD_FLAGS="--gpu_blocking_wait=$wait ${SORTD_FLAGS:-}" MODES=${MODES:-on} \
      SIZES=${SIZES:-1024 16384} DUR=${DUR:-4s} bash "$HERE/batch_bench.sh" > "$W/service_bench_$wait.log" 2>&1 || rc=$?
    cat "$W/service_bench_$wait.log"
    if [ "$rc" = 0 ]; then
      record PASS "service bench --gpu_blocking_wait=$wait" $((SECONDS - start)) "batch_bench.sh exit 0 (a report: numbers above)"
    else
      record FAIL "service bench --gpu_blocking_wait=$wait" $((SECONDS - start)) "batch_bench.sh exit $rc"
    fi
  done
fi
if [ "${KERNEL_BENCH:-1}" = 1 ]; then
  bench_check "segmented bench vs CUB" 300 "$BENCH_MATCHED" "$B/sortd_gpu_segmented_bench" --repeats="${REPEATS:-7}"
fi
finish
