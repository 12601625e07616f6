#!/usr/bin/env python3
"""Where a sort session's time goes, seen from the client.

Runs the Python client's sort session (the C++ path when it loads) against
a real sortd started with --diagnostics, alternating a sort and a
transfer-only session of the same keys, and prints for each sort: the start
and upload, the gap to FinishSortSession, the finish (the server's upload
tail, kernel and copy back), the gap to the first downloaded part, and the
download; for each transfer only its total. Phases come from the client's
progress callback. Usage:

    PYTHONPATH=<build>/python:client/python python3 bench/session_phases.py \
        --target 127.0.0.1:PORT --mib 1024 --part_mib 4 --connections 8 --repeat 3
"""

import argparse
import time

import numpy as np

import sortd_client


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--part_mib", type=int, default=4)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = (args.mib << 20) // 4
    keys = np.random.default_rng(1).integers(0, 1 << 32, n, dtype=np.uint32)
    # session_min_bytes=1: a session at any size (phases exist only there).
    with sortd_client.Client(args.target, part_bytes=args.part_mib << 20,
                             session_min_bytes=1) as client:
        path = "native" if client.native else "grpcio"
        for _ in range(args.repeat):
            marks = {}

            def progress(phase, _done, _total):
                now = time.perf_counter()
                marks.setdefault(phase + "_first", now)
                marks[phase + "_last"] = now

            start = time.perf_counter()
            client.sort_full(keys, progress=progress, connections=args.connections)
            end = time.perf_counter()
            ms = lambda a, b: (b - a) * 1e3  # noqa: E731
            print("%s %d MiB parts %d MiB: sort %.1f ms = start+upload %.1f, gap %.1f, "
                  "finish %.1f, gap %.1f, download %.1f" % (
                      path, args.mib, args.part_mib, ms(start, end),
                      ms(start, marks["upload_last"]),
                      ms(marks["upload_last"], marks["sort_first"]),
                      ms(marks["sort_first"], marks["sort_last"]),
                      ms(marks["sort_last"], marks["download_first"]),
                      ms(marks["download_first"], end)))
            start = time.perf_counter()
            client.transfer_roundtrip(keys, connections=args.connections)
            print("%s %d MiB parts %d MiB: transfer only %.1f ms" % (
                path, args.mib, args.part_mib, ms(start, time.perf_counter())))


if __name__ == "__main__":
    main()
