"""Command line: python3 -m sortd_client [--target HOST:PORT] COMMAND.

  health [--service NAME]   print the health status; exit 0 only if SERVING
  check [--dtype T] [--n N] [--descending] [--indices] [--chunked]
                            sort random data and verify it against numpy
"""

import argparse
import sys
import time

import numpy as np

from . import Client, SortdError

DTYPES = ["uint32", "int32", "float32", "uint64", "int64", "float64"]


def _random(dtype, n, rng):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":  # no NaN / -0.0: numpy's order is then the same
        return rng.standard_normal(n).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)


def _check(client, args):
    a = _random(args.dtype, args.n, np.random.default_rng(args.seed))
    if args.descending:  # stable descending: equal keys keep input order
        perm = (len(a) - 1 - np.argsort(a[::-1], kind="stable"))[::-1]
    else:
        perm = np.argsort(a, kind="stable")
    start = time.perf_counter()
    res = client.sort_full(a, descending=args.descending, return_indices=args.indices,
                           chunked=True if args.chunked else None)
    elapsed = time.perf_counter() - start
    ok = np.array_equal(res.keys, a[perm])
    if args.indices:
        ok = ok and np.array_equal(res.indices, perm)
    print("%s: %d %s keys in %.3f s (%.1f Mkeys/s), engine %s" % (
        "OK" if ok else "MISMATCH", args.n, args.dtype, elapsed,
        args.n / elapsed / 1e6 if elapsed else 0.0, res.engine))
    return 0 if ok else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m sortd_client")
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--timeout", type=float, default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    health = sub.add_parser("health")
    health.add_argument("--service", default="")
    check = sub.add_parser("check")
    check.add_argument("--dtype", choices=DTYPES, default="uint32")
    check.add_argument("--n", type=int, default=1 << 20)
    check.add_argument("--seed", type=int, default=1)
    check.add_argument("--descending", action="store_true")
    check.add_argument("--indices", action="store_true")
    check.add_argument("--chunked", action="store_true", help="force SortChunked")
    args = parser.parse_args(argv)
    with Client(args.target, timeout=args.timeout) as client:
        try:
            if args.command == "health":
                status = client.health(args.service)
                print(status)
                return 0 if status == "SERVING" else 1
            return _check(client, args)
        except SortdError as err:
            print("error: %s" % err, file=sys.stderr)
            return 2


if __name__ == "__main__":
    sys.exit(main())
