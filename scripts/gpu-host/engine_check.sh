#!/usr/bin/env bash
# GPU engine check after host-side changes: core-only build, radix and worker
# tests, worker memcheck, bundled service tests, sortd + sortctl every type.
set -u
export PATH=/usr/local/cuda/bin:$PATH
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
cmake -S . -B build-gpu -DSORTD_BUILD_SERVER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > /tmp/cfg.log 2>&1 || { tail -20 /tmp/cfg.log; exit 1; }
cmake --build build-gpu -j16 --target sortd_gpu_radix_test sortd_gpu_worker_test > /tmp/build.log 2>&1 || { grep -E "error" /tmp/build.log | head -30; exit 1; }
f='^\[  (PASSED|FAILED) |Failure|error'
echo "== radix tests"; timeout 300 build-gpu/tests/gpu/sortd_gpu_radix_test 2>&1 | grep -E "$f" | head
echo "== worker tests"; timeout 300 build-gpu/tests/gpu/sortd_gpu_worker_test 2>&1 | grep -E "$f" | head
echo "== memcheck worker"; timeout 300 compute-sanitizer --tool memcheck build-gpu/tests/gpu/sortd_gpu_worker_test --gtest_filter='GpuWorker.*:GpuWorkerTest/0.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
echo "== service tests (bundled)"; timeout 300 $B/sortd_gpu_service_test 2>&1 | grep -E "$f" | head
echo "== sortd + sortctl"
$B/sortd --listen=127.0.0.1:50085 --metrics_listen= > /tmp/x.log 2>&1 &
P=$!; sleep 2; head -1 /tmp/x.log
for t in uint32 int32 float32 uint64 int64 float64; do
  $B/sortctl gen --type=$t --count=1000000 --seed=3 --out=/tmp/in_$t.npy 2>/dev/null
  $B/sortctl sort --target=127.0.0.1:50085 --type=$t --in=/tmp/in_$t.npy --out=/tmp/out_$t.npy 2>/tmp/e_$t
  python3 -c "import numpy as np,sys; a=np.load('/tmp/in_$t.npy'); o=np.load('/tmp/out_$t.npy'); print('$t', open('/tmp/e_$t').read().strip(), 'OK' if np.array_equal(o, np.sort(a, kind='stable'), equal_nan=a.dtype.kind=='f') else 'WRONG')"
done
kill -TERM $P; wait $P; echo "sortd exit $?"
