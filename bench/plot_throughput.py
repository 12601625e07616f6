#!/usr/bin/python3
"""The README's picture: throughput against array size, drawn from the CSV
that scripts/gpu-host/throughput_curve.sh (bench/throughput_curve.py)
writes on the GPU host.

  /usr/bin/python3 bench/plot_throughput.py [--csv docs/img/throughput.csv]
                                            [--out docs/img/throughput.png]
  /usr/bin/python3 bench/plot_throughput.py --selftest

Debian's matplotlib (python3-matplotlib), Agg backend, no network. x: array
size in bytes (log2 axis), y: keys/s (log axis; GB/s of keys on the right),
one line per series, in the order the CSV's "# series:" line lists them;
the title names the device, commit and date from the CSV's header lines.
Exit status 1, and no PNG, when the CSV lacks a series it lists, a series
of --require, the device/commit/date lines, or has a row that does not
parse: a picture must not quietly miss a line.
"""
import argparse
import csv
import math
import os
import sys
import tempfile

REQUIRED = "sortd_remote,sortd_shm,sortd_cuda_ipc,numpy_sort,cub"
# Colour and line per series; a series not named here still gets a line.
STYLE = {
    "sortd_cuda_ipc": dict(color="#76b900", marker="o", linewidth=2.2),
    "sortd_shm": dict(color="#1f77b4", marker="s", linewidth=2.2),
    "sortd_remote": dict(color="#d62728", marker="^", linewidth=2.2),
    "numpy_sort": dict(color="#7f7f7f", marker="D", linewidth=1.8),
    "cub": dict(color="#000000", marker="x", linewidth=1.4, linestyle="--"),
    "sortd_kernel": dict(color="#9467bd", marker="+", linewidth=1.4, linestyle=":"),
}


class BadCsv(Exception):
    pass


def read(path):
    """(header dict, {series: [(bytes, keys_per_s)] sorted by size})."""
    header, lines = {}, []
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("#"):
                key, sep, value = line[1:].strip().partition(":")
                if sep:
                    header[key.strip()] = value.strip()
            elif line.strip():
                lines.append(line)
    series = {}
    reader = csv.DictReader(lines)
    missing = {"series", "bytes", "keys_per_s"} - set(reader.fieldnames or ())
    if missing:
        raise BadCsv("%s: no column %s" % (path, ", ".join(sorted(missing))))
    for i, r in enumerate(reader, start=2):
        try:
            nbytes, rate = int(r["bytes"]), float(r["keys_per_s"])
        except (TypeError, ValueError):
            raise BadCsv("%s: data row %d does not parse: %r" % (path, i - 1, r)) from None
        if nbytes <= 0 or not (rate > 0 and math.isfinite(rate)):
            raise BadCsv("%s: data row %d: bytes %d, keys/s %r" % (path, i - 1, nbytes, rate))
        series.setdefault(r["series"], []).append((nbytes, rate))
    for points in series.values():
        points.sort()
    return header, series


def check(header, series, required):
    listed = [s for s in header.get("series", "").split(",") if s]
    problems = ["no '# %s:' line" % k for k in ("device", "commit", "date") if not header.get(k)]
    if not listed:
        problems.append("no '# series:' line")
    for s in listed + [s for s in required if s not in listed]:
        if s not in series:
            problems.append("series %s has no rows" % s)
        elif len(series[s]) < 2:
            problems.append("series %s has %d row (a line needs 2)" % (s, len(series[s])))
    for s, points in series.items():
        sizes = [b for b, _ in points]
        if len(set(sizes)) != len(sizes):
            problems.append("series %s has two rows of one size" % s)
    if problems:
        raise BadCsv("; ".join(problems))
    return listed + sorted(s for s in series if s not in listed)


def size_label(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            v = nbytes / (1 << shift)
            return ("%d %s" % (v, unit)) if v == int(v) else ("%.1f %s" % (v, unit))
    return "%d B" % nbytes


def plot(header, series, order, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    fig, ax = plt.subplots(figsize=(9.6, 6.6), dpi=110)
    lo = min(b for pts in series.values() for b, _ in pts)
    hi = max(b for pts in series.values() for b, _ in pts)
    for s in order:
        pts = series[s]
        style = dict(STYLE.get(s, dict(marker=".", linewidth=1.4)))
        ax.plot([b for b, _ in pts], [r for _, r in pts], label=header.get("label." + s, s),
                markersize=5, **style)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = [1 << k for k in range(int(math.log2(lo)), int(math.log2(hi)) + 1)
             if (k - int(math.log2(lo))) % 2 == 0 or (1 << k) == hi]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: size_label(int(round(x)))))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(lo / 1.3, hi * 1.3)
    ax.yaxis.set_major_locator(LogLocator(base=10))

    def keys_label(y, _):
        for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if y >= scale:
                return "%g%s" % (y / scale, unit)
        return "%g" % y
    ax.yaxis.set_major_formatter(FuncFormatter(keys_label))
    ax.set_xlabel("array size (u32 keys, 4 bytes each)")
    ax.set_ylabel("keys sorted per second")
    key_bytes = 4
    right = ax.secondary_yaxis("right", functions=(lambda y: y * key_bytes / 1e9,
                                                  lambda g: g * 1e9 / key_bytes))
    right.set_ylabel("GB/s of keys")
    right.yaxis.set_major_formatter(FuncFormatter(lambda g, _: "%g" % g))
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", axis="y", alpha=0.12)
    ax.set_title("%s\n%s, commit %s, %s" % (
        "sortd: sort throughput against array size", header["device"], header["commit"],
        header["date"]), fontsize=11)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=8.5,
              frameon=False)
    cpu = header.get("cpu")
    if cpu:
        fig.text(0.01, 0.005, "numpy.sort on %s. Median of repeats; data: %s" % (
            cpu, header.get("csv_name", "throughput.csv")), fontsize=7, color="#555555")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    tmp = out + ".tmp.png"
    # No Software/date metadata: the same CSV draws the same bytes.
    fig.savefig(tmp, format="png", metadata={"Software": None})
    plt.close(fig)
    os.replace(tmp, out)


