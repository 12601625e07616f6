#!/usr/bin/env bash
# Issue #20 on a host with two GPUs, able to fail: one sortd over both
# against the same sortd limited to GPU 0 (CUDA_VISIBLE_DEVICES=0), in one
# run: the startup line, per-GPU metrics, 64 MiB Sorts from 32 clients for
# SECONDS_BIG s, 1024-key SortStream, 8 sort-session clients, 8 clients
# sorting system regions at once (no gRPC payload: how far the GPUs
# themselves scale), an array larger than one GPU's pool, and
# compute-sanitizer memcheck over worker tests with both devices visible.
# The rates are the report (printed, not judged). The checks, each one row
# of the summary table printed last (checks.sh; exit status 1 when any row
# did not pass): two GPUs visible; the GPU service tests pass with both
# visible (GpuServiceTwoGpus.* included); every sortctl bench exits 0 with
# requests ok and none failed; with both GPUs each launched kernels under
# the unary load, with one only GPU 0 did; every sort-session client exits
# 0 without a WRONG result; sortd_shm_bench exits 0 (it dies on a result
# not sorted or not a permutation); the array over one pool is exact by
# verify_sort.py and sorted on the GPU; no GPU fallback counted; each sortd
# exits 0 after SIGTERM; memcheck reports 0 errors. Servers listen on free
# ports and are waited for with `sortctl health` (checks.sh).
# Carry .device/bundle.tar.xz (README.md's bundle: sortd sortctl
# sortd_transfer_bench sortd_shm_bench sortd_gpu_service_test
# sortd_gpu_worker_test). SECONDS_BIG (30), REGION_CLIENTS (8), POOL_KEYS
# (100000000: 400 MB, over the 256 MiB pool), SANITIZE=0 (no memcheck),
# W=/tmp/sortd_multi_gpu.
set -euo pipefail
CHECKS_NAME=multi_gpu.sh
W=${W:-/tmp/sortd_multi_gpu}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

SECONDS_BIG=${SECONDS_BIG:-30}
BIG=(--max_message_bytes=1000000000)

if [ "$VISIBLE_GPUS" -ge 2 ]; then
  record PASS "two GPUs visible" 0 "$VISIBLE_GPUS GPUs"
else
  record FAIL "two GPUs visible" 0 "$VISIBLE_GPUS visible; this run compares two GPUs with one"
fi
nvidia-smi -L || true
# How the GPUs reach host memory and each other (what their copies share).
{ nvidia-smi topo -m 2>&1 || true; } | head -12
# The GPU service tests with both GPUs visible (the two-GPU tests run).
gtest_check "GPU service tests (both GPUs visible)" 240 - "$B/sortd_gpu_service_test" \
  "${SERVICE_GPU_FILTER[@]+"${SERVICE_GPU_FILTER[@]}"}"

