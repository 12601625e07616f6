"""Top-k from the user's view (issue #53): Client.topk against a real sortd,
next to what a user would do instead, on the same host.

Workloads (--workloads, comma-separated):
  array:N:K   N uniform float32 keys (N a power-of-two exponent, e.g. 24),
              the K largest with their positions
  rows:R:C:K  R rows of C float32 scores, the K largest of every row

Paths, each timed best and median of --repeat calls after a warm-up:
  topk        Client.topk (one message, or split past max_message_bytes)
  topk_shm    the same with the keys in a shared array (sortd with
              --shared_memory=system; by reference)
  sort_shm    Client.sort of that shared array into another (arrays only):
              our full sort on the same path
  sort        Client.sort of the whole array (the client's defaults), then
              its first K (rows: not run, one call a row)
  numpy       np.argpartition then a stable sort of the K (rows: along
              axis 1), here, one thread
  torch       torch.topk on CPU tensors (when torch imports), and on the
              GPU (torch.cuda, the copy to the device not counted) when one
              is present

Every sortd answer is checked against numpy's stable order. Prints a
tab-separated table: workload, path, best ms, median ms, best / topk.

  PYTHONPATH=client/python:build/python /usr/bin/python3 bench/top_k_e2e.py \\
      --target 127.0.0.1:50051 --workloads array:20:100,array:24:100,rows:16384:1024:10
"""

import argparse
import sys
import time

import numpy as np

from sortd_client import Client


def timed(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3, float(np.median(times)) * 1e3


def largest_order(a, axis=-1):
    """numpy's stable descending order (equal keys in input order)."""
    n = a.shape[axis]
    return n - 1 - np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)


def numpy_topk(a, k):
    idx = np.argpartition(-a, k - 1, axis=-1)[..., :k]
    vals = np.take_along_axis(a, idx, -1)
    order = np.argsort(-vals, axis=-1, kind="stable")
    return np.take_along_axis(vals, order, -1), np.take_along_axis(idx, order, -1)


def torch_paths(a, k):
    try:
        import torch
    except ImportError:
        return []
    t = torch.from_numpy(a)
    paths = [("torch", lambda: torch.topk(t, k, dim=-1))]
    if torch.cuda.is_available():
        g = t.cuda()

        def on_gpu():
            torch.topk(g, k, dim=-1)
            torch.cuda.synchronize()
        paths.append(("torch_gpu", on_gpu))
    return paths


def check(got, idx, a, k):
    want = largest_order(a)[..., :k]
    if not np.array_equal(idx, want) or not np.array_equal(got, np.take_along_axis(a, want, -1)):
        raise SystemExit("sortd's answer differs from numpy's stable order")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", required=True)
    ap.add_argument("--workloads", default="array:20:100,array:24:100,rows:16384:1024:10,"
                                           "rows:16384:1024:100")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--shm", action="store_true", help="also topk_shm (sortd --shared_memory=system)")
    ap.add_argument("--max_message_bytes", type=int, default=64 << 20)
    args = ap.parse_args()
    client = Client(args.target, max_message_bytes=args.max_message_bytes)
    rng = np.random.default_rng(1)
    print("workload\tpath\tbest_ms\tmedian_ms\tvs_topk")
    for spec in args.workloads.split(","):
        parts = spec.split(":")
        if parts[0] == "array":
            n, k = 1 << int(parts[1]), int(parts[2])
            a = rng.random(n, dtype=np.float32)
            name = "2^%s f32, k=%d" % (parts[1], k)
        else:
            rows, cols, k = int(parts[1]), int(parts[2]), int(parts[3])
            a = rng.random((rows, cols), dtype=np.float32)
            name = "%dx%d f32, k=%d" % (rows, cols, k)
        got, idx = client.topk(a, k)
        check(got, idx, a, k)
        results = [("topk", timed(lambda: client.topk(a, k), args.repeat))]
        if args.shm:
            shared = client.shared_array(a.shape, a.dtype)
            shared[:] = a
            got, idx = client.topk(shared, k)
            check(got, idx, a, k)
            results.append(("topk_shm", timed(lambda: client.topk(shared, k), args.repeat)))
            if a.ndim == 1:
                # Our full sort on the same path: by reference, into another
                # shared array (the input stays unsorted for the next call).
                out = client.shared_array(a.shape, a.dtype)
                results.append(("sort_shm", timed(lambda: client.sort(
                    shared, descending=True, out=out), args.repeat)))
                if not np.array_equal(out[:k], np.sort(a)[::-1][:k]):
                    raise SystemExit("sort_shm's answer differs from numpy's")
                client.unregister_region(client.region_of(out))
            client.unregister_region(client.region_of(shared.reshape(-1)))
        if a.ndim == 1:
            results.append(("sort", timed(lambda: client.sort(a, descending=True,
                                                              return_indices=True), args.repeat)))
        results.append(("numpy", timed(lambda: numpy_topk(a, k), args.repeat)))
        for path, fn in torch_paths(a, k):
            results.append((path, timed(fn, args.repeat)))
        base = results[0][1][0]
        for path, (best, median) in results:
            print("%s\t%s\t%.2f\t%.2f\t%.2f" % (name, path, best, median, best / base))
        sys.stdout.flush()
    client.close()


if __name__ == "__main__":
    main()
