#!/usr/bin/env bash
# Installs every Debian 12 package and npm tool sortd needs to build, run and
# test: every program a test runs (cmake/SortdTestTools.cmake fails the
# configure step under CI when one is missing, so this list and that one
# must agree). Idempotent: installs only what is missing, so `make run`,
# `make test` and `.ci/run` can call it every time.
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
  # the reference implementation the download blocks are tested against
  libstreamvbyte-dev
)
if [ "$BUILD_ONLY" = 0 ]; then
  # prometheus: prometheus and promtool (e2e.observability, deploy.promtool_*);
  # openssl: e2e.tls; Debian's /usr/bin/python3 and the modules the e2e,
  # python and packaging tests import (grpc, numpy, google.protobuf; venv,
  # setuptools and wheel for the offline pip install); matplotlib for
  # bench/plot_throughput.py (the README's picture, and its self-test).
  PACKAGES+=(prometheus openssl python3 python3-grpcio python3-protobuf python3-numpy
             python3-venv python3-pip python3-setuptools python3-wheel python3-matplotlib
             # sortd_client.pandas and its tests (e2e.tables); tqdm for the
             # client's progress=True bars (their tests)
             python3-pandas python3-tqdm
             # sortd_client.dask and its tests (e2e.dask): a dask.distributed
             # LocalCluster against sortd replicas
             python3-dask python3-distributed
             # make fuzz / fuzz-smoke / sanitize-smoke: clang with libFuzzer and
             # the sanitizer runtimes
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

updated=0
apt_update() {
  if [ "$updated" = 0 ]; then $SUDO apt-get update -qq; updated=1; fi
}
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  apt_update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# kubectl (deploy.k8s_manifests: `kubectl kustomize` of the overlays) is the
# `kubectl` package of Kubernetes' (or Google Cloud's) apt repository, which
# the machines' image has installed. Debian 12's own kubernetes-client is
# kubectl 1.20, whose kustomize cannot render the overlays' components, so it
# is no substitute. Installed when an apt source offers it; otherwise this
# says so, and the configure step fails under CI naming kubectl.
kubectl_ok() {
  local version
  command -v kubectl >/dev/null 2>&1 || return 1
  version="$(kubectl version --client 2>/dev/null || true)"
  grep -Eq 'Kustomize Version: v([4-9]|[1-9][0-9])\.' <<<"$version"
}
if [ "$BUILD_ONLY" = 0 ] && ! kubectl_ok; then
  apt_update
  policy="$(apt-cache policy kubectl 2>/dev/null || true)"
  if grep -Eq 'Candidate: [0-9]' <<<"$policy"; then
    echo "install-deps: installing kubectl"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends kubectl
  fi
  if ! kubectl_ok; then
    echo "install-deps: WARNING: no kubectl with kustomize v4 or later on PATH, and none from apt" >&2
    echo "  (the kubectl package of Kubernetes' apt repository; Debian 12's kubernetes-client," >&2
    echo "  kubectl 1.20, is too old): add that repository and apt-get install kubectl. Until" >&2
    echo "  then deploy.k8s_manifests fails, and under CI the configure step does." >&2
  fi
fi

# npm tools, installed into the repo's ignored .tools/node folder so nothing
# global is touched: buf (proto lint, `buf curl` as an independent client),
# dockerfilelint, and the Kubernetes/prometheus-operator API models with a
# YAML parser for validating the rendered manifests (tests/deploy).
if [ "$BUILD_ONLY" = 1 ]; then echo "install-deps: done (build only)"; exit 0; fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="$ROOT/.tools/node"
NPM_TOOLS=(@bufbuild/buf@1 dockerfilelint@1 kubernetes-models@5 @kubernetes-models/prometheus-operator@6 js-yaml@4)
# One marker per tool list: a changed list reinstalls, an unchanged one is a
# no-op, unless one of the files the tests look for has gone.
STAMP="$TOOLS/.installed-$(echo "${NPM_TOOLS[*]}" | md5sum | cut -c1-12)"
NPM_FILES=(.bin/buf .bin/dockerfilelint js-yaml/index.js kubernetes-models/package.json
           @kubernetes-models/prometheus-operator/package.json)
for f in "${NPM_FILES[@]}"; do
  [ -e "$TOOLS/node_modules/$f" ] || rm -f "$STAMP"
done
if [ ! -f "$STAMP" ]; then
  echo "install-deps: installing ${NPM_TOOLS[*]} into $TOOLS"
  mkdir -p "$TOOLS"
  (cd "$TOOLS" && npm install --silent --no-audit --no-fund --prefix "$TOOLS" "${NPM_TOOLS[@]}" >/dev/null)
  touch "$STAMP"
fi
echo "install-deps: done"
