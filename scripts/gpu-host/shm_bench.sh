#!/usr/bin/env bash
# Same-host regions on the GPU host (#18), in one run:
#   1. GPU tests of what regions need from the worker (values as the radix
#      payload, device-resident jobs) and the service's region tests, and
#      compute-sanitizer memcheck over the worker ones;
#   2. the real sortd with --shared_memory=system,cuda and a Unix socket;
#      bench/shm_bench.cc through the socket: 1 GiB u32 keys through a system
#      region, keys + values, a CUDA IPC region, the same keys through gRPC
#      payloads (sort session, and SortChunked), the in-process CUB
#      baseline, and 4 KiB request rates;
#   3. the same large cases over loopback TCP (the peer check allows it);
#   4. the Python client's region tests, CUDA IPC cases included.
# Carry .device/shm.tar.xz holding shm/{bin/{sortd,sortd_shm_bench,
# sortd_gpu_worker_test,sortd_service_test,sortd_gpu_service_test},lib}.
# LOG2 (default 28) and REPEAT (5) override the sizes.
set -euo pipefail
[ -d .device/shm ] || tar -xJf .device/shm.tar.xz -C .device
B=$PWD/.device/shm/bin
export LD_LIBRARY_PATH=$PWD/.device/shm/lib
LOG2=${LOG2:-28}
REPEAT=${REPEAT:-5}
OUT=${OUT:-/tmp/shm}
rm -rf "$OUT"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
echo "cores: $(nproc); commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

echo "== GPU worker: pairs and device memory; service: regions"
"$B/sortd_gpu_worker_test" --gtest_filter='GpuWorkerPairs*:GpuWorkerDevice*' 2>&1 | tail -3
"$B/sortd_gpu_service_test" --gtest_filter='GpuRegion*' 2>&1 | tail -3
"$B/sortd_service_test" --gtest_filter='Region*' 2>&1 | tail -3
if command -v compute-sanitizer > /dev/null; then
  compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$B/sortd_gpu_worker_test" --gtest_filter='GpuWorkerPairs.Pairs*:GpuWorkerDevice*' 2>&1 | tail -3
fi

SOCK=$OUT/sortd.sock
rm -f "$OUT/port"
"$B/sortd" --listen=127.0.0.1:0 --port_file="$OUT/port" --metrics_listen= \
  --shared_memory=system,cuda --unix_socket="$SOCK" > "$OUT/sortd.log" 2>&1 &
PID=$!
for _ in $(seq 1 600); do [ -s "$OUT/port" ] && break; sleep 0.1; done
head -2 "$OUT/sortd.log"
echo "== through the Unix socket"
timeout 300 "$B/sortd_shm_bench" --target="unix:$SOCK" --log2_keys="$LOG2" --repeat="$REPEAT" \
  --small_threads="$(nproc)" --chunked | tee "$OUT/bench.md"
echo "== over loopback TCP (large cases only)"
timeout 200 "$B/sortd_shm_bench" --target="127.0.0.1:$(cat "$OUT/port")" --log2_keys="$LOG2" \
  --repeat=3 --cuda=false --grpc=false --small_seconds=0.5 --small_threads=1 | sed -n '3,8p'
kill -TERM "$PID"; wait "$PID" || true

echo "== Python client e2e (tests/e2e/test_regions.py; CUDA IPC with raw allocations, CuPy, PyTorch)"
# The host's python3 (with its own grpcio) runs without the bundle's
# libraries; sortd gets them through a wrapper.
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$LD_LIBRARY_PATH" "$B/sortd" > "$OUT/sortd"
chmod +x "$OUT/sortd"
env -u LD_LIBRARY_PATH SORTD_BIN="$OUT/sortd" PYTHONPATH=client/python:tests/e2e \
  timeout 300 python3 tests/e2e/test_regions.py 2>&1 | tail -4
