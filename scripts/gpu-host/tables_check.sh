#!/usr/bin/env bash
# Device run, able to fail: tables and the converted types on the GPU host.
#   1. sortd_table_keys_bench: a packed table sort (int32 with nulls,
#      float32 descending with nulls first) against the u64/u32 pairs sort of
#      as many rows, through one dispatcher (the GPU engine), from host
#      memory; the table's answer checked row against row;
#   2. the packed-key core tests (sortd_core_test TableKeys*: large cases
#      go to the GPU where the dispatcher routes them);
#   3. tests/e2e/test_tables.py, test_types.py and test_regions.py's table
#      cases against the real sortd on its default engine (auto: the GPU),
#      compared with pandas / numpy; the core GPU table test under memcheck;
#   4. bench/types_bench.py against a fresh sortd (defaults): the converted
#      types, the 2^TABLE_LOG2 frame and the 2^FRAME_LOG2 frame (a table
#      session) against pandas, the string table; every answer checked;
#   5. each sortd exits 0 after SIGTERM.
# Needs .device/bundle with sortd, sortctl, sortd_table_keys_bench,
# (sortd_core_test and libsortd_client_c.so optional), python3 with numpy, pandas.
#   LOG2 (26) for the bench, TABLE_LOG2 (22), FRAME_LOG2 (26; 0 skips), PY (python3),
#   W=/tmp/sortd_tables work directory.
set -euo pipefail
CHECKS_NAME=tables_check.sh
W=${W:-/tmp/sortd_tables}
# shellcheck source=checks.sh
. "$(dirname "$0")/checks.sh"

LOG2=${LOG2:-26}
TABLE_LOG2=${TABLE_LOG2:-22}
FRAME_LOG2=${FRAME_LOG2:-26}
PY=${PY:-python3}

bench_check "packed table vs u64 pairs 2^$LOG2" 300 'Mrows/s|rate' \
  "$B/sortd_table_keys_bench" --log2="$LOG2" --repeats=5
if [ -x "$B/sortd_core_test" ]; then  # optional: the bundle has a size limit
  gtest_check "core TableKeys* (GPU where routed)" 300 - "$B/sortd_core_test" --gtest_filter='TableKeys*'
  # The device table path (core/cuda/table_job.cu) under memcheck.
  gtest_check "core TableKeysGpuTest memcheck" 400 memcheck "$B/sortd_core_test" \
    --gtest_filter='TableKeysGpuTest.*'
fi

# The e2e tests start sortd themselves: wrappers that carry the bundle's
# libraries (the host's python keeps its own).
for tool in sortd sortctl; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$LD_LIBRARY_PATH" "$B/$tool" > "$W/$tool"
  chmod +x "$W/$tool"
done
PYENV=(env -u LD_LIBRARY_PATH SORTD_BIN="$W/sortd" SORTCTL_BIN="$W/sortctl" SORTD_E2E_ENGINE=auto
       PYTHONPATH="$ROOT/client/python:$ROOT/tests/e2e")
for t in test_tables test_types "test_regions Regions.test_tables_in_regions_answer_as_one_message_reordered_in_place Regions.test_table_region_rules_and_refusals CudaRegions.test_tables_in_device_memory_answer_as_the_same_table_in_a_message"; do
  read -r -a words <<< "$t"  # the file, then the cases (none: all)
  t=${words[0]}
  run_logged "$W/log.$t" 400 "${PYENV[@]}" "$PY" "$ROOT/tests/e2e/$t.py" "${words[@]:1}"
  if [ "$RC" = 0 ]; then
    record PASS "e2e $t (auto engine)" "$SECS" "$(grep -E '^Ran ' "$W/log.$t" | head -1)"
  else
    show_log "$t" "$W/log.$t"
    record FAIL "e2e $t (auto engine)" "$SECS" "exit $RC: $(grep -E '^(FAIL|ERROR):' "$W/log.$t" | head -2 | tr '\n' ' ')"
  fi
done

# --diagnostics: transfer-only sessions, the echo baseline of types_bench.
start_sortd bench "$W/bench_sortd.log" "$B/sortd" --diagnostics
BENCH_PID=$SERVER_PID
if wait_serving bench "$BENCH_PID" 120; then
  record PASS "bench sortd SERVING" 0 "$WAIT_DETAIL; $(head -1 "$W/bench_sortd.log" | cut -c1-100)"
  NATIVE_ENV=()
  [ -f "$B/libsortd_client_c.so" ] && NATIVE_ENV=(SORTD_CLIENT_LIB="$B/libsortd_client_c.so" LD_LIBRARY_PATH="$LD_LIBRARY_PATH")
  run_logged "$W/log.types_bench" 500 env -u LD_LIBRARY_PATH "${NATIVE_ENV[@]+"${NATIVE_ENV[@]}"}" \
    SORTD_TARGET="127.0.0.1:$PORT" PYTHONPATH="$ROOT/client/python" "$PY" "$ROOT/bench/types_bench.py" \
    --log2=22 --table_log2="$TABLE_LOG2" --frame_log2="$FRAME_LOG2"
  cat "$W/log.types_bench"
  echo "sortd peak RSS (VmHWM) after types_bench: $(grep VmHWM /proc/$BENCH_PID/status 2>/dev/null | tr -s ' ')"
  # The C++ client: sortctl table over .npy columns (a table session past 8 MiB).
  "$PY" -c "import numpy as np; r=np.random.default_rng(1); n=1<<$TABLE_LOG2; np.save('$W/a.npy', r.integers(-1000,1000,n).astype(np.int32)); np.save('$W/b.npy', r.standard_normal(n).astype(np.float32))"
  t0=$(date +%s.%N)
  if "$B/sortctl" table --target="127.0.0.1:$PORT" --columns="$W/a.npy,$W/b.npy" --by=a,b --orders=asc,desc --out="$W/perm.npy" 2> "$W/log.sortctl_table"; then
    t1=$(date +%s.%N)
    "$PY" -c "import numpy as np; a=np.load('$W/a.npy'); b=np.load('$W/b.npy'); p=np.load('$W/perm.npy'); w=np.lexsort((np.arange(len(a)), -b.astype(np.float64), a)); assert (p==w).all()" \
      && record PASS "sortctl table 2^$TABLE_LOG2 (C++ client)" 0 "$(awk "BEGIN{print $t1 - $t0}") s including .npy reads and writes; $(cat "$W/log.sortctl_table")" \
      || record FAIL "sortctl table 2^$TABLE_LOG2 (C++ client)" 0 "permutation differs from np.lexsort"
  else
    record FAIL "sortctl table 2^$TABLE_LOG2 (C++ client)" 0 "$(tail -2 "$W/log.sortctl_table" | tr '\n' ' ')"
  fi
  if [ "$RC" = 0 ]; then
    record PASS "types_bench (every answer checked)" "$SECS" "table above"
  else
    record FAIL "types_bench (every answer checked)" "$SECS" "exit $RC: $(tail -2 "$W/log.types_bench" | tr '\n' ' ')"
  fi
else
  record FAIL "bench sortd SERVING" 0 "$WAIT_DETAIL: $(tail -3 "$W/bench_sortd.log" | tr '\n' ' ')"
fi
stop_sortd "bench sortd" "$BENCH_PID" 60
finish
