#!/usr/bin/env bash
# Device run for the segmented sort (#6): core-only build, segmented + worker
# tests, sanitizers on small sizes, then the cub::DeviceSegmentedSort
# comparison (table last). RADIX=1 also runs the radix tests.
set -u
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build-gpu -DSORTD_BUILD_SERVER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
cmake --build build-gpu -j16 --target sortd_gpu_segmented_test sortd_gpu_worker_test sortd_gpu_segmented_bench sortd_gpu_radix_test > /tmp/build.log 2>&1 || { grep -E "error" /tmp/build.log | head -30; exit 1; }
summary() { grep -E "^\[  (PASSED|FAILED) |Failure|differs|Expected|Which is|at [0-9]" | head -${1:-30}; }
echo "== segmented tests"
timeout 300 build-gpu/tests/gpu/sortd_gpu_segmented_test 2>&1 | summary
echo "== worker tests"
timeout 300 build-gpu/tests/gpu/sortd_gpu_worker_test 2>&1 | summary
if [ "${RADIX:-0}" = 1 ]; then
  echo "== radix tests"
  timeout 300 build-gpu/tests/gpu/sortd_gpu_radix_test 2>&1 | summary
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  echo "== memcheck segmented"
  timeout 240 compute-sanitizer --tool memcheck build-gpu/tests/gpu/sortd_gpu_segmented_test --gtest_filter='SegmentedSortSanitizer.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
  echo "== racecheck segmented"
  timeout 240 compute-sanitizer --tool racecheck build-gpu/tests/gpu/sortd_gpu_segmented_test --gtest_filter='SegmentedSortSanitizer.*' 2>&1 | grep -E "HAZARD|RACECHECK SUMMARY|PASSED|FAILED" | tail -3
  echo "== memcheck worker batch"
  timeout 240 compute-sanitizer --tool memcheck build-gpu/tests/gpu/sortd_gpu_worker_test --gtest_filter='GpuWorker.Batch*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
fi
if [ "${BENCH:-1}" = 1 ]; then
  echo "== segmented bench"
  timeout 300 build-gpu/bench/sortd_gpu_segmented_bench --repeats=${REPEATS:-9} 2>/dev/null
fi
