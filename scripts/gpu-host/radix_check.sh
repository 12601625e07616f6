#!/usr/bin/env bash
# Device run for the radix core: core-only build, GPU tests, sanitizers,
# then the CUB comparison (table last). TUNE=1 adds the tuning sweep.
set -u
export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build-gpu -DSORTD_BUILD_SERVER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -E "error" /tmp/build.log | head -30; exit 1; }
echo "== gpu tests"
timeout 300 build-gpu/tests/gpu/sortd_gpu_radix_test 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |Failure|mismatch|Expected|Which is|value at" | head -40
if [ "${SANITIZE:-1}" = 1 ]; then
echo "== memcheck"
timeout 240 compute-sanitizer --tool memcheck build-gpu/tests/gpu/sortd_gpu_radix_test --gtest_filter='RadixSortSanitizerTest.*' 2>&1 | tail -3
echo "== racecheck"
timeout 240 compute-sanitizer --tool racecheck build-gpu/tests/gpu/sortd_gpu_radix_test --gtest_filter='RadixSortSanitizerTest.*' 2>&1 | tail -3
fi
if [ "${TUNE:-0}" = 1 ]; then
echo "== tune"
timeout 300 build-gpu/bench/sortd_gpu_radix_bench --tune --max_log2=28 --repeats=5 2>/dev/null
fi
if [ "${BENCH:-1}" = 1 ]; then
echo "== bench"
timeout 400 build-gpu/bench/sortd_gpu_radix_bench --max_log2=${MAX_LOG2:-28} --repeats=5 2>/dev/null
fi
