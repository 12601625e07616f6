#!/usr/bin/env bash
# Large sorts end to end on the GPU host (#17): the real sortd (--diagnostics,
# default flags otherwise) and real clients over loopback, in one run:
#   1. C++ client (bench/transfer_bench.cc): 1 MiB..1 GiB u32 keys over 1..8
#      connections, sort and transfer-only (the same bytes up and back with no
#      sort), and the old single-stream SortChunked path;
#   2. 4 GiB keys, and 1 GiB keys + 1 GiB u32 values;
#   3. Python client (bench/transfer_bench.py): sort, transfer-only and
#      numpy.sort of the same arrays;
#   4. peak RSS of a fresh server and client around one 1 GiB sort;
#   5. small requests (1024 keys, unary and SortStream) against echo.
# Carry .device/xfer.tar.xz holding
# xfer/{bin/{sortd,sortctl,sortd_transfer_bench,libsortd_client_c.so},lib}.
# SIZES, CONNS, REPEAT, PY override the defaults. Columns: best and median
# of REPEAT runs, and the first run (cold: the server pins a block of that
# size in the background during it, docs/architecture.md).
set -euo pipefail
[ -d .device/xfer ] || tar -xJf .device/xfer.tar.xz -C .device
B=$PWD/.device/xfer/bin
export LD_LIBRARY_PATH=$PWD/.device/xfer/lib
PY=${PY:-python3}
SIZES=${SIZES:-1,16,64,256,1024}
CONNS=${CONNS:-1,2,4,8}
REPEAT=${REPEAT:-3}
OUT=${OUT:-/tmp/xfer}
rm -rf "$OUT"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
echo "cores: $(nproc); commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"

start() {  # start [flags]: sets PID, PORT
  rm -f "$OUT/port"
  "$B/sortd" --diagnostics --listen=127.0.0.1:0 --port_file="$OUT/port" --metrics_listen= \
    "$@" >> "$OUT/sortd.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do [ -s "$OUT/port" ] && break; sleep 0.1; done
  PORT=$(cat "$OUT/port")
  grep -m1 "engine" "$OUT/sortd.log" || true
}
stop() { kill -TERM "$PID"; wait "$PID" || true; }
hwm() { awk '/VmHWM/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }

start
T=127.0.0.1:$PORT
echo "== C++ client: sort / transfer-only / SortChunked"
timeout 400 "$B/sortd_transfer_bench" --target="$T" --sizes_mib="$SIZES" --connections="$CONNS" \
  --repeat="$REPEAT" --chunked | tee "$OUT/cpp.tsv"
echo "== C++ client: 4 GiB keys; 1 GiB keys + 1 GiB values (8 connections)"
timeout 200 "$B/sortd_transfer_bench" --target="$T" --sizes_mib=4096 --connections=8 --repeat=2 \
  | tail -n +2 | tee -a "$OUT/cpp.tsv"
timeout 200 "$B/sortd_transfer_bench" --target="$T" --sizes_mib=1024 --connections=8 --repeat=2 \
  --values | tail -n +2 | sed 's/^cpp/cpp-pairs/' | tee -a "$OUT/cpp.tsv"
echo "== Python client"
# Sessions through the C++ client's C library (bundled as
# xfer/bin/libsortd_client_c.so), then through grpcio.
export SORTD_CLIENT_LIB=$B/libsortd_client_c.so
PYTHONPATH=client/python timeout 400 "$PY" bench/transfer_bench.py --target "$T" \
  --sizes_mib="$SIZES" --connections=4,8 --repeat="$REPEAT" --native=on | tee "$OUT/py.tsv"
PYTHONPATH=client/python timeout 400 "$PY" bench/transfer_bench.py --target "$T" \
  --sizes_mib="$SIZES" --connections=4,8 --repeat="$REPEAT" --native=off --modes=sort,transfer \
  | tee -a "$OUT/py.tsv"
echo "== small requests against echo (1024 keys)"
timeout 60 "$B/sortctl" bench --target="$T" --with_echo --method=sort --keys=1024 --duration=5s \
  2>&1 | grep -E "ratio|requests/s" | tail -3
timeout 60 "$B/sortctl" bench --target="$T" --with_echo --method=stream --keys=1024 --duration=5s \
  2>&1 | grep -E "ratio|requests/s" | tail -3
stop

echo "== peak RSS, fresh server: one 1 GiB u32 sort (cold: no pinned block yet), then 2 more"
start
echo "server VmRSS idle: $(awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$PID/status") MiB"
"$B/sortd_transfer_bench" --target=127.0.0.1:$PORT --sizes_mib=1024 --connections=8 --repeat=1 \
  --transfer=false | tail -n +2 | tee "$OUT/rss_cpp.tsv"
echo "server VmHWM after the first (cold) C++ 1 GiB: $(hwm "$PID") MiB"
"$B/sortd_transfer_bench" --target=127.0.0.1:$PORT --sizes_mib=1024 --connections=8 --repeat=2 \
  --transfer=false | tail -n +2 | tee -a "$OUT/rss_cpp.tsv"
echo "server VmHWM after two more: $(hwm "$PID") MiB"
stop
start
PYTHONPATH=client/python "$PY" bench/transfer_bench.py --target 127.0.0.1:$PORT --sizes_mib=1024 \
  --connections=8 --repeat=1 --modes=sort | tee "$OUT/rss_py.tsv"
echo "server VmHWM after Python 1 GiB: $(hwm "$PID") MiB"
stop
