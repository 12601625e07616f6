#!/usr/bin/env bash
# compute-sanitizer over the GPU paths, from binaries bundled on the dev VM
# (no build on the GPU host). Each tool (memcheck, racecheck, synccheck;
# initcheck on the worker) over:
#   radix      sortd_gpu_radix_test      $RADIX_FILTER
#   merge      sortd_gpu_merge_test      $MERGE_FILTER
#   segmented  sortd_gpu_segmented_test  $SEGMENTED_FILTER
#   worker     sortd_gpu_worker_test     $WORKER_FILTER (memcheck), else $WORKER_SMALL_FILTER
# and, memcheck only, the service path:
#   service    sortd_gpu_service_test    $SERVICE_FILTER (in-process servers, GPU vs CPU engine)
#   sortd      the real sortd running under `compute-sanitizer --tool memcheck`
#              (startup waited for by `sortctl health`), sent sortctl sorts of
#              every numeric type ($SORTD_CASES: batched/segmented, merge
#              argsort, radix with and without indices, both orders) and
#              byte strings both orders, each verified exactly with
#              verify_sort.py (and the engine that ran it), then SIGTERM:
#              sortd must exit 0 and the sanitizer report 0 errors.
# A check passes when the gtest binary ran >= 1 test, none failed or
# skipped, it exited 0, and the tool's summary says 0 errors (racecheck: 0
# hazards, 0 errors, 0 warnings). The summary table is printed last; the
# exit status is 1 when any check did not pass (NOTRUN included).
#
# Bundle (.device/bundle, or .device/bundle.tar.xz unpacked here), made on
# the dev VM with ../shared/tools/bundle-libs .device/bundle
#   build/tests/gpu/sortd_gpu_radix_test build/tests/gpu/sortd_gpu_merge_test
#   build/tests/gpu/sortd_gpu_segmented_test build/tests/gpu/sortd_gpu_worker_test
#   build/tests/service/sortd_gpu_service_test build/server/sortd build/client/sortctl
# then strip .device/bundle/bin/* and tar -C .device -cJf .device/bundle.tar.xz bundle
# (over the 64 MiB carry limit otherwise). Needs python3 + numpy and
# compute-sanitizer (/usr/local/cuda/bin) on the host.
#
# Environment:
#   TOOLS="memcheck racecheck synccheck initcheck"  tools to run
#   TARGETS="sortd service worker radix merge segmented"  what to run them on
#   INITCHECK_TARGETS="worker"   JOBS=3 sanitizer runs at once (one GPU)
#   BUDGET_S=450  wall-clock budget: a run gets at most what is left, and a
#                 run that would start with < 45 s left is NOTRUN (a failure)
#   *_FILTER      the gtest filters below; SORTD_CASES "n:asc|desc:idx|keys ..."
#   LEAK_CHECK=1  memcheck --leak-check full on the test binaries
#   W=/tmp/sortd_sanitize  work directory: logs $W/log.<check>, the sanitized
#                 sortd's $W/memcheck-sortd.log, the table $W/summary.txt
set -euo pipefail
CHECKS_NAME=sanitize.sh
W=${W:-/tmp/sortd_sanitize}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

TOOLS=${TOOLS:-memcheck racecheck synccheck initcheck}
TARGETS=${TARGETS:-sortd service worker radix merge segmented}
INITCHECK_TARGETS=${INITCHECK_TARGETS:-worker}
JOBS=${JOBS:-3}
BUDGET_S=${BUDGET_S:-450}
# The sanitizer cases of the kernel tests are small on purpose.
RADIX_FILTER=${RADIX_FILTER:-'RadixSortSanitizerTest.*:RadixSortPassesTest.NarrowKeysSkipPasses'}
MERGE_FILTER=${MERGE_FILTER:-'MergeSortSanitizer.*:ArgsortBytes.PrefixesZeroBytesAndHighBytes:MergeSort.RejectsArgsortWithValues'}
SEGMENTED_FILTER=${SEGMENTED_FILTER:-'SegmentedSortSanitizer.*:SegmentedSort.NoSegmentsAndEmptySegmentsOnly'}
# Worker under memcheck: batches (segmented path), refusals that must leave
# host arrays untouched, byte strings across staging chunks, every chunk
# boundary for u32 keys/indices, the merge argsort and the out-of-pool
# chunked sort + GPU merge for doubles.
WORKER_FILTER=${WORKER_FILTER:-'GpuWorker.BatchOfManyTinyArraysAndEmptyBatch:GpuWorker.BatchLargerThanThePoolIsRefusedUntouched:GpuWorker.JobLargerThanThePoolLeavesHostArraysUntouched:GpuWorker.ByteStringsAcrossStagingChunks:GpuWorker.ByteStringsOverThePoolAreRefusedUntouched:GpuWorkerTest/0.*:GpuWorkerTest/5.ArgsortOnTheMergeSortEveryOrder:GpuWorkerTest/5.LargerThanThePoolIsSortedInChunksAndMergedOnTheGpu'}
# Worker under racecheck/synccheck/initcheck (slower tools): one batch
# across staging chunks, the merge argsort (doubles), a small chunked sort.
WORKER_SMALL_FILTER=${WORKER_SMALL_FILTER:-'GpuWorkerTest/0.BatchOfArraysAcrossChunkBoundariesEveryOrder:GpuWorkerTest/5.ArgsortOnTheMergeSortEveryOrder'}
INITCHECK_WORKER_FILTER=${INITCHECK_WORKER_FILTER:-"$WORKER_SMALL_FILTER:GpuWorker.JobLargerThanThePoolLeavesHostArraysUntouched"}
# Service test under memcheck: u32 and f64 (radix, merge argsort, out of
# the pool, batched), byte strings, routing and CPU fallback.
SERVICE_FILTER=${SERVICE_FILTER:-'GpuServiceTest/0.*:GpuServiceTest/5.*:GpuService.*'}
# sortd under memcheck, per numeric type: n:order:idx|keys (each must run
# on the engine checks.sh's expected_engine names).
SORTD_CASES=${SORTD_CASES:-'3000:asc:idx 3000:desc:idx 50000:desc:idx 1000003:asc:idx 1000003:desc:idx 1000003:desc:keys'}
SORTD_BYTES_N=${SORTD_BYTES_N:-40000}  # >= --gpu_min_bytes_keys: gpu_merge
NUMERIC_TYPES="uint32 int32 float32 uint64 int64 float64"

