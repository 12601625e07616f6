#!/usr/bin/env bash
# Builds the sortd image, starts it, checks health, one sort from the Python
# client, /metrics, the non-root user and a clean drain on stop, then removes
# it. Needs a working docker or podman (a daemon, not just the client) and a
# registry for the base images; the development machines have neither, so
# this runs on a workstation or CI runner that does (docs/deploy.md).
#   scripts/image-smoke.sh [cpu|gpu]     (default: cpu; gpu needs --gpus)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VARIANT="${1:-cpu}"
PYTHON="${PYTHON:-/usr/bin/python3}"

engine=""
for candidate in docker podman; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" info >/dev/null 2>&1; then
    engine="$candidate"; break
  fi
done
[ -n "$engine" ] || { echo "image-smoke: no working docker or podman engine here" >&2; exit 2; }

tag="sortd-smoke:$VARIANT-$$"
build_args=(--build-arg "SORTD_GIT_COMMIT=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)")
run_args=()
case "$VARIANT" in
  cpu) build_args+=(--build-arg BASE_IMAGE=debian --build-arg BASE_TAG=12
                    --build-arg RUNTIME_IMAGE=debian --build-arg RUNTIME_TAG=12-slim) ;;
  gpu) run_args+=(--gpus all) ;;
  *) echo "image-smoke: variant must be cpu or gpu" >&2; exit 2 ;;
esac

container=""
cleanup() {
  [ -n "$container" ] && "$engine" rm -f "$container" >/dev/null 2>&1 || true
  "$engine" rmi -f "$tag" >/dev/null 2>&1 || true
}
trap cleanup EXIT

echo "image-smoke: $engine build ($VARIANT)"
"$engine" build -t "$tag" "${build_args[@]}" .
container="$("$engine" run -d "${run_args[@]}" -p 127.0.0.1::50051 -p 127.0.0.1::9464 "$tag")"
grpc_port="$("$engine" port "$container" 50051/tcp | head -n1 | sed 's/.*://')"
metrics_port="$("$engine" port "$container" 9464/tcp | head -n1 | sed 's/.*://')"
echo "image-smoke: container $container, gRPC on $grpc_port, metrics on $metrics_port"

uid="$("$engine" exec "$container" id -u)"
[ "$uid" = 10001 ] || { echo "image-smoke: runs as uid $uid, expected 10001" >&2; exit 1; }

# The container's own health check (sortctl inside the image), then the
# Python client from outside: health, and one sort compared with numpy.
for _ in $(seq 1 120); do
  "$engine" exec "$container" sortctl health --timeout=2s --target=127.0.0.1:50051 >/dev/null 2>&1 && break
  sleep 0.5
done
"$engine" exec "$container" sortctl health --timeout=2s --target=127.0.0.1:50051
PYTHONPATH=client/python "$PYTHON" - "127.0.0.1:$grpc_port" <<'PY'
import sys
import numpy as np
from sortd_client import Client
with Client(sys.argv[1], timeout=30) as c:
    assert c.health() == "SERVING", c.health()
    keys = np.random.default_rng(7).integers(-2**31, 2**31, 1 << 20, dtype=np.int64).astype(np.int32)
    res = c.sort_full(keys, return_indices=True)
    assert np.array_equal(res.keys, np.sort(keys, kind="stable")), "keys differ"
    assert np.array_equal(res.indices, np.argsort(keys, kind="stable")), "indices differ"
    print("image-smoke: sorted %d int32 keys on %s" % (len(keys), res.engine))
PY
curl -fsS "http://127.0.0.1:$metrics_port/metrics" | grep -q '^sortd_build_info' \
  || { echo "image-smoke: /metrics has no sortd_build_info" >&2; exit 1; }

"$engine" stop --time 40 "$container" >/dev/null
code="$("$engine" inspect --format '{{.State.ExitCode}}' "$container")"
[ "$code" = 0 ] || { echo "image-smoke: exit code $code after stop" >&2; "$engine" logs "$container" >&2; exit 1; }
"$engine" logs "$container" 2>&1 | grep -q "drained, exiting" \
  || { echo "image-smoke: no drain in the log" >&2; exit 1; }
echo "image-smoke: OK ($VARIANT)"
