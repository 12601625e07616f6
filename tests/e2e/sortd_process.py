"""Starts the real sortd binary on a free loopback port for end-to-end tests."""
import os
import subprocess
import tempfile
import time
import urllib.request


def metric(url, name):
    """The value of an unlabelled sample on a /metrics page (None if absent)."""
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def scrape(url):
    """Every sample on a /metrics page as {(name, frozenset(labels)): value}."""
    out = {}
    for line in urllib.request.urlopen(url, timeout=10).read().decode().splitlines():
        if not line or line.startswith("#"):
            continue
        key, value = line.rsplit(" ", 1)
        name, labels = key, frozenset()
        if "{" in key:
            name, rest = key.split("{", 1)
            labels = frozenset(tuple(item.split("=", 1)) for item in rest.rstrip("}").split(","))
        out[(name, labels)] = float(value)
    return out


def total(samples, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    want = {(k, '"%s"' % v) for k, v in labels.items()}
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def wait_until(predicate, timeout, step=0.01):
    """Polls `predicate` until it holds or `timeout` seconds pass; whether it held."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


class SortdProcess:
    """A sortd child process; use as a context manager."""

    def __init__(self, binary, *flags):
        self.binary = binary
        self.flags = list(flags)
        self.tmp = tempfile.TemporaryDirectory(prefix="sortd-e2e-")
        self.port_file = os.path.join(self.tmp.name, "port")
        self.metrics_port_file = os.path.join(self.tmp.name, "metrics_port")
        self.metrics_port = None
        self.log_path = os.path.join(self.tmp.name, "sortd.log")
        self.proc = None
        self.port = None

    def start(self, timeout=30):
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [self.binary, "--listen=127.0.0.1:0", "--port_file=" + self.port_file,
             "--metrics_listen=127.0.0.1:0", "--metrics_port_file=" + self.metrics_port_file]
            + self.flags, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("sortd exited early:\n" + self.read_log())
            if os.path.exists(self.port_file):
                with open(self.port_file) as f:
                    self.port = int(f.read().strip())
                if os.path.exists(self.metrics_port_file):
                    with open(self.metrics_port_file) as f:
                        self.metrics_port = int(f.read().strip())
                return self
            time.sleep(0.05)
        raise RuntimeError("sortd did not start within %ss:\n%s" % (timeout, self.read_log()))

    @property
    def target(self):
        return "127.0.0.1:%d" % self.port

    @property
    def metrics_url(self):
        return "http://127.0.0.1:%d/metrics" % self.metrics_port

    def read_log(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def terminate(self, timeout=60):
        """SIGTERM and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.terminate()
        self.log.close()
        self.tmp.cleanup()
