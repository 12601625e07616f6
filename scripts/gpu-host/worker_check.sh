#!/usr/bin/env bash
# The GPU worker and its transfer pipeline on the GPU host (#17 item 5),
# able to fail: the transfer tests (extent lists of every memory kind), the
# worker's job kinds, arriving sorts, the GPU service tests, then
# compute-sanitizer memcheck over the transfer, worker and arriving tests.
# Every check is one row of the summary table printed last (checks.sh); the
# exit status is 1 when any row did not pass: a binary missing, a test
# failing or skipping (no GPU), a nonzero exit, a memcheck error, or
# compute-sanitizer missing while SANITIZE=1.
# Carry .device/xfer.tar.xz holding xfer/{bin/{sortd_gpu_transfer_test,
# sortd_gpu_worker_test,sortd_gpu_arriving_test,sortd_gpu_service_test,...},lib}.
#   SANITIZE=0 leaves out memcheck; MEMCHECK_FILTER (*) for the worker
#   tests under memcheck; W=/tmp/sortd_worker_check.
set -euo pipefail
CHECKS_NAME=worker_check.sh
W=${W:-/tmp/sortd_worker_check}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"
# This script's own bundle (not checks.sh's .device/bundle), its libraries first.
[ -d .device/xfer ] || tar -xJf .device/xfer.tar.xz -C .device
B=$ROOT/.device/xfer/bin
export LD_LIBRARY_PATH=$ROOT/.device/xfer/lib:$LD_LIBRARY_PATH

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
echo "cores: $(nproc); commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
gtest_check "transfer tests" 500 - "$B/sortd_gpu_transfer_test"
gtest_check "worker tests" 500 - "$B/sortd_gpu_worker_test"
gtest_check "arriving tests" 500 - "$B/sortd_gpu_arriving_test"
# The two-GPU tests skip on one GPU (a skip fails gtest_check): left out there.
gtest_check "gpu service tests" 500 - "$B/sortd_gpu_service_test" \
  "${SERVICE_GPU_FILTER[@]+"${SERVICE_GPU_FILTER[@]}"}"
if [ "${SANITIZE:-1}" = 1 ]; then
  if command -v compute-sanitizer > /dev/null; then
    gtest_check "memcheck transfer" 500 memcheck "$B/sortd_gpu_transfer_test"
    gtest_check "memcheck arriving" 500 memcheck "$B/sortd_gpu_arriving_test"
    gtest_check "memcheck worker" 500 memcheck "$B/sortd_gpu_worker_test" --gtest_filter="${MEMCHECK_FILTER:-*}"
  else
    # Not silently left out: asked for and not run is a failure.
    record FAIL "compute-sanitizer on PATH" 0 "not found (PATH=$PATH); SANITIZE=0 to leave memcheck out"
  fi
fi
finish
