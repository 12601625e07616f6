#!/usr/bin/env python3
"""Throughput against array size on the GPU host: one CSV for the README's
picture (bench/plot_throughput.py draws docs/img/throughput.png from it).

  throughput_curve.py --target 127.0.0.1:PORT --region_target unix:SOCK \\
      --radix_table RADIX.txt --device "$(nvidia-smi ...)" --commit C --out CSV
  throughput_curve.py --selftest

scripts/gpu-host/throughput_curve.sh runs it next to the real sortd
(--shared_memory=system,cuda). For each size 2^min_log2..2^max_log2 u32 keys
(uniform random, fresh per size; the same array for every series):

  numpy_sort      numpy.sort of the array, here, one thread (its answer is
                  the reference every other series is checked against);
  sortd_remote    Client.sort(keys) over --target: the payload on the wire,
                  as a user calls it (unary below 8 MiB, a sort session from
                  8 MiB; sessions go through libsortd_client_c where
                  $SORTD_CLIENT_LIB names it, else grpcio);
  sortd_shm       Client.sort of a view of a POSIX shared-memory region
                  (Client.shared_array) over --region_target: sorted in place
                  by reference, nothing on the wire;
  sortd_cuda_ipc  the same with device memory registered through CUDA IPC
                  (a CuPy array, else raw cudaMalloc memory through ctypes);
  cub, sortd_kernel
                  cub::DeviceRadixSort and sortd's OneSweep kernel on
                  device-resident keys, from sortd_gpu_radix_bench's table
                  (--only='u32 keys': CUDA events, median of its repeats,
                  both outputs compared on the GPU).

Times: the client call (or np.sort) from start to result, after one warm-up
call per size; the median of at least --repeat calls (more for small sizes,
until --min_seconds are spent). Every answer (warm-up included) must equal
numpy.sort's; with --expect_gpu, sorts of 2^20 keys and more must report a
GPU engine. A series that fails (an error, a wrong answer, a table row
missing or not matching CUB) stops there, and the run exits 1 naming it:
the CSV is written only when every series has every size (else CSV.partial,
for reading).
"""
import argparse
import csv
import ctypes
import datetime
import io
import os
import platform
import re
import sys
import tempfile
import time

import numpy as np

SERIES = ("sortd_remote", "sortd_shm", "sortd_cuda_ipc", "numpy_sort", "cub", "sortd_kernel")
COLUMNS = ("series", "keys", "bytes", "seconds", "keys_per_s", "best_seconds", "repeats", "engine")
KEY_BYTES = 4

NUM = r"([0-9]+(?:\.[0-9]+)?)"
# sortd_gpu_radix_bench's table: case, 2^log2, ours G/s, CUB G/s, ratio, passes, match.
RADIX_ROW = re.compile(r"^u32 keys\s+2\^(\d+)\s+" + NUM + r"\s+" + NUM + r"\s+" + NUM +
                       r"x\s+(-?\d+)\s+(yes|NO)\s*$")
RADIX_GPU = re.compile(r"^GPU: .*median of (\d+)")
# The sizes the bench's table has (bench/gpu_radix_bench.cu, main()).
RADIX_SIZES = (16, 20, 24, 26, 28, 30)


class SeriesFailed(Exception):
    pass


# ---------------------------------------------------------------- the bench's table

def parse_radix_table(text, min_log2, max_log2):
    """{log2: (ours Gkeys/s, CUB Gkeys/s)} and the bench's repeats, for
    every size of its table within [min_log2, max_log2]. Raises
    SeriesFailed for a row whose outputs differed, a size missing, or no
    table at all."""
    rows, repeats = {}, None
    for line in text.splitlines():
        m = RADIX_ROW.match(line.strip())
        if m:
            log2 = int(m.group(1))
            if m.group(6) != "yes":
                raise SeriesFailed("2^%d: sortd's output differs from CUB's (match NO)" % log2)
            rows[log2] = (float(m.group(2)), float(m.group(3)))
        g = RADIX_GPU.match(line.strip())
        if g:
            repeats = int(g.group(1))
    want = [l for l in RADIX_SIZES if min_log2 <= l <= max_log2]
    missing = [l for l in want if l not in rows]
    if not want:
        raise SeriesFailed("no size of the bench's table (2^%s) lies in 2^%d..2^%d" % (
            ",".join(map(str, RADIX_SIZES)), min_log2, max_log2))
    if missing:
        raise SeriesFailed("sortd_gpu_radix_bench's table has no 'u32 keys' row at 2^%s" %
                           ",2^".join(map(str, missing)))
    if repeats is None:
        raise SeriesFailed("sortd_gpu_radix_bench's table has no 'GPU: ... median of N' line")
    return {l: rows[l] for l in want}, repeats


