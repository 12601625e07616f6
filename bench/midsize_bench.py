"""Mid-size arrays end to end through the Python client (issue #50).

For each size (powers of two of u32 keys), one run of each path the client
can take, against the same bytes moved without a sort and against numpy:

  numpy     numpy.sort of the array, here (default kind, one thread)
  echo      DiagnosticsService.Echo of the same SortRequest on the client's
            own channel (grpcio, its options): the one-message round trip
  transfer  a transfer-only sort session (sortd --diagnostics), the same
            bytes up and back as parts, through the path sessions take
  sort      Client.sort as a user calls it (the client's defaults)
  sort_raw  the same with compress=False
  sort_coded  the same with compress=True (delta-coded sorted keys)
  unary     one Sort message (sessions off)
  session   a sort session at every size

Every sorted answer is compared with numpy's. Prints tab-separated rows:
client, mode, log2 keys, bytes, best and median milliseconds of --repeat
runs (after one warm-up), and best / numpy. With --proxy_stats (the stats
file of bench/throttle_proxy.cc, which the target then is), also the bytes
each call put on the wire, up and down (framing and all).

  PYTHONPATH=client/python python3 bench/midsize_bench.py --target 127.0.0.1:50051 \\
      --sizes_log2 14,16,18,20,22 --repeat 20
"""

import argparse
import json
import sys
import time

import numpy as np

import sortd_client
from sortd_client import client as client_module
from sortd_client.arrays import TypedInput


def timed(fn, repeat, check=None):
    """Best and median milliseconds of `repeat` calls after a warm-up
    (channels, pinned blocks); each answer is checked outside the timing."""
    out = fn()
    seconds = []
    for _ in range(repeat):
        if check is not None:
            check(out)
        del out
        t0 = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - t0)
    if check is not None:
        check(out)
    seconds.sort()
    return seconds[0] * 1e3, seconds[len(seconds) // 2] * 1e3


def wire_bytes(stats_file):
    """(up, down) bytes the throttle proxy has carried so far, once its
    stats file (rewritten every 20 ms) has caught up with the last call."""
    if not stats_file:
        return (0, 0)
    time.sleep(0.1)
    with open(stats_file) as f:
        up, down, _ = f.read().split()
    return (int(up), int(down))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", default="127.0.0.1:50051")
    parser.add_argument("--sizes_log2", default="14,16,18,20,22")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--modes", default="numpy,echo,transfer,sort,unary,session")
    parser.add_argument("--native", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--options", default="[]",
                        help="extra grpcio channel options, JSON: [[name, value], ...]")
    parser.add_argument("--no_service_config", action="store_true",
                        help="gRPC's default service config (no retries)")
    parser.add_argument("--connections", type=int, default=0,
                        help="connections per session (0: the client's choice)")
    parser.add_argument("--proxy_stats", default="",
                        help="stats file of a sortd_throttle_proxy in front of the target")
    parser.add_argument("--label", default="")
    parser.add_argument("--header", action="store_true")
    args = parser.parse_args()
    modes = args.modes.split(",")
    native = {"auto": None, "on": True, "off": False}[args.native]
    kw = dict(native=native, options=[tuple(o) for o in json.loads(args.options)],
              connections=args.connections or None)
    if args.no_service_config:
        kw["service_config"] = None
    default = sortd_client.Client(args.target, **kw)
    unary = sortd_client.Client(args.target, session_min_bytes=0, **kw)
    session = sortd_client.Client(args.target, session_min_bytes=1, **kw)
    raw = sortd_client.Client(args.target, compress=False, **kw)
    coded = sortd_client.Client(args.target, compress=True, **kw)
    label = args.label or ("py-native" if default.native else "py-grpcio")
    echo = default._channel.unary_unary("/sortd.v1.DiagnosticsService/Echo")
    if args.header:
        print("client\tmode\tlog2\tbytes\tbest_ms\tmedian_ms\tbest/numpy" +
              ("\twire_up\twire_down" if args.proxy_stats else ""))
    failures = 0
    for log2 in [int(x) for x in args.sizes_log2.split(",") if x]:
        keys = np.random.default_rng(log2).integers(0, 1 << 32, 1 << log2, dtype=np.uint32)
        want = np.sort(keys)
        request = client_module._sort_request(TypedInput(keys, "keys"), 1, False, "")

        def checker(mode, expected):
            def check(out):
                nonlocal failures
                if not np.array_equal(out, expected):
                    print("WRONG RESULT: %s at 2^%d" % (mode, log2), file=sys.stderr)
                    failures += 1
            return check

        runs = {
            "numpy": (lambda: np.sort(keys), None),
            "echo": (lambda: echo(request), None),
            "transfer": (lambda: default.transfer_roundtrip(keys), checker("transfer", keys)),
            "sort": (lambda: default.sort(keys), checker("sort", want)),
            "unary": (lambda: unary.sort(keys), checker("unary", want)),
            "session": (lambda: session.sort(keys), checker("session", want)),
            "sort_raw": (lambda: raw.sort(keys), checker("sort_raw", want)),
            "sort_coded": (lambda: coded.sort(keys), checker("sort_coded", want)),
        }
        numpy_best = None
        for mode in modes:
            if mode in ("echo", "unary") and len(request) > default.max_message_bytes - 4096:
                continue  # one message cannot carry it
            before = wire_bytes(args.proxy_stats)
            best, median = timed(runs[mode][0], args.repeat, runs[mode][1])
            after = wire_bytes(args.proxy_stats)
            if mode == "numpy":
                numpy_best = best
            ratio = "%.2f" % (best / numpy_best) if numpy_best else "-"
            wire = ""
            if args.proxy_stats:
                calls = args.repeat + 1
                wire = "\t%d\t%d" % ((after[0] - before[0]) // calls,
                                      (after[1] - before[1]) // calls)
            print("%s\t%s\t%d\t%d\t%.3f\t%.3f\t%s%s" % (label, mode, log2, keys.nbytes, best,
                                                        median, ratio, wire))
            sys.stdout.flush()
    for c in (default, unary, session, raw, coded):
        c.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
