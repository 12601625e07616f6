"""Scale-out, end to end: three real sortd processes behind one client target
(`ipv4:` with three addresses, as a headless Service's DNS name resolves to
several pods). The clients' default channel config (round-robin, health
checks, retries of UNAVAILABLE) must spread calls over every replica, and a
replica that drains (SIGTERM) or dies (SIGKILL) under load must cost no
request. A call is provably in flight on the replica that goes: a SortChunked
upload held open by its client (sortd answers nothing, not even headers,
before the whole upload is in), seen on that replica's
sortd_inflight_requests before the signal. Also: --max_connection_age
closes connections so clients rebalance.

Environment: SORTD_BIN, SORTCTL_BIN, PYTHONPATH with client/python and
tests/e2e.
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

from sortd.v1 import sort_pb2
from sortd_client import Client
from sort_reference import reference_permutation
from sortd_process import SortdProcess, metric, scrape, total, wait_until

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


def inflight(server):
    """sortd_inflight_requests of a server (0 once it is gone)."""
    try:
        return metric(server.metrics_url, "sortd_inflight_requests") or 0
    except OSError:
        return 0


def chunked_served(server):
    """SortChunked calls a server answered OK."""
    return total(scrape(server.metrics_url), "sortd_requests_total", method="SortChunked", code="OK")


class HeldUpload:
    """A SortChunked call on the client's own channel (its round-robin and
    retry policy) that sends its header and the first half of its keys, then
    holds its stream open until release(): in flight, unanswered, on
    whichever replica it reached, until the client sends the rest."""

    def __init__(self, client, keys):
        self.keys = keys
        self.gate = threading.Event()
        self.responses = []
        self.error = None
        call = client._channel.stream_stream(
            "/sortd.v1.SortService/SortChunked",
            request_serializer=sort_pb2.SortChunkedRequest.SerializeToString,
            response_deserializer=sort_pb2.SortChunkedResponse.FromString)
        self.thread = threading.Thread(target=self._run, args=(call,))
        self.thread.start()

    def _requests(self):
        h = sort_pb2.SortChunkedRequest()
        h.header.total_keys = len(self.keys)
        h.header.return_indices = True
        h.header.request_id = "held"
        yield h
        for i, part in enumerate(np.array_split(self.keys, 2)):
            if i:
                self.gate.wait(120)  # the rest only once released
            c = sort_pb2.SortChunkedRequest()
            c.chunk.keys.int32.values.extend(part.tolist())
            yield c

    def _run(self, call):
        try:
            for response in call(self._requests(), timeout=180):
                self.responses.append(response)
        except Exception as e:  # checked by result()
            self.error = e

    def answered(self):
        return bool(self.responses) or not self.thread.is_alive()

    def release(self):
        self.gate.set()

    def result(self, timeout=120):
        """(sorted keys, indices) once the call ended; raises its error."""
        self.release()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError("the held upload did not end")
        if self.error is not None:
            raise self.error
        keys = np.concatenate([np.array(r.chunk.keys.int32.values, np.int32)
                               for r in self.responses])
        indices = np.concatenate([np.array(r.indices, np.uint64) for r in self.responses])
        return keys, indices


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

    def check_replica_loss(self, stop_one, until_stopped):
        """Loses the replica holding a call in flight, under load: stop_one
        signals it, until_stopped(victim) waits until it stopped taking
        work; then the held call gets the rest of its upload. Returns the
        victim and whether the held call was answered by a survivor."""
        rng = np.random.default_rng(9)
        held_keys = rng.integers(-1000, 1000, 200_000).astype(np.int32)  # ties: stability shows
        with Client(self.target) as client:
            held = HeldUpload(client, held_keys)
            try:
                # Before any other load: the one replica with a call admitted
                # holds the upload.
                self.assertTrue(wait_until(lambda: sum(inflight(s) for s in self.servers) == 1
                                           or held.answered(), 60),
                                "the held upload never reached a replica")
                self.assertFalse(held.answered(), "the held upload ended early: %r" % held.error)
                holders = [s for s in self.servers if inflight(s) == 1]
                self.assertEqual(len(holders), 1, [inflight(s) for s in self.servers])
                victim = holders[0]
                survivors = [s for s in self.servers if s is not victim]
                chunked_before = sum(chunked_served(s) for s in survivors)
                with Load(client) as load:
                    self.assertTrue(wait_until(lambda: all(sorts_served(s) > 0 for s in self.servers),
                                               60), "load never reached every replica: %s"
                                    % load.errors[:3])
                    # At the signal, the held call is in flight on the victim
                    # (admitted there, nothing answered: the client has not
                    # sent the rest of its keys).
                    self.assertGreaterEqual(inflight(victim), 1)
                    self.assertFalse(held.answered(), "the held upload ended early: %r" % held.error)
                    stop_one(victim)
                    until_stopped(victim)
                    held_keys_out, held_indices = held.result()
                    # Keep the load on until the victim is gone and the
                    # survivors have answered 200 more calls.
                    self.assertIsNotNone(victim.proc.wait(60))
                    before = sum(sorts_served(s) for s in survivors)
                    self.assertTrue(wait_until(
                        lambda: sum(sorts_served(s) for s in survivors) >= before + 200, 60))
            finally:
                held.release()
        self.assertEqual(load.errors, [])
        self.assertGreater(load.completed(), 200)
        # The held call's answer is exact.
        perm = reference_permutation(held_keys, descending=False)
        np.testing.assert_array_equal(held_indices, perm)
        np.testing.assert_array_equal(held_keys_out, held_keys[perm])
        moved = sum(chunked_served(s) for s in survivors) - chunked_before
        self.assertIn(moved, (0, 1))
        return victim, moved == 1

    def test_sigterm_one_replica_under_load_loses_no_request(self):
        # The draining victim refuses new calls and finishes the one in
        # flight: the held upload, completed after the signal, is answered
        # by the victim itself.
        def until_draining(victim):
            self.assertTrue(wait_until(lambda: "draining" in victim.read_log(), 30),
                            victim.read_log())
        victim, moved = self.check_replica_loss(lambda s: s.proc.send_signal(signal.SIGTERM),
                                                until_draining)
        self.assertEqual(victim.proc.returncode, 0)
        self.assertIn("drained", victim.read_log())
        self.assertFalse(moved, "the draining replica did not finish the call in flight")

    def test_sigkill_one_replica_under_load_loses_no_request(self):
        # Calls in flight on the killed replica fail with UNAVAILABLE before
        # any response: the retry policy sends them to another replica. The
        # held upload is replayed from the client's retry buffer to a
        # survivor, which answers it.
        victim, moved = self.check_replica_loss(lambda s: s.proc.kill(),
                                                lambda s: s.proc.wait(60))
        self.assertEqual(victim.proc.returncode, -signal.SIGKILL)
        self.assertTrue(moved, "the held upload was not answered by a survivor")

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
        self.assertTrue(t.is_alive(), "the bench ended before the drain began")
        self.servers[1].proc.send_signal(signal.SIGTERM)
        t.join(120)
        bench = result["bench"]
        self.assertEqual(bench.returncode, 0, bench.stdout + bench.stderr)
        self.assertRegex(bench.stdout + bench.stderr, r"\b0 errors\b")
        self.assertEqual(self.servers[1].proc.wait(60), 0)


class ConnectionAge(unittest.TestCase):
    @staticmethod
    def leaves_ready(channel, timeout):
        """Whether the channel, READY now or soon, leaves READY within
        `timeout` s; and the states it went through."""
        states = []
        left_ready = threading.Event()

        def watch(state):
            states.append(state)
            if grpc.ChannelConnectivity.READY in states and state != grpc.ChannelConnectivity.READY:
                left_ready.set()
        channel.subscribe(watch, try_to_connect=False)
        try:
            return left_ready.wait(timeout), states
        finally:
            channel.unsubscribe(watch)

    def test_max_connection_age_closes_idle_and_busy_connections(self):
        # After --max_connection_age the server sends GOAWAY: a pick_first
        # channel (no service config) then leaves READY, which is what makes
        # clients re-resolve and reconnect. Calls in flight on a connection
        # it closes get --max_connection_age_grace to end.
        with SortdProcess(SORTD, "--max_connection_age=1s", "--max_connection_age_grace=5s") as server:
            with Client(server.target, service_config=None) as client:
                self.assertEqual(client.health(), "SERVING")
                channel = client._channel
                # Idle: the connection of one finished call.
                np.testing.assert_array_equal(client.sort(np.array([3, 1, 2], np.uint32)), [1, 2, 3])
                left, states = self.leaves_ready(channel, 30)
                self.assertTrue(left, states)
                # The client reconnects by itself for the next call.
                np.testing.assert_array_equal(client.sort(np.array([2, 1], np.uint32)), [1, 2])
                # Busy: a call held open on the new connection as it ages.
                keys = np.random.default_rng(3).integers(-50, 50, 20_000).astype(np.int32)
                held = HeldUpload(client, keys)
                try:
                    self.assertTrue(wait_until(lambda: inflight(server) == 1 or held.answered(), 30),
                                    "the held upload never arrived")
                    self.assertFalse(held.answered(), "the held upload ended early: %r" % held.error)
                    left, states = self.leaves_ready(channel, 30)
                    self.assertTrue(left, states)
                    self.assertFalse(held.answered(),
                                     "the held upload ended before its connection was closed")
                    self.assertEqual(inflight(server), 1)
                finally:
                    held.release()
                # Within the grace, the call in flight ends with its answer.
                got, indices = held.result()
                perm = reference_permutation(keys, descending=False)
                np.testing.assert_array_equal(indices, perm)
                np.testing.assert_array_equal(got, keys[perm])
                np.testing.assert_array_equal(client.sort(np.array([5, 4], np.uint32)), [4, 5])


if __name__ == "__main__":
    unittest.main(verbosity=2)