def radix_rows(table, repeats):
    out = []
    for log2, (ours, cub) in sorted(table.items()):
        n = 1 << log2
        for series, gkeys, engine in (("cub", cub, "cub::DeviceRadixSort"),
                                      ("sortd_kernel", ours, "sortd::cuda::RadixSort")):
            if gkeys <= 0:
                raise SeriesFailed("%s: 2^%d at %g Gkeys/s" % (series, log2, gkeys))
            out.append(row(series, n, n / (gkeys * 1e9), None, repeats, engine))
    return out


# ---------------------------------------------------------------- timing

def measure(call, check, prepare=None, repeat=5, min_seconds=0.3, max_repeat=50, max_wall=2.0):
    """One warm-up call, then at least `repeat` timed calls: more, up to
    max_repeat, until the timed calls add up to min_seconds or everything
    (prepare and check included) to max_wall. check(result) after each,
    outside the time. Returns (seconds list, last result)."""
    times, result, spent, start = [], None, 0.0, time.perf_counter()
    for i in range(max_repeat + 1):
        if i > repeat and (spent >= min_seconds or time.perf_counter() - start >= max_wall):
            break
        if prepare is not None:
            prepare()
        t0 = time.perf_counter()
        result = call()
        t = time.perf_counter() - t0
        check(result)
        if i > 0:  # the first is the warm-up
            times.append(t)
            spent += t
    return times, result


def row(series, n, seconds, best, repeats, engine):
    return {"series": series, "keys": n, "bytes": n * KEY_BYTES, "seconds": "%.6g" % seconds,
            "keys_per_s": "%.6g" % (n / seconds),
            "best_seconds": "" if best is None else "%.6g" % best,
            "repeats": repeats, "engine": engine}


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def timed_row(series, n, times, engine):
    return row(series, n, median(times), min(times), len(times), engine)


# ---------------------------------------------------------------- device memory

class RawDeviceArray:
    """cudaMalloc memory with __cuda_array_interface__ (no CuPy needed):
    what the CUDA IPC series uses where CuPy does not load."""

    H2D, D2H = 1, 2

    def __init__(self, rt, check, pointer, count, owner=None):
        self.rt, self._check, self.pointer, self.count, self.owner = rt, check, pointer, count, owner
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": "<u4",
                                         "data": (pointer, False), "version": 3,
                                         "strides": None, "stream": None}

    @classmethod
    def allocate(cls, count):
        from sortd_client import cuda_ipc
        rt = cuda_ipc.cudart()
        p = ctypes.c_void_p()
        cuda_ipc.check(rt.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(count * KEY_BYTES)),
                       "cudaMalloc")
        return cls(rt, cuda_ipc.check, p.value, count)

    def view(self, count):
        return RawDeviceArray(self.rt, self._check, self.pointer, count, owner=self)

    def upload(self, array):
        self._check(self.rt.cudaMemcpy(ctypes.c_void_p(self.pointer), ctypes.c_void_p(array.ctypes.data),
                                       ctypes.c_size_t(array.nbytes), self.H2D), "cudaMemcpy")

    def download(self):
        out = np.empty(self.count, np.uint32)
        self._check(self.rt.cudaMemcpy(ctypes.c_void_p(out.ctypes.data), ctypes.c_void_p(self.pointer),
                                       ctypes.c_size_t(out.nbytes), self.D2H), "cudaMemcpy")
        return out


