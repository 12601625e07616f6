# shellcheck shell=bash
# Sourced by the device scripts that must be able to fail (sanitize.sh,
# gpu_e2e.sh, bytes_e2e.sh and the *_check.sh / multi_gpu.sh runs): every
# check records one row (PASS or FAIL)
# into a rows file; the summary table is printed last and the script exits
# non-zero when any row is not PASS (also when the script dies part-way).
#
# The caller sets `set -euo pipefail`, then sources this file with
# CHECKS_NAME (for the summary) and W (a work directory, made empty here).
# Helpers:
#   record STATUS NAME SECS DETAIL      one row (STATUS PASS, FAIL or NOTRUN)
#   run_logged LOG TIMEOUT CMD...       runs CMD into LOG; sets RC and SECS
#   gtest_verdict LOG RC                sets VERDICT_OK (1/0) and VERDICT
#   sanitizer_verdict TOOL LOG RC       likewise for a compute-sanitizer log
#   gtest_check NAME TIMEOUT TOOL|- BIN ARGS...   a gtest binary (sanitized): one row
#   core_build TARGET...                the core-only build into BUILD_GPU: one row
#   bench_check NAME TIMEOUT ROWS BIN ARGS...     a bench: its table printed (the
#                                       report), exit 0 and no "NO" row asserted: one row
#   start_sortd NAME LOGFILE CMD...     background server on a free port
#   wait_serving NAME PID TIMEOUT       polls `sortctl health`; sets PORT
#   stop_sortd NAME PID TIMEOUT         SIGTERM, wait, record "exit 0"
#   sort_and_verify NAME PORT ENGINE ORDER IN OUT IDX|- [sortctl flags]
#                                       sortctl sort + verify_sort.py: one row
#   read_thresholds SORTD_LOG           the GPU profile's thresholds, from its startup line
#   expected_engine N idx|keys|bytes    the engine sortd's defaults pick
#   finish                              summary table last, exit status
# Sets up the carried bundle (run from the repository root): CUDA on PATH,
# .device/bundle.tar.xz unpacked, B (its bin directory, unless set) and its
# libraries on LD_LIBRARY_PATH; ROOT is the repository root.

export PATH=/usr/local/cuda/bin:$PATH
ROOT=$PWD
if [ -f .device/bundle.tar.xz ] && [ ! -d .device/bundle ]; then tar -C .device -xJf .device/bundle.tar.xz; fi
B=${B:-$ROOT/.device/bundle/bin}
export LD_LIBRARY_PATH=$ROOT/.device/bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Where core_build puts the core-only build (tests/gpu, bench below it).
BUILD_GPU=${BUILD_GPU:-$ROOT/build-gpu}

CHECKS_NAME=${CHECKS_NAME:-$(basename "$0")}
W=${W:?W (work directory) must be set before sourcing checks.sh}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VERIFY="$HERE/verify_sort.py"
# W is emptied: only a directory this file made before (or none) is.
if [ -e "$W" ] && [ ! -f "$W/.made_by_checks_sh" ]; then
  echo "$CHECKS_NAME: W=$W exists and was not made by checks.sh; not emptying it" >&2
  exit 2
fi
rm -rf "$W"
mkdir -p "$W/rows.d" "$W/running.d"
touch "$W/.made_by_checks_sh"
ROWS_FILE=${ROWS_FILE:-$W/rows.d/00-main.tsv}
: > "$ROWS_FILE"
SUMMARY_DONE=0
SERVER_PIDS=()

