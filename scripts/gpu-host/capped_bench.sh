#!/usr/bin/env bash
# End to end beyond loopback (#50, "Measure beyond loopback"): the real
# sortd (GPU engine, --diagnostics) behind bench/throttle_proxy.cc at each
# link rate of CAPS (Gbit/s each way; 0: loopback, no proxy), both clients:
#   C++ (sortd_transfer_bench): a sort session with raw keys, one with
#       delta-coded keys, a transfer-only session;
#   Python (bench/midsize_bench.py, native library): numpy.sort, transfer,
#       sort_raw, sort_coded, with the bytes each call put on the wire.
# Carry .device/bundle.tar.xz holding bundle/{bin/{sortd,sortd_transfer_bench,
# sortd_throttle_proxy,libsortd_client_c.so},lib}. CAPS, SIZES (log2 keys),
# REPEAT, PY, RESULTS (the folder of the tables) override; KEY_BITS=64 runs
# the C++ client on uint64 keys (SIZES count keys), SKIP_PY=1 leaves Python
# out, SORTD_FLAGS reaches sortd (e.g. --engine=cpu).
set -euo pipefail
[ -d .device/bundle ] || tar -xJf .device/bundle.tar.xz -C .device
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
PY=${PY:-python3}
CAPS=${CAPS:-0 25 10}
SIZES=${SIZES:-20,24,28}
REPEAT=${REPEAT:-3}
KEY_BITS=${KEY_BITS:-32}
SKIP_PY=${SKIP_PY:-0}
RESULTS=${RESULTS:-/tmp/capped}
rm -rf "$RESULTS"; mkdir -p "$RESULTS"
nvidia-smi --query-gpu=name --format=csv,noheader || true
echo "cores: $(nproc); commit: ${SORTD_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}"
"$B/sortd" --diagnostics --listen=127.0.0.1:0 --port_file="$RESULTS/port" --metrics_listen= \
  ${SORTD_FLAGS:-} > "$RESULTS/sortd.log" 2>&1 &
PIDS=$!
trap 'kill -TERM $PIDS 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do [ -s "$RESULTS/port" ] && break; sleep 0.1; done
SERVER=127.0.0.1:$(cat "$RESULTS/port")
export SORTD_CLIENT_LIB=$B/libsortd_client_c.so
export PYTHONPATH=client/python
for cap in $CAPS; do
  T=$SERVER
  STATS=()
  if [ "$cap" != 0 ]; then
    rm -f "$RESULTS/proxy.port"
    "$B/sortd_throttle_proxy" --target "$SERVER" --gbit "$cap" --listen_port_file "$RESULTS/proxy.port" \
      --stats_file "$RESULTS/proxy.stats" 2> "$RESULTS/proxy-$cap.log" &
    PROXY=$!
    PIDS="$PIDS $PROXY"
    for _ in $(seq 1 100); do [ -s "$RESULTS/proxy.port" ] && break; sleep 0.05; done
    T=127.0.0.1:$(cat "$RESULTS/proxy.port")
    STATS=(--proxy_stats "$RESULTS/proxy.stats")
  fi
  label=$([ "$cap" = 0 ] && echo loopback || echo "${cap}G")
  echo "== $label: C++ client"
  "$B/sortd_transfer_bench" --target="$T" --sizes_log2="$SIZES" --connections=0 \
    --repeat="$REPEAT" --modes=sort,coded,transfer --key_bits="$KEY_BITS" \
    | awk -F'\t' -v cap="$label" -v bits="$KEY_BITS" 'NR > 1 {$1 = "cpp-u" bits "-" cap; $5 = sprintf("%.1f", $5 * 1e3); $6 = sprintf("%.1f", $6 * 1e3); $7 = sprintf("%.1f", $7 * 1e3); print}' OFS='\t' \
    | tee -a "$RESULTS/cpp.tsv"
  if [ "$SKIP_PY" != 1 ]; then
    echo "== $label: Python client"
    "$PY" bench/midsize_bench.py --target "$T" --sizes_log2="$SIZES" --repeat="$REPEAT" \
      --modes=numpy,transfer,sort_raw,sort_coded --label "py-$label" ${STATS[@]+"${STATS[@]}"} \
      | tee -a "$RESULTS/py.tsv"
  fi
  if [ "$cap" != 0 ]; then kill -TERM "$PROXY"; wait "$PROXY" 2>/dev/null || true; fi
done
echo "== C++ (ms: best, median, first)"
cat "$RESULTS/cpp.tsv"
if [ "$SKIP_PY" != 1 ]; then
  echo "== Python (ms; wire bytes a call)"
  cat "$RESULTS/py.tsv"
fi