class DeviceKeys:
    """One device allocation of max_n u32 keys (CuPy, else raw): view(n)
    gives its first n keys, upload/download move them."""

    def __init__(self, max_n, prefer="cupy"):
        self.kind = None
        if prefer == "cupy":
            try:
                import cupy
                self._base = cupy.empty(max_n, dtype=cupy.uint32)
                self._cupy = cupy
                self.kind = "cupy %s" % cupy.__version__
            except Exception as err:  # not installed, or no usable CUDA for it
                self.cupy_error = "%s: %s" % (type(err).__name__, err)
        if self.kind is None:
            self._base = RawDeviceArray.allocate(max_n)
            self._cupy = None
            self.kind = "raw cudaMalloc memory (ctypes)"

    @property
    def base(self):
        return self._base

    def view(self, n):
        return self._base[:n] if self._cupy is not None else self._base.view(n)

    def upload(self, view, keys):
        if self._cupy is not None:
            view.set(keys)
            self._cupy.cuda.runtime.deviceSynchronize()
        else:
            view.upload(keys)

    def download(self, view):
        return view.get() if self._cupy is not None else view.download()


# ---------------------------------------------------------------- the series

def check_equal(ref):
    def check(out):
        if out.shape != ref.shape or not np.array_equal(out, ref):
            bad = np.flatnonzero(out != ref) if out.shape == ref.shape else []
            raise SeriesFailed("wrong answer (%s)" % (
                "%d of %d keys differ, first at %d" % (len(bad), len(ref), bad[0]) if len(bad)
                else "shape %s, expected %s" % (out.shape, ref.shape)))
    return check


def engine_check(name, n, engine, expect_gpu):
    if expect_gpu and n >= (1 << 20) and not str(engine).startswith("ENGINE_GPU"):
        raise SeriesFailed("2^%d keys ran on %s, not a GPU engine" % (n.bit_length() - 1, engine))


class Runner:
    """The sortd series over live clients (or stand-ins with the same
    methods: the selftest's)."""

    def __init__(self, client, region_client, max_n, args):
        self.client, self.region_client, self.max_n, self.args = client, region_client, max_n, args
        self._shared = None
        self._device = None
        self.notes = {}

    def kw(self):
        return dict(repeat=self.args.repeat, min_seconds=self.args.min_seconds,
                    max_repeat=self.args.max_repeat)

    def sortd_remote(self, keys, ref):
        check = check_equal(ref)
        times, res = measure(lambda: self.client.sort_full(keys), lambda r: check(r.keys), **self.kw())
        return times, res.engine

    def sortd_shm(self, keys, ref):
        if self._shared is None:
            self._shared = self.region_client.shared_array(self.max_n, np.uint32)
        view = self._shared[:len(keys)]
        check = check_equal(ref)

        def call():
            res = self.region_client.sort_full(view)
            if res.keys is not view:
                raise SeriesFailed("the answer did not come back in the region (not the region path)")
            return res
        times, res = measure(call, lambda r: check(view), prepare=lambda: view.__setitem__(
            slice(None), keys), **self.kw())
        return times, res.engine

    def sortd_cuda_ipc(self, keys, ref):
        if self._device is None:
            self._device = DeviceKeys(self.max_n, self.args.cuda_arrays)
            self.region_client.register_cuda_array(self._device.base)
            self.notes["cuda_arrays"] = self._device.kind
        dev = self._device
        view = dev.view(len(keys))
        check = check_equal(ref)
        times, res = measure(lambda: self.region_client.sort_full(view),
                             lambda r: check(dev.download(view)),
                             prepare=lambda: dev.upload(view, keys), **self.kw())
        return times, res.engine


def numpy_series(keys, args):
    out = []
    times, ref = measure(lambda: np.sort(keys), lambda r: out.append(r) if not out else None,
                         repeat=args.repeat, min_seconds=args.min_seconds, max_repeat=args.max_repeat)
    # Every np.sort answer is the same array; the reference is the last one,
    # checked sorted here once (so that a broken numpy cannot pass itself).
    if not np.array_equal(out[0], ref) or (len(ref) > 1 and not np.all(ref[:-1] <= ref[1:])):
        raise SeriesFailed("numpy.sort's answers differ or are not sorted")
    return times, ref


