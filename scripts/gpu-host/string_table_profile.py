#!/usr/bin/env python3
"""Where the time of sortd_client.pandas.sort_values goes for a frame with a
string key (bench/types_bench.py's (str, int64) table): each phase timed
alone, against pandas' own stable sort of the same frame.

  SORTD_TARGET=host:port python3 string_table_profile.py [--log2=21]
"""
import argparse
import os
import time

import numpy as np
import pandas as pd

from sortd_client import Client
from sortd_client import pandas as sortd_pandas
from sortd_client.pandas import _key_column, _take


def timed(fn, repeats=3):
    best, out = None, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        t = time.perf_counter() - t0
        best = t if best is None or t < best else best
    return best, out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log2", type=int, default=21)
    args = p.parse_args()
    n = 1 << args.log2
    rng = np.random.default_rng(1)
    words = np.array(["%06d" % i for i in range(50_000)])[rng.integers(0, 50_000, n)]
    df = pd.DataFrame({"s": words, "v": rng.integers(0, 100, n)})
    print("pandas %s, dtype of s: %s, %d rows" % (pd.__version__, df["s"].dtype, n))
    client = Client(os.environ["SORTD_TARGET"])

    def argsort(distinct):
        return client.sort(distinct, return_indices=True)[1]

    rows = []
    rows.append(("pd.factorize(s)", timed(lambda: pd.factorize(df["s"]))[0]))
    codes, uniques = pd.factorize(df["s"])
    rows.append(("list(uniques) + encode", timed(lambda: [x.encode() for x in list(uniques)])[0]))
    enc = np.empty(len(uniques), dtype=object)
    enc[:] = [x.encode() for x in list(uniques)]
    rows.append(("argsort of the distinct (sortd)", timed(lambda: argsort(enc))[0]))
    rows.append(("_key_column(s) (all of the above)", timed(lambda: _key_column(df["s"], argsort))[0]))
    rows.append(("_key_column(v)", timed(lambda: _key_column(df["v"], argsort))[0]))
    s_vals, s_mask = _key_column(df["s"], argsort)
    v_vals, _ = _key_column(df["v"], argsort)
    cols = {"0:s": s_vals if s_mask is None else np.ma.MaskedArray(s_vals, s_mask), "1:v": v_vals}
    rows.append(("client.sort_table (int32 rank, int64)", timed(lambda: client.sort_table(cols, by=list(cols)))[0]))
    perm = client.sort_table(cols, by=list(cols))
    rows.append(("_take(df, perm)", timed(lambda: _take(df, perm))[0]))
    rows.append(("df.take(perm)", timed(lambda: df.take(perm))[0]))
    total, got = timed(lambda: sortd_pandas.sort_values(df, ["s", "v"], client=client))
    rows.append(("sortd_pandas.sort_values (whole)", total))
    t_pandas, want = timed(lambda: df.sort_values(["s", "v"], kind="stable"))
    rows.append(("pandas sort_values(kind=stable)", t_pandas))
    print("%-42s %10s" % ("phase", "seconds"))
    for name, t in rows:
        print("%-42s %10.4f" % (name, t))
    print("check: %s; ratio %.2fx" % ("ok" if got.index.equals(want.index) else "WRONG", t_pandas / total))


if __name__ == "__main__":
    main()