def draw(csv_path, out, required):
    header, series = read(csv_path)
    order = check(header, series, required)
    header.setdefault("csv_name", os.path.basename(csv_path))
    plot(header, series, order, out)
    return order


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--csv", default=os.path.join(root, "docs", "img", "throughput.csv"))
    p.add_argument("--out", help="default: the CSV's path with .png")
    p.add_argument("--require", default=REQUIRED,
                   help="series that must be there (comma-separated; '' for none)")
    p.add_argument("--selftest", action="store_true")
    args = p.parse_args(argv)
    if args.selftest:
        return selftest()
    out = args.out or os.path.splitext(args.csv)[0] + ".png"
    try:
        order = draw(args.csv, out, [s for s in args.require.split(",") if s])
    except (OSError, BadCsv) as err:
        print("plot_throughput: %s" % err, file=sys.stderr)
        return 1
    print("plot_throughput: %d series from %s -> %s" % (len(order), args.csv, out))
    return 0


FIXTURE = """# title: fixture
# device: NVIDIA Test GPU, 1 MiB
# cpu: Test CPU x 2
# commit: 0123abc
# date: 2026-12-01
# series: sortd_remote,sortd_shm,sortd_cuda_ipc,numpy_sort,cub
# label.sortd_remote: remote
series,keys,bytes,seconds,keys_per_s,best_seconds,repeats,engine
numpy_sort,16384,65536,0.0005,3.2768e+07,0.0004,5,numpy
numpy_sort,65536,262144,0.002,3.2768e+07,0.002,5,numpy
sortd_remote,16384,65536,0.001,1.6384e+07,0.001,5,ENGINE_GPU_SEGMENTED
sortd_remote,65536,262144,0.002,3.2768e+07,0.002,5,ENGINE_GPU_RADIX
sortd_shm,16384,65536,0.0002,8.192e+07,,5,ENGINE_GPU_SEGMENTED
sortd_shm,65536,262144,0.0003,2.18453e+08,,5,ENGINE_GPU_RADIX
sortd_cuda_ipc,16384,65536,0.0002,8.192e+07,,5,ENGINE_GPU_SEGMENTED
sortd_cuda_ipc,65536,262144,0.0002,3.2768e+08,,5,ENGINE_GPU_RADIX
cub,65536,262144,1e-05,6.5536e+09,,7,cub
cub,1048576,4194304,5e-05,2.09715e+10,,7,cub
"""


def selftest():
    failures = []
    with tempfile.TemporaryDirectory() as d:
        def case(name, text, ok, needle="", require=REQUIRED):
            sub = os.path.join(d, str(len(os.listdir(d))))
            os.mkdir(sub)
            path = os.path.join(sub, "throughput.csv")
            png = os.path.join(sub, "throughput.png")
            with open(path, "w") as f:
                f.write(text)
            try:
                draw(path, png, [s for s in require.split(",") if s])
                got, err = True, ""
            except BadCsv as e:
                got, err = False, str(e)
            if got != ok:
                failures.append("%s: %s" % (name, "drawn" if got else "refused: " + err))
            elif not ok:
                if needle not in err:
                    failures.append("%s: %r not in %r" % (name, needle, err))
                if os.path.exists(png):
                    failures.append("%s: a PNG was written" % name)
            else:
                with open(png, "rb") as f:
                    data = f.read()
                if not data.startswith(b"\x89PNG\r\n\x1a\n") or len(data) < 10000:
                    failures.append("%s: not a PNG of a plot (%d bytes)" % (name, len(data)))
                return data
            return None

        first = case("good", FIXTURE, True)
        again = case("good_again", FIXTURE, True)
        if first is not None and first != again:
            failures.append("the same CSV drew different bytes")
        case("a listed series without rows", FIXTURE.replace("sortd_shm,16384", "other,16384")
             .replace("sortd_shm,65536", "other,65536"), False, "series sortd_shm has no rows")
        case("a required series not listed and absent",
             "\n".join(l for l in FIXTURE.splitlines() if not l.startswith("cub"))
             .replace(",cub\n", "\n") + "\n", False, "series cub has no rows")
        case("one point", "\n".join(l for l in FIXTURE.splitlines()
                                    if not l.startswith("numpy_sort,65536")) + "\n",
             False, "numpy_sort has 1 row")
        case("no commit", FIXTURE.replace("# commit: 0123abc\n", ""), False, "no '# commit:' line")
        case("a bad number", FIXTURE.replace("8.192e+07", "fast", 1), False, "does not parse")
        case("a zero rate", FIXTURE.replace("8.192e+07", "0", 1), False, "keys/s")
        case("no series line", FIXTURE.replace("# series:", "# Series:"), False, "no '# series:' line")
        case("two rows of one size", FIXTURE + "cub,65536,262144,1e-05,6.5536e+09,,7,cub\n",
             False, "two rows of one size")
        case("fewer required", "\n".join(l for l in FIXTURE.splitlines() if not l.startswith("cub"))
             .replace(",cub\n", "\n") + "\n", True, require="numpy_sort")
    if failures:
        print("plot_throughput selftest: FAILED\n  " + "\n  ".join(failures))
        return 1
    print("plot_throughput selftest: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