T0=$SECONDS
SAN=(compute-sanitizer --error-exitcode 86)
LEAK=()
[ "${LEAK_CHECK:-0}" = 1 ] && LEAK=(--leak-check full)

binary_of() {
  case $1 in
    radix) echo sortd_gpu_radix_test ;; merge) echo sortd_gpu_merge_test ;;
    segmented) echo sortd_gpu_segmented_test ;; worker) echo sortd_gpu_worker_test ;;
    service) echo sortd_gpu_service_test ;; sortd) echo sortd ;;
  esac
}

filter_of() {  # TOOL TARGET
  case $2 in
    radix) echo "$RADIX_FILTER" ;; merge) echo "$MERGE_FILTER" ;; segmented) echo "$SEGMENTED_FILTER" ;;
    service) echo "$SERVICE_FILTER" ;;
    worker)
      case $1 in memcheck) echo "$WORKER_FILTER" ;; initcheck) echo "$INITCHECK_WORKER_FILTER" ;;
        *) echo "$WORKER_SMALL_FILTER" ;; esac ;;
  esac
}

timeout_of() {  # TOOL TARGET: the most one run may take
  case $2 in
    sortd) echo 330 ;; service) echo 300 ;; worker) echo 270 ;; *) echo 200 ;;
  esac
}

# One gtest binary under one tool: one row.
gtest_step() {
  local tool=$1 target=$2 t=$3 bin SAN_EXTRA=()
  bin=$(binary_of "$target")
  [ "$tool" = memcheck ] && SAN_EXTRA=("${LEAK[@]+"${LEAK[@]}"}")
  gtest_check "$tool $target ($bin)" "$t" "$tool" "$B/$bin" --gtest_filter="$(filter_of "$tool" "$target")"
}

# The real sortd under memcheck: several rows.
sortd_step() {
  local t=$1 start=$SECONDS name="memcheck sortd" log=$W/memcheck-sortd.log
  local deadline=$((SECONDS + t)) left n order kind ty c sortd_pid bin
  for bin in sortd sortctl; do
    if [ ! -x "$B/$bin" ]; then
      record FAIL "$name" 0 "$B/$bin is not in the bundle"
      return 0
    fi
  done
  start_sortd san "$log" "${SAN[@]}" --tool memcheck "$B/sortd"
  local san_pid=$SERVER_PID
  if wait_serving san "$san_pid" $((t / 2)); then
    record PASS "$name: SERVING under the sanitizer" $((SECONDS - start)) "$WAIT_DETAIL"
    read_thresholds "$log"
    # Every numeric type through each case, then byte strings both orders.
    local cases=() expect in out idx flags cname
    for ty in $NUMERIC_TYPES; do
      for c in $SORTD_CASES; do cases+=("$ty:$c"); done
    done
    cases+=("bytes:$SORTD_BYTES_N:asc:idx" "bytes:$SORTD_BYTES_N:desc:idx")
    for c in "${cases[@]}"; do
      IFS=: read -r ty n order kind <<< "$c"
      cname="$name: $ty n=$n $order ${kind/idx/indices}"
      # 60 s stay for SIGTERM, the drain and the sanitizer's report.
      left=$((deadline - SECONDS - 60))
      if [ "$left" -lt 30 ]; then
        record NOTRUN "$cname" 0 "the step's $t s are spent"
        continue
      fi
      in=$W/in_${ty}_$n.npy out=$W/out_${ty}_$n.npy idx=$W/idx_${ty}_$n.bin flags=()
      if [ "$ty" = bytes ]; then
        in=$W/in_bytes_$n.txt out=$W/out_bytes_$n.txt flags=(--type=bytes --format=text)
        expect=$(expected_engine "$n" bytes)
      else
        expect=$(expected_engine "$n" "$kind")
      fi
      [ "$kind" = idx ] || idx=-
      SORT_TIMEOUT=$((left - 10 < 180 ? left - 10 : 180)) \
        sort_and_verify "$cname" "$PORT" "$expect" "$order" "$in" "$out" "$idx" "${flags[@]+"${flags[@]}"}"
    done
  else
    record FAIL "$name: SERVING under the sanitizer" $((SECONDS - start)) "$WAIT_DETAIL"
  fi
  sortd_pid=$(descendant_named "$san_pid" sortd || true)
  [ -n "$sortd_pid" ] || echo "memcheck sortd: no sortd process under the sanitizer found; SIGTERM goes to compute-sanitizer"
  left=$((deadline - SECONDS))
  stop_sortd "$name" "$san_pid" $((left > 30 ? left : 30)) "${sortd_pid:-$san_pid}"
  sanitizer_verdict memcheck "$log" "$STOP_RC"
  if [ "$VERDICT_OK" = 1 ]; then
    record PASS "$name: sanitizer summary" $((SECONDS - start)) "$VERDICT"
  else
    record FAIL "$name: sanitizer summary" $((SECONDS - start)) "$VERDICT"
    show_log "memcheck sortd" "$log"
  fi
}

