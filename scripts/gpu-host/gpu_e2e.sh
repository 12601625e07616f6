#!/usr/bin/env bash
# Device run for the GPU engine: core-only build + radix/worker tests +
# sanitizers; the bundled service test; the real sortd with sortctl on every
# type (verified with numpy); Sort RPC bench GPU vs CPU engine (table last).
set -u
export PATH=/usr/local/cuda/bin:$PATH
ROOT=$PWD
B=$ROOT/.device/bundle/bin
export LD_LIBRARY_PATH=$ROOT/.device/bundle/lib
if [ -f .device/bundle.tar.xz ] && [ ! -d .device/bundle ]; then tar -C .device -xJf .device/bundle.tar.xz; fi
# Core tests: bundled (built on the dev VM) when the bundle has them, else
# a core-only build here.
if [ -x "$B/sortd_gpu_radix_test" ]; then
  T=$B
else
  cmake -S . -B build-gpu -DSORTD_BUILD_SERVER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
  cmake --build build-gpu -j16 > /tmp/build.log 2>&1 || { grep -E "error" /tmp/build.log | head -30; exit 1; }
  T=build-gpu/tests/gpu
fi
filter='^\[  (PASSED|FAILED|  OK|SKIPPED) |Failure|mismatch|Expected|Which is|value at|error'
echo "== radix tests"; timeout 300 $T/sortd_gpu_radix_test 2>&1 | grep -E "$filter" | grep -v "  OK" | head -20
echo "== worker tests"; timeout 300 $T/sortd_gpu_worker_test 2>&1 | grep -E "$filter" | grep -v "  OK" | head -20
echo "== memcheck radix"; timeout 200 compute-sanitizer --tool memcheck $T/sortd_gpu_radix_test --gtest_filter='RadixSortSanitizerTest.*' 2>&1 | tail -1
echo "== racecheck radix"; timeout 200 compute-sanitizer --tool racecheck $T/sortd_gpu_radix_test --gtest_filter='RadixSortSanitizerTest.*' 2>&1 | tail -1
echo "== memcheck worker"; timeout 200 compute-sanitizer --tool memcheck $T/sortd_gpu_worker_test --gtest_filter='GpuWorker.JobLarger*:GpuWorkerTest/0.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
echo "== service tests (bundled)"; timeout 300 $B/sortd_gpu_service_test 2>&1 | grep -E "$filter" | grep -v "  OK" | head -20

echo "== e2e: real sortd + sortctl"
$B/sortd --listen=127.0.0.1:50061 --metrics_listen=127.0.0.1:9471 --max_message_bytes=1000000000 > /tmp/gpu_sortd.log 2>&1 &
GPU_PID=$!
$B/sortd --engine=cpu --listen=127.0.0.1:50062 --metrics_listen=127.0.0.1:9472 --max_message_bytes=1000000000 > /tmp/cpu_sortd.log 2>&1 &
CPU_PID=$!
sleep 2
head -3 /tmp/gpu_sortd.log
for t in uint32 int32 float32 uint64 int64 float64; do
  n=2000000; ext=npy; [ $t = bytes ] && n=200000 && ext=txt
  $B/sortctl gen --type=$t --count=$n --seed=7 --out=/tmp/in_$t.$ext 2>/dev/null
  for order in asc desc; do
    $B/sortctl sort --target=127.0.0.1:50061 --max_message_bytes=1000000000 --type=$t --order=$order --in=/tmp/in_$t.$ext --out=/tmp/out_$t.$ext --indices_out=/tmp/idx_$t.bin 2>/tmp/sort_$t.err || { echo "sort $t failed"; cat /tmp/sort_$t.err; }
    python3 - "$t" "$order" "$(cat /tmp/sort_$t.err)" <<'PY'
import sys, numpy as np
t, order, msg = sys.argv[1], sys.argv[2], sys.argv[3]
if t == 'bytes':
    print(f"{t:8s} {order:4s} {msg.strip()}")
    sys.exit(0)
a = np.load(f"/tmp/in_{t}.npy"); o = np.load(f"/tmp/out_{t}.npy")
idx = np.fromfile(f"/tmp/idx_{t}.bin", dtype=np.uint64)
ref = np.sort(a, kind="stable")
if order == "desc": ref = ref[::-1]
ok_keys = np.array_equal(o, ref, equal_nan=(a.dtype.kind == 'f'))
ok_idx = np.array_equal(a[idx].view(np.uint8), o.view(np.uint8))
print(f"{t:8s} {order:4s} {msg.strip():40s} keys {'OK' if ok_keys else 'WRONG'} indices {'OK' if ok_idx else 'WRONG'}")
PY
  done
done
echo "== service bench: Sort RPC, uint32, 5 s each"
for keys in 4194304 67108864; do
  for conc in 1 4; do
    for port in 50061 50062; do
      eng=$([ $port = 50061 ] && echo gpu-auto || echo cpu)
      r=$(timeout 60 $B/sortctl bench --target=127.0.0.1:$port --max_message_bytes=1000000000 --type=uint32 --keys=$keys --concurrency=$conc --duration=5s 2>&1)
      echo "$keys keys ($((keys*4/1048576)) MiB) conc=$conc engine=$eng | $(echo "$r" | grep -E 'throughput|latency|requests:' | tr -s ' ' | tr '\n' ' ')"
    done
  done
done
echo "== metrics (gpu server)"
curl -s 127.0.0.1:9471/metrics | grep -E '^sortd_(gpu_kernel_duration_seconds_(count|sum)|transfer_duration_seconds_(count|sum)|device_pool_bytes|gpu_fallbacks_total|keys_sorted_total)' | head -20
kill -TERM $GPU_PID $CPU_PID; wait $GPU_PID; echo "gpu sortd exit $?"; wait $CPU_PID