record() {  # STATUS NAME SECS DETAIL
  local status=$1 name=$2 secs=${3:--} detail=${4:--}
  detail=${detail//$'\t'/ }
  detail=${detail//$'\n'/; }
  printf '%s\t%s\t%s\t%s\n' "$status" "$name" "$secs" "$detail" >> "$ROWS_FILE"
  printf '[%s] %s: %s\n' "$status" "$name" "$detail"
}

# run_logged LOG TIMEOUT CMD...: RC is the command's exit status (124 or
# 137: timed out; the whole process group is signalled, so children of a
# sanitizer go too), SECS its wall time.
run_logged() {
  local log=$1 t=$2 start=$SECONDS pid
  shift 2
  RC=0
  timeout -k 15 "$t" "$@" > "$log" 2>&1 < /dev/null &
  pid=$!
  echo "$pid" > "$W/running.d/$pid"  # for on_exit, should the script be killed
  wait "$pid" || RC=$?
  rm -f "$W/running.d/$pid"
  SECS=$((SECONDS - start))
}

timed_out() { [ "$1" = 124 ] || [ "$1" = 137 ]; }

# gtest_verdict LOG RC: passes when the binary exited 0, ran at least one
# test, none failed and none skipped (the GPU tests skip without a GPU).
gtest_verdict() {
  local log=$1 rc=$2 passed failed failed_names skipped ran
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -1)
  # Each failed test is named twice (when it ends and in the list).
  failed_names=$(grep '^\[  FAILED  \] [A-Za-z_]' "$log" | sed 's/^\[  FAILED  \] //; s/[ ,].*//' | sort -u || true)
  failed=$(printf '%s' "$failed_names" | grep -c . || true)
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$log" | tail -1)
  VERDICT_OK=0
  if timed_out "$rc"; then
    VERDICT="timed out (${ran:-?} tests finished)"
  elif [ -z "$ran" ]; then
    VERDICT="no gtest result (exit $rc)"
  elif [ "$ran" = 0 ]; then
    VERDICT="the filter selected no test"
  elif [ "${failed:-0}" != 0 ]; then
    VERDICT="$failed of $ran tests FAILED: $(echo "$failed_names" | sed -n 1,4p | tr '\n' ' ')"
  elif [ "${skipped:-0}" != 0 ]; then
    VERDICT="$skipped of $ran tests SKIPPED (no GPU visible?)"
  elif [ "$rc" != 0 ]; then
    VERDICT="$ran tests passed but exit $rc"
  else
    VERDICT="$passed tests passed"
    VERDICT_OK=1
  fi
}

# sanitizer_verdict TOOL LOG RC: one summary line of the tool and zero
# errors (racecheck: zero hazards, errors and warnings).
sanitizer_verdict() {
  local tool=$1 log=$2 rc=$3 line n
  VERDICT_OK=0
  if [ "$tool" = racecheck ]; then
    line=$(grep -E 'RACECHECK SUMMARY: [0-9]+ hazards? displayed' "$log" | tail -1 || true)
    n=$(grep -c 'RACECHECK SUMMARY:' "$log" || true)
    if [ -z "$line" ]; then
      VERDICT="no RACECHECK SUMMARY (exit $rc)"
    elif [ "$n" != 1 ]; then
      VERDICT="$n RACECHECK SUMMARY lines"
    elif ! echo "$line" | grep -Eq 'SUMMARY: 0 hazards? displayed \(0 errors?, 0 warnings?\)'; then
      VERDICT="${line#*SUMMARY: }"
    else
      VERDICT="0 hazards"
      VERDICT_OK=1
    fi
  else
    line=$(grep -E 'ERROR SUMMARY: [0-9]+ errors?' "$log" | tail -1 || true)
    n=$(grep -c 'ERROR SUMMARY:' "$log" || true)
    if [ -z "$line" ]; then
      VERDICT="no ERROR SUMMARY (exit $rc)"
    elif [ "$n" != 1 ]; then
      VERDICT="$n ERROR SUMMARY lines"
    elif ! echo "$line" | grep -Eq 'ERROR SUMMARY: 0 errors?'; then
      VERDICT="${line#*ERROR SUMMARY: }"
    else
      VERDICT="0 errors"
      VERDICT_OK=1
      if grep -q 'LEAK SUMMARY:' "$log" && ! grep -q 'LEAK SUMMARY: 0 bytes' "$log"; then
        VERDICT="$(grep 'LEAK SUMMARY:' "$log" | tail -1 | sed 's/.*LEAK SUMMARY: //')"
        VERDICT_OK=0
      fi
    fi
  fi
  if [ "$rc" = 86 ] && [ "$VERDICT_OK" = 1 ]; then
    VERDICT="$VERDICT but --error-exitcode fired"
    VERDICT_OK=0
  fi
}

# gtest_check NAME TIMEOUT TOOL BIN ARGS...: one gtest binary, under
# `compute-sanitizer --tool TOOL` unless TOOL is "-"; one row. Passes when
# the tests pass (gtest_verdict) and the tool reports nothing
# (sanitizer_verdict). Extra sanitizer options: SAN_EXTRA (array).
gtest_check() {
  local name=$1 t=$2 tool=$3 bin=$4 log g g_ok
  shift 4
  log=$W/log.${name//[^A-Za-z0-9_.-]/_}
  if [ ! -x "$bin" ]; then
    record FAIL "$name" 0 "$bin: not there (bundle or build)"
    return 0
  fi
  if [ "$tool" = - ]; then
    run_logged "$log" "$t" "$bin" "$@" --gtest_color=no
  else
    run_logged "$log" "$t" compute-sanitizer --error-exitcode 86 --tool "$tool" \
      "${SAN_EXTRA[@]+"${SAN_EXTRA[@]}"}" "$bin" "$@" --gtest_color=no
  fi
  gtest_verdict "$log" "$RC"
  g=$VERDICT g_ok=$VERDICT_OK
  if [ "$tool" != - ]; then
    sanitizer_verdict "$tool" "$log" "$RC"
    g="$g; $VERDICT"
    [ "$VERDICT_OK" = 1 ] || g_ok=0
  fi
  if timed_out "$RC"; then
    record FAIL "$name" "$SECS" "timed out after $t s ($g)"
    show_log "$name" "$log"
  elif [ "$g_ok" = 1 ]; then
    record PASS "$name" "$SECS" "$g"
  else
    record FAIL "$name" "$SECS" "$g"
    show_log "$name" "$log"
  fi
}

# core_build TARGET...: the core-only build (no server: the GPU host has no
# gRPC C++ libraries) of TARGETs into BUILD_GPU; one row. A failed build is
# a FAIL row here; the binaries it did not make then fail gtest_check as
# "not there" (a stale one from an earlier build may run, but this row
# already fails the script).
core_build() {
  local start=$SECONDS
  if ! cmake -S "$ROOT" -B "$BUILD_GPU" -DSORTD_BUILD_SERVER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_BUILD_TYPE=Release > "$W/cfg.log" 2>&1; then
    record FAIL "core-only build (configure)" $((SECONDS - start)) "$(tail -3 "$W/cfg.log" | tr '\n' ' ')"
  elif ! cmake --build "$BUILD_GPU" -j"$(nproc)" --target "$@" > "$W/build.log" 2>&1; then
    record FAIL "core-only build" $((SECONDS - start)) "$(grep -m3 -E 'error' "$W/build.log" | tr '\n' ' ')"
  else
    record PASS "core-only build" $((SECONDS - start)) "$*"
  fi
}

# A bench table's row saying its output matched CUB's ("match"/"verified"
# column of the GPU benches: yes or NO).
BENCH_MATCHED='(^|[[:space:]])yes([[:space:]]|$)'

# bench_check NAME TIMEOUT ROWS BIN ARGS...: a benchmark. Its table (stdout)
# is the report and is printed whole; stderr (progress) goes to a log. The
# check, one row: exit 0, at least one line matching the ERE ROWS (a table
# cut short or empty must not pass; BENCH_MATCHED for the GPU benches) and
# no line with the word NO (a row whose output differed from CUB's).
bench_check() {
  local name=$1 t=$2 rows=$3 bin=$4 log start=$SECONDS pid rc=0 n bad
  shift 4
  log=$W/bench.${name//[^A-Za-z0-9_.-]/_}
  if [ ! -x "$bin" ]; then
    record FAIL "$name" 0 "$bin: not there (bundle or build)"
    return 0
  fi
  echo "== $name: $(basename "$bin") $*"
  timeout -k 15 "$t" "$bin" "$@" > "$log" 2> "$log.err" < /dev/null &
  pid=$!
  echo "$pid" > "$W/running.d/$pid"
  wait "$pid" || rc=$?
  rm -f "$W/running.d/$pid"
  cat "$log"
  n=$(grep -cE "$rows" "$log" || true)
  bad=$(grep -E '(^|[[:space:]])NO([[:space:]]|$)' "$log" | head -3 | tr -s ' ' | tr '\n' ';' || true)
  if timed_out "$rc"; then
    record FAIL "$name" $((SECONDS - start)) "timed out after $t s ($n rows)"
  elif [ "$rc" != 0 ]; then
    record FAIL "$name" $((SECONDS - start)) "exit $rc: $(tail -2 "$log.err" | tr '\n' ' ')"
  elif [ -n "$bad" ]; then
    record FAIL "$name" $((SECONDS - start)) "output differs from the reference: $bad"
  elif [ "$n" = 0 ]; then
    record FAIL "$name" $((SECONDS - start)) "no table row (none matches $rows)"
  else
    record PASS "$name" $((SECONDS - start)) "exit 0, $n table rows, none says NO (table above)"
  fi
}

# Lines of a failed log worth reading, prefixed with the check's name.
show_log() {  # NAME LOG
  echo "---- $1: $2"
  grep -E 'Failure|FAILED|Expected|Which is|differ|=========  *(Invalid|Program hit|Race|Barrier|Uninitialized|Error|Internal|Saved host|[A-Z][a-z]+ hazard)|ERROR SUMMARY|RACECHECK SUMMARY|LEAK SUMMARY|error|Error' "$2" \
    | head -40 | sed "s|^|  $1: |" || true
  tail -5 "$2" | sed "s|^|  $1 (tail): |"
}

# ---------------------------------------------------------------- servers

proc_state() { local s; read -r s 2>/dev/null < "/proc/$1/stat" || return 1; s=${s##*) }; echo "${s%% *}"; }
alive() { local st; st=$(proc_state "$1") || return 1; [ "$st" != Z ] && [ "$st" != X ]; }

# Children of PID, from /proc (no procps needed).
children_of() {
  local f line rest
  for f in /proc/[0-9]*/stat; do
    read -r line 2>/dev/null < "$f" || continue
    rest=${line##*) }
    rest=${rest#* }
    [ "${rest%% *}" = "$1" ] && { f=${f#/proc/}; echo "${f%/stat}"; }
  done
  return 0
}

# descendant_named PID NAME: the first descendant of PID whose comm is NAME.
descendant_named() {
  local queue=("$1") p c
  while [ ${#queue[@]} -gt 0 ]; do
    p=${queue[0]}
    queue=("${queue[@]:1}")
    for c in $(children_of "$p"); do
      if [ "$(cat "/proc/$c/comm" 2>/dev/null)" = "$2" ]; then echo "$c"; return 0; fi
      queue+=("$c")
    done
  done
  return 1
}

# start_sortd NAME LOG CMD...: CMD (sortd, or a sanitizer running sortd)
# in the background with --listen/--metrics_listen on free ports and port
# files in $W; sets SERVER_PID. Its arguments must not name the ports.
start_sortd() {
  local name=$1 log=$2
  shift 2
  rm -f "$W/$name.port" "$W/$name.mport"
  "$@" --listen=127.0.0.1:0 --port_file="$W/$name.port" \
    --metrics_listen=127.0.0.1:0 --metrics_port_file="$W/$name.mport" > "$log" 2>&1 < /dev/null &
  SERVER_PID=$!
  SERVER_PIDS+=("$SERVER_PID")
}

# wait_serving NAME PID TIMEOUT: the port file is written and `sortctl
# health` answers SERVING; sets PORT and MPORT. Fails at once when the
# process has exited.
wait_serving() {
  local name=$1 pid=$2 t=$3 start=$SECONDS
  PORT=""
  while [ $((SECONDS - start)) -lt "$t" ]; do
    if ! alive "$pid"; then
      WAIT_DETAIL="exited before serving"
      return 1
    fi
    if [ -s "$W/$name.port" ]; then
      PORT=$(tr -dc 0-9 < "$W/$name.port")
      if [ -n "$PORT" ] && "$B/sortctl" health --target="127.0.0.1:$PORT" --timeout=5s > /dev/null 2>&1; then
        MPORT=$(tr -dc 0-9 2>/dev/null < "$W/$name.mport" || true)
        WAIT_DETAIL="serving on port $PORT after $((SECONDS - start)) s"
        return 0
      fi
    fi
    sleep 0.5
  done
  WAIT_DETAIL="not SERVING after $t s"
  return 1
}

# stop_sortd NAME PID TIMEOUT [SIGNAL_PID]: SIGTERM to SIGNAL_PID (default
# PID: the sortd itself, also when PID is a sanitizer running it), wait up
# to TIMEOUT s for PID, record "NAME exit after SIGTERM" (must be 0). Sets
# STOP_RC.
stop_sortd() {
  local name=$1 pid=$2 t=$3 target=${4:-$2} start=$SECONDS
  STOP_RC=0
  if ! alive "$pid"; then
    wait "$pid" || STOP_RC=$?
    record FAIL "$name exit after SIGTERM" 0 "had already exited (status $STOP_RC) before SIGTERM"
    return 0
  fi
  kill -TERM "$target" 2> /dev/null || true
  while alive "$pid" && [ $((SECONDS - start)) -lt "$t" ]; do sleep 0.2; done
  if alive "$pid"; then
    kill -KILL "$pid" 2> /dev/null || true
    [ "$target" != "$pid" ] && kill -KILL "$target" 2> /dev/null || true
    wait "$pid" 2> /dev/null || STOP_RC=$?
    record FAIL "$name exit after SIGTERM" $((SECONDS - start)) "still running $t s after SIGTERM (killed)"
    return 0
  fi
  wait "$pid" || STOP_RC=$?
  if [ "$STOP_RC" = 0 ]; then
    record PASS "$name exit after SIGTERM" $((SECONDS - start)) "exit 0"
  else
    record FAIL "$name exit after SIGTERM" $((SECONDS - start)) "exit $STOP_RC"
  fi
}

# The service tests' filter for this host: with fewer than two GPUs the
# two-GPU tests skip, and gtest_check counts a skip as a failed check
# ("no GPU visible?"), so they are left out there.
# (CUDA_VISIBLE_DEVICES, where set, says how many the tests see.)
SERVICE_GPU_FILTER=()
VISIBLE_GPUS=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ' || true)
if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
  VISIBLE_GPUS=$(printf '%s\n' "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c . || true)
fi
if [ "$VISIBLE_GPUS" -lt 2 ]; then
  SERVICE_GPU_FILTER=(--gtest_filter='-GpuServiceTwoGpus.*')
fi

# The thresholds of the GPU's profile (--gpu_min_keys and
# --gpu_merge_argsort_max_keys "auto"), read from a GPU sortd's startup
# line ("... >= N keys (gpu_merge for argsorts of more than 4096 and fewer
# than M keys) ..."); the H200 profile's until read.
GPU_MIN_KEYS=32768 GPU_MERGE_MAX=65536
read_thresholds() {  # SORTD_LOG
  local n m
  n=$(sed -n 's/.*numeric arrays of >= \([0-9]*\) keys.*/\1/p' "$1" | head -1)
  m=$(sed -n 's/.*and fewer than \([0-9]*\) keys).*/\1/p' "$1" | head -1)
  [ -n "$n" ] && GPU_MIN_KEYS=$n
  [ -n "$m" ] && GPU_MERGE_MAX=$m
  if grep -q 'no argsort on gpu_merge' "$1"; then GPU_MERGE_MAX=0; fi
  return 0
}

# The engine sortd's default flags pick when a GPU serves: <=
# --inline_max_keys (1024) inline on the CPU, <= --max_batch_request_keys
# (16384) batched on the GPU (segmented), below --gpu_min_keys the CPU,
# argsorts of more than 4096 keys below --gpu_merge_argsort_max_keys the
# merge sort, the rest the radix sort. Byte strings (>=
# --gpu_min_bytes_keys): merge.
expected_engine() {  # N idx|keys|bytes
  if [ "$2" = bytes ]; then
    if [ "$1" -ge 16384 ]; then echo ENGINE_GPU_MERGE; else echo ENGINE_CPU; fi
  elif [ "$1" -le 1024 ]; then echo ENGINE_CPU
  elif [ "$1" -le 16384 ]; then echo ENGINE_GPU_SEGMENTED
  elif [ "$1" -lt "$GPU_MIN_KEYS" ]; then echo ENGINE_CPU
  elif [ "$2" = idx ] && [ "$1" -gt 4096 ] && [ "$1" -lt "$GPU_MERGE_MAX" ]; then echo ENGINE_GPU_MERGE
  else echo ENGINE_GPU_RADIX; fi
}

# Engine named by sortctl's "sorted N keys on ENGINE_..." line.
engine_of() { sed -n 's/^sorted [0-9]* keys on \(ENGINE_[A-Z_]*\).*/\1/p' "$1" | tail -1; }

# sort_and_verify NAME PORT EXPECT_ENGINE ORDER IN OUT IDX|- [sortctl flags...]:
# one `sortctl sort` (its exit status kept), the engine it reports, then
# verify_sort.py (exact: permutation, stable contract order, bit-exact
# keys). One row. IDX "-": keys only. EXPECT_ENGINE=0 leaves the engine
# unchecked (only to try the scripts on a machine without a GPU).
sort_and_verify() {
  local name=$1 port=$2 expect=$3 order=$4 in=$5 out=$6 idx=$7 start=$SECONDS rc=0 engine vrc=0 f
  shift 7
  f=$W/sort.${name//[^A-Za-z0-9_.=-]/_}
  local idx_flag=()
  [ "$idx" != - ] && idx_flag=(--indices_out="$idx")
  rm -f "$out" "$f.verify"
  [ "$idx" != - ] && rm -f "$idx"
  timeout -k 10 "${SORT_TIMEOUT:-120}" "$B/sortctl" sort --target="127.0.0.1:$port" --order="$order" \
    --in="$in" --out="$out" "${idx_flag[@]}" "$@" > "$f.sortctl" 2>&1 < /dev/null || rc=$?
  engine=$(engine_of "$f.sortctl")
  if [ "$rc" != 0 ]; then
    record FAIL "$name" $((SECONDS - start)) "sortctl exit $rc: $(tail -2 "$f.sortctl" | tr '\n' ' ')"
    return 0
  fi
  local vargs=(check --input "$in" --output "$out" --order "$order")
  [ "$idx" != - ] && vargs+=(--indices "$idx")
  timeout -k 10 300 python3 "$VERIFY" "${vargs[@]}" > "$f.verify" 2>&1 || vrc=$?
  if [ "$vrc" != 0 ]; then
    record FAIL "$name" $((SECONDS - start)) "verify_sort exit $vrc: $(sed -n 1,3p "$f.verify" | tr '\n' ' ')"
    sed -n '1,12s|^|  |p' "$f.verify"
  elif [ "${EXPECT_ENGINE:-1}" = 1 ] && [ -n "$expect" ] && [ "$engine" != "$expect" ]; then
    record FAIL "$name" $((SECONDS - start)) "exact, but ran on ${engine:-no engine reported}, expected $expect"
  else
    record PASS "$name" $((SECONDS - start)) "exact on ${engine:-?}"
  fi
}

# metric_sum PORT REGEX: sum of the samples whose series matches REGEX.
metric_sum() {
  python3 - "$1" "$2" <<'PY'
import re, sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=10).read().decode()
pat = re.compile(sys.argv[2])
total = 0.0
for line in text.splitlines():
    if line and not line.startswith("#"):
        series, _, value = line.rpartition(" ")
        if pat.match(series):
            total += float(value)
print("%g" % total)
PY
}

# ---------------------------------------------------------------- summary

cleanup_servers() {
  local p c
  for p in "${SERVER_PIDS[@]+"${SERVER_PIDS[@]}"}"; do
    if alive "$p"; then
      c=$(descendant_named "$p" sortd || true)
      [ -n "$c" ] && kill -KILL "$c" 2> /dev/null || true
      kill -KILL "$p" 2> /dev/null || true
    fi
  done
}

print_summary() {
  local total failed status name secs detail
  cat "$W"/rows.d/*.tsv > "$W/rows.tsv" 2> /dev/null || true
  total=$(wc -l < "$W/rows.tsv")
  failed=$(awk -F'\t' '$1 != "PASS"' "$W/rows.tsv" | wc -l)
  {
    echo
    echo "== summary: $CHECKS_NAME ($total checks, $((total - failed)) passed, $failed not passed; full rows in $W/rows.tsv)"
    printf '%-6s  %-46s %4s  %s\n' result check secs detail
    while IFS=$'\t' read -r status name secs detail; do
      [ ${#detail} -gt 110 ] && detail="${detail:0:107}..."
      printf '%-6s  %-46s %4s  %s\n' "$status" "$name" "$secs" "$detail"
    done < "$W/rows.tsv"
    if [ "$failed" = 0 ] && [ "$total" -gt 0 ]; then
      echo "$CHECKS_NAME: ALL $total CHECKS PASSED"
    else
      echo "$CHECKS_NAME: FAILED ($failed of $total checks did not pass)"
    fi
  } | tee "$W/summary.txt"
  SUMMARY_FAILED=$failed
  SUMMARY_TOTAL=$total
}

# Every process this script started and that still runs (a run in flight
# when the script is killed): TERM, then KILL what is left.
descendants_of() {
  local queue=("$1") p c
  while [ ${#queue[@]} -gt 0 ]; do
    p=${queue[0]}
    queue=("${queue[@]:1}")
    for c in $(children_of "$p"); do
      echo "$c"
      queue+=("$c")
    done
  done
}
stop_descendants() {
  local pids f
  # Runs in flight (their `timeout` signals its whole process group), also
  # those whose step subshell is already gone.
  for f in "$W"/running.d/*; do
    [ -f "$f" ] && kill -TERM "$(cat "$f")" 2> /dev/null
  done
  pids=$(descendants_of "$$")
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2> /dev/null
  sleep 2
  pids=$(descendants_of "$$")
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids 2> /dev/null
  return 0
}

# On any exit: stop our servers; if the script died before finish (set -e,
# an unset variable, a signal), stop what it started, record that and still
# print the table last.
on_exit() {
  local rc=$?
  trap - EXIT
  set +e
  cleanup_servers
  if [ "$SUMMARY_DONE" = 0 ]; then
    stop_descendants
    ROWS_FILE=$W/rows.d/99-abort.tsv
    record FAIL "$CHECKS_NAME ran to the end" "" "aborted with status $rc (line ${ABORT_LINE:-?}; 143: SIGTERM, e.g. an outer timeout)"
    print_summary
    exit 1
  fi
  exit "$rc"
}
trap 'ABORT_LINE=$LINENO' ERR
trap 'exit 143' TERM
trap 'exit 130' INT
trap on_exit EXIT

finish() {
  cleanup_servers
  print_summary
  SUMMARY_DONE=1
  [ "$SUMMARY_FAILED" = 0 ] && [ "$SUMMARY_TOTAL" -gt 0 ] && exit 0
  exit 1
}
