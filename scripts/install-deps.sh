#!/usr/bin/env bash
# Installs every Debian 12 package and npm tool sortd needs to build, run and
# test. Idempotent: installs only what is missing, so `make run`, `make test`
# and `.ci/run` can call it every time.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libhwy-dev prometheus python3 python3-grpcio python3-protobuf python3-numpy
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

# Node.js may come from another source (e.g. nodesource, which bundles npm);
# only fall back to Debian's packages when no npm is on PATH at all.
if ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# buf (proto lint and `buf curl` as an independent client) from the npm
# registry, installed into the repo's ignored tools/node folder so nothing
# global is touched.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools/node"
if [ ! -x "$TOOLS/node_modules/.bin/buf" ]; then
  echo "install-deps: installing @bufbuild/buf into $TOOLS"
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && npm install --silent --no-audit --no-fund --prefix "$TOOLS" @bufbuild/buf@1 >/dev/null)
fi
echo "install-deps: done"
