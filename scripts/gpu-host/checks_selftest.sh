#!/usr/bin/env bash
# Self-test of the device scripts' own logic (checks.sh and the scripts that
# source it), without a GPU and without building: fake test binaries,
# benches, sortd and sortctl stand in for the bundle, and each run must end
# with the exit status and the FAIL row its fault calls for (a FAILED,
# skipped or crashed test, a missing binary, a bench row saying NO, an
# empty or failing bench, a failed build, a wrong float order, an unstable
# permutation, a failed child script). A script that cannot fail fails here.
# Needs python3 with numpy (verify_sort.py). Exit 0 when every case held.
#   scripts/gpu-host/checks_selftest.sh [PYTHON]
set -euo pipefail
SRC=$(cd "$(dirname "$0")" && pwd)
PY=$(command -v "${1:-python3}")
T=$(mktemp -d /tmp/sortd_checks_selftest.XXXXXX)
trap 'rm -rf "$T" /tmp/sortd_checks_selftest_w.$$.*' EXIT
mkdir -p "$T/repo/scripts" "$T/fake" "$T/path"
cp -r "$SRC" "$T/repo/scripts/gpu-host"
ln -s "$PY" "$T/path/python3"
# shellcheck disable=SC2016  # the fake's own text
printf '#!/bin/bash\nexit ${FAKE_CMAKE_RC:-0}\n' > "$T/path/cmake"  # core_build: no build here

cat > "$T/fake/gtest" << 'EOF'
#!/bin/bash
case ${FAKE_GTEST:-pass} in
  pass) printf '[==========] 3 tests from 1 test suite ran. (1 ms total)\n[  PASSED  ] 3 tests.\n' ;;
  fail) printf '[  FAILED  ] A.B (1 ms)\n[==========] 3 tests from 1 test suite ran. (1 ms total)\n'
        printf '[  PASSED  ] 2 tests.\n[  FAILED  ] 1 test, listed below:\n[  FAILED  ] A.B\n'; exit 1 ;;
  skip) printf '[==========] 3 tests from 1 test suite ran. (1 ms total)\n[  PASSED  ] 0 tests.\n'
        printf '[  SKIPPED ] 3 tests, listed below:\n' ;;
  crash) printf '[ RUN      ] A.B\n'; exit 139 ;;
esac
EOF
cat > "$T/fake/bench" << 'EOF'
#!/bin/bash
echo "case n ours CUB ratio match"; echo "progress" >&2
case ${FAKE_BENCH:-ok} in
  ok) echo "u32 keys 2^16 1.0 1.0 1.00x 4 yes"; echo "bytes/1024 12 ns" ;;
  no) echo "u32 keys 2^16 1.0 1.0 1.00x 4 yes"; echo "u32 keys 2^20 1.0 1.0 1.00x 4 NO" ;;
  empty) ;;
  exit) exit 3 ;;
