#!/usr/bin/env bash
# The device encoder of sorted keys (core/cuda/key_blocks.cu) on the GPU
# host: its test (the CPU encoder's bytes, the arriving sort coding over the
# keys), the worker tests it touches, compute-sanitizer memcheck and
# racecheck on it, then sortd_key_blocks_bench (GPU encode, CPU decode by
# threads). Carry .device/bundle.tar.xz holding bundle/bin/{sortd_gpu_key_blocks_test,
# sortd_key_blocks_bench} (and, where they fit, sortd_gpu_arriving_test,
# sortd_gpu_worker_test, sortd_gpu_service_test). SKIP_BENCH=1: tests only.
set -euo pipefail
[ -d .device/bundle ] || tar -xJf .device/bundle.tar.xz -C .device
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
CS=${CS:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
nvidia-smi --query-gpu=name --format=csv,noheader || true
echo "== tests"
"$B/sortd_gpu_key_blocks_test" --gtest_brief=1
# The worker tests, where the bundle carries them (each binary is ~33 MB).
for t in sortd_gpu_arriving_test sortd_gpu_worker_test sortd_gpu_service_test; do
  if [ -x "$B/$t" ]; then "$B/$t" --gtest_brief=1; fi
done
echo "== compute-sanitizer"
for tool in memcheck racecheck; do
  timeout 240 "$CS" --tool "$tool" --error-exitcode 1 "$B/sortd_gpu_key_blocks_test" --gtest_brief=1 \
    --gtest_filter='*Bytes32:*NoKeys*' > "/tmp/cs-$tool.log" 2>&1 \
    && echo "$tool: clean" || { echo "$tool: FAILED"; tail -20 "/tmp/cs-$tool.log"; exit 1; }
done
if [ "${SKIP_BENCH:-0}" = 1 ]; then exit 0; fi
echo "== bench"
"$B/sortd_key_blocks_bench" --log2 "${LOG2:-28}" --repeats "${REPEATS:-10}" --threads 16
