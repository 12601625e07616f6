#!/usr/bin/env bash
# Radix core on the GPU host from binaries built on the dev VM (no build
# there): bundle `build/tests/gpu/sortd_gpu_radix_test
# build/bench/sortd_gpu_radix_bench` into .device/bundle.tar.xz (see
# README.md). Radix tests, memcheck + racecheck, the tuning sweep and the
# CUB comparison, table last.
#   TESTS=0 SANITIZE=0 TUNE=0 BENCH=0 to leave parts out; MAX_LOG2 (28);
#   TUNE_ONLY / BENCH_ONLY: a case name for --only.
set -u
export PATH=/usr/local/cuda/bin:$PATH
if [ -f .device/bundle.tar.xz ] && [ ! -d .device/bundle ]; then tar -C .device -xJf .device/bundle.tar.xz; fi
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
if [ "${TESTS:-1}" = 1 ]; then
  echo "== radix tests"
  timeout 480 "$B/sortd_gpu_radix_test" 2>&1 | grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED) |Failure|mismatch|Expected|Which is|value at" | head -40
fi
if [ "${SANITIZE:-1}" = 1 ]; then
  for tool in memcheck racecheck; do
    echo "== $tool"
    timeout 240 compute-sanitizer --tool $tool "$B/sortd_gpu_radix_test" --gtest_filter='RadixSortSanitizerTest.*' 2>&1 | tail -3
  done
fi
if [ "${TUNE:-1}" = 1 ]; then
  echo "== tune"
  timeout 400 "$B/sortd_gpu_radix_bench" --tune --max_log2="${MAX_LOG2:-28}" --repeats=5 ${TUNE_ONLY:+--only="$TUNE_ONLY"} 2>/dev/null
fi
if [ "${BENCH:-1}" = 1 ]; then
  echo "== bench"
  timeout 400 "$B/sortd_gpu_radix_bench" --max_log2="${MAX_LOG2:-28}" --repeats=5 ${BENCH_ONLY:+--only="$BENCH_ONLY"} 2>/dev/null
fi
