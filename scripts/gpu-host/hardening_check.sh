#!/usr/bin/env bash
# One device call for issue #16 on a GPU host: compute-sanitizer over the GPU
# paths (sanitize.sh), the GPU tests and real-sortd checks (gpu_e2e.sh,
# bytes_e2e.sh; no bench), and the GPU branches of the dispatcher and
# Start() tests. Carry .device/bundle.tar.xz (README.md: the bundle list,
# plus sortd_core_test and sortd_service_test). Summaries print last; logs
# go to $OUT when set. SANITIZE_S bounds sanitize.sh (default 290 s).
set -u
ROOT=$PWD
if [ -f .device/bundle.tar.xz ] && [ ! -d .device/bundle ]; then tar -C .device -xJf .device/bundle.tar.xz; fi
export LD_LIBRARY_PATH=$ROOT/.device/bundle/lib
B=$ROOT/.device/bundle/bin
BUDGET_S=${SANITIZE_S:-290} timeout -k 10 $(( ${SANITIZE_S:-290} + 20 )) bash scripts/gpu-host/sanitize.sh > /tmp/san.out 2>&1; s=$?
SANITIZE=0 BENCH=0 timeout -k 10 200 bash scripts/gpu-host/gpu_e2e.sh > /tmp/e2e.out 2>&1; e=$?
SERVICE=0 timeout -k 10 70 bash scripts/gpu-host/bytes_e2e.sh > /tmp/bytes.out 2>&1; b=$?
timeout 120 $B/sortd_core_test --gtest_filter='Dispatcher*:ParseEngine*' > /tmp/branches.out 2>&1; c=$?
timeout 120 $B/sortd_service_test --gtest_filter='StartTest*' >> /tmp/branches.out 2>&1; t=$?
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  tar -C /tmp -czf "$OUT/gpu_host_logs.tgz" --exclude='*.npy' --exclude='*.bin' --exclude='in*.txt' \
    --exclude='out*.txt' san.out e2e.out bytes.out branches.out sortd_sanitize sortd_gpu_e2e sortd_bytes_e2e 2>/dev/null
fi
echo "== GPU branches of the dispatcher and Start() tests"
grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[       OK|Failure' /tmp/branches.out | head -20
for d in sanitize gpu_e2e bytes_e2e; do
  cat /tmp/sortd_$d/summary.txt 2>/dev/null || echo "== $d: no summary"
done
echo "exit status: sanitize=$s gpu_e2e=$e bytes_e2e=$b core_branches=$c start_branches=$t"
[ $s = 0 ] && [ $e = 0 ] && [ $b = 0 ] && [ $c = 0 ] && [ $t = 0 ]
