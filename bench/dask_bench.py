#!/usr/bin/env python3
"""dask's own sort_values against sortd-backed sorts, on one dask.distributed
LocalCluster and the same persisted data (docs/distributed.md, numbers in
docs/benchmarks.md, "dask").

Starts --replicas real sortd processes (sortd flags after --), a
LocalCluster of --workers processes, generates --gib of rows on the workers
(a uniform float64 key `k`, an int64 row id and --payload int64 columns)
in --partitions partitions, persists it, then times, each to a persisted
result (wait on every partition):
  dask      ddf.sort_values("k")                 (dask's range shuffle, pandas per partition)
  dask+ps   ddf.sort_values("k", sort_function=partition_sort)  (the same, sortd per partition)
  sortd     sortd_client.dask.sort_values(ddf, "k")  (our sample sort)
Each result is checked on the workers: rows and their id sum equal the
input's, every partition in order, and consecutive partitions in order.

  PYTHONPATH=<build>/python:client/python /usr/bin/python3 bench/dask_bench.py \\
      --sortd=build/server/sortd --replicas=1 --workers=2 --gib=1 -- --engine=cpu
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "client", "python"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_replica(binary, flags, tmp, i):
    port = free_port()
    log = open(os.path.join(tmp, "sortd-%d.log" % i), "w")
    proc = subprocess.Popen([binary, "--listen=127.0.0.1:%d" % port,
                             "--advertise_address=127.0.0.1:%d" % port,
                             "--metrics_listen=127.0.0.1:0"] + flags,
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, "127.0.0.1:%d" % port
        if proc.poll() is not None:
            raise SystemExit("sortd exited:\n" + open(log.name).read())
        time.sleep(0.05)
    raise SystemExit("sortd did not start")


def make_partition(index, rows, payload):
    import pandas as pd
    rng = np.random.default_rng([11, index])
    frame = {"k": rng.random(rows), "rid": np.arange(rows, dtype=np.int64) + index * (1 << 32)}
    block = rng.integers(0, 1 << 62, (rows, payload))
    for c in range(payload):
        frame["p%d" % c] = block[:, c]
    return pd.DataFrame(frame)


def summary(frame):
    """(rows, rid sum mod 2^64, in order, first key, last key)."""
    k = frame["k"].to_numpy()
    if len(k) == 0:
        return 0, 0, True, None, None
    return (len(k), int(frame["rid"].to_numpy().sum(dtype=np.uint64)), bool(np.all(k[1:] >= k[:-1])),
            float(k[0]), float(k[-1]))


def check(client, dask, out, want_rows, want_ids):
    got = client.gather(client.compute([dask.delayed(summary)(p) for p in out.to_delayed()]))
    rows = sum(g[0] for g in got)
    ids = sum(g[1] for g in got)
    ordered = all(g[2] for g in got)
    ends = [(g[3], g[4]) for g in got if g[0]]
    across = all(a[1] <= b[0] for a, b in zip(ends[:-1], ends[1:]))
    sizes = [g[0] for g in got]
    ok = rows == want_rows and ids % (1 << 64) == want_ids % (1 << 64) and ordered and across
    return ok, max(sizes) / (sum(sizes) / len(sizes))


def print_profile(name, tasks):
    """Worker-seconds by task kind (key prefix) and action, from dask's
    task stream: where a run's time went."""
    from distributed.utils import key_split
    totals = {}
    for task in tasks:
        for ss in task.get("startstops", ()):
            k = (key_split(task["key"]), ss["action"])
            totals[k] = totals.get(k, 0.0) + ss["stop"] - ss["start"]
    for (prefix, action), seconds in sorted(totals.items(), key=lambda kv: -kv[1])[:6]:
        print("  %-8s %-40s %-12s %7.2f worker-s" % (name, prefix[:40], action, seconds))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sortd", required=True)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="threads per worker")
    parser.add_argument("--memory_limit", default="auto")
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--payload", type=int, default=6, help="int64 payload columns")
    parser.add_argument("--partitions", type=int, default=0, help="0: about 128 MiB each")
    parser.add_argument("--runs", default="dask,dask+ps,sortd")
    parser.add_argument("--repeat", type=int, default=2,
                        help="rounds over --runs, each in another order; the best counts")
    parser.add_argument("--profile", action="store_true",
                        help="per task kind: worker seconds computing and transferring")
    args, flags = parser.parse_known_args()
    flags = [f for f in flags if f != "--"]

    import dask
    import dask.dataframe as dd
    import distributed
    from sortd_client import dask as sortd_dask

    row_bytes = 8 * (2 + args.payload)
    total_rows = int(args.gib * (1 << 30) / row_bytes)
    partitions = args.partitions or max(1, int(round(args.gib * 8)))
    rows = total_rows // partitions
    tmp = tempfile.mkdtemp(prefix="sortd-dask-bench-")
    replicas = [start_replica(args.sortd, flags, tmp, i) for i in range(args.replicas)]
    target = "ipv4:" + ",".join(t for _, t in replicas)
    cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=args.threads,
                                       processes=True, memory_limit=args.memory_limit,
                                       dashboard_address=None, silence_logs=40)
    client = distributed.Client(cluster)
    results = []
    try:
        meta = make_partition(0, 0, args.payload)
        parts = [dask.delayed(make_partition, pure=True)(i, rows, args.payload)
                 for i in range(partitions)]
        ddf = dd.from_delayed(parts, meta=meta, verify_meta=False).persist()
        distributed.wait(ddf)
        want_rows = rows * partitions
        want_ids = sum(rows * (rows - 1) // 2 + i * (1 << 32) * rows for i in range(partitions))
        runs = {
            "dask": lambda: ddf.sort_values("k"),
            "dask+ps": lambda: ddf.sort_values(
                "k", sort_function=sortd_dask.partition_sort,
                sort_function_kwargs={"target": target}),
            "sortd": lambda: sortd_dask.sort_values(ddf, "k", target=target),
        }

        names = args.runs.split(",")
        # Each round in another order (the first runs of a fresh cluster pay
        # its warm-up: page faults, connections); the best of the rounds counts.
        order = [names[r % len(names):] + names[:r % len(names)] for r in range(args.repeat)]
        for name in [n for round_names in order for n in round_names]:
            with distributed.get_task_stream(client) as stream:
                t0 = time.perf_counter()
                out = runs[name]().persist()
                distributed.wait(out)
                seconds = time.perf_counter() - t0
            if args.profile:
                print_profile(name, stream.data)
            ok, skew = check(client, dask, out, want_rows, want_ids)
            results.append((name, seconds, ok, skew))
            del out
            print("%-8s %.2f s  %s  skew %.2f" % (name, seconds, "exact" if ok else "WRONG", skew),
                  flush=True)
    finally:
        client.close()
        cluster.close()
        for proc, _ in replicas:
            proc.terminate()
            proc.wait(timeout=60)
    gib = total_rows * row_bytes / (1 << 30)
    print()
    print("%.2f GiB, %d rows of %d B, %d partitions; %d workers x %d threads; %d replica(s) %s"
          % (gib, total_rows, row_bytes, partitions, args.workers, args.threads, args.replicas,
             " ".join(flags)))
    print("| run | best seconds (each round) | GiB/s | vs dask | exact | skew |")
    print("|---|---|---|---|---|---|")
    best = {}
    for name, seconds, ok, skew in results:
        prev = best.get(name)
        best[name] = (min(seconds, prev[0]) if prev else seconds,
                      ok and (prev[1] if prev else True), max(skew, prev[2] if prev else 0),
                      (prev[3] if prev else []) + [seconds])
    base = best.get("dask", (None,))[0]
    for name in names:
        seconds, ok, skew, runs_s = best[name]
        print("| %s | %.2f (%s) | %.2f | %s | %s | %.2f |"
              % (name, seconds, ", ".join("%.2f" % x for x in runs_s), gib / seconds,
                 "%.2fx" % (base / seconds) if base else "-", "yes" if ok else "NO", skew))


if __name__ == "__main__":
    main()
