#!/usr/bin/env bash
# The GPU worker and its transfer pipeline on the GPU host (#17 item 5): the
# transfer tests (extent lists of every memory kind), the worker's job kinds,
# arriving sorts, the GPU service tests, then compute-sanitizer memcheck over
# the transfer, worker and arriving tests. Prints a short table last.
# Carry .device/xfer.tar.xz holding xfer/{bin/{sortd_gpu_transfer_test,
# sortd_gpu_worker_test,sortd_gpu_arriving_test,sortd_gpu_service_test,...},lib}.
set -uo pipefail
[ -d .device/xfer ] || tar -xJf .device/xfer.tar.xz -C .device
B=$PWD/.device/xfer/bin
export LD_LIBRARY_PATH=$PWD/.device/xfer/lib
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
echo "cores: $(nproc); commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
declare -a rows
run() {  # run NAME COMMAND...: records passed/failed counts from gtest's summary
  local name=$1; shift
  local log; log=$(mktemp)
  timeout 500 "$@" > "$log" 2>&1; local rc=$?
  local passed; passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$log" | tail -1)
  local errors; errors=$(grep -oP 'ERROR SUMMARY: \K[0-9]+' "$log" | tail -1)
  grep -E '^\[  FAILED  \]|FAILED TEST|ERROR SUMMARY' "$log" | head -12
  rows+=("| $name | rc $rc | passed ${passed:-?} | sanitizer errors ${errors:--} |")
}
run transfer "$B/sortd_gpu_transfer_test"
run worker "$B/sortd_gpu_worker_test"
run arriving "$B/sortd_gpu_arriving_test"
run gpu-service "$B/sortd_gpu_service_test"
if command -v compute-sanitizer > /dev/null; then
  CS="compute-sanitizer --tool memcheck --error-exitcode 1"
  run memcheck-transfer $CS "$B/sortd_gpu_transfer_test"
  run memcheck-arriving $CS "$B/sortd_gpu_arriving_test"
  run memcheck-worker $CS "$B/sortd_gpu_worker_test" --gtest_filter="${MEMCHECK_FILTER:-*}"
fi
echo
echo "| check | exit | tests | memcheck |"
echo "| --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
