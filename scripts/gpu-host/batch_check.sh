#!/usr/bin/env bash
# Device run for batching (#6) from bundled binaries (no build on the host):
# segmented/worker/merge GPU tests, compute-sanitizer on small sizes, the
# segmented kernel vs cub::DeviceSegmentedSort, the bundled GPU service
# tests, then the service benchmark (batch_bench.sh) for each GPU wait mode.
# Bundle (dev VM): bundle-libs .device/bundle sortd sortctl
#   sortd_gpu_service_test sortd_gpu_segmented_test sortd_gpu_worker_test
#   sortd_gpu_merge_test sortd_gpu_segmented_bench; strip; tar cJf
#   .device/bundle.tar.xz; carry .device.
# Env: TESTS=0, SANITIZE=0, KERNEL_BENCH=0, SERVICE_BENCH=0, WAITS="true false",
#      SIZES, REPEATS. Full logs go to $OUT when set.
set -u
OUT=${OUT:-/tmp}
[ -d .device/bundle ] || (cd .device && tar xJf bundle.tar.xz)
B=$PWD/.device/bundle
export LD_LIBRARY_PATH=$B/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure|Expected|Which is" | head -${1:-20}; }
if [ "${TESTS:-1}" = 1 ]; then
  for t in segmented worker merge; do
    echo "== $t tests"
    timeout 300 $B/bin/sortd_gpu_${t}_test > $OUT/$t.log 2>&1; summary < $OUT/$t.log
  done
  echo "== service tests"
  timeout 300 $B/bin/sortd_gpu_service_test > $OUT/service.log 2>&1; summary < $OUT/service.log
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  echo "== memcheck segmented (bins + merge path)"
  timeout 240 compute-sanitizer --tool memcheck $B/bin/sortd_gpu_segmented_test \
    --gtest_filter='SegmentedSortSanitizer.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
  echo "== racecheck segmented"
  timeout 240 compute-sanitizer --tool racecheck $B/bin/sortd_gpu_segmented_test \
    --gtest_filter='SegmentedSortSanitizer.*' 2>&1 | grep -E "RACECHECK SUMMARY|PASSED|FAILED" | tail -2
  echo "== memcheck worker batches"
  timeout 240 compute-sanitizer --tool memcheck $B/bin/sortd_gpu_worker_test \
    --gtest_filter='GpuWorker*Batch*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
fi
if [ "${SERVICE_BENCH:-1}" = 1 ]; then
  for wait in ${WAITS:-true false}; do
    echo "== service bench, --gpu_blocking_wait=$wait"
    SORTD_FLAGS="--gpu_blocking_wait=$wait ${SORTD_FLAGS:-}" MODES=${MODES:-on} \
      SIZES=${SIZES:-1024 16384} DUR=${DUR:-4s} bash scripts/gpu-host/batch_bench.sh 2>&1 |
      tee $OUT/service_bench_$wait.log
  done
fi
if [ "${KERNEL_BENCH:-1}" = 1 ]; then
  echo "== segmented bench"
  timeout 300 $B/bin/sortd_gpu_segmented_bench --repeats=${REPEATS:-7} 2>/dev/null | tee $OUT/segmented_bench.log
fi
