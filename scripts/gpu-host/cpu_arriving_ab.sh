#!/usr/bin/env bash
# The CPU engine with and without sorting sessions while their parts arrive
# (#17), on the GPU host's 16 cores: the same client against two sortd
# binaries with --engine=cpu, alternating, best of REPEAT per round.
# Carry .device/xfer.tar.xz (the new build; xfer/bin/{sortd,
# sortd_transfer_bench}) and BEFORE=path of the old sortd (same libraries).
set -euo pipefail
[ -d .device/xfer ] || tar -xJf .device/xfer.tar.xz -C .device
B=$PWD/.device/xfer/bin
export LD_LIBRARY_PATH=$PWD/.device/xfer/lib
BEFORE=${BEFORE:?the sortd binary to compare with}
SIZES=${SIZES:-256,1024}
REPEAT=${REPEAT:-3}
ROUNDS=${ROUNDS:-2}
OUT=${OUT:-/tmp/cpuab}
rm -rf "$OUT"; mkdir -p "$OUT"
echo "cores: $(nproc); commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
run() {  # run LABEL BINARY
  rm -f "$OUT/port"
  "$2" --engine=cpu --diagnostics --listen=127.0.0.1:0 --port_file="$OUT/port" --metrics_listen= \
    > "$OUT/$1.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 300); do [ -s "$OUT/port" ] && break; sleep 0.1; done
  timeout 300 "$B/sortd_transfer_bench" --target="127.0.0.1:$(cat "$OUT/port")" --sizes_mib="$SIZES" \
    --connections=8 --repeat="$REPEAT" | tail -n +2 | sed "s/^cpp/$1/"
  kill -TERM "$pid"; wait "$pid" || true
}
echo "label	mode	bytes	connections	best_s	median_s	first_s	GB/s	client_rss_MiB"
for r in $(seq 1 "$ROUNDS"); do
  run before "$BEFORE"
  run after "$B/sortd"
done
