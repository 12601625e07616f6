#!/usr/bin/env bash
# A/B of a GPU core on the GPU host: builds this tree and a base tree
# (BASE, default .device/base: e.g. `git archive <commit> | tar -x -C
# .device/base`, carried), then runs each named bench case from both,
# alternating, ROUNDS times (table rows: base first, then this tree).
# BENCH=radix (default: sortd_gpu_radix_bench at 2^LOG2 keys) or
# segmented (sortd_gpu_segmented_bench; a case is "name segments x len");
# ARGS: more bench flags for both trees (e.g. --no_bounds).
#   CASES="u32 sorted in place;u32 keys" LOG2=26 ROUNDS=2 scripts/gpu-host/radix_ab.sh
#   BENCH=segmented ARGS=--no_bounds CASES="u32 keys 65536 x 64" scripts/gpu-host/radix_ab.sh
set -u
export PATH=/usr/local/cuda/bin:$PATH
BASE=${BASE:-.device/base}
LOG2=${LOG2:-26}
ROUNDS=${ROUNDS:-2}
REPEATS=${REPEATS:-9}
BENCH=${BENCH:-radix}
read -r -a extra <<< "${ARGS:-}"
case "$BENCH" in
  radix) target=sortd_gpu_radix_bench; extra+=(--min_log2="$LOG2" --max_log2="$LOG2") ;;
  segmented) target=sortd_gpu_segmented_bench ;;
  *) echo "radix_ab: BENCH must be radix or segmented" >&2; exit 2 ;;
esac
# TARGETS: more targets to build in this tree (e.g. the radix test).
build() {
  local log="/tmp/ab-build-$2.log"
  cmake -S "$1" -B "$1/build-gpu" -DSORTD_BUILD_SERVER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release > "$log" 2>&1 &&
    cmake --build "$1/build-gpu" -j8 --target "$target" $3 >> "$log" 2>&1 ||
    { grep -E "error" "$log" | head -20; return 1; }
}
# Both trees at once: each bench is one large translation unit.
build "$BASE" base "" & base_build=$!
build . new "${TARGETS:-}" || exit 1
wait "$base_build" || exit 1
IFS=';' read -r -a cases <<< "${CASES:-u32 keys}"
for round in $(seq "$ROUNDS"); do
  for c in "${cases[@]}"; do
    for tree in "$BASE" .; do
      printf '%-6s r%s ' "$([ "$tree" = . ] && echo new || echo base)" "$round"
      "$tree/build-gpu/bench/$target" --only="$c" "${extra[@]}" --repeats="$REPEATS" 2>/dev/null | tail -1
    done
  done
done
