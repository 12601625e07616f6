#!/usr/bin/env bash
# Server memory around large sorts (#17: server peak RSS <= 1.25x the array):
# for each sortd configuration, a fresh server (GPU engine), its idle RSS,
# one cold 1 GiB u32 sort over 8 connections (the server pins the session's
# block during it), then two more over the same warm connections, VmHWM
# after each step; then 1 GiB sorts and transfer-only runs (best of 3) for
# the time each configuration costs.
# Carry .device/xfer.tar.xz as for transfer_bench.sh. CONFIGS: ';'-separated
# "label|sortd binary|flags" (default: this tree's sortd as it starts, with
# gRPC's own receive window, and with 4 MiB windows); OLD_SORTD adds an older
# binary. RSS_MODES (transfer_bench modes of the measured sorts: sort, raw
# keys, by default; coded for delta-coded keys) overrides.
set -euo pipefail
[ -d .device/xfer ] || tar -xJf .device/xfer.tar.xz -C .device
B=$PWD/.device/xfer/bin
export LD_LIBRARY_PATH=$PWD/.device/xfer/lib
OUT=${OUT:-/tmp/rss}
RSS_MODES=${RSS_MODES:-sort}
rm -rf "$OUT"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
echo "cores: $(nproc); commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
CONFIGS=${CONFIGS:-"default|$B/sortd|;grpc_window|$B/sortd|--receive_window_bytes=0;window_4MiB|$B/sortd|--receive_window_bytes=4194304"}
if [ -n "${OLD_SORTD:-}" ]; then CONFIGS="old|$OLD_SORTD|;$CONFIGS"; fi

start() {  # start binary [flags]: sets PID, PORT
  local bin=$1; shift
  rm -f "$OUT/port"
  "$bin" --diagnostics --listen=127.0.0.1:0 --port_file="$OUT/port" --metrics_listen= "$@" >> "$OUT/sortd.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do [ -s "$OUT/port" ] && break; sleep 0.1; done
  PORT=$(cat "$OUT/port")
}
stop() { kill -TERM "$PID"; wait "$PID" || true; }
mib() { awk -v k="$2" '$1 == k":" {printf "%.0f", $2/1024}' "/proc/$1/status"; }
bench() {  # bench args...: 1 GiB u32 over 8 connections, the bench's rows
  "$B/sortd_transfer_bench" --target=127.0.0.1:$PORT --sizes_mib=1024 --connections=8 "$@" | tail -n +2
}

printf '%-14s %6s %9s %9s %9s %s\n' config idle cold_hwm warm_hwm cold/1GiB "times (sort, transfer: best/median ms)"
IFS=';' read -ra CONFIG_LIST <<< "$CONFIGS"
for config in "${CONFIG_LIST[@]}"; do
  IFS='|' read -r label bin flags <<< "$config"
  # shellcheck disable=SC2086
  start "$bin" $flags
  sleep 1
  idle=$(mib "$PID" VmRSS)
  bench --repeat=1 --modes="$RSS_MODES" > "$OUT/$label.cold" 2>&1
  cold=$(mib "$PID" VmHWM)
  bench --repeat=2 --modes="$RSS_MODES" > "$OUT/$label.warm" 2>&1
  warm=$(mib "$PID" VmHWM)
  times=$(bench --repeat=3 --modes="$RSS_MODES,transfer" 2>&1 | awk -F'\t' '$1 == "cpp" {printf "%s %.0f/%.0f  ", $2, $5 * 1000, $6 * 1000}')
  stop
  printf '%-14s %6s %9s %9s %8.2fx %s\n' "$label" "$idle" "$cold" "$warm" "$(awk -v c="$cold" 'BEGIN {print c / 1024}')" "$times"
done
