#!/usr/bin/env bash
# Sort sessions with and without the arriving path (#17): the real sortd
# with --gpu_arriving_streams=1 (default) and =0 (sort after the upload),
# alternating, the C++ client at SIZES MiB over 8 connections, after a
# warm-up run of each size (so the server's pinned blocks exist). Carry
# .device/xfer.tar.xz (transfer_bench.sh has the layout).
set -euo pipefail
[ -d .device/xfer ] || tar -xJf .device/xfer.tar.xz -C .device
B=$PWD/.device/xfer/bin
export LD_LIBRARY_PATH=$PWD/.device/xfer/lib
SIZES=${SIZES:-256,1024}
REPEAT=${REPEAT:-5}
MODES=${MODES:-1 0 1 0}
OUT=${OUT:-/tmp/arriving}
rm -rf "$OUT"; mkdir -p "$OUT"
for mode in $MODES; do
  rm -f "$OUT/port"
  "$B/sortd" --diagnostics --listen=127.0.0.1:0 --port_file="$OUT/port" --metrics_listen= \
    --gpu_arriving_streams="$mode" >> "$OUT/sortd.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do [ -s "$OUT/port" ] && break; sleep 0.1; done
  T=127.0.0.1:$(cat "$OUT/port")
  "$B/sortd_transfer_bench" --target="$T" --sizes_mib="$SIZES" --connections=8 --repeat=2 \
    > /dev/null
  echo "== --gpu_arriving_streams=$mode"
  timeout 200 "$B/sortd_transfer_bench" --target="$T" --sizes_mib="$SIZES" --connections=8 \
    --repeat="$REPEAT" | tee -a "$OUT/ab.tsv"
  if [ -n "${PAIRS:-}" ]; then
    timeout 200 "$B/sortd_transfer_bench" --target="$T" --sizes_mib=1024 --connections=8 \
      --repeat=3 --values | tail -n +2 | sed 's/^cpp/cpp-pairs/' | tee -a "$OUT/ab.tsv"
  fi
  kill -TERM "$PID"; wait "$PID" || true
done
