#!/usr/bin/env bash
# The README's picture, measured: throughput against array size on the GPU
# host, one CSV (docs/img/throughput.csv; bench/plot_throughput.py draws
# docs/img/throughput.png from it on the dev VM). In one run:
#   1. sortd_gpu_radix_bench --only='u32 keys' alone on the GPU: CUB's
#      DeviceRadixSort and sortd's kernel on device-resident keys (2^16..2^28
#      in the bench's own steps, outputs compared on the GPU);
#   2. the real sortd (--shared_memory=system,cuda, a Unix socket) and
#      bench/throughput_curve.py: per size 2^MIN_LOG2..2^MAX_LOG2 u32 keys,
#      numpy.sort of the array, Client.sort over loopback TCP (the payload on
#      the wire), the same array in a POSIX shm region and in a CUDA IPC
#      region (sorted in place), each answer checked against numpy.sort;
#   3. sortd's exit status after SIGTERM (must be 0).
# Exit status 1 naming what failed (a series, the bench, sortd); the CSV is
# written only when every series has every size (else throughput.csv.partial).
# ~2-3 minutes on the H200 host; every step has a timeout, ~8 minutes at most.
#
# Bundle, on the dev VM (build with -DCMAKE_CUDA_ARCHITECTURES=90):
#   rm -rf .device/curve .device/curve.tar.xz
#   ../shared/tools/bundle-libs .device/curve build/server/sortd \
#     build/bench/sortd_gpu_radix_bench build/python/libsortd_client_c.so
#   strip .device/curve/bin/* && tar -C .device -cJf .device/curve.tar.xz curve
# and carry .device/curve.tar.xz (libsortd_client_c.so is optional: without
# it the Python client's sessions go through grpcio, and the legend says so).
# Run from the repository root:
#   SORTD_COMMIT=<commit of the binaries> scripts/gpu-host/throughput_curve.sh
# Output in $DEST (default $OUT, where the device tool has one, else
# /tmp/throughput_curve): throughput.csv, radix.txt, sortd.log, curve.log.
# Environment: SORTD_COMMIT (required where git does not work), MIN_LOG2 (14),
# MAX_LOG2 (28), STEP (1: 2x; 2: 4x), REPEAT (5), SERIES (all of
# sortd_remote,sortd_shm,sortd_cuda_ipc,numpy_sort,cub,sortd_kernel), NATIVE
# (auto|on|off: the Python client's sessions), PY (python3), BUNDLE
# (.device/curve), SHARED_MEMORY (system,cuda), SERVER_FLAGS, EXPECT_GPU
# (1: sorts of 2^20 keys and more must run on a GPU engine; 0 to try the
# script's own logic on a machine without a GPU, with SERIES and
# SHARED_MEMORY=system).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUNDLE=${BUNDLE:-.device/curve}
case $BUNDLE in /*) ;; *) BUNDLE=$PWD/$BUNDLE ;; esac
if [ ! -d "$BUNDLE" ] && [ -f "$BUNDLE.tar.xz" ]; then
  tar -xJf "$BUNDLE.tar.xz" -C "$(dirname "$BUNDLE")"
fi
B=$BUNDLE/bin
L=$BUNDLE/lib
PY=${PY:-python3}
MIN_LOG2=${MIN_LOG2:-14}
MAX_LOG2=${MAX_LOG2:-28}
STEP=${STEP:-1}
REPEAT=${REPEAT:-5}
SERIES=${SERIES:-sortd_remote,sortd_shm,sortd_cuda_ipc,numpy_sort,cub,sortd_kernel}
NATIVE=${NATIVE:-auto}
EXPECT_GPU=${EXPECT_GPU:-1}
DEST=${DEST:-${OUT:-/tmp/throughput_curve}}
mkdir -p "$DEST"
rm -f "$DEST/throughput.csv" "$DEST/throughput.csv.partial"
# The socket's path must stay short (108 bytes): not under $DEST.
W=$(mktemp -d /tmp/throughput_curve.XXXXXX)
FAILED=()
PID=""
fail() { echo "throughput_curve.sh: FAILED: $*" >&2; FAILED+=("$*"); }
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2> /dev/null; then kill -KILL "$PID" 2> /dev/null || true; fi
  rm -rf "$W"
}
trap cleanup EXIT

COMMIT=${SORTD_COMMIT:-$(git rev-parse --short HEAD 2> /dev/null || true)}
if [ -z "$COMMIT" ]; then
  echo "throughput_curve.sh: set SORTD_COMMIT to the commit the binaries were built from" >&2
  exit 2
fi
[ -x "$B/sortd" ] || { echo "throughput_curve.sh: no $B/sortd (carry $BUNDLE.tar.xz)" >&2; exit 2; }
DEVICE=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null \
  | head -1 | awk -F', *' '{printf "%s (%s, driver %s)", $1, $2, $3}' || true)
if [ -z "$DEVICE" ]; then
  [ "$EXPECT_GPU" = 1 ] && { echo "throughput_curve.sh: nvidia-smi finds no GPU" >&2; exit 2; }
  DEVICE="no GPU (dry run)"
fi
echo "device: $DEVICE; cores: $(nproc); commit: $COMMIT; sizes 2^$MIN_LOG2..2^$MAX_LOG2 step $STEP"
T0=$SECONDS

# 1. The kernel table, before sortd holds the GPU.
case ",$SERIES," in
  *,cub,* | *,sortd_kernel,*)
    rc=0
    timeout -k 5 90 env LD_LIBRARY_PATH="$L" "$B/sortd_gpu_radix_bench" --only='u32 keys' \
      --min_log2="$MIN_LOG2" --max_log2="$MAX_LOG2" --repeats=7 > "$DEST/radix.txt" 2> "$W/radix.err" || rc=$?
    if [ "$rc" != 0 ]; then
      fail "cub, sortd_kernel: sortd_gpu_radix_bench exit $rc: $(tail -3 "$W/radix.err" | tr '\n' ' ')"
    fi
    tail -8 "$DEST/radix.txt"
    echo "radix bench: $((SECONDS - T0)) s"
    ;;
esac

# 2. sortd and the client series.
rm -f "$W/port"
# shellcheck disable=SC2086  # SERVER_FLAGS: words
env LD_LIBRARY_PATH="$L" "$B/sortd" --listen=127.0.0.1:0 --port_file="$W/port" --metrics_listen= \
  --shared_memory="${SHARED_MEMORY:-system,cuda}" --unix_socket="$W/sortd.sock" \
  ${SERVER_FLAGS:-} > "$DEST/sortd.log" 2>&1 < /dev/null &
PID=$!
for _ in $(seq 1 450); do
  [ -s "$W/port" ] && [ -S "$W/sortd.sock" ] && break
  kill -0 "$PID" 2> /dev/null || break
  sleep 0.1
done
if [ ! -s "$W/port" ] || ! kill -0 "$PID" 2> /dev/null; then
  fail "sortd did not start: $(tail -3 "$DEST/sortd.log" | tr '\n' ' ')"
else
  PORT=$(tr -dc 0-9 < "$W/port")
  head -3 "$DEST/sortd.log" | cut -c1-200
  # The host's python3 with its own grpcio; the bundle's libraries only
  # where the C++ client's library is loaded (it needs them).
  PYENV=(env -u LD_LIBRARY_PATH)
  if [ "$NATIVE" != off ] && [ -f "$B/libsortd_client_c.so" ]; then
    PYENV=(env LD_LIBRARY_PATH="$L" SORTD_CLIENT_LIB="$B/libsortd_client_c.so")
  elif [ "$NATIVE" = on ]; then
    fail "NATIVE=on but no $B/libsortd_client_c.so"
  fi
  rc=0
  "${PYENV[@]}" PYTHONPATH=client/python timeout -k 10 300 "$PY" bench/throughput_curve.py \
    --target="127.0.0.1:$PORT" --region_target="unix:$W/sortd.sock" --radix_table="$DEST/radix.txt" \
    --series="$SERIES" --min_log2="$MIN_LOG2" --max_log2="$MAX_LOG2" --step="$STEP" \
    --repeat="$REPEAT" --native="$NATIVE" --expect_gpu="$EXPECT_GPU" --device="$DEVICE" \
    --commit="$COMMIT" --note="cores=$(nproc)" --note="server=sortd --shared_memory=${SHARED_MEMORY:-system,cuda} ${SERVER_FLAGS:-}" \
    --out="$DEST/throughput.csv" 2>&1 | tee "$DEST/curve.log" || rc=$?
  if [ "$rc" != 0 ]; then
    fail "bench/throughput_curve.py exit $rc: $(grep -m1 'FAILED series' "$DEST/curve.log" || tail -2 "$DEST/curve.log" | tr '\n' ' ')"
  fi

  # 3. sortd drains and exits 0.
  kill -TERM "$PID" 2> /dev/null || true
  for _ in $(seq 1 300); do kill -0 "$PID" 2> /dev/null || break; sleep 0.1; done
  if kill -0 "$PID" 2> /dev/null; then
    kill -KILL "$PID" 2> /dev/null || true
    wait "$PID" 2> /dev/null || true
    fail "sortd still running 30 s after SIGTERM (killed)"
  else
    src=0
    wait "$PID" || src=$?
    [ "$src" = 0 ] || fail "sortd exit $src after SIGTERM: $(tail -2 "$DEST/sortd.log" | tr '\n' ' ')"
  fi
  PID=""
fi

echo "== throughput_curve.sh: $((SECONDS - T0)) s; files in $DEST: $(cd "$DEST" && printf '%s ' *)"
if [ ${#FAILED[@]} -gt 0 ]; then
  # No CSV from a run that failed anywhere (it must not be committed).
  [ -f "$DEST/throughput.csv" ] && mv "$DEST/throughput.csv" "$DEST/throughput.csv.partial"
  echo "throughput_curve.sh: FAILED (${#FAILED[@]}):"
  printf '  %s\n' "${FAILED[@]}"
  exit 1
fi
if [ ! -s "$DEST/throughput.csv" ]; then
  echo "throughput_curve.sh: FAILED: no $DEST/throughput.csv"
  exit 1
fi
echo "throughput_curve.sh: OK: $DEST/throughput.csv ($(grep -vc '^#' "$DEST/throughput.csv") lines)"
