"""Load burst against a real sortd: N Python clients (processes) each sort
their own array of --keys uint32 at the same moment against a server whose
--max_inflight_bytes admits fewer at once; optionally a light client sorting
1024-key arrays all along, its latency compared with its idle latency.
Prints, per client, the outcome and time, the server's peak RSS against the
limit, the admission counters, and (--by_hand) the time of running the same
arrays G at a time by hand (docs/benchmarks.md, "Load bursts").

Times run from the common start to the last answer (making the arrays
before and checking them after are not counted).

  /usr/bin/python3 bench/burst_bench.py --sortd=build/server/sortd \
      --clients=4 --keys=268435456 --limit=2147483648 [--by_hand=2] \
      [--small] [-- sortd flags]

Each answer is checked on the client: sorted, same length, and the same sums
of the keys and of their squares (mod 2^64) as its input: a multiset check
that costs a pass, not a second sort.
"""
import argparse
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))


def peak_rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    return float("nan")


def fingerprint(a, step=1 << 24):
    # In pieces: no temporary of the whole array's size (16 clients of 1 GiB).
    total = squares = 0
    for i in range(0, len(a), step):
        w = a[i:i + step].astype(np.uint64)
        total += int(np.sum(w, dtype=np.uint64))
        squares += int(np.sum(w * w, dtype=np.uint64))
    return len(a), total % (1 << 64), squares % (1 << 64)


def is_sorted(a, step=1 << 24):
    return all(bool(np.all(a[i + 1:i + step + 1] >= a[i:i + step][:len(a[i + 1:i + step + 1])]))
               for i in range(0, max(len(a) - 1, 0), step))


def sort_one(target, keys_n, seed, ready, answered, queue):
    """One client: its array made, then (with the others, `ready`) one sort;
    its time goes on the queue at once; the check of its answer waits until
    every client has its answer (`answered`), so that no client's check
    competes with another's transfer."""
    from sortd_client import Client
    keys = np.random.default_rng(seed).integers(0, 2**32, keys_n, dtype=np.uint32)
    want = fingerprint(keys)
    phases = {}  # phase -> (first, last report), seconds from t0

    def progress(phase, done, total):
        now = time.perf_counter() - t0
        phases[phase] = (phases.get(phase, (now, now))[0], now)

    out = None
    with Client(target) as client:
        ready.wait()  # every client has its array: go together
        t0 = time.perf_counter()
        try:
            out = client.sort(keys, progress=progress)
            outcome = None
        except Exception as e:  # a refusal is a result here
            outcome = "error: %s" % str(e).splitlines()[0][:160]
        queue.put((seed, time.perf_counter() - t0, time.time(), phases))
    answered.wait()
    if outcome is None:
        outcome = "ok" if fingerprint(out) == want and is_sorted(out) else "WRONG"
    queue.put((seed, outcome))


def small_loop(target, go, stop, queue):
    """1024-key sorts from `go` until `stop` (events); their latencies."""
    from sortd_client import Client
    rng = np.random.default_rng(7)
    lat = []
    with Client(target) as client:
        client.sort(np.arange(1024, dtype=np.uint32))  # connected before the window
        go.wait()
        while not stop.is_set():
            keys = rng.integers(0, 2**32, 1024, dtype=np.uint64).astype(np.uint32)
            t0 = time.perf_counter()
            out = client.sort(keys)
            lat.append(time.perf_counter() - t0)
            assert np.array_equal(out, np.sort(keys))
    queue.put(lat)


def p99_ms(lat):
    return 1000 * float(np.percentile(lat, 99)) if lat else float("nan")


def scrape(url):
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(sortd_admission_\w+(?:\{[^}]*\})?) (\S+)$', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def run_clients(target, seeds, keys_n, window=None):
    """Runs the clients together; their results (seed, outcome, seconds,
    end, phases) and the wall time from their common start to the last
    answer. window: (go, stop) events set at that start and at the last
    answer."""
    queue = mp.Queue()
    ready = mp.Barrier(len(seeds) + 1)
    answered = mp.Event()
    procs = [mp.Process(target=sort_one, args=(target, keys_n, s, ready, answered, queue))
             for s in seeds]
    for p in procs:
        p.start()
    ready.wait()
    at = time.time()
    if window:
        window[0].set()
    timed = [queue.get() for _ in procs]
    if window:
        window[1].set()
    answered.set()
    outcomes = dict(queue.get() for _ in procs)
    for p in procs:
        p.join()
    results = sorted((seed, outcomes[seed], seconds, end, phases)
                     for seed, seconds, end, phases in timed)
    return results, max(r[3] for r in results) - at


def small_window(target, seeds, keys_n, small_queue):
    """The small client's latencies while the clients of `seeds` run
    (None: idle, for 3 s)."""
    go, stop = mp.Event(), mp.Event()
    p = mp.Process(target=small_loop, args=(target, go, stop, small_queue))
    p.start()
    if seeds is None:
        go.set()
        time.sleep(3)
        stop.set()
    else:
        run_clients(target, seeds, keys_n, window=(go, stop))
    lat = small_queue.get()
    p.join()
    return lat


