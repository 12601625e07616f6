#!/bin/bash
# Runs each libFuzzer binary of a fuzz build tree for a bounded time, from
# the checked-in seeds plus the tree's own growing corpus, and prints one
# line per fuzzer: executions, corpus size, findings. Exits non-zero on any
# finding (the crashing input is saved under <tree>/fuzz-findings/NAME/RUN/).
# Usage: tests/fuzz/run.sh BUILD_TREE SECONDS_PER_FUZZER
set -euo pipefail
tree=$1
seconds=$2
here=$(cd "$(dirname "$0")" && pwd)
status=0
summary=()
for name in request chunked cpu_engine session blocks; do
  binary=$tree/tests/fuzz/sortd_${name}_fuzzer
  corpus=$tree/fuzz-corpus/$name
  # Each run keeps its findings apart: an input saved by an earlier run
  # (perhaps of a bug since fixed) does not fail this one.
  findings=$tree/fuzz-findings/$name/$(date +%Y%m%dT%H%M%S)
  log=$tree/fuzz-$name.log
  mkdir -p "$corpus" "$findings"
  # -rss_limit_mb: a request may legitimately hold a few arrays; more is a finding.
  set +e
  "$binary" -max_total_time="$seconds" -print_final_stats=1 -rss_limit_mb=2048 \
    -timeout=30 -artifact_prefix="$findings/" "$corpus" "$here/corpus/$name" > "$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  units=$(ls "$corpus" | wc -l)
  crashes=$(ls "$findings" | wc -l)
  summary+=("$(printf '%-11s %10s execs %6s corpus %3s findings  rc=%s' "$name" "$execs" "$units" "$crashes" "$rc")")
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    status=1
    echo "== $name: finding (log $log) =="
    grep -A30 -m1 'FUZZ FINDING\|ERROR: AddressSanitizer\|runtime error\|ERROR: libFuzzer' "$log" || tail -40 "$log"
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
