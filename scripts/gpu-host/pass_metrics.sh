#!/usr/bin/env bash
# Nsight Compute counters of the first COUNT launches of kernels matching
# REGEX in a command: duration, instructions, shared-memory wavefronts
# (atomics, stores, loads), L2 sectors, DRAM bytes, global store requests
# and sectors, occupancy, and the five largest stall reasons per issue.
# One line per launch. Used to compare our OneSweep passes with CUB's
# (docs/benchmarks-history.md, "Ties and skew"), e.g.
#   scripts/gpu-host/pass_metrics.sh OneSweepPass 4 -- sortd_gpu_radix_bench --only="u32 skewed" --max_log2=26 --repeats=1
#   scripts/gpu-host/pass_metrics.sh Onesweep 4 -- (the same: CUB's passes)
# ncu replays each launch (no clock control): compare launches of one run.
set -euo pipefail
if [ $# -lt 4 ] || [ "$3" != "--" ]; then
  echo "usage: $0 REGEX COUNT -- COMMAND [ARGS...]" >&2
  exit 2
fi
REGEX=$1 COUNT=$2; shift 3
export PATH=/usr/local/cuda/bin:$PATH
M=gpu__time_duration.sum,smsp__inst_executed.sum
for op in atom st ld; do M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_$op.sum; done
M=$M,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,dram__bytes_write.sum
M=$M,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,sm__warps_active.avg.pct_of_peak_sustained_active
for r in long_scoreboard short_scoreboard mio_throttle lg_throttle barrier membar wait math_pipe_throttle \
         not_selected selected dispatch_stall no_instruction branch_resolving; do
  M=$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
done
csv=$(mktemp)
ncu --clock-control none -k "regex:$REGEX" --launch-count "$COUNT" --metrics "$M" --print-units base --csv "$@" \
  2>/dev/null | grep '^"' > "$csv" || true
python3 - "$csv" <<'PY'
import collections, csv, sys
short = [("gpu__time_duration.sum", "us", 1e3), ("smsp__inst_executed.sum", "Minst", 1e6),
         ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum", "shAtomWF(M)", 1e6),
         ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "shStWF(M)", 1e6),
         ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "shLdWF(M)", 1e6),
         ("lts__t_sectors_srcunit_tex_op_write.sum", "L2wrSec(M)", 1e6),
         ("lts__t_sectors_srcunit_tex_op_read.sum", "L2rdSec(M)", 1e6),
         ("dram__bytes_read.sum", "dramRd(MB)", 1e6), ("dram__bytes_write.sum", "dramWr(MB)", 1e6),
         ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "gStReq(M)", 1e6),
         ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "gStSec(M)", 1e6),
         ("sm__warps_active.avg.pct_of_peak_sustained_active", "occ%", 1)]
launches = collections.OrderedDict()
with open(sys.argv[1]) as f:
    for r in csv.DictReader(f):
        launches.setdefault(r["ID"], {})[r["Metric Name"]] = float(r["Metric Value"].replace(",", "") or 0)
if not launches:
    sys.exit("no launch matched (or ncu failed)")
for m in launches.values():
    print(" ".join("%s=%.1f" % (name, m.get(k, float("nan")) / scale) for k, name, scale in short))
    stalls = sorted(((v, k.split("stalled_")[1].split("_per")[0]) for k, v in m.items() if "stalled_" in k),
                    reverse=True)[:5]
    print("   stalls/issue: " + ", ".join("%s %.2f" % (n, v) for v, n in stalls))
PY
rm -f "$csv"