def cpu_list(text):
    """{0, 1, ...} of "0-7,12"."""
    out = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def phase_summary(label, results):
    """Medians over the clients of where their time went (progress
    reports): waiting before the first upload report (admission), the
    upload, upload end to sorted, and the download."""
    rows = []
    for _, _, seconds, _, ph in results:
        if "upload" not in ph or "download" not in ph:
            continue
        up, down = ph["upload"], ph["download"]
        sort_end = ph.get("sort", (up[1], up[1]))[1]
        rows.append((up[0], up[1] - up[0], sort_end - up[1], down[1] - down[0], seconds))
    if not rows:
        print("%s: no progress reports" % label)
        return
    med = np.median(np.array(rows), axis=0)
    print("%s (medians of %d): wait %.2f s, upload %.2f s, to sorted %.2f s, download %.2f s,"
          " call %.2f s" % ((label, len(rows)) + tuple(med)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sortd", required=True)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--keys", type=int, default=1 << 28)
    parser.add_argument("--limit", type=int, default=2 << 30)
    parser.add_argument("--by_hand", type=int, default=0,
                        help="also run the arrays this many at a time, one group after another")
    parser.add_argument("--warmup", type=int, default=1,
                        help="1: one untimed group (--by_hand clients) before the burst")
    parser.add_argument("--server_cpus", default="",
                        help="CPUs for sortd, e.g. 0-7 (with --client_cpus: clients on other "
                             "cores, as remote clients would be)")
    parser.add_argument("--client_cpus", default="", help="CPUs for the clients, e.g. 8-15")
    parser.add_argument("--small", action="store_true",
                        help="a client sorting 1024 keys throughout, against its idle p99")
    args, server_flags = parser.parse_known_args()
    server_flags = [f for f in server_flags if f != "--"]
    tmp = tempfile.mkdtemp(prefix="sortd-burst-")
    port_file, metrics_file = os.path.join(tmp, "port"), os.path.join(tmp, "metrics_port")
    server = subprocess.Popen(
        [args.sortd, "--listen=127.0.0.1:0", "--port_file=" + port_file,
         "--metrics_listen=127.0.0.1:0", "--metrics_port_file=" + metrics_file,
         "--max_inflight_bytes=%d" % args.limit] + server_flags,
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "sortd.log"), "w"),
        preexec_fn=(lambda: os.sched_setaffinity(0, cpu_list(args.server_cpus)))
        if args.server_cpus else None)
    if args.client_cpus:
        os.sched_setaffinity(0, cpu_list(args.client_cpus))  # the clients inherit it
    try:
        deadline = time.time() + 60
        while not (os.path.exists(port_file) and os.path.exists(metrics_file)):
            if time.time() > deadline or server.poll() is not None:
                raise SystemExit("sortd did not start")
            time.sleep(0.05)
        time.sleep(0.1)
        target = "127.0.0.1:" + open(port_file).read().strip()
        metrics_url = "http://127.0.0.1:%s/metrics" % open(metrics_file).read().strip()

        idle = []
        small_queue = mp.Queue()
        if args.small:
            idle = small_window(target, None, args.keys, small_queue)

        seeds = list(range(1, args.clients + 1))
        if args.warmup:
            # The server's first large sorts pin host memory and fill the
            # device pool: paid here, not by whichever phase comes first.
            run_clients(target, seeds[:max(1, args.by_hand)], args.keys)
        results, burst_s = run_clients(target, seeds, args.keys)
        counters = scrape(metrics_url)
        peak = peak_rss_mib(server.pid)

        by_hand_s = None
        by_hand_results = []
        if args.by_hand:
            by_hand_s = 0
            for i in range(0, len(seeds), args.by_hand):
                group, seconds = run_clients(target, seeds[i:i + args.by_hand], args.keys)
                by_hand_s += seconds
                by_hand_results += group

        busy = []
        if args.small:
            # The burst again, with the small client sorting from its start
            # to its last answer.
            busy = small_window(target, seeds, args.keys, small_queue)
    finally:
        server.terminate()
        server.wait(timeout=60)

    print("| client | outcome | seconds |")
    print("|---|---|---|")
    for seed, outcome, seconds, _, _ in results:
        print("| %d | %s | %.2f |" % (seed, outcome, seconds))
    ok = sum(1 for r in results if r[1] == "ok")
    print()
    print("clients exact: %d/%d; burst wall time %.2f s" % (ok, len(results), burst_s))
    print("server peak RSS %.0f MiB = %.2fx the limit (%d MiB)"
          % (peak, peak / (args.limit / 2**20), args.limit >> 20))
    for name in sorted(counters):
        if "refusals" in name and counters[name] > 0:
            print("  %s %g" % (name, counters[name]))
    phase_summary("burst", results)
    if by_hand_s is not None:
        phase_summary("by hand", by_hand_results)
        print("by hand, %d at a time: %.2f s; burst / by hand = %.2f"
              % (args.by_hand, by_hand_s, burst_s / by_hand_s))
    if args.small:
        print("1024-key sorts: idle p99 %.2f ms (%d calls), during the burst p99 %.2f ms (%d calls),"
              " ratio %.2f" % (p99_ms(idle), len(idle), p99_ms(busy), len(busy),
                                p99_ms(busy) / p99_ms(idle)))


if __name__ == "__main__":
    mp.set_start_method("spawn")
    main()
