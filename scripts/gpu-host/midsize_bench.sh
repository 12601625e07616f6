#!/usr/bin/env bash
# Mid-size arrays end to end on the GPU host (#50): the real sortd (GPU
# engine, defaults plus --diagnostics) over loopback, both clients:
#   1. C++ client (bench/transfer_bench.cc --sizes_log2): one Sort message
#      (unary), a sort session, a transfer-only session;
#   2. Python client (bench/midsize_bench.py): numpy.sort, echo of the same
#      request, transfer-only session, Client.sort, unary, session.
# Carry .device/bundle.tar.xz holding bundle/{bin/{sortd,sortd_transfer_bench,
# libsortd_client_c.so},lib}. SIZES (log2 keys), REPEAT, PY, VARIANTS (1:
# also the A/B variants of the client's channel settings) override.
set -euo pipefail
[ -d .device/bundle ] || tar -xJf .device/bundle.tar.xz -C .device
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
PY=${PY:-python3}
SIZES=${SIZES:-14,16,18,20,22,24}
REPEAT=${REPEAT:-15}
OUT=${OUT:-/tmp/midsize}
rm -rf "$OUT"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader || true
echo "cores: $(nproc); commit: ${SORTD_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}"
"$B/sortd" --diagnostics --listen=127.0.0.1:0 --port_file="$OUT/port" --metrics_listen= \
  ${SORTD_FLAGS:-} > "$OUT/sortd.log" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do [ -s "$OUT/port" ] && break; sleep 0.1; done
T=127.0.0.1:$(cat "$OUT/port")
grep -m1 "engine" "$OUT/sortd.log" || true
echo "== C++ client"
"$B/sortd_transfer_bench" --target="$T" --sizes_log2="$SIZES" --connections=${CONNS:-0} \
  --repeat="$REPEAT" --modes=auto,unary,sort,transfer | awk -F'\t' 'NR > 1 {$5 = sprintf("%.3f", $5 * 1e3); $6 = sprintf("%.3f", $6 * 1e3); $7 = sprintf("%.3f", $7 * 1e3)} {print}' OFS='\t' | tee "$OUT/cpp.tsv"
if [ "${VARIANTS:-0}" = 1 ]; then
  echo "== C++ client, gRPC's probed window (the old default)"
  "$B/sortd_transfer_bench" --target="$T" --sizes_log2="$SIZES" --repeat="$REPEAT" \
    --modes=unary --receive_window_bytes=0 | tail -n +2 | sed 's/^cpp/cpp-probe/'
  echo "== C++ client, no retry policy"
  "$B/sortd_transfer_bench" --target="$T" --sizes_log2="$SIZES" --repeat="$REPEAT" \
    --modes=unary --retries=false | tail -n +2 | sed 's/^cpp/cpp-noretry/'
fi
echo "== Python client"
export SORTD_CLIENT_LIB=$B/libsortd_client_c.so
export PYTHONPATH=client/python
"$PY" bench/midsize_bench.py --target "$T" --sizes_log2="$SIZES" --repeat="$REPEAT" --header \
  | tee "$OUT/py.tsv"
if [ "${VARIANTS:-0}" = 1 ]; then
  W='[["grpc.http2.lookahead_bytes", 8388608], ["grpc.http2.bdp_probe", 0]]'
  "$PY" bench/midsize_bench.py --target "$T" --sizes_log2="$SIZES" --repeat="$REPEAT" \
    --modes=echo,unary --options "$W" --label py-win8M
  "$PY" bench/midsize_bench.py --target "$T" --sizes_log2="$SIZES" --repeat="$REPEAT" \
    --modes=echo,unary --options "$W" --no_service_config --label py-win8M-noretry
  "$PY" bench/midsize_bench.py --target "$T" --sizes_log2="$SIZES" --repeat="$REPEAT" \
    --modes=echo,unary --no_service_config --label py-noretry
  "$PY" bench/midsize_bench.py --target "$T" --sizes_log2="$SIZES" --repeat="$REPEAT" \
    --modes=transfer,unary,session --native=off --label py-grpcio
fi
