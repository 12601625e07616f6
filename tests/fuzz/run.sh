#!/bin/bash
# Runs each libFuzzer binary of a fuzz build tree for a bounded time, from
# the checked-in seeds plus the tree's own growing corpus, and prints one
# line per fuzzer: executions, corpus size, findings. Exits non-zero on any
# finding (the crashing input is saved under <tree>/fuzz-findings/NAME/RUN/).
# The fuzzers run side by side, FUZZ_JOBS at a time (default: one a core).
# Usage: tests/fuzz/run.sh BUILD_TREE SECONDS_PER_FUZZER
set -euo pipefail
tree=$1
seconds=$2
here=$(cd "$(dirname "$0")" && pwd)
# FUZZ_JOBS fuzzers at a time (default: one a core), each on one core.
jobs=${FUZZ_JOBS:-$(nproc)}
names=(request chunked cpu_engine session blocks)

# One fuzzer's run: its summary line in $tree/fuzz-NAME.summary, and on a
# finding the excerpt in $tree/fuzz-NAME.finding.
run_one() {
  local name=$1
  local binary=$tree/tests/fuzz/sortd_${name}_fuzzer
  local corpus=$tree/fuzz-corpus/$name
  # Each run keeps its findings apart: an input saved by an earlier run
  # (perhaps of a bug since fixed) does not fail this one.
  local findings=$tree/fuzz-findings/$name/$(date +%Y%m%dT%H%M%S)
  local log=$tree/fuzz-$name.log
  mkdir -p "$corpus" "$findings"
  rm -f "$tree/fuzz-$name.finding"
  # -rss_limit_mb: a request may legitimately hold a few arrays; more is a finding.
  local rc=0
  "$binary" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 \
    -timeout=30 -artifact_prefix="$findings/" "$corpus" "$here/corpus/$name" > "$log" 2>&1 || rc=$?
  local execs units crashes
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  units=$(ls "$corpus" | wc -l)
  crashes=$(ls "$findings" | wc -l)
  printf '%-11s %10s execs %6s corpus %3s findings  rc=%s\n' "$name" "$execs" "$units" "$crashes" \
    "$rc" > "$tree/fuzz-$name.summary"
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    { echo "== $name: finding (log $log) =="
      grep -A30 -m1 'FUZZ FINDING\|ERROR: AddressSanitizer\|runtime error\|ERROR: libFuzzer' "$log" \
        || tail -40 "$log"; } > "$tree/fuzz-$name.finding"
  fi
}

running=0
for name in "${names[@]}"; do
  run_one "$name" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
status=0
for name in "${names[@]}"; do
  if [ -f "$tree/fuzz-$name.finding" ]; then
    status=1
    cat "$tree/fuzz-$name.finding"
  fi
done
for name in "${names[@]}"; do cat "$tree/fuzz-$name.summary"; done
exit $status
