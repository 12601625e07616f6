#!/usr/bin/env bash
# A/B of the unary path (#50, "a unary GPU sort makes no CopyFrom pass"):
# two sortd binaries, the one before the change (bin/sortd_before) and after
# (bin/sortd), on the GPU engine over loopback, each serving in turn; the
# C++ client's one-message Sort (transfer_bench --modes=unary) at each size,
# keys alone and with uint32 values, then the Python client's unary mode.
# Carry .device/bundle.tar.xz holding bundle/{bin/{sortd,sortd_before,
# sortd_transfer_bench,libsortd_client_c.so},lib}. SIZES (log2 keys),
# REPEAT, ROUNDS (alternations), RESULTS override.
set -euo pipefail
[ -d .device/bundle ] || tar -xJf .device/bundle.tar.xz -C .device
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
SIZES=${SIZES:-14,16,18,20,22,24}
REPEAT=${REPEAT:-15}
ROUNDS=${ROUNDS:-2}
RESULTS=${RESULTS:-/tmp/unary_ab}
rm -rf "$RESULTS"; mkdir -p "$RESULTS"
nvidia-smi --query-gpu=name --format=csv,noheader || true
echo "cores: $(nproc); commit: ${SORTD_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}"
export SORTD_CLIENT_LIB=$B/libsortd_client_c.so PYTHONPATH=client/python
for round in $(seq 1 "$ROUNDS"); do
  for variant in sortd_before sortd; do
    rm -f "$RESULTS/port"
    "$B/$variant" --listen=127.0.0.1:0 --port_file="$RESULTS/port" --metrics_listen= \
      > "$RESULTS/$variant.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 600); do [ -s "$RESULTS/port" ] && break; sleep 0.1; done
    T=127.0.0.1:$(cat "$RESULTS/port")
    for values in false true; do
      "$B/sortd_transfer_bench" --target="$T" --sizes_log2="$SIZES" --repeat="$REPEAT" \
        --modes=unary --values=$values | tail -n +2 \
        | awk -F'\t' -v v="$variant" -v p="$values" -v r="$round" \
          '{printf "%s\t%s\t%s\t%s\t%.3f\t%.3f\n", v, (p == "true" ? "pairs" : "keys"), r, $3, $5 * 1e3, $6 * 1e3}' \
        | tee -a "$RESULTS/cpp.tsv"
    done
    python3 bench/midsize_bench.py --target "$T" --sizes_log2="$SIZES" --repeat="$REPEAT" \
      --modes=unary --label "py-$variant-r$round" | tee -a "$RESULTS/py.tsv"
    kill -TERM "$PID"; wait "$PID" 2>/dev/null || true
  done
done
echo "== C++ unary (variant, arrays, round, payload bytes, best ms, median ms)"
sort -t$'\t' -k2,2 -k4,4n -k1,1 "$RESULTS/cpp.tsv"
echo "== Python unary"
sort -t$'\t' -k3,3n -k1,1 "$RESULTS/py.tsv"
