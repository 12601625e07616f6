#!/usr/bin/env bash
# GPU/CPU crossover for --gpu_min_keys: Sort RPC latency/throughput by size
# on a --engine=gpu server (every size on the GPU) vs --engine=cpu.
#   KEYS="4096 ..." sizes, TYPES="uint32 uint64", DURATION=2s,
#   SERVER_FLAGS="--batching=off" (both servers; with batching on, requests
#   of <= --max_batch_request_keys go through the batcher, not the radix).
set -u
KEYS=${KEYS:-4096 16384 65536 131072 262144 1048576}
TYPES=${TYPES:-uint32 uint64}
if [ -f .device/bundle.tar.xz ] && [ ! -d .device/bundle ]; then tar -C .device -xJf .device/bundle.tar.xz; fi
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
$B/sortd --engine=gpu --listen=127.0.0.1:50071 --metrics_listen= ${SERVER_FLAGS:-} > /tmp/g.log 2>&1 &
G=$!
$B/sortd --engine=cpu --listen=127.0.0.1:50072 --metrics_listen= ${SERVER_FLAGS:-} > /tmp/c.log 2>&1 &
C=$!
sleep 2
kill -0 $G && kill -0 $C || { echo "a server did not start:"; tail -3 /tmp/g.log /tmp/c.log; exit 1; }
for type in $TYPES; do
for keys in $KEYS; do
  for conc in 1 8; do
    line="$type $keys keys conc=$conc"
    for port in 50071 50072; do
      r=$(timeout 30 $B/sortctl bench --target=127.0.0.1:$port --type=$type --keys=$keys --concurrency=$conc --duration=${DURATION:-2s} 2>&1)
      line="$line | $([ $port = 50071 ] && echo gpu || echo cpu) $(echo "$r" | grep -oE '[0-9.]+ req/s') p50 $(echo "$r" | grep -oE 'p50 [0-9.]+ ms' | cut -d' ' -f2)ms"
    done
    echo "$line"
  done
done
done
kill -TERM $G $C; wait
