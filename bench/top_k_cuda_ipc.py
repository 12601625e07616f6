#!/usr/bin/env python3
"""TopK of device memory through the Python client (issue #53): a CuPy
array registered as a CUDA region, selected where it lies by the real
sortd's GPU, against torch.topk of the same memory on the same GPU
(zero-copy view) and the client's Sort of the same region (a full sort
in place). Each time is a whole call, the median of --repeats after
warm-up; the call's cost over the kernel is the TopK call minus the
kernel's time (sortd_gpu_top_k_bench, same shapes). Needs SORTD_BIN (or
--target of a running sortd --shared_memory=system,cuda)."""
import argparse
import os
import statistics
import subprocess
import sys
import time

import cupy
import numpy as np
import torch

from sortd_client import Client


def median_ms(fn, repeats):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--port", type=int, default=50171)
    args = ap.parse_args()
    server = subprocess.Popen([os.environ["SORTD_BIN"], "--listen=127.0.0.1:%d" % args.port,
                               "--metrics_listen=", "--shared_memory=system,cuda"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        client = Client("127.0.0.1:%d" % args.port, timeout=120)
        deadline = time.monotonic() + 60
        while True:  # until the server answers
            try:
                client.health(timeout=2)
                break
            except Exception:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        cases = [("u32 2^26 k=100", "uint32", (1 << 26,), 100),
                 ("f32 2^26 k=100", "float32", (1 << 26,), 100),
                 ("f32 65536x1024 k=10", "float32", (65536, 1024), 10),
                 ("f32 65536x1024 k=100", "float32", (65536, 1024), 100)]
        rows = []
        for name, dtype, shape, k in cases:
            if dtype == "uint32":
                x = cupy.random.randint(0, 1 << 32, size=shape, dtype=cupy.uint64).astype(cupy.uint32)
                t = torch.as_tensor(x.view(cupy.int32), device="cuda")  # topk takes no uint32
            else:
                x = cupy.random.random(shape, dtype=cupy.float32)
                t = torch.as_tensor(x, device="cuda")
            cupy.cuda.Device().synchronize()
            region = client.register_cuda_array(x)
            ours = median_ms(lambda: client.topk(x, k, largest=True), args.repeats)
            got_keys, got_idx = client.topk(x, k, largest=True)
            torch_ms = median_ms(lambda: (torch.topk(t, k, dim=-1, largest=True),
                                          torch.cuda.synchronize()), args.repeats)
            if dtype == "float32":  # same answer (ties: none expected in random floats)
                want = torch.topk(t, k, dim=-1, largest=True).values.cpu().numpy()
                assert np.array_equal(got_keys, want), name
            sort_ms = None
            if len(shape) == 1:
                backup = x.copy()
                def sort_once():
                    x[...] = backup
                    cupy.cuda.Device().synchronize()
                    client.sort(x, descending=True)
                sort_ms = median_ms(sort_once, max(5, args.repeats // 4))
            rows.append((name, ours, torch_ms, sort_ms, got_idx.nbytes + got_keys.nbytes))
            region.close()
            del x, t
            cupy.get_default_memory_pool().free_all_blocks()
            torch.cuda.empty_cache()
        print("\nTopK of a CUDA region through the Python client vs torch.topk of the same "
              "memory, %s, median of %d calls (ms)" % (torch.cuda.get_device_name(), args.repeats))
        print("%-22s %10s %11s %7s %14s %12s" % ("case", "client.topk", "torch.topk", "ratio",
                                                 "sort (region)", "bytes back"))
        for name, ours, torch_ms, sort_ms, back in rows:
            print("%-22s %10.3f %11.3f %7.2f %14s %12d" % (
                name, ours, torch_ms, torch_ms / ours,
                "-" if sort_ms is None else "%.3f" % sort_ms, back))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
