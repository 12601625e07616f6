"""Cancellation storm against a real sortd: rounds of concurrent large Sort
calls whose deadline expires mid-flight, then idle. Prints the server's RSS
after each round and after the idle period, and how the server counted the
calls, to show whether memory returns once nothing is in flight
(docs/benchmarks.md, "Memory after cancellation storms").

  /usr/bin/python3 bench/cancel_storm.py --sortd=build/server/sortd \
      [--rounds=4 --clients=30 --keys=4194304 --deadline=0.3 --idle=5] [-- sortd flags]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client", "python"))
from sortd_client import Client  # noqa: E402


def rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sortd", required=True)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--keys", type=int, default=4 << 20)
    parser.add_argument("--deadline", type=float, default=0.3)
    parser.add_argument("--idle", type=float, default=5)
    args, server_flags = parser.parse_known_args()
    server_flags = [f for f in server_flags if f != "--"]
    tmp = tempfile.mkdtemp(prefix="sortd-storm-")
    port_file, metrics_file = os.path.join(tmp, "port"), os.path.join(tmp, "metrics_port")
    server = subprocess.Popen([args.sortd, "--listen=127.0.0.1:0", "--port_file=" + port_file,
                               "--metrics_listen=127.0.0.1:0", "--metrics_port_file=" + metrics_file]
                              + server_flags, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while not os.path.exists(port_file):
            if time.time() > deadline or server.poll() is not None:
                raise SystemExit("sortd did not start")
            time.sleep(0.05)
        with open(port_file) as f:
            target = "127.0.0.1:" + f.read().strip()
        with open(metrics_file) as f:
            metrics_url = "http://127.0.0.1:%s/metrics" % f.read().strip()
        keys = np.random.default_rng(1).integers(0, 2**32, args.keys, dtype=np.uint64).astype(np.uint32)
        client = Client(target)
        client.sort(keys)  # warm-up: one complete large sort
        print("after one complete sort: RSS %.0f MiB" % rss_mib(server.pid))
        for round_ in range(args.rounds):
            def call():
                try:
                    client.sort(keys, timeout=args.deadline)
                except Exception:
                    pass
            threads = [threading.Thread(target=call) for _ in range(args.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            time.sleep(1)
            print("round %d (%d calls, deadline %.1f s): RSS %.0f MiB" % (
                round_, args.clients, args.deadline, rss_mib(server.pid)))
        time.sleep(args.idle)
        print("after %.0f s idle: RSS %.0f MiB" % (args.idle, rss_mib(server.pid)))
        page = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
        for line in page.splitlines():
            if line.startswith("sortd_requests_total{") and 'method="Sort"' in line:
                print("  " + line)
            if line.startswith("sortd_inflight_bytes "):
                print("  " + line)
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
