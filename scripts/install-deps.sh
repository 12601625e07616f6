#!/usr/bin/env bash
# Installs every Debian 12 package and npm tool sortd needs to build, run and
# test. Idempotent: installs only what is missing, so `make run`, `make test`
# and `.ci/run` can call it every time.
#   --build-only: just what `cmake --build` needs (the container image's build
#   stage): no test tools, no Prometheus, no Python, no npm tools.
set -euo pipefail

BUILD_ONLY=0
[ "${1:-}" = "--build-only" ] && BUILD_ONLY=1

PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev
  libhwy-dev
)
if [ "$BUILD_ONLY" = 0 ]; then
  PACKAGES+=(prometheus openssl python3 python3-grpcio python3-protobuf python3-numpy
             python3-venv python3-pip python3-setuptools python3-wheel
             # make fuzz / fuzz-smoke: clang with libFuzzer and the sanitizer runtimes
             clang libclang-rt-14-dev)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

# Node.js may come from another source (e.g. nodesource, which bundles npm);
# only fall back to Debian's packages when no npm is on PATH at all.
if [ "$BUILD_ONLY" = 0 ] && ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# npm tools, installed into the repo's ignored .tools/node folder so nothing
# global is touched: buf (proto lint, `buf curl` as an independent client),
# dockerfilelint, and the Kubernetes/prometheus-operator API models with a
# YAML parser for validating the rendered manifests (tests/deploy).
if [ "$BUILD_ONLY" = 1 ]; then echo "install-deps: done (build only)"; exit 0; fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools/node"
NPM_TOOLS=(@bufbuild/buf@1 dockerfilelint@1 kubernetes-models@5 @kubernetes-models/prometheus-operator@6 js-yaml@4)
# One marker per tool list: a changed list reinstalls, an unchanged one is a no-op.
STAMP="$TOOLS/.installed-$(echo "${NPM_TOOLS[*]}" | md5sum | cut -c1-12)"
if [ ! -f "$STAMP" ]; then
  echo "install-deps: installing ${NPM_TOOLS[*]} into $TOOLS"
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && npm install --silent --no-audit --no-fund --prefix "$TOOLS" "${NPM_TOOLS[@]}" >/dev/null)
  touch "$STAMP"
fi
echo "install-deps: done"