def run_sizes(args, runner, table_rows, wanted, failed, log=sys.stdout):
    """Every size, every wanted series; failures recorded in `failed`."""
    rows = list(table_rows)
    for log2 in range(args.min_log2, args.max_log2 + 1, args.step):
        n = 1 << log2
        keys = np.random.default_rng(log2).integers(0, 1 << 32, n, dtype=np.uint32)
        times, ref = numpy_series(keys, args)
        rows.append(timed_row("numpy_sort", n, times, "numpy %s" % np.__version__))
        line = ["2^%-2d %9.3g keys/s numpy" % (log2, n / median(times))]
        for name in ("sortd_remote", "sortd_shm", "sortd_cuda_ipc"):
            if name not in wanted or name in failed:
                continue
            try:
                times, engine = getattr(runner, name)(keys, ref)
                engine_check(name, n, engine, args.expect_gpu)
            except Exception as err:  # the series stops; the others go on
                failed[name] = "2^%d: %s" % (log2, err if isinstance(err, SeriesFailed)
                                             else "%s: %s" % (type(err).__name__, err))
                line.append("%s FAILED" % name)
                continue
            rows.append(timed_row(name, n, times, engine))
            line.append("%9.3g %s" % (n / median(times), name))
        print(", ".join(line), file=log)
        log.flush()
        del keys, ref
    return rows


# ---------------------------------------------------------------- output

