#!/usr/bin/env bash
# ncu of one size: our kernels and CUB's side by side (durations, registers,
# occupancy, DRAM throughput), summarised per kernel.
set -u
export PATH=/usr/local/cuda/bin:$PATH
# The bench from a carried bundle (.device/bundle.tar.xz, see
# radix_bundled.sh) when there is one, else a core-only build here.
if [ -f .device/bundle.tar.xz ]; then
  [ -d .device/bundle ] || tar -C .device -xJf .device/bundle.tar.xz
  export LD_LIBRARY_PATH=$PWD/.device/bundle/lib
  BENCH=$PWD/.device/bundle/bin/sortd_gpu_radix_bench
else
  cmake -S . -B build-gpu -DSORTD_BUILD_SERVER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > /tmp/cfg.log 2>&1; cmake --build build-gpu -j16 --target sortd_gpu_radix_bench > /tmp/build.log 2>&1 || { grep -E "error" /tmp/build.log | head -30; exit 1; }
  BENCH=build-gpu/bench/sortd_gpu_radix_bench
fi
ONLY=${ONLY:-u32 keys}
L=${L:-24}
timeout 300 ncu --metrics gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__bytes.sum,sm__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio \
  --csv "$BENCH" --only="$ONLY" --min_log2=$L --max_log2=$L --repeats=1 > /tmp/ncu.csv 2>/tmp/ncu.err
tail -3 /tmp/ncu.err
python3 - <<'PY'
import csv, collections, re
rows = list(csv.DictReader(l for l in open('/tmp/ncu.csv') if l.startswith('"')))
by = collections.OrderedDict()
for r in rows:
    name = r['Kernel Name']
    m = re.match(r'(?:void )?([\w:]+?)(?:<|\()', name)
    short = (m.group(1) if m else name)[-40:]
    key = (r['ID'], short)
    by.setdefault(key, {})[r['Metric Name']] = r['Metric Value']
for (i, k), m in by.items():
    g = lambda n: m.get(n, '?')
    st = lambda n: g('smsp__average_warps_issue_stalled_' + n + '_per_issue_active.ratio')
    print(f"{i:>3} {k[-28:]:28s} t={g('gpu__time_duration.sum'):>9} regs={g('launch__registers_per_thread'):>3} occ={g('sm__warps_active.avg.pct_of_peak_sustained_active'):>6} dram={g('dram__bytes.sum'):>12} inst={g('sm__inst_executed.sum'):>12} bank={g('l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum'):>10} stall: short={st('short_scoreboard')} long={st('long_scoreboard')} bar={st('barrier')} mio={st('mio_throttle')} lg={st('lg_throttle')} membar={st('membar')}")
PY