metrics() {  # the per-GPU series worth reading (a report)
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$MPORT/metrics', timeout=10).read().decode())" \
    | grep -E '^sortd_(device_pool_bytes|gpu_kernel_duration_seconds_count|transfer_duration_seconds_count|gpu_fallbacks_total)' \
    | grep -v ' 0$' || true
}
kernels() {  # kernels GPU: launches counted on that GPU so far
  metric_sum "$MPORT" "^sortd_gpu_kernel_duration_seconds_count\\{gpu=\"$1\"\\}" || echo "?"
}
no_fallback() {  # no_fallback NAME
  local f
  f=$(metric_sum "$MPORT" '^sortd_gpu_fallbacks_total' || echo "?")
  if [ "$f" = 0 ]; then
    record PASS "$1: no CPU fallback" 0 "sortd_gpu_fallbacks_total 0"
  else
    record FAIL "$1: no CPU fallback" 0 "sortd_gpu_fallbacks_total $f"
  fi
}
# load NAME KEYS CONCURRENCY METHOD SECONDS: one sortctl bench; its rates
# printed (the report); one row: exit 0, requests ok, none failed.
load() {
  local name=$1 log start=$SECONDS rc=0 ok="" errs=""
  log=$W/load.${name//[^A-Za-z0-9_.-]/_}
  timeout -k 10 $(($5 + 90)) "$B/sortctl" bench --target="127.0.0.1:$PORT" "${BIG[@]}" \
    --type=uint32 --keys="$2" --concurrency="$3" --method="$4" --duration="${5}s" > "$log" 2>&1 < /dev/null || rc=$?
  echo "$name: $(grep -E 'throughput|latency' "$log" | tr -s ' ' | tr '\n' ' ' | sed -E 's/payload [^,]*, //' || true)"
  read -r ok errs < <(sed -n 's/^ *requests: \([0-9]*\) ok, \([0-9]*\) errors.*/\1 \2/p' "$log" | tail -1) || true
  if [ "$rc" != 0 ]; then
    record FAIL "$name" $((SECONDS - start)) "sortctl bench exit $rc: $(tail -2 "$log" | tr '\n' ' ')"
  elif [ -z "$ok" ] || [ "$ok" = 0 ] || [ "$errs" != 0 ]; then
    record FAIL "$name" $((SECONDS - start)) "${ok:-?} requests ok, ${errs:-?} failed: $(grep -m1 'requests:' "$log" || true)"
  else
    record PASS "$name" $((SECONDS - start)) "$ok requests ok, 0 failed"
  fi
}

for mode in two one; do
  cmd=("$B/sortd")
  [ "$mode" = one ] && cmd=(env CUDA_VISIBLE_DEVICES=0 "$B/sortd")
  start_sortd "$mode" "$W/sortd_$mode.log" "${cmd[@]}" "${BIG[@]}" --shared_memory=system
  pid=$SERVER_PID
  start=$SECONDS
  if ! wait_serving "$mode" "$pid" 120; then
    record FAIL "$mode: sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL: $(tail -3 "$W/sortd_$mode.log" | tr '\n' ' ')"
    stop_sortd "$mode sortd" "$pid" 60
    continue
  fi
  record PASS "$mode: sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL"
  echo "== $mode: $(head -1 "$W/sortd_$mode.log")"
  load "$mode: 64 MiB x 32 clients" 16777216 32 sort "$SECONDS_BIG"
  metrics | sed "s/^/$mode: /"
  # Both GPUs take the unary load; CUDA_VISIBLE_DEVICES=0 leaves only GPU 0.
  k0=$(kernels 0) k1=$(kernels 1)
  if [ "$mode" = two ]; then
    if [ "$k0" != 0 ] && [ "$k0" != "?" ] && [ "$k1" != 0 ] && [ "$k1" != "?" ]; then
      record PASS "two: both GPUs launched kernels" 0 "GPU 0: $k0, GPU 1: $k1 launches"
    else
      record FAIL "two: both GPUs launched kernels" 0 "GPU 0: $k0, GPU 1: $k1 launches"
    fi
  elif [ "$k0" != 0 ] && [ "$k0" != "?" ] && [ "$k1" = 0 ]; then
    record PASS "one: only GPU 0 launched kernels" 0 "GPU 0: $k0, GPU 1: $k1 launches"
  else
    record FAIL "one: only GPU 0 launched kernels" 0 "GPU 0: $k0, GPU 1: $k1 launches"
  fi
  load "$mode: 1024 keys SortStream x 8" 1024 8 stream 10
  # Sort sessions (parallel raw parts, issue #17): 8 clients at once, each
  # 4 sorts of 256 MiB over 4 connections; aggregate GB/s of keys sorted.
  # Each client checks its results (sorted, checksum, pairs; WRONG and exit
  # 1 otherwise).
  if [ -x "$B/sortd_transfer_bench" ]; then
    start=$SECONDS t0=$(date +%s.%N) clients=() failed=0
    for c in $(seq 8); do
      timeout -k 10 300 "$B/sortd_transfer_bench" --target="127.0.0.1:$PORT" --sizes_mib=256 --connections=4 \
        --repeat=4 --transfer=false > "$W/sessions_${mode}_$c.tsv" 2>&1 < /dev/null &
      clients+=($!)
    done
    for p in "${clients[@]}"; do wait "$p" || failed=$((failed + 1)); done
    t1=$(date +%s.%N)
    wrong=$(cat "$W"/sessions_"${mode}"_*.tsv | grep -c WRONG || true)
    echo "$mode: sessions 8 clients x 4 x 256 MiB: $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f s, %.2f GB/s of keys", b - a, 8 * 4 * 268435456 / (b - a) / 1e9}')"
    if [ "$failed" = 0 ] && [ "$wrong" = 0 ]; then
      record PASS "$mode: 8 sort-session clients" $((SECONDS - start)) "all exit 0, no WRONG result"
    else
      record FAIL "$mode: 8 sort-session clients" $((SECONDS - start)) "$failed clients exited nonzero, $wrong WRONG results ($W/sessions_${mode}_*.tsv)"
    fi
  else
    record FAIL "$mode: 8 sort-session clients" 0 "$B/sortd_transfer_bench: not there (bundle)"
  fi
  metrics | grep kernel | sed "s/^/$mode after sessions: /" || true
  # System regions (issue #18): 8 clients, 256 MiB of keys each, sorting at
  # once, 5 rounds; the keys move by DMA from the pinned region, no gRPC
  # payload. sortd_shm_bench exits 1 on a result not sorted or not a
  # permutation.
  if [ -x "$B/sortd_shm_bench" ]; then
    start=$SECONDS rc=0
    timeout -k 10 120 "$B/sortd_shm_bench" --target="127.0.0.1:$PORT" --clients="${REGION_CLIENTS:-8}" --log2_keys=26 \
      --repeat=5 > "$W/regions_$mode.log" 2>&1 < /dev/null || rc=$?
    grep -E '^\||concurrent|clients' "$W/regions_$mode.log" | sed "s/^/$mode regions: /" || true
    if [ "$rc" = 0 ]; then
      record PASS "$mode: region clients (sortd_shm_bench)" $((SECONDS - start)) "exit 0: every result sorted and a permutation"
    else
      record FAIL "$mode: region clients (sortd_shm_bench)" $((SECONDS - start)) "exit $rc: $(tail -2 "$W/regions_$mode.log" | tr '\n' ' ')"
    fi
    metrics | grep kernel | sed "s/^/$mode after regions: /" || true
  else
    record FAIL "$mode: region clients (sortd_shm_bench)" 0 "$B/sortd_shm_bench: not there (bundle)"
  fi
  no_fallback "$mode"
  stop_sortd "$mode sortd" "$pid" 60
