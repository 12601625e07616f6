#!/usr/bin/env bash
# Bundled GPU service tests, then mixed load on the real sortd: large arrays
# (GPU, on their own pool) and small ones (CPU) at the same time.
set -u
B=$PWD/.device/bundle/bin
export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
echo "== service tests (bundled)"
timeout 300 $B/sortd_gpu_service_test 2>&1 | grep -E "^\[  (PASSED|FAILED) |Failure" | head
$B/sortd --listen=127.0.0.1:50083 --metrics_listen=127.0.0.1:9483 > /tmp/m.log 2>&1 &
P=$!
sleep 2
echo "== small alone"
$B/sortctl bench --target=127.0.0.1:50083 --keys=1024 --concurrency=4 --duration=3s | grep -E "throughput|latency"
echo "== small while 24 clients send 4 Mi-key arrays"
$B/sortctl bench --target=127.0.0.1:50083 --keys=4194304 --concurrency=24 --duration=6s > /tmp/big.txt 2>&1 &
sleep 1.5
$B/sortctl bench --target=127.0.0.1:50083 --keys=1024 --concurrency=4 --duration=3s | grep -E "throughput|latency"
wait %2 2>/dev/null; sleep 5
echo "== the large ones"; grep -E "throughput|latency|requests:" /tmp/big.txt
curl -s 127.0.0.1:9483/metrics | grep -E '^sortd_keys_sorted_total\{engine="(cpu|gpu_radix)"\}'
kill -TERM $P; wait $P; echo "exit $?"
