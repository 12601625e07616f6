#!/usr/bin/env bash
# Batching on vs off against gRPC echo (#6): 64 concurrent streams (and 64
# unary clients) of 1024-, 16384- and 262144-key u32 requests. For each
# batching mode a fresh sortd --diagnostics runs; sortctl bench --with_echo
# measures echo and sort of the same payload in one run.
#   BIN=build scripts/gpu-host/batch_bench.sh   (dev VM: binaries in build/)
#   scripts/gpu-host/batch_bench.sh             (GPU host: .device/bundle)
set -u
. "$(dirname "$0")/server_binaries.sh"
DUR=${DUR:-4s}
MODES=${MODES:-"off auto"}
SIZES=${SIZES:-"1024 16384 262144"}
for mode in $MODES; do
  $SORTD --diagnostics --batching=$mode --listen=127.0.0.1:50091 --metrics_listen=127.0.0.1:0 \
    --max_message_bytes=100000000 ${SORTD_FLAGS:-} > /tmp/batch_$mode.log 2>&1 &
  P=$!
  sleep 2
  echo "#### batching=$mode: $(grep -m1 engine /tmp/batch_$mode.log)"
  for keys in $SIZES; do
    for method in stream sort; do
      echo "== batching=$mode method=$method keys=$keys conc=64"
      timeout 120 $SORTCTL bench --target=127.0.0.1:50091 --with_echo --method=$method \
        --keys=$keys --concurrency=64 --duration=$DUR --max_message_bytes=100000000 2>&1 |
        grep -E "requests/s|ratio|p50|engine" | head -8
    done
  done
  kill -TERM $P; wait $P
done
