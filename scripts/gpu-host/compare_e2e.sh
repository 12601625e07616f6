#!/usr/bin/env bash
# End to end on the GPU host, two server builds in one run (the user's view
# of a service change): sortctl bench against the gRPC echo of the same
# payload (small unary, small stream, 16 MiB unary), the Python client
# sorting a 256 MiB u32 array (time, verified against numpy.sort, client and
# server peak RSS) next to numpy.sort itself, and the cancellation storm's
# RSS. MODES (default: "default mmap1m") picks the allocator settings:
# default (glibc), mmap1m (MALLOC_MMAP_THRESHOLD_=1048576), jemalloc and
# tcmalloc (LD_PRELOAD of the libraries carried in .device/alloc); BUILDS
# (default "old new"); BENCH=0 skips the sortctl benches, PYSORT=0 the
# Python sort, CANCEL=0 the cancellation storm.
# Carry .device/cmp.tar.xz holding cmp/{bin/{sortd,sortctl}.{old,new},lib}.
set -euo pipefail
[ -d .device/cmp ] || tar -xJf .device/cmp.tar.xz -C .device
B=$PWD/.device/cmp/bin
export LD_LIBRARY_PATH=$PWD/.device/cmp/lib
PY=${PY:-python3}
OUT=${OUT:-/tmp/cmp}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
echo "cores: $(nproc)"

start() {  # start NAME [env...] -- flags: sets PID, PORT
  local name=$1; shift
  rm -f "$OUT/port" "$OUT/mport"
  env "$@" "$B/sortd.$name" --diagnostics --listen=127.0.0.1:0 --port_file="$OUT/port" \
    --metrics_listen=127.0.0.1:0 --metrics_port_file="$OUT/mport" > "$OUT/sortd.$name.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 600); do [ -s "$OUT/port" ] && break; sleep 0.1; done
  PORT=$(cat "$OUT/port")
}
stop() { kill -TERM "$PID"; wait "$PID" || true; }

bench() {  # bench NAME args: one line per run
  timeout 120 "$B/sortctl.$1" bench --target=127.0.0.1:$PORT --with_echo \
    --max_message_bytes=67108864 "${@:2}" 2>&1 | grep -E "ratio|requests/s|throughput" | tr -s ' ' | tr '\n' ' '
  echo
}

python_sort() {  # python_sort LABEL: 256 MiB through the Python client
  PYTHONPATH=client/python "$PY" - "127.0.0.1:$PORT" "$PID" "$1" <<'PY'
import resource, sys, time
import numpy as np
from sortd_client import Client
target, pid, label = sys.argv[1], int(sys.argv[2]), sys.argv[3]
keys = np.random.default_rng(11).integers(0, 2**32, 1 << 26, dtype=np.uint64).astype(np.uint32)
t = time.perf_counter(); ref = np.sort(keys); t_np = time.perf_counter() - t
with Client(target) as c:
    c.sort(keys[:1 << 16])
    times = []
    for _ in range(3):
        t = time.perf_counter(); out = c.sort(keys); times.append(time.perf_counter() - t)
        assert np.array_equal(out, ref), "wrong result"
hwm = [l for l in open("/proc/%d/status" % pid) if l.startswith("VmHWM")][0].split()[1]
print("%-14s python 2^26 u32: median %.3f s (%s), numpy.sort %.3f s, client peak RSS %.0f MiB, server peak RSS %.0f MiB" % (
    label, sorted(times)[1], " ".join("%.3f" % x for x in times), t_np,
    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, int(hwm) / 1024))
PY
}

for build in ${BUILDS:-old new}; do
  for mode in ${MODES:-default mmap1m}; do
    case "$mode" in
      default) envs=() ;;
      mmap1m) envs=(MALLOC_MMAP_THRESHOLD_=1048576) ;;
      jemalloc) envs=(LD_PRELOAD=$PWD/.device/alloc/libjemalloc.so.2) ;;
      tcmalloc) envs=(LD_PRELOAD=$PWD/.device/alloc/libtcmalloc_minimal.so.4) ;;
    esac
    label="$build/$mode"
    start "$build" "${envs[@]}"
    head -1 "$OUT/sortd.$build.log" | cut -c1-160
    if [ "$mode" = default ] && [ "${BENCH:-1}" = 1 ]; then
      echo "$label unary 1024 keys x8:   $(bench $build --keys=1024 --concurrency=8 --duration=4s)"
      echo "$label stream 1024 keys x8:  $(bench $build --method=stream --keys=1024 --concurrency=8 --duration=4s)"
      echo "$label unary 4Mi keys x4:    $(bench $build --keys=4194304 --concurrency=4 --duration=5s)"
    fi
    if [ "${PYSORT:-1}" = 1 ]; then python_sort "$label"; fi
    stop
    if [ "${CANCEL:-1}" = 1 ]; then
      echo "$label cancel storm: $(env "${envs[@]}" PYTHONPATH=client/python "$PY" bench/cancel_storm.py \
        --sortd="$B/sortd.$build" --clients=30 --rounds=4 2>&1 | grep -E 'RSS|CANCELLED|OK' | tr -s ' ' | tr '\n' ';')"
    fi
  done
done
