#!/usr/bin/env bash
# A report (it prints numbers and asserts nothing; formerly arena_check.sh):
# --malloc_arena_max values (ARENAS, default "0 1"; sortd's default is 8), on the
# real sortd: Sort/SortStream throughput at 1024 keys, 16 MiB and 256 MiB,
# then a soak reporting the idle RSS after load (docs/hardening.md,
# "Memory"); ARENAS="0 1" (default) picks the values, SPECS the bench rows
# (keys:concurrency:method ...), SOAK=0 skips the soak. Carry .device/perf.tar.xz (bundle-libs of sortd and sortctl).
set -u
[ -d .device/perf ] || tar -C .device -xJf .device/perf.tar.xz
export LD_LIBRARY_PATH=$PWD/.device/perf/lib
B=$PWD/.device/perf/bin
SOAK_S=${SOAK_S:-40}
for arenas in ${ARENAS:-0 1}; do
  $B/sortd --malloc_arena_max=$arenas --listen=127.0.0.1:50300 --metrics_listen= \
    --max_message_bytes=1000000000 > /tmp/arena_$arenas.log 2>&1 &
  pid=$!
  for i in $(seq 100); do $B/sortctl health --target=127.0.0.1:50300 >/dev/null 2>&1 && break; sleep 0.1; done
  for spec in ${SPECS:-1024:8:sort 1024:8:stream 4194304:4:sort 67108864:1:sort}; do
    IFS=: read -r keys conc method <<< "$spec"
    set -- $keys $conc $method
    r=$(timeout 60 $B/sortctl bench --target=127.0.0.1:50300 --max_message_bytes=1000000000 \
      --type=uint32 --keys=$1 --concurrency=$2 --method=$3 --duration=5s 2>&1 \
      | grep -E 'throughput|latency' | tr -s ' ' | tr '\n' ' ')
    echo "arenas=$arenas keys=$1 conc=$2 $3 | $r"
  done
  kill -TERM $pid; wait $pid
  [ "${SOAK:-1}" = 0 ] && continue
  SORTD_BIN=$B/sortd PYTHONPATH=client/python:tests/e2e timeout 200 python3 bench/soak.py \
    --duration=$SOAK_S --clients=32 --max_keys=4194304 -- --malloc_arena_max=$arenas 2>&1 \
    | grep -E '^RSS|^soak|load phase' | sed "s/^/arenas=$arenas soak: /"
done
