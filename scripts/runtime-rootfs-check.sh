#!/usr/bin/env bash
# The image's runtime stage without a container engine: a fresh Debian 12
# root filesystem (debootstrap --variant=minbase), the `runtime` install
# component copied to /opt/sortd, exactly the packages that
# scripts/runtime-packages.sh lists, then the real sortd started in it
# (chroot, uid 10001) and a sort from the Python client outside. This is what
# the CPU image (debian:12-slim runtime) does, checked where docker cannot
# run. Needs root and Debian's package mirror; takes a few minutes.
#   scripts/runtime-rootfs-check.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD="${1:-build}"
[ "$(id -u)" = 0 ] || { echo "runtime-rootfs-check: needs root (debootstrap, chroot)" >&2; exit 2; }
if ! command -v debootstrap >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
fi

root="$(mktemp -d /tmp/sortd-rootfs.XXXXXX)"
chmod 755 "$root"  # the unprivileged user must reach / (mktemp makes it 0700)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  for m in proc dev; do umount -l "$root/$m" 2>/dev/null || true; done
  rm -rf "$root"
}
trap cleanup EXIT

echo "runtime-rootfs-check: debootstrap bookworm into $root"
debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"

cmake --install "$BUILD" --prefix "$root/opt/sortd" --component runtime --strip >/dev/null
bash scripts/runtime-packages.sh "$root/opt/sortd/bin/sortd" "$root/opt/sortd/bin/sortctl" \
  > "$root/opt/sortd/runtime-packages.txt"
echo "runtime-rootfs-check: installing $(tr '\n' ' ' < "$root/opt/sortd/runtime-packages.txt")"
chroot "$root" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(cat /opt/sortd/runtime-packages.txt) >/dev/null'
if chroot "$root" ldd /opt/sortd/bin/sortd /opt/sortd/bin/sortctl | grep "not found"; then
  echo "runtime-rootfs-check: libraries missing in the runtime root" >&2; exit 1
fi
for tool in gcc g++ cc c++ nvcc cmake; do
  if chroot "$root" sh -c "command -v $tool" >/dev/null; then
    echo "runtime-rootfs-check: $tool present in the runtime root" >&2; exit 1
  fi
done

mkdir -p "$root/run/sortd" && chown 10001:10001 "$root/run/sortd"
chroot --userspec=10001:10001 "$root" env FLAGS_listen=127.0.0.1:0 FLAGS_metrics_listen=127.0.0.1:0 \
  /opt/sortd/bin/sortd --tryfromenv=listen,metrics_listen --port_file=/run/sortd/port \
  > "$root/run/sortd/log" 2>&1 &
server_pid=$!
for _ in $(seq 1 300); do
  [ -s "$root/run/sortd/port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$root/run/sortd/log" >&2; exit 1; }
  sleep 0.1
done
port="$(cat "$root/run/sortd/port")"
chroot --userspec=10001:10001 "$root" /opt/sortd/bin/sortctl health --target="127.0.0.1:$port"
PYTHONPATH=client/python /usr/bin/python3 - "127.0.0.1:$port" <<'PY'
import sys
import numpy as np
from sortd_client import Client
with Client(sys.argv[1], timeout=30) as c:
    keys = np.random.default_rng(3).standard_normal(1 << 20).astype(np.float32)
    out, idx = c.sort(keys, return_indices=True)
    assert np.array_equal(out, np.sort(keys, kind="stable")) and np.array_equal(idx, np.argsort(keys, kind="stable"))
    print("runtime-rootfs-check: sorted %d float32 keys in the runtime root" % len(keys))
PY
kill -TERM "$server_pid"
wait "$server_pid"; code=$?
server_pid=""
grep -q "drained, exiting" "$root/run/sortd/log" || { cat "$root/run/sortd/log" >&2; exit 1; }
echo "runtime-rootfs-check: OK (exit $code, $(du -shx "$root" | cut -f1) root with $(chroot "$root" dpkg -l | grep -c '^ii') packages)"
