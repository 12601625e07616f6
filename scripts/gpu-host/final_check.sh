#!/usr/bin/env bash
# Final device run: radix + worker tests, sanitizers, full CUB comparison.
set -u
bash scripts/gpu-host/radix_check.sh
echo "== worker tests"
build-gpu/tests/gpu/sortd_gpu_worker_test 2>&1 | grep -E "^\[  (PASSED|FAILED) |Failure" | head
echo "== memcheck worker"
timeout 200 compute-sanitizer --tool memcheck build-gpu/tests/gpu/sortd_gpu_worker_test --gtest_filter='GpuWorker.JobLarger*:GpuWorkerTest/0.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
