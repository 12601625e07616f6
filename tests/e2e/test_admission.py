"""Load bursts, end to end, on the real sortd binary and the Python client
(its C++ library where it loads, and grpcio): more large sorts at once than
--max_inflight_bytes admits all wait their turn and come back exact; one
that can never fit fails at once and is not retried; a deadline that passes
in the admission queue frees everything. Waits are on observed state
(/metrics), never on a sleep alone.

Environment: SORTD_BIN, PYTHONPATH with client/python and tests/e2e;
SORTD_CLIENT_LIB optionally (the native path).
"""
import os
import threading
import time
import unittest

import grpc
import numpy as np

from sortd_client import Client, SortdError
from slow_proxy import SlowProxy
from sortd_process import SortdProcess, metric, wait_until

SORTD = os.environ["SORTD_BIN"]
MIB = 1 << 20


def refusals(url, reason):
    return metric(url, 'sortd_admission_refusals_total{reason="%s"}' % reason) or 0


def random_keys(n, seed):
    return np.random.default_rng(seed).integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)


class AdmissionE2ETest(unittest.TestCase):
    def test_a_burst_over_the_limit_waits_and_every_answer_is_exact(self):
        # 6M uint32 keys: a CPU-sorted session admits 8 bytes a key (keys and
        # the sort's scratch), 48 MiB: one at a time under 64 MiB.
        n = 6 << 20
        with SortdProcess(SORTD, "--engine=cpu", "--max_inflight_bytes=%d" % (64 * MIB)) as s:
            inputs = [random_keys(n, seed) for seed in range(4)]
            results, errors = [None] * 4, []
            most_waiting = [0]
            stop = threading.Event()

            def watch():
                while not stop.is_set():
                    waiting = metric(s.metrics_url, "sortd_admission_waiting_requests") or 0
                    most_waiting[0] = max(most_waiting[0], waiting)
                    time.sleep(0.005)

            def run(i):
                try:
                    # Half through the C++ library (if it loads), half grpcio.
                    with Client(s.target, native=None if i % 2 == 0 else False) as c:
                        results[i] = c.sort(inputs[i])
                except Exception as e:  # reported below
                    errors.append(e)

            watcher = threading.Thread(target=watch)
            watcher.start()
            threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            stop.set()
            watcher.join()
            self.assertEqual(errors, [])
            for i in range(4):
                np.testing.assert_array_equal(results[i], np.sort(inputs[i]), err_msg="caller %d" % i)
            self.assertGreaterEqual(most_waiting[0], 1, "no request ever waited: not a burst")
            self.assertEqual(refusals(s.metrics_url, "queue_full"), 0)
            self.assertTrue(wait_until(
                lambda: metric(s.metrics_url, "sortd_inflight_bytes") == 0, timeout=10))
            self.assertEqual(metric(s.metrics_url, "sortd_admission_waiting_requests"), 0)

    def test_a_sort_that_can_never_fit_fails_at_once_and_is_not_retried(self):
        with SortdProcess(SORTD, "--engine=cpu", "--max_inflight_bytes=%d" % (64 * MIB)) as s:
            with Client(s.target) as c:
                t0 = time.monotonic()
                with self.assertRaises(SortdError) as caught:
                    c.sort(random_keys(10 << 20, 1))  # 80 MiB admitted
                self.assertEqual(caught.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
                self.assertIn("can never run", str(caught.exception))
                self.assertLess(time.monotonic() - t0, 10)
            self.assertEqual(refusals(s.metrics_url, "too_large"), 1)  # one attempt

    def test_a_deadline_that_passes_in_the_queue_frees_everything(self):
        # The first session's answer comes back through a slow proxy (8
        # MB/s for 24 MB): it holds its 48 MiB while the late one waits.
        n = 6 << 20
        with SortdProcess(SORTD, "--engine=cpu", "--max_inflight_bytes=%d" % (64 * MIB)) as s:
            proxy = SlowProxy(s.port, 8 << 20)
            first_keys = random_keys(n, 1)
            out = {}

            def first():
                with Client("127.0.0.1:%d" % proxy.port) as c:
                    out["first"] = c.sort(first_keys)

            t = threading.Thread(target=first)
            t.start()
            self.assertTrue(wait_until(
                lambda: (metric(s.metrics_url, "sortd_inflight_bytes") or 0) > 0, timeout=30))
            late_keys = random_keys(n, 2)
            with Client(s.target, timeout=0.3) as late:
                late.health()  # connected: the deadline is spent waiting, not dialling
                with self.assertRaises(SortdError) as caught:
                    late.sort(late_keys)
            self.assertEqual(caught.exception.code, grpc.StatusCode.DEADLINE_EXCEEDED)
            # The late one waited and left (its deadline, or the client's
            # cancellation at it, whichever reached the server first)...
            self.assertTrue(wait_until(
                lambda: refusals(s.metrics_url, "deadline") + refusals(s.metrics_url, "cancelled")
                == 1, timeout=10))
            self.assertEqual(metric(s.metrics_url, "sortd_admission_waiting_requests"), 0)
            # ...while the first still held its memory, and was answered.
            self.assertGreater(metric(s.metrics_url, "sortd_inflight_bytes"), 0)
            t.join()
            proxy.close()
            np.testing.assert_array_equal(out["first"], np.sort(first_keys))
            self.assertTrue(wait_until(
                lambda: metric(s.metrics_url, "sortd_inflight_bytes") == 0, timeout=10))
            self.assertEqual(metric(s.metrics_url, 'sortd_keys_sorted_total{engine="cpu"}'), n)

    def test_busy_refusals_are_retried_unless_the_client_says_not_to(self):
        # No queue: a second large sort is refused at once while the first
        # holds the limit (its answer comes back through a slow proxy).
        n = 6 << 20
        with SortdProcess(SORTD, "--engine=cpu", "--max_inflight_bytes=%d" % (64 * MIB),
                          "--max_queued_waits=0") as s:
            proxy = SlowProxy(s.port, 4 << 20)  # 24 MB back in about 6 s
            first_keys = random_keys(n, 1)
            out = {}

            def first():
                with Client("127.0.0.1:%d" % proxy.port) as c:
                    out["first"] = c.sort(first_keys)

            t = threading.Thread(target=first)
            t.start()
            self.assertTrue(wait_until(
                lambda: (metric(s.metrics_url, "sortd_inflight_bytes") or 0) > 0, timeout=30))
            keys = random_keys(n, 2)
            for native in (None, False):  # the C++ library's path (if it loads), grpcio
                before = refusals(s.metrics_url, "queue_full")
                with Client(s.target, retry_busy=False, native=native) as c:
                    with self.assertRaises(SortdError) as caught:
                        c.sort(keys)
                self.assertEqual(caught.exception.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
                self.assertIn("server busy", str(caught.exception))
                self.assertEqual(refusals(s.metrics_url, "queue_full"), before + 1)
            # The default client comes back after the server's hint: more
            # than one attempt (and exact if the first finished meanwhile).
            before = refusals(s.metrics_url, "queue_full")
            with Client(s.target) as c:
                try:
                    np.testing.assert_array_equal(c.sort(keys), np.sort(keys))
                except SortdError as e:
                    self.assertEqual(e.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertGreaterEqual(refusals(s.metrics_url, "queue_full"), before + 2)
            t.join()
            proxy.close()
            np.testing.assert_array_equal(out["first"], np.sort(first_keys))


if __name__ == "__main__":
    unittest.main()
