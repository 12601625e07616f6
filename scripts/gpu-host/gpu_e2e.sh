#!/usr/bin/env bash
# Device run for the GPU engine, able to fail: core tests (radix, worker;
# bundled, else a core-only build here), the pinned host-memory pool tests
# (bundled sortd_core_test), memcheck/racecheck on the radix
# sanitizer case and memcheck on worker cases, the bundled service test;
# the real sortd (GPU) sent sortctl sorts of every numeric type, both
# orders, with indices at each of $SIZES and keys only at $N, each checked
# exactly by verify_sort.py (permutation, stable contract order incl.
# -0.0/+0.0 and NaNs, bit-exact keys) and for the engine that ran it; no
# GPU fallback counted; sortd's exit status after SIGTERM must be 0. Then
# (BENCH=1) the Sort RPC bench GPU vs CPU engine at 16/256 MiB. Every
# check is one row of the summary table, printed last; the exit status is 1
# when any check did not pass.
#
# Bundle (.device/bundle, or .device/bundle.tar.xz unpacked here; see
# README.md): sortd sortctl sortd_gpu_service_test sortd_core_test, plus
# sortd_gpu_radix_test sortd_gpu_worker_test (else they are built here).
# Environment: BENCH=0 skips the bench (BENCH_KEYS="4194304 67108864",
# BENCH_SECONDS=5); BUILD=0 forbids the core-only build
# (never attempted without nvidia-smi); SANITIZE=0 the sanitizer runs
# (sanitize.sh does more); TESTS=0 all gtest binaries; SERVICE=0 the service
# test; N=2000000 keys; SIZES="$N 50000" (50000 with indices: gpu_merge);
# W=/tmp/sortd_gpu_e2e work directory.
set -euo pipefail
CHECKS_NAME=gpu_e2e.sh
W=${W:-/tmp/sortd_gpu_e2e}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

N=${N:-2000000}
SIZES=${SIZES:-"$N 50000"}
NUMERIC_TYPES="uint32 int32 float32 uint64 int64 float64"
T0=$SECONDS

if [ "${TESTS:-1}" = 1 ]; then
  # Core tests: bundled (built on the dev VM) when the bundle has them, else
  # a core-only build here.
  if [ -x "$B/sortd_gpu_radix_test" ] && [ -x "$B/sortd_gpu_worker_test" ]; then
    T=$B
  elif ! nvidia-smi -L > /dev/null 2>&1 || [ "${BUILD:-1}" = 0 ]; then
    # Never build on a machine without a GPU (the dev VM): that is what the
    # bundle is for.
    T=$B
    record FAIL "core tests in the bundle" 0 "sortd_gpu_radix_test/sortd_gpu_worker_test not in $B, and no GPU here to build for (or BUILD=0)"
  else
    T=$ROOT/build-gpu/tests/gpu
    start=$SECONDS
    if ! cmake -S . -B build-gpu -DSORTD_BUILD_SERVER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > "$W/cfg.log" 2>&1; then
      record FAIL "core-only build (configure)" $((SECONDS - start)) "$(tail -3 "$W/cfg.log" | tr '\n' ' ')"
    elif ! cmake --build build-gpu -j16 --target sortd_gpu_radix_test sortd_gpu_worker_test > "$W/build.log" 2>&1; then
      record FAIL "core-only build" $((SECONDS - start)) "$(grep -m3 -E 'error' "$W/build.log" | tr '\n' ' ')"
    else
      record PASS "core-only build" $((SECONDS - start)) "sortd_gpu_radix_test sortd_gpu_worker_test"
    fi
  fi
  # The radix tests take 246-258 s on the H200 (2026-11-28): room for slower GPUs.
  gtest_check "radix tests" 480 - "$T/sortd_gpu_radix_test"
  gtest_check "worker tests" 300 - "$T/sortd_gpu_worker_test"
  # The pinned pool's GPU test skips without a GPU, which fails here; its
  # no-GPU counterpart skips where a GPU is, so it is left out. sortd_core_test
  # needs the CPU engine's libraries (abseil, Highway): bundled only.
  gtest_check "host memory pool tests (bundled)" 120 - "$B/sortd_core_test" \
    --gtest_filter='HostMemoryPool.*-HostMemoryPool.WithoutAGpu*'
  if [ "${SANITIZE:-1}" = 1 ]; then
    gtest_check "memcheck radix" 240 memcheck "$T/sortd_gpu_radix_test" --gtest_filter='RadixSortSanitizerTest.*'
    gtest_check "racecheck radix" 240 racecheck "$T/sortd_gpu_radix_test" --gtest_filter='RadixSortSanitizerTest.*'
    gtest_check "memcheck worker" 240 memcheck "$T/sortd_gpu_worker_test" --gtest_filter='GpuWorker.JobLarger*:GpuWorkerTest/0.*'
  fi
  if [ "${SERVICE:-1}" = 1 ]; then
    gtest_check "service tests (bundled)" 300 - "$B/sortd_gpu_service_test" \
    "${SERVICE_GPU_FILTER[@]+"${SERVICE_GPU_FILTER[@]}"}"
  fi