esac
EOF
cat > "$T/fake/sortd" << 'EOF'
#!/bin/bash
# Writes its ports, serves /metrics, exits 0 on SIGTERM.
for a; do case $a in --port_file=*) pf=${a#*=} ;; --metrics_port_file=*) mf=${a#*=} ;; esac; done
# (40000-key argsorts: gpu_radix, as the fake sortctl reports.)
echo "sortd (fake): numeric arrays of >= 32768 keys (gpu_merge for argsorts of more than 4096 and fewer than 40000 keys)"
exec python3 - "$pf" "$mf" << 'PY'
import http.server, signal, socket, sys, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
        self.wfile.write(b'sortd_gpu_fallbacks_total{gpu="0",reason="memory"} 0\n')
    def log_message(self, *a): pass
h = http.server.HTTPServer(("127.0.0.1", 0), H)
threading.Thread(target=h.serve_forever, daemon=True).start()
open(sys.argv[2], "w").write(str(h.server_port)); open(sys.argv[1], "w").write(str(s.getsockname()[1]))
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
signal.pause()
PY
EOF
cat > "$T/fake/sortctl" << 'EOF'
#!/bin/bash
# health: yes; sort: the contract's answer (verify_sort.py's reference), or
# FAKE_BUG=zeros (numpy's order: -0.0 == +0.0, NaNs by payload) or
# unstable (two equal keys swapped).
cmd=$1; shift
[ "$cmd" = health ] && exit 0
if [ "$cmd" = bench ]; then printf '  requests: 10 ok, 0 errors\n  throughput: 1.0 req/s\n'; exit 0; fi
for a; do case $a in --in=*) in=${a#*=} ;; --out=*) out=${a#*=} ;; --indices_out=*) idx=${a#*=} ;; --order=*) order=${a#*=} ;; esac; done
exec python3 - "$in" "$out" "${idx:-}" "$order" << 'PY'
import os, sys
import numpy as np
sys.path.insert(0, os.environ["SELFTEST_SRC"]); import verify_sort as v
inp, out, idx, order = sys.argv[1:]
a = np.load(inp); desc = order == "desc"; bug = os.environ.get("FAKE_BUG", "")
p = v.reference_numeric(a, desc)
if bug == "zeros" and a.dtype.kind == "f":
    p = np.argsort(a, kind="stable")
    p = p[::-1] if desc else p
elif bug == "unstable":
    k = v.order_key(a)[p]; i = int(np.nonzero(k[1:] == k[:-1])[0][0]); p[[i, i + 1]] = p[[i + 1, i]]
p = p.astype(np.uint64); np.save(out, a[p])
if idx: p.astype("<u8").tofile(idx)
print("sorted %d keys on ENGINE_GPU_RADIX" % len(a))
PY
EOF
chmod +x "$T"/fake/* "$T/path/cmake"
for d in .device/bundle/bin .device/xfer/bin build-gpu/tests/gpu build-gpu/bench; do
  mkdir -p "$T/repo/$d"
  for t in radix worker merge segmented service transfer arriving; do ln -s "$T/fake/gtest" "$T/repo/$d/sortd_gpu_${t}_test"; done
  ln -s "$T/fake/gtest" "$T/repo/$d/sortd_core_test"
  for b in sortd_gpu_radix_bench sortd_gpu_merge_bench sortd_gpu_segmented_bench sortd_cpu_bench; do ln -s "$T/fake/bench" "$T/repo/$d/$b"; done
  ln -s "$T/fake/sortd" "$T/repo/$d/sortd"
  ln -s "$T/fake/sortctl" "$T/repo/$d/sortctl"
  for b in sortd_transfer_bench sortd_shm_bench; do ln -s /bin/true "$T/repo/$d/$b"; done
done
export PATH=$T/path:$PATH SELFTEST_SRC=$SRC CUDA_VISIBLE_DEVICES=0 SANITIZE=0

failures=0 n=0
# expect RC ROW_REGEX SCRIPT [VAR=VALUE...]: run SCRIPT in the fake repo
# with the variables set; its exit status must be RC and its output must
# hold a line matching ROW_REGEX.
expect() {
  local want=$1 row=$2 script=$3 rc=0 log
  shift 3
  n=$((n + 1))
  log=$T/case$n.log
  (cd "$T/repo" && env W="/tmp/sortd_checks_selftest_w.$$.$n" "$@" timeout 300 bash "scripts/gpu-host/$script") > "$log" 2>&1 || rc=$?
  if [ "$rc" = "$want" ] && grep -qE "$row" "$log"; then
    echo "ok   $script $* -> exit $rc"
  else
    echo "FAIL $script $*: exit $rc (wanted $want), line /$row/ $(grep -qE "$row" "$log" && echo found || echo missing)"
    grep -E '^\[(PASS|FAIL|NOTRUN)\]' "$log" | sed 's/^/       /' | head -8
    failures=$((failures + 1))
  fi
}
expect 0 'ALL 3 CHECKS PASSED' merge_check.sh
expect 1 '^\[FAIL\] merge tests: 1 of 3 tests FAILED: A.B' merge_check.sh FAKE_GTEST=fail CPU=0 BENCH=0
expect 1 '^\[FAIL\] merge tests: 3 of 3 tests SKIPPED' merge_check.sh FAKE_GTEST=skip CPU=0 BENCH=0
expect 1 '^\[FAIL\] merge tests: no gtest result \(exit 139\)' merge_check.sh FAKE_GTEST=crash CPU=0 BENCH=0
expect 1 '^\[FAIL\] merge tests: .*not there' merge_check.sh B=/nonexistent CPU=0 BENCH=0
expect 1 '^\[FAIL\] merge bench vs CUB: output differs .*NO' merge_check.sh FAKE_BENCH=no TESTS=0 CPU=0
expect 1 '^\[FAIL\] merge bench vs CUB: no table row' merge_check.sh FAKE_BENCH=empty TESTS=0 CPU=0
expect 1 '^\[FAIL\] CPU engine byte strings: exit 3' merge_check.sh FAKE_BENCH=exit TESTS=0 BENCH=0
expect 0 'ALL 3 CHECKS PASSED' radix_check.sh
expect 1 '^\[FAIL\] core-only build \(configure\)' radix_check.sh FAKE_CMAKE_RC=1 BENCH=0
expect 1 '^\[FAIL\] radix_check.sh: exit 1; not passed: radix bench vs CUB' final_check.sh FAKE_BENCH=no
expect 1 '^\[FAIL\] worker tests: 1 of 3 tests FAILED' segmented_check.sh FAKE_GTEST=fail BENCH=0
expect 1 '^\[FAIL\] radix tuning sweep vs CUB: output differs' radix_bundled.sh FAKE_BENCH=no TESTS=0 BENCH=0
expect 1 '^\[FAIL\] service tests \(bundled\): 3 of 3 tests SKIPPED' batch_check.sh FAKE_GTEST=skip SERVICE_BENCH=0 KERNEL_BENCH=0
expect 1 '^\[FAIL\] arriving tests: no gtest result' worker_check.sh FAKE_GTEST=crash
expect 1 '^\[FAIL\] host memory pool tests \(bundled\): 3 of 3 tests SKIPPED' gpu_e2e.sh FAKE_GTEST=skip BUILD=0 SERVICE=0 BENCH=0 SIZES=40000 N=40000 EXPECT_ENGINE=0
expect 1 '^\[FAIL\] two GPUs visible: 1 visible' multi_gpu.sh SECONDS_BIG=1 POOL_KEYS=40000
# engine_check: the real checks of every sort (verify_sort.py), the server
# waited for by health, exit 0 after SIGTERM.
expect 0 'ALL 31 CHECKS PASSED' engine_check.sh N=40000
expect 1 '^\[FAIL\] float32 n=40000 asc indices: verify_sort exit 1.*-0\.0' engine_check.sh N=40000 TYPES=float32 FAKE_BUG=zeros
expect 1 '^\[FAIL\] int64 n=40000 desc indices: verify_sort exit 1.*stable reference permutation' engine_check.sh N=40000 TYPES=int64 FAKE_BUG=unstable
echo "checks_selftest.sh: $((n - failures)) of $n cases held"
[ "$failures" = 0 ]