run_step() {  # TOOL TARGET SECONDS
  if [ "$2" = sortd ]; then sortd_step "$3"; else gtest_step "$1" "$2" "$3"; fi
}

# ---- plan: memcheck first (the service path first), then the rest
has() { case " $1 " in *" $2 "*) return 0 ;; *) return 1 ;; esac; }
STEPS=()
for tool in memcheck racecheck synccheck initcheck; do
  has "$TOOLS" "$tool" || continue
  for target in sortd service worker radix merge segmented; do
    has "$TARGETS" "$target" || continue
    case $tool:$target in
      memcheck:*) ;;
      initcheck:*) has "$INITCHECK_TARGETS" "$target" || continue ;;
      *:sortd | *:service) continue ;;
    esac
    STEPS+=("$tool:$target")
  done
done

echo "== sanitize.sh: ${#STEPS[@]} runs, $JOBS at a time, budget $BUDGET_S s"
echo "   tools: $TOOLS; targets: $TARGETS; bundle: $B"
for f in RADIX_FILTER MERGE_FILTER SEGMENTED_FILTER WORKER_FILTER WORKER_SMALL_FILTER INITCHECK_WORKER_FILTER SERVICE_FILTER SORTD_CASES; do
  echo "   $f=${!f}"
done
if ! command -v compute-sanitizer > /dev/null; then
  record FAIL "compute-sanitizer on PATH" 0 "not found (PATH=$PATH)"
  finish
fi
compute-sanitizer --version 2>&1 | tail -1 || true
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2 || true
fi

# Inputs of the sortd step, made before any run starts.
if has "$TOOLS" memcheck && has "$TARGETS" sortd; then
  for c in $SORTD_CASES; do
    n=${c%%:*}
    for ty in $NUMERIC_TYPES; do
      [ -f "$W/in_${ty}_$n.npy" ] || python3 "$VERIFY" gen --type "$ty" --count "$n" --seed "$n" --out "$W/in_${ty}_$n.npy"
    done
  done
  python3 "$VERIFY" gen --type bytes --count "$SORTD_BYTES_N" --seed 5 --out "$W/in_bytes_$SORTD_BYTES_N.txt"
fi

i=0
STEP_ROWS=()
for step in "${STEPS[@]}"; do
  i=$((i + 1))
  tool=${step%%:*}
  target=${step#*:}
  rows=$W/rows.d/$(printf '%02d' "$i")-$tool-$target.tsv
  : > "$rows"
  STEP_ROWS+=("$rows")
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  left=$((BUDGET_S - (SECONDS - T0)))
  if [ "$left" -lt 45 ]; then
    ROWS_FILE=$rows record NOTRUN "$tool $target" 0 "BUDGET_S=$BUDGET_S spent (raise it, or narrow TOOLS/TARGETS)"
    continue
  fi
  t=$(timeout_of "$tool" "$target")
  [ "$t" -gt "$left" ] && t=$left
  echo "== start $tool $target (at most $t s) at $((SECONDS - T0)) s"
  (
    ROWS_FILE=$rows
    SERVER_PIDS=()
    trap cleanup_servers EXIT
    run_step "$tool" "$target" "$t"
  ) &
done
wait || true
# A run that died without a row is a failure too.
for f in "${STEP_ROWS[@]+"${STEP_ROWS[@]}"}"; do
  [ -s "$f" ] || ROWS_FILE=$f record FAIL "$(basename "$f" .tsv | cut -d- -f2-)" "" "the run ended without a result"
done
echo "== sanitize.sh took $((SECONDS - T0)) s; logs in $W"
finish
