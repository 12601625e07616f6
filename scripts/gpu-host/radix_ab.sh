#!/usr/bin/env bash
# A/B of the radix core on the GPU host: builds this tree and a base tree
# (BASE, default .device/base: e.g. `git archive <commit> | tar -x -C
# .device/base`, carried), then runs each named bench case from both,
# alternating, ROUNDS times (table rows: base first, then this tree).
#   CASES="u32 sorted in place;u32 keys" LOG2=26 ROUNDS=2 scripts/gpu-host/radix_ab.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH
BASE=${BASE:-.device/base}
LOG2=${LOG2:-26}
ROUNDS=${ROUNDS:-2}
REPEATS=${REPEATS:-9}
build() {
  cmake -S "$1" -B "$1/build-gpu" -DSORTD_BUILD_SERVER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release > /tmp/ab-cfg.log 2>&1 &&
    cmake --build "$1/build-gpu" -j16 --target sortd_gpu_radix_bench > /tmp/ab-build.log 2>&1 ||
    { grep -E "error" /tmp/ab-build.log | head -20; exit 1; }
}
build "$BASE"
build .
IFS=';' read -r -a cases <<< "${CASES:-u32 keys}"
for round in $(seq "$ROUNDS"); do
  for c in "${cases[@]}"; do
    for tree in "$BASE" .; do
      printf '%-6s r%s ' "$([ "$tree" = . ] && echo new || echo base)" "$round"
      "$tree/build-gpu/bench/sortd_gpu_radix_bench" --only="$c" --min_log2="$LOG2" --max_log2="$LOG2" \
        --repeats="$REPEATS" 2>/dev/null | tail -1
    done
  done
done
