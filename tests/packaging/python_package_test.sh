#!/usr/bin/env bash
# Packaging test: installs the Python client the way its users do
# (`pip install ./client/python`) into a throwaway venv and uses it, with no
# PYTHONPATH into the source or build tree, against the real sortd.
#
# Environment:
#   SORTD_BIN  the sortd server binary (required)
#   REPO       repository root (default: two levels above this script)
#   PYTHON     base interpreter (default /usr/bin/python3: Debian's, whose
#              python3-grpcio/-protobuf/-numpy the venv sees through
#              --system-site-packages; PyPI need not be reachable)
#   SHIP_LIB   the built libsortd_client_c.so that pip ships in the package
#              (required: handed to client/python/setup.py as
#              SORTD_CLIENT_LIB, then unset, so the installed copy must load)
#
# pip runs with --no-build-isolation --no-index, so setuptools and wheel come
# from the system (python3-setuptools, python3-wheel). The source is copied to
# a temp dir first because setuptools writes build/ and *.egg-info next to it.
set -euo pipefail

: "${SORTD_BIN:?set SORTD_BIN to the sortd binary}"
: "${SHIP_LIB:?set SHIP_LIB to the built libsortd_client_c.so}"
REPO="${REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
PYTHON="${PYTHON:-/usr/bin/python3}"
SRC="$REPO/client/python"
unset PYTHONPATH PYTHONHOME SORTD_CLIENT_LIB SORTD_CLIENT_NATIVE
export PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1

tmp="$(mktemp -d "${TMPDIR:-/tmp}/sortd-pip-test.XXXXXX")"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 143' TERM INT  # so that a ctest timeout still runs cleanup

step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# The source tree must stay as it was: snapshot its top level.
src_before="$(ls -A "$SRC")"

step "copy client/python to $tmp/src"
mkdir -p "$tmp/src" "$tmp/cwd"
tar -C "$SRC" --exclude=__pycache__ --exclude='*.pyc' --exclude=./build \
    --exclude='./*.egg-info' --exclude=./dist -cf - . | tar -C "$tmp/src" -xf -
cp -r "$tmp/src/tests" "$tmp/tests"   # unit tests, away from any package source

step "venv (--system-site-packages) from $PYTHON"
"$PYTHON" -m venv --system-site-packages "$tmp/venv"
py="$tmp/venv/bin/python"

step "pip install --no-build-isolation --no-index client/python"
if ! SORTD_CLIENT_LIB="$SHIP_LIB" "$py" -m pip install --no-build-isolation --no-index \
       --no-cache-dir --disable-pip-version-check "$tmp/src" >"$tmp/pip.log" 2>&1; then
  cat "$tmp/pip.log" >&2
  fail "pip install failed"
fi
grep -E "^(Requirement already satisfied|Successfully installed)" "$tmp/pip.log" || true

[[ "$(ls -A "$SRC")" == "$src_before" ]] || \
  fail "the source tree $SRC changed: $(ls -A "$SRC" | tr '\n' ' ')"

# Everything from here runs outside the repository, without PYTHONPATH.
cd "$tmp/cwd"

step "imports come from the venv's site-packages"
VENV="$tmp/venv" "$py" - <<'EOF'
import importlib.metadata, os, sys, sysconfig
venv = os.path.realpath(os.environ["VENV"])
assert os.path.realpath(sys.prefix) == venv, (sys.prefix, venv)
site = os.path.realpath(sysconfig.get_paths()["purelib"])
assert site.startswith(venv + os.sep), (site, venv)
import sortd_client, sortd.v1.sort_pb2, sortd.v1.sort_pb2_grpc
for mod in (sortd_client, sortd.v1.sort_pb2, sortd.v1.sort_pb2_grpc):
    path = os.path.realpath(mod.__file__)
    assert path.startswith(site + os.sep), "%s imported from %s, not %s" % (mod.__name__, path, site)
    print("%-22s %s" % (mod.__name__, path))
