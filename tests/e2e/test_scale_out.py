"""Scale-out, end to end: three real sortd processes behind one client target
(`ipv4:` with three addresses, as a headless Service's DNS name resolves to
several pods). The clients' default channel config (round-robin, health
checks, retries of UNAVAILABLE) must spread calls over every replica, and a
replica that drains (SIGTERM) or dies (SIGKILL) under load must cost no
request. Also: --max_connection_age closes connections so clients rebalance.

Environment: SORTD_BIN, SORTCTL_BIN, PYTHONPATH with client/python.
"""
import os
import re
import signal
import subprocess
import threading
import time
import unittest
import urllib.request

import grpc
import numpy as np

from sortd_client import Client
from sortd_process import SortdProcess, wait_until

SORTD = os.environ["SORTD_BIN"]
SORTCTL = os.environ["SORTCTL_BIN"]


def sorts_served(server):
    """Sort calls a server answered OK, from its /metrics (0 once it is gone)."""
    try:
        page = urllib.request.urlopen(server.metrics_url, timeout=5).read().decode()
    except OSError:
        return 0
    total = 0.0
    for line in page.splitlines():
        if line.startswith("sortd_requests_total{") and 'code="OK"' in line \
                and re.search(r'method="(Sort|SortPairs)"', line):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Load:
    """Worker threads sorting random arrays through one client until stopped;
    each result is compared with numpy's stable sort of its own request."""

    def __init__(self, client, workers=4, keys=4096):
        self.client = client
        self.keys = keys
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.done = 0
        self.errors = []
        self.threads = [threading.Thread(target=self._run, args=(seed,)) for seed in range(workers)]

    def _run(self, seed):
        rng = np.random.default_rng(seed)
        while not self.stop.is_set():
            keys = rng.integers(-2**31, 2**31, self.keys, dtype=np.int64).astype(np.int32)
            try:
                out = self.client.sort(keys, timeout=60)
                ok = np.array_equal(out, np.sort(keys, kind="stable"))
                with self.lock:
                    self.done += 1
                    if not ok:
                        self.errors.append("wrong result")
            except Exception as e:  # every failure is a lost request
                with self.lock:
                    self.errors.append(repr(e))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(120)

    def completed(self):
        with self.lock:
            return self.done


class ScaleOut(unittest.TestCase):
    def setUp(self):
        # A drain delay makes the refusal window visible: for 1 s after
        # SIGTERM a replica answers new calls with UNAVAILABLE.
        self.servers = [SortdProcess(SORTD, "--drain_delay=1s", "--engine=cpu").start()
                        for _ in range(3)]
        self.target = "ipv4:" + ",".join(s.target for s in self.servers)

    def tearDown(self):
        for s in self.servers:
            s.__exit__(None, None, None)

    def test_python_client_spreads_calls_over_every_replica(self):
        with Client(self.target) as client:
            rng = np.random.default_rng(1)
            # Round-robin starts once the replicas' connections are up; keep
            # calling (bounded) until every replica has answered some.
            for _ in range(600):
                keys = rng.integers(0, 1 << 32, 1000, dtype=np.uint64).astype(np.uint32)
                np.testing.assert_array_equal(client.sort(keys, timeout=30), np.sort(keys))
                if all(sorts_served(s) >= 5 for s in self.servers):
                    break
            counts = [sorts_served(s) for s in self.servers]
            self.assertTrue(all(c >= 5 for c in counts), counts)

    def check_replica_loss(self, stop_one):
        with Client(self.target) as client, Load(client) as load:
            self.assertTrue(wait_until(lambda: all(sorts_served(s) > 0 for s in self.servers), 60),
                            "load never reached every replica: %s" % load.errors[:3])
            victim, survivors = self.servers[1], [self.servers[0], self.servers[2]]
            stop_one(victim)
            # Keep the load on until the victim is gone and the survivors
            # have answered 200 more calls.
            self.assertIsNotNone(victim.proc.wait(60))
            before = sum(sorts_served(s) for s in survivors)
            self.assertTrue(wait_until(lambda: sum(sorts_served(s) for s in survivors) >= before + 200, 60))
        self.assertEqual(load.errors, [])
        self.assertGreater(load.completed(), 200)
        return victim

    def test_sigterm_one_replica_under_load_loses_no_request(self):
        victim = self.check_replica_loss(lambda s: s.proc.send_signal(signal.SIGTERM))
        self.assertEqual(victim.proc.returncode, 0)
        self.assertIn("drained", victim.read_log())

    def test_sigkill_one_replica_under_load_loses_no_request(self):
        # Calls in flight on the killed replica fail with UNAVAILABLE before
        # any response: the retry policy sends them to another replica.
        victim = self.check_replica_loss(lambda s: s.proc.kill())
        self.assertEqual(victim.proc.returncode, -signal.SIGKILL)

    def sortctl_bench(self, seconds):
        return subprocess.run(
            [SORTCTL, "bench", "--target=" + self.target, "--concurrency=4", "--keys=4096",
             "--type=int32", "--method=sort", "--duration=%ds" % seconds],
            capture_output=True, text=True, timeout=120)

    def test_sortctl_spreads_calls_and_survives_a_drain(self):
        # The C++ client: the same default config spreads sortctl's calls.
        bench = self.sortctl_bench(3)
        self.assertEqual(bench.returncode, 0, bench.stdout + bench.stderr)
        counts = [sorts_served(s) for s in self.servers]
        self.assertTrue(all(c > 0 for c in counts), (counts, bench.stdout))
        # Under load, one replica drains: sortctl reports no failed call.
        result = {}
        t = threading.Thread(target=lambda: result.update(bench=self.sortctl_bench(6)))
        t.start()
        before = sorts_served(self.servers[1])
        self.assertTrue(wait_until(lambda: sorts_served(self.servers[1]) > before, 30))
        self.servers[1].proc.send_signal(signal.SIGTERM)
        t.join(120)
        bench = result["bench"]
        self.assertEqual(bench.returncode, 0, bench.stdout + bench.stderr)
        self.assertRegex(bench.stdout + bench.stderr, r"\b0 errors\b")
        self.assertEqual(self.servers[1].proc.wait(60), 0)


class ConnectionAge(unittest.TestCase):
    def test_max_connection_age_closes_idle_and_busy_connections(self):
        # After --max_connection_age the server sends GOAWAY: a pick_first
        # channel (no service config) then leaves READY, which is what makes
        # clients re-resolve and reconnect.
        with SortdProcess(SORTD, "--max_connection_age=1s", "--max_connection_age_grace=1s") as server:
            with Client(server.target, service_config=None) as client:
                self.assertEqual(client.health(), "SERVING")
                states = []
                left_ready = threading.Event()
                channel = client._channel

                def watch(state):
                    states.append(state)
                    if states and grpc.ChannelConnectivity.READY in states \
                            and state != grpc.ChannelConnectivity.READY:
                        left_ready.set()
                np.testing.assert_array_equal(client.sort(np.array([3, 1, 2], np.uint32)), [1, 2, 3])
                channel.subscribe(watch, try_to_connect=False)
                try:
                    self.assertTrue(left_ready.wait(30), states)
                finally:
                    channel.unsubscribe(watch)
                # The client reconnects by itself for the next call.
                np.testing.assert_array_equal(client.sort(np.array([2, 1], np.uint32)), [1, 2])


if __name__ == "__main__":
    unittest.main(verbosity=2)
