#!/usr/bin/env bash
# Device run for the GPU merge sort (#4), from binaries bundled on the dev VM
# (../shared/tools/bundle-libs .device/bundle build/tests/gpu/sortd_gpu_merge_test
#  build/bench/sortd_gpu_merge_bench build/bench/sortd_cpu_bench [...]; carry .device):
# merge tests, sanitizers on small sizes, the merge benchmark (vs CUB, argsort
# vs radix, strings) and the CPU engine's string rate on the same inputs.
#   TESTS=0 SANITIZE=0 BENCH=0 CPU=0 skip parts; EXTRA="cmd" runs a command first.
set -u
B=${B:-.device/bundle}
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
summary() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED|Failure|differs|Expected|Which is|got index" | head -${1:-30}; }
if [ -n "${EXTRA:-}" ]; then eval "$EXTRA"; fi
if [ "${TESTS:-1}" = 1 ]; then
  echo "== merge tests"
  timeout 400 $B/bin/sortd_gpu_merge_test 2>&1 | summary
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  echo "== memcheck merge"
  timeout 240 compute-sanitizer --tool memcheck $B/bin/sortd_gpu_merge_test --gtest_filter='MergeSortSanitizer.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
  echo "== racecheck merge"
  timeout 240 compute-sanitizer --tool racecheck $B/bin/sortd_gpu_merge_test --gtest_filter='MergeSortSanitizer.*' 2>&1 | grep -E "HAZARD|RACECHECK SUMMARY|PASSED|FAILED" | tail -3
fi
if [ "${CPU:-1}" = 1 ]; then
  echo "== CPU engine, byte strings"
  timeout 200 $B/bin/sortd_cpu_bench --benchmark_filter='bytes/' 2>/dev/null | grep -E "bytes/"
fi
if [ "${BENCH:-1}" = 1 ]; then
  echo "== merge bench"
  timeout 300 $B/bin/sortd_gpu_merge_bench --repeats=${REPEATS:-7} ${BENCH_ARGS:-} 2>/dev/null
fi