done

# Larger than one GPU's pool (256 MiB), smaller than both: 100 M u32 keys
# with indices, many equal (stability shows).
POOL_KEYS=${POOL_KEYS:-100000000}
python3 "$VERIFY" gen --type uint32 --count "$POOL_KEYS" --seed 3 --out "$W/big.npy"
start_sortd pool "$W/sortd_pool.log" "$B/sortd" "${BIG[@]}" --gpu_pool_bytes=268435456
pid=$SERVER_PID
start=$SECONDS
if wait_serving pool "$pid" 120; then
  read_thresholds "$W/sortd_pool.log"
  record PASS "pool: sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL"
  SORT_TIMEOUT=300 sort_and_verify "pool: $POOL_KEYS u32 indices over one pool" "$PORT" "$(expected_engine "$POOL_KEYS" idx)" asc \
    "$W/big.npy" "$W/big_out.npy" "$W/big_idx.bin" "${BIG[@]}"
  metrics | sed "s/^/pool: /"
  no_fallback pool
else
  record FAIL "pool: sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL: $(tail -3 "$W/sortd_pool.log" | tr '\n' ' ')"
fi
stop_sortd "pool sortd" "$pid" 60
rm -f "$W/big.npy" "$W/big_out.npy" "$W/big_idx.bin"
if [ "${SANITIZE:-1}" = 1 ]; then
  gtest_check "memcheck worker (both GPUs visible)" 200 memcheck "$B/sortd_gpu_worker_test" \
    --gtest_filter='GpuWorker.ConcurrentJobs*:GpuWorker.JobsThatFit*:GpuWorkerTest/0.*'
fi
finish
