#!/usr/bin/env bash
# Device run: the real sortd with byte-string keys on the GPU merge sort,
# through sortctl (unary Sort and, with a small client message limit,
# SortChunked), verified against Python's stable sort of the same lines and
# against a CPU-engine sortd; then the bundled GPU service tests.
# Needs .device/bundle with sortd, sortctl, sortd_gpu_service_test
# (../shared/tools/bundle-libs; carry .device or a tarball of it).
#   N=200000 strings (default); SERVICE=0 skips the service tests.
set -u
ROOT=$PWD
B=$ROOT/.device/bundle/bin
export LD_LIBRARY_PATH=$ROOT/.device/bundle/lib
N=${N:-200000}
$B/sortd --listen=127.0.0.1:50071 --metrics_listen=127.0.0.1:9481 --max_message_bytes=1000000000 > /tmp/bytes_gpu.log 2>&1 &
GPU_PID=$!
$B/sortd --engine=cpu --listen=127.0.0.1:50072 --metrics_listen=127.0.0.1:9482 --max_message_bytes=1000000000 > /tmp/bytes_cpu.log 2>&1 &
CPU_PID=$!
# Lines of 0..120 bytes: shared prefixes, duplicates, bytes >= 0x80 (no
# newline or CR: one key per line).
python3 - "$N" <<'PY'
import random, sys
n = int(sys.argv[1]); rng = random.Random(5)
alphabet = [b for b in range(256) if b not in (10, 13)]
prefixes = [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(64)]
with open("/tmp/bytes_in.txt", "wb") as f:
    for i in range(n):
        r = rng.random()
        if r < 0.1 and i > 0: s = last  # duplicates
        else: s = rng.choice(prefixes) + bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        last = s
        f.write(s + b"\n")
PY
for i in $(seq 50); do
  $B/sortctl health --target=127.0.0.1:50071 >/dev/null 2>&1 && $B/sortctl health --target=127.0.0.1:50072 >/dev/null 2>&1 && break
  sleep 0.2
done
head -2 /tmp/bytes_gpu.log
for order in asc desc; do
  for mode in unary chunked; do
    limit=1000000000; [ $mode = chunked ] && limit=8388608  # >= the server's 4 MiB response chunks
    for port in 50071 50072; do
      rm -f /tmp/bytes_out_$port.txt /tmp/bytes_idx_$port.bin
      $B/sortctl sort --target=127.0.0.1:$port --max_message_bytes=$limit --type=bytes --format=text --order=$order \
        --in=/tmp/bytes_in.txt --out=/tmp/bytes_out_$port.txt --indices_out=/tmp/bytes_idx_$port.bin 2> /tmp/bytes_err_$port.txt \
        || { echo "sort failed on $port:"; cat /tmp/bytes_err_$port.txt; }
    done
    same=$(cmp -s /tmp/bytes_out_50071.txt /tmp/bytes_out_50072.txt && cmp -s /tmp/bytes_idx_50071.bin /tmp/bytes_idx_50072.bin && echo identical || echo DIFFERENT)
    python3 - "$order" "$mode" "$(cat /tmp/bytes_err_50071.txt)" "$same" <<'PY'
import sys, struct
order, mode, msg, same = sys.argv[1:5]
import os
keys = open("/tmp/bytes_in.txt", "rb").read().split(b"\n")[:-1]
if not os.path.exists("/tmp/bytes_idx_50071.bin"):
    print(f"bytes {order:4s} {mode:7s} FAILED: {msg.strip()}"); sys.exit(0)
out = open("/tmp/bytes_out_50071.txt", "rb").read().split(b"\n")[:-1]
raw = open("/tmp/bytes_idx_50071.bin", "rb").read()
idx = struct.unpack(f"<{len(raw)//8}Q", raw)
ref = sorted(range(len(keys)), key=lambda i: keys[i], reverse=False)
if order == "desc":  # stable descending: equal keys keep input order
    ref = sorted(range(len(keys)), key=lambda i: keys[i], reverse=True)
ok_idx = list(idx) == ref
ok_keys = out == [keys[i] for i in ref]
print(f"bytes {order:4s} {mode:7s} {msg.strip():38s} keys {'OK' if ok_keys else 'WRONG'} indices {'OK' if ok_idx else 'WRONG'} vs cpu sortd {same}")
PY
  done
done
echo "== metrics (gpu server)"
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9481/metrics').read().decode())" | grep -E '^sortd_(keys_sorted_total|gpu_fallbacks_total|requests_total\{.*bytes)' | head -12
kill -TERM $GPU_PID $CPU_PID; wait $GPU_PID; echo "gpu sortd exit $?"; wait $CPU_PID
if [ "${SERVICE:-1}" = 1 ]; then
  echo "== service tests (bundled)"
  timeout 300 $B/sortd_gpu_service_test 2>&1 | grep -E '^\[  (PASSED|FAILED)|Failure' | head -20
fi