def write_csv(path, header, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        for key, value in header:
            f.write("# %s: %s\n" % (key, str(value).replace("\n", " ")))
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    os.replace(tmp, path)


def complete(rows, wanted, sizes, radix_sizes):
    """Series of `wanted` lacking a size they should have."""
    have = {}
    for r in rows:
        have.setdefault(r["series"], set()).add(int(r["keys"]).bit_length() - 1)
    gaps = {}
    for s in wanted:
        need = radix_sizes if s in ("cub", "sortd_kernel") else sizes
        missing = sorted(set(need) - have.get(s, set()))
        if missing:
            gaps[s] = "no row at 2^%s" % ",2^".join(map(str, missing))
    return gaps


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return "%s x %d" % (line.split(":", 1)[1].strip(), os.cpu_count() or 0)
    except OSError:
        pass
    return "%s x %d" % (platform.processor() or platform.machine(), os.cpu_count() or 0)


LABELS = {
    "sortd_remote": "sortd remote: Client.sort, payload over loopback TCP (%s)",
    "sortd_shm": "sortd same-host: POSIX shm region, sorted in place",
    "sortd_cuda_ipc": "sortd same-host: CUDA IPC region (device memory)",
    "numpy_sort": "numpy.sort (one CPU thread)",
    "cub": "cub::DeviceRadixSort, device-resident keys",
    "sortd_kernel": "sortd's radix kernel, device-resident keys",
}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", help="sortd for sortd_remote (gRPC target)")
    p.add_argument("--region_target", help="sortd for the region series (unix:/path or loopback); "
                   "default --target")
    p.add_argument("--radix_table", help="stdout of sortd_gpu_radix_bench --only='u32 keys'")
    p.add_argument("--series", default=",".join(SERIES))
    p.add_argument("--min_log2", type=int, default=14)
    p.add_argument("--max_log2", type=int, default=28)
    p.add_argument("--step", type=int, default=1, help="log2 step between sizes (1: 2x, 2: 4x)")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--min_seconds", type=float, default=0.3)
    p.add_argument("--max_repeat", type=int, default=50)
    p.add_argument("--native", choices=("auto", "on", "off"), default="auto",
                   help="sort sessions through libsortd_client_c (on), grpcio (off), or "
                        "whichever loads (auto: what a user gets)")
    p.add_argument("--cuda_arrays", choices=("cupy", "raw"), default="cupy")
    p.add_argument("--expect_gpu", type=int, default=1)
    p.add_argument("--timeout", type=float, default=300, help="seconds per client call")
    p.add_argument("--device", default="", help="the GPU, as nvidia-smi names it")
    p.add_argument("--commit", default=os.environ.get("SORTD_COMMIT", ""))
    p.add_argument("--date", default=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"))
    p.add_argument("--note", action="append", default=[], help="KEY=VALUE header lines")
    p.add_argument("--out", help="the CSV (written only when complete; else OUT.partial)")
    p.add_argument("--selftest", action="store_true")
    args = p.parse_args(argv)
    if args.selftest:
        return selftest()
    wanted = [s for s in args.series.split(",") if s]
    unknown = sorted(set(wanted) - set(SERIES))
    if unknown or not wanted or not args.out or not args.commit:
        p.error("need --out and --commit (or $SORTD_COMMIT); --series from %s%s" % (
            ",".join(SERIES), "; unknown: " + ",".join(unknown) if unknown else ""))
    if "numpy_sort" not in wanted:
        p.error("numpy_sort is the reference: it cannot be left out")
    sizes = list(range(args.min_log2, args.max_log2 + 1, args.step))
    failed = {}
    table_rows, radix_sizes, bench_line = [], [], ""
    if "cub" in wanted or "sortd_kernel" in wanted:
        try:
            if not args.radix_table:
                raise SeriesFailed("no --radix_table")
            with open(args.radix_table) as f:
                text = f.read()
            table, bench_repeats = parse_radix_table(text, args.min_log2, args.max_log2)
            radix_sizes = sorted(table)
            table_rows = [r for r in radix_rows(table, bench_repeats) if r["series"] in wanted]
            bench_line = next((l.strip() for l in text.splitlines() if l.startswith("GPU: ")), "")
        except (OSError, SeriesFailed) as err:
            for s in ("cub", "sortd_kernel"):
                if s in wanted:
                    failed[s] = str(err)

    client = region_client = None
    service = [s for s in wanted if s.startswith("sortd_") and s != "sortd_kernel"]
    header_notes = {}
    if service:
        import sortd_client
        if not args.target and "sortd_remote" in service:
            p.error("sortd_remote needs --target")
        native = {"auto": None, "on": True, "off": False}[args.native]
        client = sortd_client.Client(args.target or args.region_target, timeout=args.timeout,
                                     native=native)
        region_client = (sortd_client.Client(args.region_target, timeout=args.timeout, native=False)
                         if args.region_target else client)
        deadline = time.monotonic() + 60
        for c in {id(client): client, id(region_client): region_client}.values():
            while True:
                try:
                    if c.health(timeout=5) == "SERVING":
                        break
                except Exception:
                    pass
                if time.monotonic() > deadline:
                    print("sortd is not SERVING after 60 s", file=sys.stderr)
                    return 1
                time.sleep(0.5)
        if "sortd_remote" in service:
            header_notes["remote_path"] = ("sessions from 8 MiB through libsortd_client_c (C++ client)"
                                           if client.native else "sessions from 8 MiB through grpcio")
    runner = Runner(client, region_client, 1 << args.max_log2, args)
    t0 = time.monotonic()
    try:
        rows = run_sizes(args, runner, table_rows, wanted, failed)
    finally:
        for c in {id(client): client, id(region_client): region_client}.values():
            if c is not None:
                c.close()
    header_notes.update(runner.notes)
    gaps = complete(rows, [s for s in wanted if s not in failed], sizes, radix_sizes)
    failed.update(gaps)

    import grpc
    header = [("title", "sortd throughput against array size: u32 keys, uniform random, ascending"),
              ("device", args.device or "?"), ("cpu", cpu_name()), ("commit", args.commit),
              ("date", args.date),
              ("software", "python %s, numpy %s, grpcio %s" % (platform.python_version(),
                                                                np.__version__, grpc.__version__)),
              ("timing", "median of >= %d calls after one warm-up, each answer checked against "
                         "numpy.sort (sortd: the client call to its result; cub/sortd_kernel: "
                         "CUDA events in sortd_gpu_radix_bench)" % args.repeat)]
    if bench_line:
        header.append(("radix_bench", bench_line))
    header += sorted(header_notes.items())
    header += [(k, v) for k, _, v in (n.partition("=") for n in args.note)]
    header.append(("series", ",".join(wanted)))
    for s in wanted:
        label = LABELS[s]
        if s == "sortd_remote":
            label %= "C++ sessions" if client is not None and client.native else "grpcio"
        header.append(("label." + s, label))
    header.append(("seconds_total", "%.0f" % (time.monotonic() - t0)))
    path = args.out if not failed else args.out + ".partial"
    write_csv(path, header, rows)
    print("\n%-16s %7s  %s" % ("series", "sizes", "result"))
    for s in wanted:
        got = [r for r in rows if r["series"] == s]
        peak = max((float(r["keys_per_s"]) for r in got), default=0)
        print("%-16s %7d  %s" % (s, len(got), "FAILED: " + failed[s] if s in failed
                                 else "ok, peak %.3g keys/s" % peak))
    if failed:
        print("throughput_curve: FAILED series: %s (partial rows in %s)" % (
            ", ".join(s for s in wanted if s in failed), path))
        return 1
    print("throughput_curve: %d series x sizes 2^%d..2^%d written to %s" % (
        len(wanted), args.min_log2, args.max_log2, path))
    return 0


# ---------------------------------------------------------------- selftest

def _table(rows, repeats=7):
    lines = ["u32 keys 2^16 done", "",
             "GPU: NVIDIA Test GPU (132 SMs, 60 MiB L2, tuning h200), CUDA runtime 13000, "
             "median of %d after warm-up" % repeats,
             "case                    n   ours G/s    CUB G/s   ratio  passes  match"]
    for log2, ours, cub, match in rows:
        lines.append("%-18s 2^%-4d %10.2f %10.2f %6.2fx %7d %6s" % (
            "u32 keys", log2, ours, cub, ours / cub, 4, match))
        lines.append("%-18s 2^%-4d %10.2f %10.2f %6.2fx %7d %6s" % (
            "u32/u32 pairs", log2, 1.0, 1.0, 1.0, 4, "NO"))  # another case: ignored
    return "\n".join(lines) + "\n"


class _FakeClient:
    """Client's methods the series use, answering with numpy (or wrongly)."""

    def __init__(self, wrong_from=None, wrong_in_region=False):
        self.wrong_from, self.wrong_in_region = wrong_from, wrong_in_region
        self.native = False

    def _result(self, keys, engine):
        import collections
        return collections.namedtuple("R", "keys engine")(keys, engine)

    def sort_full(self, keys):
        out = np.sort(keys)
        if self.wrong_from is not None and len(keys) >= self.wrong_from:
            out[0], out[-1] = out[-1], out[0]
        return self._result(out, "ENGINE_GPU_RADIX")

    def shared_array(self, n, dtype):
        self._region = np.zeros(n, dtype)
        return self._region

    def sort_full_region(self, view):
        view.sort()
        if self.wrong_in_region:
            view[0] += 1
        return self._result(view, "ENGINE_GPU_RADIX")


class _FakeRegionClient(_FakeClient):
    def sort_full(self, keys):
        return self.sort_full_region(keys)


def selftest():
    failures = []

    def expect(what, cond, detail=""):
        if not cond:
            failures.append("%s %s" % (what, detail))

    # The bench's table.
    table, reps = parse_radix_table(_table([(16, 5.0, 4.0, "yes"), (20, 30.0, 25.0, "yes"),
                                            (24, 40.0, 38.0, "yes")]), 14, 24)
    expect("table parsed", table == {16: (5.0, 4.0), 20: (30.0, 25.0), 24: (40.0, 38.0)} and reps == 7,
           str(table))
    rows = radix_rows(table, reps)
    cub16 = [r for r in rows if r["series"] == "cub" and r["keys"] == 1 << 16][0]
    expect("cub keys/s from G/s", abs(float(cub16["keys_per_s"]) - 4e9) < 1e3, str(cub16))
    for what, text, lo, hi, needle in (
            ("a row not matching CUB", _table([(16, 5.0, 4.0, "yes"), (20, 3.0, 2.0, "NO")]), 14, 20,
             "match NO"),
            ("a size missing", _table([(16, 5.0, 4.0, "yes")]), 14, 24, "2^20,2^24"),
            ("no table", "CUDA error: no device\n", 14, 20, "no 'u32 keys' row"),
            ("no GPU line", _table([(16, 5.0, 4.0, "yes")]).replace("GPU:", "gpu"), 16, 16, "median of")):
        try:
            parse_radix_table(text, lo, hi)
            failures.append("%s: accepted" % what)
        except SeriesFailed as err:
            expect(what, needle in str(err), "(%s)" % err)

    # The series and the run over stand-in clients.
    class Args:
        min_log2, max_log2, step, repeat, min_seconds, max_repeat = 4, 10, 2, 3, 0.0, 3
        expect_gpu, cuda_arrays = 1, "raw"

    def run(client, region, wanted):
        failed = {}
        runner = Runner(client, region, 1 << Args.max_log2, Args)
        rows = run_sizes(Args, runner, [], wanted, failed, log=io.StringIO())
        failed.update(complete(rows, [s for s in wanted if s not in failed], [4, 6, 8, 10], []))
        return rows, failed

    wanted = ["sortd_remote", "sortd_shm", "numpy_sort"]
    rows, failed = run(_FakeClient(), _FakeRegionClient(), wanted)
    expect("all good: no failure", not failed, str(failed))
    expect("all good: 4 sizes x 3 series", len(rows) == 12, str(len(rows)))
    expect("repeats counted", all(r["repeats"] == 3 for r in rows), str([r["repeats"] for r in rows]))
    rows, failed = run(_FakeClient(wrong_from=1 << 8), _FakeRegionClient(), wanted)
    expect("a wrong remote answer fails the series at its size",
           set(failed) == {"sortd_remote"} and failed["sortd_remote"].startswith("2^8: wrong answer"),
           str(failed))
    expect("... and the others go on", len([r for r in rows if r["series"] == "sortd_shm"]) == 4)
    rows, failed = run(_FakeClient(), _FakeRegionClient(wrong_in_region=True), wanted)
    expect("a wrong region answer fails", set(failed) == {"sortd_shm"}, str(failed))

    class CpuClient(_FakeClient):
        def sort_full(self, keys):
            return self._result(np.sort(keys), "ENGINE_CPU")
    Args.max_log2 = 20
    failed = {}
    run_sizes(Args, Runner(CpuClient(), _FakeRegionClient(), 1 << 20, Args), [], ["sortd_remote", "numpy_sort"],
              failed, log=io.StringIO())
    expect("a CPU engine at 2^20 fails with --expect_gpu",
           "2^20" in failed.get("sortd_remote", "") and "ENGINE_CPU" in failed.get("sortd_remote", ""),
           str(failed))
    Args.max_log2 = 10

    # Completeness and the CSV.
    gaps = complete([row("cub", 1 << 16, 1e-4, None, 7, "x")], ["cub", "numpy_sort"], [16], [16, 20])
    expect("gaps named", gaps == {"cub": "no row at 2^20", "numpy_sort": "no row at 2^16"}, str(gaps))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.csv")
        write_csv(path, [("device", "NVIDIA Test GPU"), ("series", "cub")], rows[:2])
        text = open(path).read()
        expect("csv header", text.startswith("# device: NVIDIA Test GPU\n# series: cub\nseries,keys,"), text)
        back = list(csv.DictReader(l for l in text.splitlines() if not l.startswith("#")))
        expect("csv rows", len(back) == 2 and back[0]["series"] == rows[0]["series"], str(back))
    if failures:
        print("throughput_curve selftest: FAILED\n  " + "\n  ".join(failures))
        return 1
    print("throughput_curve selftest: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
