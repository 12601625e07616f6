#!/usr/bin/env bash
# Runs sortd_cpu_bench (CPU engine vs std::sort / std::stable_sort) and
# prints a summary: keys/s per method and the engine's speed-up over the std
# baselines, per key type and size.
#
#   bench/run_cpu_bench.sh [--filter REGEX] [--min-time SECONDS]
#                          [--repetitions N] [--json FILE] [-- extra args]
#
# Env: SORTD_BENCH_BIN (default: build-core/bench/sortd_cpu_bench, else
# build/bench/sortd_cpu_bench). Build it with, e.g.:
#   cmake -S . -B build-core -G Ninja -DSORTD_BUILD_SERVER=OFF \
#     -DCMAKE_BUILD_TYPE=Release -DSORTD_WITH_CUDA=OFF
#   cmake --build build-core --target sortd_cpu_bench
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FILTER='.*'
MIN_TIME='0.2'
REPS='1'
JSON=''
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --filter) FILTER="$2"; shift 2 ;;
    --min-time) MIN_TIME="$2"; shift 2 ;;
    --repetitions) REPS="$2"; shift 2 ;;
    --json) JSON="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "run_cpu_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done

BIN="${SORTD_BENCH_BIN:-}"
if [ -z "$BIN" ]; then
  for candidate in "$ROOT/build-core/bench/sortd_cpu_bench" "$ROOT/build/bench/sortd_cpu_bench"; do
    if [ -x "$candidate" ]; then BIN="$candidate"; break; fi
  done
fi
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
  echo "run_cpu_bench: sortd_cpu_bench not found (build it first, or set SORTD_BENCH_BIN)" >&2
  exit 1
fi

CLEANUP=''
if [ -z "$JSON" ]; then
  JSON="$(mktemp /tmp/sortd_cpu_bench.XXXXXX.json)"
  CLEANUP="$JSON"
fi
trap '[ -n "$CLEANUP" ] && rm -f "$CLEANUP"' EXIT

echo "run_cpu_bench: $BIN (filter '$FILTER', min_time ${MIN_TIME}s, repetitions $REPS)"
"$BIN" --benchmark_filter="$FILTER" --benchmark_min_time="$MIN_TIME" \
  --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only="$([ "$REPS" -gt 1 ] && echo true || echo false)" \
  --benchmark_out="$JSON" --benchmark_out_format=json "${EXTRA[@]}"

/usr/bin/python3 - "$JSON" <<'PY'
import json, sys
from collections import defaultdict

data = json.load(open(sys.argv[1]))
ctx = data.get("context", {})
rate = defaultdict(dict)  # (type, n) -> method -> keys/s
errors = []
for b in data["benchmarks"]:
    if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
        continue
    name = b.get("run_name", b["name"])
    parts = name.split("/")
    if len(parts) < 3:
        continue
    typ, method, n = parts[0], parts[1], int(parts[2])
    if b.get("error_occurred"):
        errors.append(f"{name}: {b.get('error_message')}")
        continue
    rate[(typ, n)][method] = b["items_per_second"]

print()
print(f"host: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs @ "
      f"{ctx.get('mhz_per_cpu', '?')} MHz, library build {ctx.get('library_build_type', '?')}")
methods = ["engine_st", "engine_mt", "std_sort", "std_stable_sort"]
head = (f"{'type':<6} {'n':>6} | " + " ".join(f"{m:>15}" for m in methods) +
        " | " + f"{'st/sort':>8} {'mt/sort':>8} {'st/stable':>9} {'mt/stable':>9}")
print("Mkeys/s (sort time only) and speed-up of the engine over std:")
print(head)
print("-" * len(head))

def ratio(r, a, b):
    return f"{r[a] / r[b]:.1f}x" if a in r and b in r else "-"

order = {"u32": 0, "f32": 1, "u64": 2, "pairs": 3, "argsort_u32": 4, "argsort_u64": 5}
for (typ, n) in sorted(rate, key=lambda k: (order.get(k[0], 9), k[0], k[1])):
    r = rate[(typ, n)]
    log2 = n.bit_length() - 1
    size = f"2^{log2}" if n == 1 << log2 else str(n)
    cells = " ".join(f"{r[m] / 1e6:>15.1f}" if m in r else f"{'-':>15}" for m in methods)
    print(f"{typ:<6} {size:>6} | {cells} | {ratio(r, 'engine_st', 'std_sort'):>8} "
          f"{ratio(r, 'engine_mt', 'std_sort'):>8} {ratio(r, 'engine_st', 'std_stable_sort'):>9} "
          f"{ratio(r, 'engine_mt', 'std_stable_sort'):>9}")

target = rate.get(("u32", 1 << 24), {})
if "engine_st" in target and "std_sort" in target:
    x = target["engine_st"] / target["std_sort"]
    print(f"\nu32 2^24 single-thread engine vs std::sort: {x:.1f}x "
          f"(target >= 20x: {'MET' if x >= 20 else 'NOT MET'})")
for e in errors:
    print("ERROR", e)
sys.exit(1 if errors else 0)
PY
