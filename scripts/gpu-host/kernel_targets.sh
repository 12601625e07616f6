#!/usr/bin/env bash
# Issue #19's kernel targets on this host's GPU, in one call: the radix
# bench (2^16..2^28, presorted, ties), the library call on few keys, the
# merge sort and the segmented sort (with and without bounds) against CUB,
# then kernel_targets.py's table of every target, met or not (exit 1 when
# one is not, or when any output differs from CUB's). The targets' other
# condition, compute-sanitizer clean, is sanitize.sh's (TARGETS="radix
# merge segmented", its own bundle: the test binaries and these benches
# together are over the carry limit).
#
# Bundle, on the dev VM (binaries built there; ~43 MB as xz):
#   rm -rf .device/targets && ../shared/tools/bundle-libs .device/targets \
#     build/bench/sortd_gpu_radix_bench build/bench/sortd_gpu_merge_bench \
#     build/bench/sortd_gpu_segmented_bench
#   strip .device/targets/bin/* && tar -C .device -cJf .device/targets.tar.xz targets
# and carry .device/targets.tar.xz.
# Environment: REPEATS (5), MAX_LOG2 (28), OUT_DIR ($OUT or
# /tmp/kernel_targets): the benches' five outputs and targets.md are kept
# there (six files: the device tool returns at most eight).
set -u
export PATH=/usr/local/cuda/bin:$PATH
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
if [ -f .device/targets.tar.xz ] && [ ! -d .device/targets ]; then tar -C .device -xJf .device/targets.tar.xz; fi
B=${B:-$ROOT/.device/targets/bin}
export LD_LIBRARY_PATH=$ROOT/.device/targets/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
D=${OUT_DIR:-${OUT:-/tmp/kernel_targets}}
E=$(mktemp -d)  # the benches' stderr (progress lines): not kept, $OUT returns at most 8 files
mkdir -p "$D"
REPEATS=${REPEATS:-5}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader || true
T0=$SECONDS
status=0
run() {  # run NAME TIMEOUT COMMAND...: stdout to $D/NAME.txt
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  if ! timeout "$limit" "$@" > "$D/$name.txt" 2> "$E/$name.err"; then
    echo "$name: exit status $? (tail of stderr follows)"
    tail -3 "$E/$name.err"
    status=1
  fi
  echo "$name: $((SECONDS - start)) s"
}
run radix 300 "$B/sortd_gpu_radix_bench" --max_log2="${MAX_LOG2:-28}" --repeats="$REPEATS"
run small 120 "$B/sortd_gpu_radix_bench" --small
run merge 200 "$B/sortd_gpu_merge_bench" --strings=0 --max_log2=26 --repeats=7
run segmented 120 "$B/sortd_gpu_segmented_bench" --repeats=7
run segmented_no_bounds 120 "$B/sortd_gpu_segmented_bench" --repeats=7 --no_bounds
echo "benches done at t=$((SECONDS - T0)) s"
python3 "$ROOT/scripts/gpu-host/kernel_targets.py" --radix "$D/radix.txt" --small "$D/small.txt" \
  --merge "$D/merge.txt" --segmented "$D/segmented.txt" --segmented_no_bounds "$D/segmented_no_bounds.txt" \
  | tee "$D/targets.md"
[ "${PIPESTATUS[0]}" = 0 ] || status=1
exit $status
