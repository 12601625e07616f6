#!/usr/bin/env bash
# Device run, able to fail: the real sortd with byte-string keys on the GPU
# merge sort, through sortctl (unary Sort and, with a small client message
# limit, SortChunked), both orders, with indices. Each answer is checked
# exactly by verify_sort.py (permutation, the stable unsigned-lexicographic
# order in both directions, keys = input[indices]) and for its engine, on
# the GPU sortd and on a CPU-engine sortd, and the two answers must be
# byte-identical; no GPU fallback counted; both servers must exit 0 after
# SIGTERM. Then the bundled GPU service tests. Every check is one row of
# the summary table, printed last; the exit status is 1 when any check did
# not pass.
# Needs .device/bundle with sortd, sortctl, sortd_gpu_service_test
# (../shared/tools/bundle-libs; carry .device or a tarball of it), python3
# and numpy.
#   N=200000 strings (default); SERVICE=0 skips the service tests;
#   W=/tmp/sortd_bytes_e2e work directory.
set -euo pipefail
CHECKS_NAME=bytes_e2e.sh
W=${W:-/tmp/sortd_bytes_e2e}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

N=${N:-200000}
T0=$SECONDS
BIG=(--max_message_bytes=1000000000)
start_sortd gpu "$W/gpu_sortd.log" "$B/sortd" "${BIG[@]}"
GPU_PID=$SERVER_PID
start_sortd cpu "$W/cpu_sortd.log" "$B/sortd" --engine=cpu "${BIG[@]}"
CPU_PID=$SERVER_PID
# Lines of 0..120 bytes: shared prefixes, duplicates, 0x00, 0x0d, bytes
# >= 0x80 (no 0x0a: one key per line).
python3 "$VERIFY" gen --type bytes --count "$N" --seed 5 --out "$W/in.txt"

start=$SECONDS
ok=1
if wait_serving gpu "$GPU_PID" 120; then
  GPU_PORT=$PORT GPU_MPORT=$MPORT
  record PASS "gpu sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL; $(head -1 "$W/gpu_sortd.log" | cut -c1-100)"
else
  record FAIL "gpu sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL: $(tail -3 "$W/gpu_sortd.log" | tr '\n' ' ')"
  ok=0
fi
if wait_serving cpu "$CPU_PID" 60; then
  CPU_PORT=$PORT
  record PASS "cpu sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL"
else
  record FAIL "cpu sortd SERVING" $((SECONDS - start)) "$WAIT_DETAIL: $(tail -3 "$W/cpu_sortd.log" | tr '\n' ' ')"
  ok=0
fi

if [ "$ok" = 1 ]; then
  for order in asc desc; do
    for mode in unary chunked; do
      limit=1000000000
      [ "$mode" = chunked ] && limit=8388608  # >= the server's 4 MiB response chunks
      for srv in gpu cpu; do
        if [ "$srv" = gpu ]; then port=$GPU_PORT expect=$(expected_engine "$N" bytes)
        else port=$CPU_PORT expect=ENGINE_CPU; fi
        sort_and_verify "$srv bytes $order $mode" "$port" "$expect" "$order" "$W/in.txt" \
          "$W/out_$srv.txt" "$W/idx_$srv.bin" --max_message_bytes=$limit --type=bytes --format=text
      done
      if [ -f "$W/out_gpu.txt" ] && cmp -s "$W/out_gpu.txt" "$W/out_cpu.txt" \
          && [ -f "$W/idx_gpu.bin" ] && cmp -s "$W/idx_gpu.bin" "$W/idx_cpu.bin"; then
        record PASS "gpu = cpu sortd, bytes $order $mode" 0 "keys and indices byte-identical"
      else
        record FAIL "gpu = cpu sortd, bytes $order $mode" 0 "keys or indices DIFFERENT (or missing)"
      fi
    done
  done
  echo "== metrics (gpu server)"
  python3 -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen('http://127.0.0.1:$GPU_MPORT/metrics', timeout=10).read().decode())" > "$W/metrics.txt" || true
  grep -E '^sortd_(keys_sorted_total|gpu_fallbacks_total|requests_total\{.*bytes)' "$W/metrics.txt" | head -12 || true
  fallbacks=$(metric_sum "$GPU_MPORT" '^sortd_gpu_fallbacks_total' || echo "?")
  if [ "$fallbacks" = 0 ]; then
    record PASS "gpu sortd: no CPU fallback" 0 "sortd_gpu_fallbacks_total 0"
  else
    record FAIL "gpu sortd: no CPU fallback" 0 "sortd_gpu_fallbacks_total $fallbacks"
  fi
fi
stop_sortd "gpu sortd" "$GPU_PID" 60
stop_sortd "cpu sortd" "$CPU_PID" 60

if [ "${SERVICE:-1}" = 1 ]; then
  gtest_check "service tests (bundled)" 300 - "$B/sortd_gpu_service_test" \
    "${SERVICE_GPU_FILTER[@]+"${SERVICE_GPU_FILTER[@]}"}"
fi
echo "== bytes_e2e.sh took $((SECONDS - T0)) s; logs in $W"
finish
