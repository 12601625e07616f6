#!/usr/bin/env bash
# GPU/CPU crossover for --gpu_min_keys: Sort RPC latency/throughput by size
# on a --engine=gpu server (every size on the GPU) vs --engine=cpu.
set -u
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
$B/sortd --engine=gpu --listen=127.0.0.1:50071 --metrics_listen= > /tmp/g.log 2>&1 &
G=$!
$B/sortd --engine=cpu --listen=127.0.0.1:50072 --metrics_listen= > /tmp/c.log 2>&1 &
C=$!
sleep 2
for type in uint32 uint64; do
for keys in 4096 16384 65536 131072 262144 1048576; do
  for conc in 1 8; do
    line="$type $keys keys conc=$conc"
    for port in 50071 50072; do
      r=$(timeout 30 $B/sortctl bench --target=127.0.0.1:$port --type=$type --keys=$keys --concurrency=$conc --duration=2s 2>&1)
      line="$line | $([ $port = 50071 ] && echo gpu || echo cpu) $(echo "$r" | grep -oE '[0-9.]+ req/s') p50 $(echo "$r" | grep -oE 'p50 [0-9.]+ ms' | cut -d' ' -f2)ms"
    done
    echo "$line"
  done
done
done
kill -TERM $G $C; wait