fi

echo "== e2e: real sortd + sortctl"
for t in $NUMERIC_TYPES; do
  for n in $SIZES; do
    python3 "$VERIFY" gen --type "$t" --count "$n" --seed 7 --out "$W/in_${t}_$n.npy"
  done
done
BIG=(--max_message_bytes=1000000000)
start_sortd gpu "$W/gpu_sortd.log" "$B/sortd" "${BIG[@]}"
GPU_PID=$SERVER_PID
CPU_PID=""
if [ "${BENCH:-1}" = 1 ]; then
  start_sortd cpu "$W/cpu_sortd.log" "$B/sortd" --engine=cpu "${BIG[@]}"
  CPU_PID=$SERVER_PID
fi
start=$SECONDS
if wait_serving gpu "$GPU_PID" 120; then
  GPU_PORT=$PORT GPU_MPORT=$MPORT
  read_thresholds "$W/gpu_sortd.log"
  record PASS "gpu sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL; $(head -1 "$W/gpu_sortd.log" | cut -c1-120)"
  for t in $NUMERIC_TYPES; do
    for n in $SIZES; do
      for order in asc desc; do
        sort_and_verify "gpu $t n=$n $order indices" "$GPU_PORT" "$(expected_engine "$n" idx)" "$order" \
          "$W/in_${t}_$n.npy" "$W/out.npy" "$W/idx.bin" "${BIG[@]}"
      done
    done
    n=${SIZES%% *}
    for order in asc desc; do
      sort_and_verify "gpu $t n=$n $order keys only" "$GPU_PORT" "$(expected_engine "$n" keys)" "$order" \
        "$W/in_${t}_$n.npy" "$W/out.npy" - "${BIG[@]}"
    done
  done
  echo "== metrics (gpu server)"
  python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$GPU_MPORT/metrics', timeout=10).read().decode())" > "$W/metrics.txt" || true
  grep -E '^sortd_(gpu_kernel_duration_seconds_(count|sum)|transfer_duration_seconds_(count|sum)|device_pool_bytes|gpu_fallbacks_total|keys_sorted_total)' "$W/metrics.txt" | head -20 || true
  fallbacks=$(metric_sum "$GPU_MPORT" '^sortd_gpu_fallbacks_total' || echo "?")
  if [ "$fallbacks" = 0 ]; then
    record PASS "gpu sortd: no CPU fallback" 0 "sortd_gpu_fallbacks_total 0"
  else
    record FAIL "gpu sortd: no CPU fallback" 0 "sortd_gpu_fallbacks_total $fallbacks"
  fi
else
  record FAIL "gpu sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL: $(tail -3 "$W/gpu_sortd.log" | tr '\n' ' ')"
fi

if [ "${BENCH:-1}" = 1 ]; then
  echo "== service bench: Sort RPC, uint32, ${BENCH_SECONDS:-5} s each"
  bench_failed=() bench_runs=0
  if wait_serving cpu "$CPU_PID" 60; then
    CPU_PORT=$PORT
    for keys in ${BENCH_KEYS:-4194304 67108864}; do
      for conc in 1 4; do
        for eng in gpu-auto cpu; do
          port=$([ "$eng" = cpu ] && echo "$CPU_PORT" || echo "${GPU_PORT:-0}")
          rc=0
          timeout -k 10 60 "$B/sortctl" bench --target="127.0.0.1:$port" "${BIG[@]}" --type=uint32 \
            --keys="$keys" --concurrency=$conc --duration="${BENCH_SECONDS:-5}s" > "$W/bench.txt" 2>&1 || rc=$?
          bench_runs=$((bench_runs + 1))
          [ "$rc" = 0 ] || bench_failed+=("$keys/$conc/$eng: exit $rc")
          echo "$keys keys ($((keys * 4 / 1048576)) MiB) conc=$conc engine=$eng | $(grep -E 'throughput|latency|requests:' "$W/bench.txt" | tr -s ' ' | tr '\n' ' ')" | tee -a "$W/bench_table.txt"
        done
      done
    done
  else
    bench_failed+=("cpu sortd: $WAIT_DETAIL")
  fi
  if [ ${#bench_failed[@]} = 0 ]; then
    record PASS "bench: sortctl bench runs" 0 "$bench_runs ran; table above and in $W/bench_table.txt"
  else
    record FAIL "bench: sortctl bench runs" 0 "${bench_failed[*]}"
  fi
fi

stop_sortd "gpu sortd" "$GPU_PID" 60
[ -n "$CPU_PID" ] && stop_sortd "cpu sortd" "$CPU_PID" 60
echo "== gpu_e2e.sh took $((SECONDS - T0)) s; logs in $W"
finish
