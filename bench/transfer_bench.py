"""End-to-end transfer benchmark of a running sortd through the Python client.

For each size and connection count: a sort through the client's default path
(a sort session for large arrays), the same bytes moved up and back without
the sort (transfer_roundtrip: sortd --diagnostics), and numpy.sort of the same
array on this machine, one thread. Every sort is checked against numpy.
Prints tab-separated rows like bench/transfer_bench.cc (client "py").

  PYTHONPATH=client/python python3 bench/transfer_bench.py --target 127.0.0.1:50051 \\
      --sizes_mib 1,64,1024 --connections 4,8 --repeat 3
"""

import argparse
import resource
import sys
import time

import numpy as np

import sortd_client


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def is_sorted_permutation(out, keys, key_sum):
    """Sorted, same length and checksum: checked in slices, so that the
    check adds no array-sized temporaries to the peak RSS being measured."""
    if out.shape != keys.shape or int(out.sum(dtype=np.uint64)) != key_sum:
        return False
    step = 1 << 24
    for i in range(0, len(out), step):
        piece = out[i:i + step + 1]
        if not np.all(piece[:-1] <= piece[1:]):
            return False
    return True


LABEL = "py"


def report(mode, nbytes, connections, seconds, moved):
    first = seconds[0]
    seconds = sorted(seconds)
    best, median = seconds[0], seconds[len(seconds) // 2]
    print(LABEL + "\t%s\t%d\t%d\t%.4f\t%.4f\t%.4f\t%.2f\t%.0f" % (
        mode, nbytes, connections, best, median, first, moved / best / 1e9, peak_rss_mib()))
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--sizes_mib", default="1,16,64,256,1024")
    parser.add_argument("--connections", default="8")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", default="sort,transfer,numpy")
    parser.add_argument("--header", action="store_true")
    parser.add_argument("--native", choices=("auto", "on", "off"), default="auto",
                        help="sessions through the C++ client's C library (on), grpcio "
                             "(off), or whichever loads (auto); rows say which: py-native "
                             "or py-grpcio")
    args = parser.parse_args()
    modes = set(args.modes.split(","))
    if args.header:
        print("client\tmode\tbytes\tconnections\tbest_s\tmedian_s\tfirst_s\tGB/s(up+down)"
              "\tclient_peak_rss_MiB")
    failures = 0
    native = {"auto": None, "on": True, "off": False}[args.native]
    global LABEL
    with sortd_client.Client(args.target, native=native) as client:
        LABEL = "py-native" if client.native else "py-grpcio"
        for mib in [int(x) for x in args.sizes_mib.split(",") if x]:
            n = (mib << 20) // 4
            keys = np.random.default_rng(mib).integers(0, 1 << 32, n, dtype=np.uint32)
            key_sum = int(keys.sum(dtype=np.uint64))
            if "numpy" in modes:
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    np.sort(keys)
                    times.append(time.perf_counter() - t0)
                report("numpy.sort", keys.nbytes, 0, times, keys.nbytes)
            for conns in [int(x) for x in args.connections.split(",") if x]:
                if "sort" in modes:
                    times = []
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        out = client.sort_full(keys, connections=conns).keys
                        times.append(time.perf_counter() - t0)
                        if not is_sorted_permutation(out, keys, key_sum):
                            print("WRONG RESULT at %d MiB x%d" % (mib, conns), file=sys.stderr)
                            failures += 1
                        del out
                    report("sort", keys.nbytes, conns, times, 2 * keys.nbytes)
                if "transfer" in modes:
                    times = []
                    for _ in range(args.repeat):
                        t0 = time.perf_counter()
                        out = client.transfer_roundtrip(keys, connections=conns)
                        times.append(time.perf_counter() - t0)
                        if not np.array_equal(out, keys):
                            print("WRONG TRANSFER at %d MiB x%d" % (mib, conns), file=sys.stderr)
                            failures += 1
                        del out
                    report("transfer", keys.nbytes, conns, times, 2 * keys.nbytes)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
