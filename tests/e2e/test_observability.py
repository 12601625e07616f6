"""Observability end-to-end: the real sortd scraped by a real Prometheus.

Checks `promtool check metrics` on the live page, that every Grafana panel
queries only metrics sortd exports, and that counters, histogram counts and
byte totals seen through Prometheus's HTTP API equal what was sent.

Environment: SORTD_BIN, PROMETHEUS_BIN, PROMTOOL_BIN, DASHBOARD_JSON,
PYTHONPATH with <build>/python and client/python.
"""
import json
import os
import re
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

import grpc
import numpy as np

from sortd.v1 import sort_pb2, sort_pb2_grpc
from sortd_client import Client
from sortd_process import SortdProcess

SORTD = os.environ["SORTD_BIN"]
PROMETHEUS = os.environ.get("PROMETHEUS_BIN", "/usr/bin/prometheus")
PROMTOOL = os.environ.get("PROMTOOL_BIN", "/usr/bin/promtool")
DASHBOARD = os.environ["DASHBOARD_JSON"]

# Metrics whose series exist only when the server sees a GPU.
GPU_ONLY = {"sortd_gpu_kernel_duration_seconds", "sortd_transfer_duration_seconds", "sortd_device_pool_bytes",
            "sortd_gpu_fallbacks_total", "sortd_gpu_in_rotation"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def exported_families(text):
    """Metric family names from the # TYPE lines of an exposition."""
    return {m.group(1) for m in re.finditer(r"^# TYPE (\S+) ", text, re.M)}


def base_name(name, families):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in families | GPU_ONLY:
            return name[: -len(suffix)]
    return name


class Observability(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sortd = SortdProcess(SORTD).start()
        cls.tmp = tempfile.TemporaryDirectory(prefix="sortd-prom-")
        config = os.path.join(cls.tmp.name, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: sortd\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:%d']\n" % cls.sortd.metrics_port)
        cls.prom_log = open(os.path.join(cls.tmp.name, "prometheus.log"), "w")
        # free_port() only proposes a port: a parallel test may bind it before
        # Prometheus does, which then exits; try again on another.
        for attempt in range(3):
            cls.prom_port = free_port()
            cls.prom = subprocess.Popen(
                [PROMETHEUS, "--config.file=" + config,
                 "--storage.tsdb.path=" + os.path.join(cls.tmp.name, "data%d" % attempt),
                 "--web.listen-address=127.0.0.1:%d" % cls.prom_port],
                stdout=cls.prom_log, stderr=subprocess.STDOUT)
            if cls.wait_ready(deadline=time.time() + 60):
                return
            if cls.prom.poll() is None:
                cls.prom.kill()
            cls.prom.wait(30)
        raise RuntimeError("prometheus did not become ready")

    @classmethod
    def wait_ready(cls, deadline):
        while time.time() < deadline:
            try:
                http_get("http://127.0.0.1:%d/-/ready" % cls.prom_port, timeout=2)
                return True
            except Exception:
                if cls.prom.poll() is not None:
                    return False  # exited (e.g. the port was taken)
                time.sleep(0.2)
        return False

    @classmethod
    def tearDownClass(cls):
        cls.prom.terminate()
        cls.prom.wait(30)
        cls.prom_log.close()
        cls.sortd.terminate()
        cls.sortd.__exit__(None, None, None)
        cls.tmp.cleanup()

    def query(self, expr):
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (
            self.prom_port, urllib.parse.urlencode({"query": expr}))
        body = json.loads(http_get(url))
        self.assertEqual(body["status"], "success", body)
        return body["data"]["result"]

    def value(self, expr):
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def test_2_live_metrics_pass_promtool(self):
        text = http_get(self.sortd.metrics_url)
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for name in ("sortd_requests_total", "sortd_request_duration_seconds", "sortd_queue_duration_seconds",
                     "sortd_keys_sorted_total", "sortd_bytes_received_total",
                     "sortd_bytes_sent_total", "sortd_batch_size", "sortd_inflight_requests",
                     "sortd_inflight_bytes", "sortd_build_info", "sortd_gpu_devices"):
            self.assertIn(name, exported_families(text))

    def test_3_dashboard_queries_only_exported_metrics(self):
        dashboard = json.load(open(DASHBOARD))
        text = http_get(self.sortd.metrics_url)
        families = exported_families(text)
        gpus = float(re.search(r"^sortd_gpu_devices (\S+)$", text, re.M).group(1))
        exprs = []
        for panel in dashboard["panels"]:
            exprs += [t["expr"] for t in panel.get("targets", [])]
        exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
        self.assertGreater(len(exprs), 20)
        for expr in exprs:
            names = set(re.findall(r"\b(sortd_[a-z0-9_]+)\b", expr))
            self.assertTrue(names, expr)
            for name in names:
                base = base_name(name, families)
                if base in GPU_ONLY and gpus == 0:
                    continue  # exported per GPU; this host has none
                self.assertIn(base, families, "panel query uses %s, which sortd does not export: %s" % (name, expr))

    # unittest runs tests in name order: this one first, on a fresh server, so
    # that its counts are exact; the page checks after it then see every
    # request-driven family populated.
    def test_1_prometheus_sees_exactly_what_was_sent(self):
        ok_sorts, pairs, invalid = 20, 5, 7
        with Client(self.sortd.target) as c:
            rng = np.random.default_rng(1)
            for _ in range(ok_sorts):
                c.sort(rng.integers(0, 1 << 32, size=1000, dtype=np.uint64).astype(np.uint32))
            for _ in range(pairs):
                c.sort_pairs(rng.integers(-100, 100, size=100, dtype=np.int64),
                             rng.standard_normal(100).astype(np.float32))
        with grpc.insecure_channel(self.sortd.target) as channel:
            stub = sort_pb2_grpc.SortServiceStub(channel)
            for _ in range(invalid):
                with self.assertRaises(grpc.RpcError) as cm:
                    stub.Sort(sort_pb2.SortRequest())
                self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)

        total = ok_sorts + pairs + invalid
        deadline = time.time() + 30
        while self.value('sum(sortd_requests_total{job="sortd"})') != total:
            self.assertLess(time.time(), deadline, "Prometheus never saw %d requests" % total)
            time.sleep(0.5)

        self.assertEqual(self.value('up{job="sortd"}'), 1)
        self.assertEqual(self.value('sortd_requests_total{method="Sort",code="OK",key_type="uint32"}'), ok_sorts)
        self.assertEqual(self.value('sortd_requests_total{method="Sort",code="INVALID_ARGUMENT",key_type="none"}'), invalid)
        self.assertEqual(self.value('sortd_requests_total{method="SortPairs",code="OK",key_type="int64"}'), pairs)
        self.assertEqual(self.value('sortd_request_duration_seconds_count{method="Sort",engine="cpu"}'), ok_sorts)
        self.assertEqual(self.value('sortd_request_duration_seconds_bucket{method="Sort",engine="cpu",le="+Inf"}'), ok_sorts)
        self.assertEqual(self.value('sortd_request_duration_seconds_count{method="Sort",engine="none"}'), invalid)
        self.assertEqual(self.value('sortd_request_duration_seconds_count{method="SortPairs",engine="cpu"}'), pairs)
        self.assertEqual(self.value('sortd_queue_duration_seconds_count{method="Sort"}'), ok_sorts)
        self.assertEqual(self.value('sortd_batch_size_count{engine="cpu"}'), ok_sorts + pairs)
        self.assertEqual(self.value('sortd_bytes_received_total{method="Sort"}'), ok_sorts * 1000 * 4)
        self.assertEqual(self.value('sortd_bytes_sent_total{method="Sort"}'), ok_sorts * 1000 * 4)
        self.assertEqual(self.value('sortd_bytes_received_total{method="SortPairs"}'), pairs * 100 * (8 + 4))
        self.assertEqual(self.value('sortd_bytes_sent_total{method="SortPairs"}'), pairs * 100 * (8 + 4))
        self.assertEqual(self.value('sortd_keys_sorted_total{engine="cpu"}'), ok_sorts * 1000 + pairs * 100)
        self.assertEqual(self.value("sortd_inflight_requests"), 0)
        self.assertEqual(self.value("sortd_build_info"), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
