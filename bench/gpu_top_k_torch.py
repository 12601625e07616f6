#!/usr/bin/env python3
"""torch.topk (and torch.sort) on the GPU for the shapes of
sortd_gpu_top_k_bench (issue #53), timed the same way: whole calls,
synchronised, the median of --repeats after warm-up. u32 keys are int32
here and u64 int64 (torch.topk takes no unsigned types); floats are
uniform in [0, 1)."""
import argparse
import statistics
import time

import torch


def median_ms(fn, repeats):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    cases = [
        ("u32 2^26 k=10", torch.int32, (1 << 26,), 10, False),
        ("u32 2^26 k=100", torch.int32, (1 << 26,), 100, False),
        ("u32 2^26 k=100 desc", torch.int32, (1 << 26,), 100, True),
        ("u32 2^26 k=1000", torch.int32, (1 << 26,), 1000, False),
        ("f32 2^26 k=100 desc", torch.float32, (1 << 26,), 100, True),
        ("u64 2^25 k=100", torch.int64, (1 << 25,), 100, False),
        ("f32 65536x1024 k=10 desc", torch.float32, (65536, 1024), 10, True),
        ("f32 65536x1024 k=100 desc", torch.float32, (65536, 1024), 100, True),
        ("f32 16384x4096 k=100 desc", torch.float32, (16384, 4096), 100, True),
    ]
    rows = []
    for name, dtype, shape, k, largest in cases:
        if dtype.is_floating_point:
            x = torch.rand(shape, device=dev, generator=g, dtype=dtype)
        else:
            info = torch.iinfo(dtype)
            x = torch.randint(info.min, info.max, shape, device=dev, generator=g, dtype=dtype)
        topk = median_ms(lambda: torch.topk(x, k, dim=-1, largest=largest, sorted=True), args.repeats)
        sort = median_ms(lambda: torch.sort(x, dim=-1, descending=largest, stable=True), args.repeats)
        rows.append((name, topk, sort))
        del x
        torch.cuda.empty_cache()
    print("\ntorch %s on %s, median of %d calls (ms, synchronised)" %
          (torch.__version__, torch.cuda.get_device_name(), args.repeats))
    print("%-28s %10s %10s" % ("case", "torch.topk", "torch.sort"))
    for name, topk, sort in rows:
        print("%-28s %10.3f %10.3f" % (name, topk, sort))


if __name__ == "__main__":
    main()