# The C++ client's library ships in the package, and it is what loads
# (SORTD_CLIENT_LIB is unset): the installed client is the fast client.
from sortd_client import native
lib = os.path.join(os.path.dirname(os.path.realpath(sortd_client.__file__)), "_native",
                   "libsortd_client_c.so")
assert os.path.isfile(lib), "no %s in the installed package" % lib
assert native.load() is not None, native.load_error()
assert os.path.realpath(native._loaded[1]) == lib, (native._loaded[1], lib)
print("native library        %s" % lib)
version = importlib.metadata.version("sortd-client")
assert version == "0.1.0", version
print("sortd-client", version)
EOF

step "client unit tests against the installed package"
if ! "$py" -m unittest discover -s "$tmp/tests" -t "$tmp/tests" >"$tmp/unit.log" 2>&1; then
  cat "$tmp/unit.log" >&2
  fail "client unit tests"
fi
tail -n 3 "$tmp/unit.log"

step "start sortd"
port_file="$tmp/port"
"$SORTD_BIN" --listen=127.0.0.1:0 --port_file="$port_file" --metrics_listen= \
    >"$tmp/sortd.log" 2>&1 &
server_pid=$!
deadline=$((SECONDS + 30))
until [[ -s "$port_file" ]]; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$tmp/sortd.log" >&2
    fail "sortd exited before writing its port file"
  fi
  if ((SECONDS >= deadline)); then
    cat "$tmp/sortd.log" >&2
    fail "sortd wrote no port file within 30 s"
  fi
  sleep 0.05
done
target="127.0.0.1:$(<"$port_file")"
echo "sortd on $target"

step "sort every numeric dtype with the installed client"
"$py" - "$target" <<'EOF'
import sys
import numpy as np
from sortd_client import Client

rng = np.random.default_rng(12345)
n = 50_000  # above 32768, so a GPU server takes its GPU path
with Client(sys.argv[1], timeout=60) as c:
    assert c.health() == "SERVING", c.health()
    assert c.native, "the installed client took the grpcio path"
    big = rng.integers(0, 1 << 32, 1 << 19, dtype=np.uint32)  # 2 MiB: a session
    assert np.array_equal(c.sort(big), np.sort(big)), "session through the shipped library"
    print("sort 2 MiB through the shipped library ok")
    for dtype in ["uint32", "int32", "float32", "uint64", "int64", "float64"]:
        dt = np.dtype(dtype)
        if dt.kind == "f":  # duplicates; no NaN or -0.0 (numpy orders those differently)
            a = (rng.integers(-5000, 5000, n) / 8).astype(dt)
        else:
            info = np.iinfo(dt)
            a = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
            a[: n // 2] = a[: n // 2] % 1000  # duplicates, to see stability
            rng.shuffle(a)
        want_idx = np.argsort(a, kind="stable")
        got, idx = c.sort(a, return_indices=True)
        assert got.dtype == dt, (dtype, got.dtype)
        assert np.array_equal(got, np.sort(a, kind="stable")), dtype
        assert np.array_equal(idx, want_idx), dtype + " indices"
        print("sort %-7s n=%d ok" % (dtype, n))
    keys = rng.integers(0, 100, n, dtype=np.int64)
    values = rng.standard_normal(n)
    perm = np.argsort(keys, kind="stable")
    k, v = c.sort_pairs(keys, values)
    assert np.array_equal(k, keys[perm]) and np.array_equal(v, values[perm]), "sort_pairs"
    print("sort_pairs int64/float64 n=%d ok" % n)
    words = [b"pear", b"apple", b"", b"apple\x00", b"\xff"]
    assert list(c.sort(words)) == sorted(words), "bytes"
    print("sort bytes ok")
EOF

step "console entry points"
"$py" -m sortd_client --target "$target" health
if [[ -x "$tmp/venv/bin/sortd-py" ]]; then
  "$tmp/venv/bin/sortd-py" --target "$target" check --dtype float64 --n 10000
fi

step "SIGTERM sortd"
kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
if [[ $rc != 0 ]]; then
  cat "$tmp/sortd.log" >&2
  fail "sortd exited $rc after SIGTERM (want 0)"
fi
echo "sortd exited 0"
echo "PASS"
