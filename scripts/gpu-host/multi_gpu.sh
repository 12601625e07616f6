#!/usr/bin/env bash
# Issue #20 on a host with two GPUs: one sortd over both against the same
# sortd limited to GPU 0 (CUDA_VISIBLE_DEVICES=0), in one run: the startup
# line, per-GPU metrics, 64 MiB Sorts from 32 clients for 30 s, 1024-key
# SortStream, 8 sort-session clients, 8 clients sorting system regions at
# once (no gRPC payload: how far the GPUs themselves scale), an array
# larger than one GPU's pool, and compute-sanitizer
# memcheck over worker tests with both devices visible. Carry
# .device/bundle.tar.xz (README.md's bundle).
set -u
[ -d .device/bundle ] || tar -C .device -xJf .device/bundle.tar.xz
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
B=$PWD/.device/bundle/bin
SECONDS_BIG=${SECONDS_BIG:-30}
# The GPU service tests first (with two GPUs visible), when bundled.
if [ -x $B/sortd_gpu_service_test ]; then
  timeout 240 $B/sortd_gpu_service_test > /tmp/mg_service.log 2>&1
  echo "GPU service tests (exit $?): $(grep -E '^\[  (PASSED|FAILED) ' /tmp/mg_service.log | tr '\n' ' ')"
  grep -E '^\[  FAILED  \] [A-Za-z]' /tmp/mg_service.log | head -8
fi
nvidia-smi -L
# How the GPUs reach host memory and each other (what their copies share).
nvidia-smi topo -m 2>&1 | head -12
metrics() {
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9700/metrics').read().decode())" \
    | grep -E '^sortd_(device_pool_bytes|gpu_kernel_duration_seconds_count|transfer_duration_seconds_count|gpu_fallbacks_total)' | grep -v ' 0$'
}
start() {  # $1: env assignment or "", $2: name, rest: sortd flags
  local vis=$1 name=$2; shift 2
  env $vis $B/sortd --listen=127.0.0.1:50400 --metrics_listen=127.0.0.1:9700 \
    --max_message_bytes=1000000000 --shared_memory=system "$@" > /tmp/mg_$name.log 2>&1 &
  pid=$!
  for i in $(seq 200); do $B/sortctl health --target=127.0.0.1:50400 >/dev/null 2>&1 && break; sleep 0.1; done
  echo "== $name: $(head -1 /tmp/mg_$name.log)"
}
bench() {  # keys concurrency method seconds
  timeout 120 $B/sortctl bench --target=127.0.0.1:50400 --max_message_bytes=1000000000 \
    --type=uint32 --keys=$1 --concurrency=$2 --method=$3 --duration=${4}s 2>&1 \
    | grep -E 'throughput|latency' | tr -s ' ' | tr '\n' ' ' | sed -E 's/payload [^,]*, //'
  echo
}
for mode in two one; do
  vis=""; [ $mode = one ] && vis="CUDA_VISIBLE_DEVICES=0"
  start "$vis" $mode
  echo "$mode: 64 MiB x 32 clients: $(bench 16777216 32 sort $SECONDS_BIG)"
  metrics | sed "s/^/$mode: /"
  echo "$mode: 1024 keys SortStream x 8: $(bench 1024 8 stream 10)"
  # Sort sessions (parallel raw parts, issue #17): 8 clients at once, each
  # 4 sorts of 256 MiB over 4 connections; aggregate GB/s of keys sorted.
  if [ -x $B/sortd_transfer_bench ]; then
    t0=$(date +%s.%N)
    clients=()
    for c in $(seq 8); do
      $B/sortd_transfer_bench --target=127.0.0.1:50400 --sizes_mib=256 --connections=4 --repeat=4 \
        --transfer=false > /tmp/mg_sessions_$c.tsv 2>&1 &
      clients+=($!)
    done
    wait "${clients[@]}"
    t1=$(date +%s.%N)
    echo "$mode: sessions 8 clients x 4 x 256 MiB: $(awk -v a=$t0 -v b=$t1 'BEGIN {printf "%.2f s, %.2f GB/s of keys", b - a, 8 * 4 * 268435456 / (b - a) / 1e9}') (failed: $(grep -c WRONG /tmp/mg_sessions_*.tsv | awk -F: '{s += $2} END {print s}'))"
  fi
  metrics | grep kernel | sed "s/^/$mode after sessions: /"
  # System regions (issue #18): 8 clients, 256 MiB of keys each, sorting at
  # once, 5 rounds; the keys move by DMA from the pinned region, no gRPC
  # payload.
  if [ -x $B/sortd_shm_bench ]; then
    timeout 120 $B/sortd_shm_bench --target=127.0.0.1:50400 --clients=${REGION_CLIENTS:-8} --log2_keys=26 \
      --repeat=5 2>&1 | grep -E '^\||concurrent|clients' | sed "s/^/$mode regions: /"
    metrics | grep kernel | sed "s/^/$mode after regions: /"
  fi
  kill -TERM $pid; wait $pid; echo "$mode: exit $?"
done
# Larger than one GPU's pool (256 MiB), smaller than both: 100 M u32 keys.
start "" pool --gpu_pool_bytes=268435456
$B/sortctl gen --type=uint32 --count=100000000 --seed=3 --out=/tmp/big.npy 2>/dev/null
/usr/bin/time -f "%e s" $B/sortctl sort --target=127.0.0.1:50400 --max_message_bytes=1000000000 --type=uint32 \
  --in=/tmp/big.npy --out=/tmp/big_out.npy --indices_out=/tmp/big_idx.bin 2>&1 | tail -2
python3 scripts/gpu-host/verify_sort.py check --type=uint32 --order=asc --input=/tmp/big.npy \
  --output=/tmp/big_out.npy --indices=/tmp/big_idx.bin --label="100M u32 over one pool" 2>&1 | tail -2
metrics | sed "s/^/pool: /"
kill -TERM $pid; wait $pid
echo "== memcheck, worker tests, both GPUs visible"
timeout 200 compute-sanitizer --tool memcheck $B/sortd_gpu_worker_test \
  --gtest_filter='GpuWorker.ConcurrentJobs*:GpuWorker.JobsThatFit*:GpuWorkerTest/0.*' 2>&1 \
  | grep -E 'ERROR SUMMARY|PASSED|FAILED' | tail -3
