"""How much of each application is available, read from the clusters themselves."""

from __future__ import annotations

import threading
from collections import defaultdict

from berth_testkit.servers.etcd import ServerUnavailable
from berth_testkit.servers.kube import KubeCluster


class Sampler:
    """Every Deployment's available replicas on every cluster, every 100 ms: per
    application, the fewest available over all clusters at any sample."""

    def __init__(self, clusters: dict[str, KubeCluster]) -> None:
        self.clusters = clusters
        self.fewest: dict[str, int] = {}
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now(self) -> dict[str, dict[str, int]]:
        """Deployment name → cluster → available replicas (its status, as kubectl shows)."""
        seen: dict[str, dict[str, int]] = defaultdict(dict)
        for cname, kube in self.clusters.items():
            try:
                listed = kube.request("GET", "/apis/apps/v1/namespaces/default/deployments")
            except (OSError, ServerUnavailable):  # a cluster that is down shows nothing
                continue
            for d in listed.get("items", []):
                seen[d["metadata"]["name"]][cname] = (d.get("status") or {}).get(
                    "availableReplicas", 0)
        return seen

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, where in self.now().items():
                total = sum(where.values())
                self.fewest[name] = min(self.fewest.get(name, total), total)
            self.samples += 1
            self._stop.wait(0.1)
