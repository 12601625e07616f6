#!/usr/bin/env bash
# Packaging test: installs the C++ client the way its users do
# (`cmake --install <build> --component dev`, and `--component runtime` for
# the binaries), builds tests/packaging/consumer, a project of its own that
# only does find_package(sortd) + sortd::client, and runs it against the
# installed sortd: once on a host:port target, once on an
# `ipv4:a,b` target of two servers (the default channel config:
# round_robin, health checking, retries).
#
# Environment:
#   BUILD  the sortd build tree, with `all` built (required)
#   REPO   repository root (default: two levels above this script)
set -euo pipefail

: "${BUILD:?set BUILD to the sortd build tree (built)}"
REPO="${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
TIMEOUT_S=60  # for a server to start, or to exit after SIGTERM

TMP="$(mktemp -d "${TMPDIR:-/tmp}/sortd-cpp-install-test.XXXXXX")"
server_pids=()
cleanup() {
  local pid
  for pid in "${server_pids[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that a ctest timeout still runs cleanup

step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# The files under a prefix, relative to it, sorted.
list_files() { (cd "$1" && find . -type f -o -type l | sed 's|^\./||' | LC_ALL=C sort); }

PREFIX="$TMP/prefix"
step "cmake --install $BUILD --prefix $PREFIX --component dev, runtime"
cmake --install "$BUILD" --prefix "$PREFIX" --component dev
cmake --install "$BUILD" --prefix "$PREFIX" --component runtime

for f in \
    include/sortd/client/sortd_client.h \
    include/sortd/client/sortd_client_impl.h \
    include/sortd/client/typed_codec.h \
    include/sortd/client/sortd_client_c.h \
    include/sortd/sortd/v1/sort.pb.h \
    include/sortd/sortd/v1/sort.grpc.pb.h \
    include/sortd/sortd/v1/typed_array_fields.h \
    lib/libsortd_client.a \
    lib/libsortd_client_c.so \
    lib/libsortd_proto.a \
    lib/cmake/sortd/sortdConfig.cmake \
    lib/cmake/sortd/sortdConfigVersion.cmake \
    lib/cmake/sortd/sortdTargets.cmake \
    bin/sortd \
    bin/sortctl; do
  [[ -e "$PREFIX/$f" ]] || fail "not installed: $f"
done
installed="$(list_files "$PREFIX")"
if grep -E '(^|/)(core|tests?|server)/' <<<"$installed"; then
  fail "core/, server/ or test files were installed (above)"
fi
if grep -E '^include/' <<<"$installed" | grep -vE '^include/sortd/(client|sortd/v1)/[^/]+\.h$'; then
  fail "unexpected headers installed (above)"
fi

# The C library exports its four functions and nothing of the gRPC,
# protobuf and abseil code inside it (a Python process has its own).
exported="$(nm -D --defined-only "$PREFIX/lib/libsortd_client_c.so" | awk '{print $3}' | LC_ALL=C sort)"
[[ "$exported" == $'sortd_client_abi_version\nsortd_client_close\nsortd_client_open\nsortd_client_sort_session' ]] \
  || fail "libsortd_client_c.so exports: $exported"

# The container image's runtime stage installs just this component.
step "runtime component alone: only the binaries"
cmake --install "$BUILD" --prefix "$TMP/runtime" --component runtime >/dev/null
runtime="$(list_files "$TMP/runtime")"
[[ "$runtime" == $'bin/sortctl\nbin/sortd' ]] || fail "runtime component installed: $runtime"

step "configure tests/packaging/consumer with -DCMAKE_PREFIX_PATH=$PREFIX"
# Nothing from the source or build tree: the consumer sees the prefix only.
cmake -S "$REPO/tests/packaging/consumer" -B "$TMP/consumer-build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    >"$TMP/consumer-configure.log" 2>&1 || { cat "$TMP/consumer-configure.log" >&2; fail "configure"; }
grep -F -- "-- sortd 0.1" "$TMP/consumer-configure.log"
grep -qF -- "from $PREFIX/lib/cmake/sortd" "$TMP/consumer-configure.log" \
  || fail "find_package(sortd) did not find the installed package"

step "build the consumer"
cmake --build "$TMP/consumer-build" -j2 >"$TMP/consumer-build.log" 2>&1 \
  || { cat "$TMP/consumer-build.log" >&2; fail "consumer build"; }
consumer="$TMP/consumer-build/consumer"

# start_server NAME: the installed sortd on 127.0.0.1:0; sets $port.
start_server() {
  local name="$1" port_file="$TMP/$1.port"
  "$PREFIX/bin/sortd" --listen=127.0.0.1:0 --port_file="$port_file" --metrics_listen= \
      >"$TMP/$name.log" 2>&1 &
  server_pids+=("$!")
  local pid="$!" deadline=$((SECONDS + TIMEOUT_S))
  # The port file is written (atomically) once the server serves.
  until [[ -s "$port_file" ]]; do
    if ! kill -0 "$pid" 2>/dev/null; then cat "$TMP/$name.log" >&2; fail "$name exited early"; fi
    if ((SECONDS >= deadline)); then cat "$TMP/$name.log" >&2; fail "$name: no port file"; fi
    sleep 0.05
  done
  port="$(<"$port_file")"
  [[ "$port" =~ ^[0-9]+$ ]] || fail "$name: bad port file: $port"
  echo "$name serving on 127.0.0.1:$port (pid $pid)"
}

# stop_server INDEX NAME: SIGTERM; the server must drain and exit 0.
stop_server() {
  local pid="${server_pids[$1]}" name="$2" deadline=$((SECONDS + TIMEOUT_S)) rc=0
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then cat "$TMP/$name.log" >&2; fail "$name: still running after SIGTERM"; fi
    sleep 0.05
  done
  wait "$pid" || rc=$?
  if ((rc != 0)); then cat "$TMP/$name.log" >&2; fail "$name exited $rc after SIGTERM"; fi
  echo "$name drained and exited 0"
}

step "start two installed sortd servers"
start_server sortd-a; port_a="$port"
start_server sortd-b; port_b="$port"

step "consumer 127.0.0.1:$port_a"
"$consumer" "127.0.0.1:$port_a" || fail "consumer against 127.0.0.1:$port_a"

step "consumer ipv4:127.0.0.1:$port_a,127.0.0.1:$port_b"
"$consumer" "ipv4:127.0.0.1:$port_a,127.0.0.1:$port_b" || fail "consumer against both servers"

step "SIGTERM the servers"
stop_server 0 sortd-a
stop_server 1 sortd-b
echo "PASS"
