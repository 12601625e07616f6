#!/usr/bin/python3
"""The converted types and table sorts through the real sortd, as a user
calls them (the Python client), next to what that user would do instead:
numpy.sort / pandas sort_values(kind="stable") on the same host. Each
answer is checked; median of REPEATS calls after a warm-up. Prints one
table (seconds; ratio = the alternative's time / sortd's).

  SORTD_TARGET=127.0.0.1:50051 /usr/bin/python3 bench/types_bench.py [--log2=22] [--table_log2=22]

The converted types travel in one message (64 MiB by default): 2^22 datetime64
keys is 32 MiB. The string table has half the rows (it is twice as wide).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np


def timed(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log2", type=int, default=22)
    ap.add_argument("--table_log2", type=int, default=22)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--frame_log2", type=int, default=0,
                    help="also the (Int32 nulls, float32 desc NaN) frame at 2^N rows, a table "
                         "session (one call after a warm-up; pandas' side is slow)")
    args = ap.parse_args()
    from sortd_client import Client
    from sortd_client import pandas as sortd_pandas
    import pandas as pd
    client = Client(os.environ.get("SORTD_TARGET", "127.0.0.1:50051"))
    rng = np.random.default_rng(1)
    n = 1 << args.log2
    rows = []
    arrays = {
        "uint32": rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32),
        "int16": rng.integers(-(1 << 15), 1 << 15, n).astype(np.int16),
        "uint8": rng.integers(0, 256, n).astype(np.uint8),
        "int64": rng.integers(-(1 << 62), 1 << 62, n),
        "datetime64[ns]": rng.integers(0, 1 << 62, n).view("M8[ns]"),
        "float16": rng.standard_normal(n).astype(np.float16),
    }
    failed = []
    payload = {}  # workload -> bytes sent (for GB/s)
    try:
        # The echo baseline: the same uint32 payload up and back through a
        # transfer-only session (a server with --diagnostics), nothing sorted.
        u = arrays["uint32"]
        t_echo, echoed = timed(lambda: client.transfer_roundtrip(u), args.repeats)
        rows.append((f"echo (transfer-only session) uint32 2^{args.log2}", t_echo, "-", float("nan"),
                     np.array_equal(echoed, u)))
        payload[rows[-1][0]] = u.nbytes
    except Exception as err:  # noqa: BLE001 - a server without --diagnostics
        print("echo baseline skipped: %s" % err)
    for name, a in arrays.items():
        t_sortd, got = timed(lambda: client.sort(a), args.repeats)
        t_numpy, want = timed(lambda: np.sort(a, kind="stable"), args.repeats)
        ok = np.array_equal(got.view(f"u{a.itemsize}"), want.view(f"u{a.itemsize}"))
        if not ok:
            failed.append(name)
        rows.append((f"{name} keys 2^{args.log2}", t_sortd, "numpy.sort", t_numpy, ok))
        payload[rows[-1][0]] = a.nbytes
    def frame_row(log2, repeats):
        m = 1 << log2
        a = rng.integers(-1000, 1000, m).astype(np.int32)
        b = rng.standard_normal(m).astype(np.float32)
        b[rng.integers(0, m, m // 10)] = np.nan
        df = pd.DataFrame({"a": pd.array(a, dtype="Int32"), "b": b})
        df.loc[rng.integers(0, m, m // 10), "a"] = pd.NA
        t_sortd, got = timed(lambda: sortd_pandas.sort_values(
            df, ["a", "b"], ascending=[True, False], client=client), repeats)
        t_pandas, want = timed(lambda: df.sort_values(["a", "b"], ascending=[True, False],
                                                      kind="stable"), repeats)
        ok = got.index.equals(want.index)
        if not ok:
            failed.append("table int32,float32 2^%d" % log2)
        rows.append((f"table (Int32 nulls, float32 desc NaN) 2^{log2}", t_sortd,
                     "pandas", t_pandas, ok))
        payload[rows[-1][0]] = 8 * m

    frame_row(args.table_log2, args.repeats)
    if args.frame_log2:
        frame_row(args.frame_log2, 1)
    m = 1 << args.table_log2
    words = np.array(["%06d" % i for i in range(50_000)])[rng.integers(0, 50_000, m // 2)]
    df2 = pd.DataFrame({"s": words, "v": rng.integers(0, 100, m // 2)})
    t_sortd, got = timed(lambda: sortd_pandas.sort_values(df2, ["s", "v"], client=client), 3)
    t_pandas, want = timed(lambda: df2.sort_values(["s", "v"], kind="stable"), 3)
    ok = got.index.equals(want.index)
    if not ok:
        failed.append("table str,int64")
    rows.append((f"table (str, int64) 2^{args.table_log2 - 1}", t_sortd, "pandas", t_pandas, ok))
    # GB/s: the payload's bytes (keys; a frame's key columns) over sortd's time.
    print("%-48s %12s %8s %14s %12s %8s %s" % ("workload", "sortd s", "GB/s", "instead", "its s",
                                            "ratio", "check"))
    for name, ts, other, to, ok in rows:
        gbs = payload.get(name, 0) / ts / 1e9
        print("%-48s %12.4f %8.2f %14s %12.4f %7.2fx %s" % (name, ts, gbs, other, to, to / ts,
                                                       "ok" if ok else "WRONG"))
    if failed:
        print("types_bench: wrong answers: " + ", ".join(failed))
        sys.exit(1)


if __name__ == "__main__":
    main()
