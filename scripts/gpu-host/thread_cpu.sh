#!/usr/bin/env bash
# Where the server's CPU goes per request (#6): runs one sortd, then for each
# METHOD a sortctl bench, and prints the CPU microseconds per request that
# each sortd thread group (by thread name: sortd-gpu, sortd-cpu,
# sortd-batcher, gRPC's own) and the client spent, and how busy the whole
# machine was. perf is not available on the GPU host; /proc is.
#   METHODS="echo_stream stream" KEYS=1024 scripts/gpu-host/thread_cpu.sh
#   BIN=build scripts/gpu-host/thread_cpu.sh   (dev VM)
set -u
. "$(dirname "$0")/server_binaries.sh"
DUR=${DUR:-4s}
KEYS=${KEYS:-1024}
CONC=${CONC:-64}
METHODS=${METHODS:-"echo_stream stream"}
PORT=${PORT:-50093}

# tid comm ticks (utime+stime) for every thread of $1.
thread_ticks() {
  for t in /proc/"$1"/task/*; do
    cat "$t/stat" 2>/dev/null
    echo
  done | awk 'NF {
      lp = index($0, "("); rp = 0
      for (i = length($0); i > 0; --i) if (substr($0, i, 1) == ")") { rp = i; break }
      comm = substr($0, lp + 1, rp - lp - 1); gsub(/ /, "_", comm)
      split(substr($0, rp + 2), f, " ")
      print $1, comm, f[12] + f[13] }'
}
machine_ticks() { awk '/^cpu / { busy = $2 + $3 + $4 + $7 + $8; print busy, busy + $5 + $6 }' /proc/stat; }
child_ticks() {
  # bash's `times` in this shell (not a subshell): its second line is the
  # user and system time of the children it waited for.
  times > /tmp/thread_cpu_times
  tail -1 /tmp/thread_cpu_times | awk '{
      split($1, u, "m"); split($2, s, "m"); sub(/s/, "", u[2]); sub(/s/, "", s[2])
      printf "%d\n", ((u[1] * 60 + u[2]) + (s[1] * 60 + s[2])) * 100 }' > /tmp/thread_cpu_children
}

$SORTD --diagnostics --listen=127.0.0.1:$PORT --metrics_listen=127.0.0.1:0 \
  --max_message_bytes=100000000 ${SORTD_FLAGS:-} > /tmp/thread_cpu_sortd.log 2>&1 &
P=$!
sleep 2
echo "# $(grep -m1 engine /tmp/thread_cpu_sortd.log)"
HZ=$(getconf CLK_TCK)
for method in $METHODS; do
  before=$(thread_ticks $P)
  read -r mb0 mt0 < <(machine_ticks)
  child_ticks; c0=$(cat /tmp/thread_cpu_children)
  out=$(timeout 120 $SORTCTL bench --target=127.0.0.1:$PORT --method=$method --keys=$KEYS \
    --concurrency=$CONC --duration=$DUR --max_message_bytes=100000000 ${CLIENT_FLAGS:-} 2>&1)
  child_ticks; c1=$(cat /tmp/thread_cpu_children)
  read -r mb1 mt1 < <(machine_ticks)
  after=$(thread_ticks $P)
  requests=$(echo "$out" | awk '/requests:/ { print $2 }')
  echo "== $method keys=$KEYS conc=$CONC: $(echo "$out" | grep -E 'throughput|latency' | tr -s ' ' | tr '\n' ' ')"
  echo "   machine busy $(awk -v b=$((mb1 - mb0)) -v t=$((mt1 - mt0)) 'BEGIN { printf "%.0f%%", 100 * b / t }') of $(nproc) cores"
  # Per thread group: CPU us per request and threads that ran.
  join -a2 -e0 -o '0,2.2,1.3,2.3' <(echo "$before" | sort -k1,1) <(echo "$after" | sort -k1,1) |
    awk -v n="$requests" -v hz="$HZ" -v client=$((c1 - c0)) '
      { d = $4 - $3; g = $2; sub(/[-_]?[0-9]+$/, "", g); ticks[g] += d; if (d > 0) threads[g]++; total += d }
      END {
        for (g in ticks) if (ticks[g] > 0)
          printf "   server %-18s %8.2f us/req  (%d threads ran)\n", g, ticks[g] * 1e6 / hz / n, threads[g]
        printf "   server %-18s %8.2f us/req\n", "TOTAL", total * 1e6 / hz / n
        printf "   client %-18s %8.2f us/req\n", "sortctl", client * 1e6 / hz / n
      }' | sort -k2,2
done
kill -TERM $P; wait $P
grep "batcher:" /tmp/thread_cpu_sortd.log
