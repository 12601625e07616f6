"""What a user with a GPU on their own host would do instead of calling sortd.

For each size (powers of two of random u32 keys, a host numpy array), the
best of --repeat runs after one warm-up, in milliseconds, of:

  numpy   numpy.sort (default kind)
  cupy    cupy.asarray -> cupy.sort -> .get(): host to device, sort, back
  torch   torch.from_numpy -> .cuda() -> torch.sort -> .cpu()
  cupy_device / torch_device  the sort alone, of an array already on the GPU

Every answer is compared with numpy's. Modules that do not import are
reported as missing (the GPU host has CuPy and PyTorch). Prints
tab-separated rows: mode, log2 keys, bytes, best ms, median ms.

  python3 bench/local_gpu_anchor.py --sizes_log2 14,16,18,20,22,24,28 --repeat 5
"""
import argparse
import sys
import time

import numpy as np


def timed(fn, repeat):
    fn()  # warm-up (kernels, pools)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[0], times[len(times) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes_log2", default="14,16,18,20,22,24,28")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    try:
        import cupy
    except ImportError as err:
        cupy = None
        print("cupy: missing (%s)" % err, file=sys.stderr)
    try:
        import torch
        if not torch.cuda.is_available():
            raise ImportError("no CUDA device")
    except ImportError as err:
        torch = None
        print("torch: missing (%s)" % err, file=sys.stderr)
    print("mode\tlog2\tbytes\tbest_ms\tmedian_ms")
    failures = 0
    for log2 in (int(x) for x in args.sizes_log2.split(",")):
        keys = np.random.default_rng(log2).integers(0, 1 << 32, 1 << log2, dtype=np.uint32)
        want = np.sort(keys)
        modes = {"numpy": lambda: np.sort(keys)}
        if cupy is not None:
            on_device = cupy.asarray(keys)
            modes["cupy"] = lambda: cupy.sort(cupy.asarray(keys)).get()

            def cupy_device():
                out = cupy.sort(on_device)
                cupy.cuda.Device().synchronize()
                return out
            modes["cupy_device"] = cupy_device
        if torch is not None:
            # torch has no uint32 sort on CUDA everywhere: int64 holds every
            # u32 key in order.
            dev = torch.from_numpy(keys.astype(np.int64)).cuda()
            modes["torch"] = lambda: torch.sort(torch.from_numpy(keys).to(torch.int64).cuda())[0].cpu()

            def torch_device():
                out = torch.sort(dev)[0]
                torch.cuda.synchronize()
                return out
            modes["torch_device"] = torch_device
        for mode, fn in modes.items():
            got = fn()
            got = got.get() if hasattr(got, "get") else (
                got.cpu().numpy() if hasattr(got, "cpu") else got)
            if not np.array_equal(np.asarray(got).astype(np.uint64), want.astype(np.uint64)):
                print("WRONG RESULT: %s at 2^%d" % (mode, log2), file=sys.stderr)
                failures += 1
                continue
            best, median = timed(fn, args.repeat)
            print("%s\t%d\t%d\t%.3f\t%.3f" % (mode, log2, keys.nbytes, best, median), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
