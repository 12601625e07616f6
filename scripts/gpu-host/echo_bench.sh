#!/usr/bin/env bash
# Sort vs gRPC echo of the same payload on the GPU host (sortd --diagnostics,
# --engine=auto: GPU for arrays >= --gpu_min_keys), u32 keys.
set -u
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
$B/sortd --diagnostics --listen=127.0.0.1:50081 --metrics_listen= --max_message_bytes=1000000000 > /tmp/e.log 2>&1 &
P=$!
sleep 2
head -1 /tmp/e.log
run() {
  echo "== $*"
  timeout 120 $B/sortctl bench --target=127.0.0.1:50081 --with_echo --max_message_bytes=1000000000 "$@" 2>&1 | grep -E "method|throughput|latency|requests/s|p50:"
}
run --keys=1024 --concurrency=8 --duration=4s
run --method=stream --keys=1024 --concurrency=8 --duration=4s
run --keys=4194304 --concurrency=4 --duration=5s
run --keys=67108864 --concurrency=1 --duration=6s
kill -TERM $P; wait $P
