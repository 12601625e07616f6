#!/usr/bin/env bash
# Per-kernel GPU durations of a command under Nsight Compute (no clock
# control, one metric: cheap). Prints launch order, kernel (shortened),
# grid and microseconds; the last LAST launches (default 40).
#   scripts/gpu-host/kernel_times.sh [LAST] -- COMMAND [ARGS...]
# ncu serialises launches, so host gaps (round trips) are not in these
# times: compare their sum with the command's own host-timed total.
set -euo pipefail
LAST=40
if [ "${1:-}" != "--" ]; then LAST="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
export PATH=/usr/local/cuda/bin:$PATH
csv=$(mktemp)
ncu --clock-control none --metrics gpu__time_duration.sum --print-units base --csv "$@" > "$csv" 2>/dev/null || true
python3 - "$csv" "$LAST" <<'PY'
import csv, re, sys
rows = []
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = re.sub(r"\(.*", "", r["Kernel Name"]).split("<")[0].split("::")[-1]
    rows.append((r["ID"], name, r["Grid Size"], float(r["Metric Value"].replace(",", "")) / 1000.0))
for row in rows[-int(sys.argv[2]):]:
    print("%5s %-34s %-16s %9.1f us" % row)
PY
rm -f "$csv"
