"""A real Prometheus scraping a real Pushgateway, on free loopback ports.

Values are pushed to the Pushgateway and scraped every second; the first
sample is queryable a few seconds after Prometheus starts, so ``wait_value``
polls Prometheus' HTTP API rather than sleeping.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from berth_testkit.servers.etcd import ServerUnavailable, free_port, kill_process, stop_process
from berth_testkit.servers.launch import spawn

HOW = ("Prometheus is needed: run scripts/install-prometheus.sh "
       "(apt-get install prometheus prometheus-pushgateway)")


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


class PrometheusServer:
    def __init__(self) -> None:
        for tool in ("prometheus", "prometheus-pushgateway"):
            if shutil.which(tool) is None:
                raise ServerUnavailable(f"{tool} not found. {HOW}")
        self.workdir = Path(tempfile.mkdtemp(prefix="berth-prometheus-"))
        self.gateway_port = free_port()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.gateway = f"http://127.0.0.1:{self.gateway_port}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        (self.workdir / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: pushgateway\n"
            "    honor_labels: true\n"
            f"    static_configs: [{{targets: ['127.0.0.1:{self.gateway_port}']}}]\n")
        with open(self.workdir / "pushgateway.log", "ab") as log:
            self.procs.append(spawn(
                ["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{self.gateway_port}"],
                stdout=log, stderr=subprocess.STDOUT))
        self.start_prometheus()
        self._wait(f"{self.gateway}/-/ready", timeout)
        self._wait(f"{self.url}/-/ready", timeout)
        return self

    def start_prometheus(self) -> None:
        with open(self.workdir / "prometheus.log", "ab") as log:
            self.prometheus = spawn(
                ["prometheus", f"--config.file={self.workdir / 'prometheus.yml'}",
                 f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"],
                stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(self.prometheus)

    def _wait(self, url: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with _opener().open(url, timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        logs = "".join((self.workdir / f).read_text(errors="replace")[-1500:]
                       for f in ("prometheus.log", "pushgateway.log")
                       if (self.workdir / f).exists())
        self.cleanup()
        raise ServerUnavailable(f"{url} not ready within {timeout}s:\n{logs}")

    def push(self, **values: float | str) -> None:
        body = "".join(f"{k} {v}\n" for k, v in values.items()).encode()
        req = urllib.request.Request(f"{self.gateway}/metrics/job/berth", data=body, method="PUT")
        with _opener().open(req, timeout=5) as r:
            assert r.status in (200, 202), r.status

    def query(self, q: str) -> list[dict[str, object]]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        with _opener().open(url, timeout=5) as r:
            return list(json.loads(r.read())["data"]["result"])

    def wait_value(self, q: str, value: float, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query(q)
            if result and float(result[0]["value"][1]) == value:  # type: ignore[index]
                return
            time.sleep(0.2)
        raise AssertionError(f"Prometheus never showed {q} = {value}")

    def stop_prometheus(self) -> None:
        stop_process(self.prometheus)

    def cleanup(self) -> None:
        for p in self.procs:
            kill_process(p)
        shutil.rmtree(self.workdir, ignore_errors=True)
