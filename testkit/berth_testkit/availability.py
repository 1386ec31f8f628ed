"""How much of each application is available, read from the clusters themselves."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from berth_testkit.servers.etcd import ServerUnavailable
from berth_testkit.servers.kube import KubeCluster

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


class Sampler:
    """Every Deployment's available replicas on every cluster, every 100 ms: per
    application, the fewest available over all clusters at any sample.

    It polls rather than watches (``mirror.py``): totals over several clusters summed
    from one watch per cluster counted lows that a read of every cluster at once did
    not show (a cluster's watch a moment behind another's), so a watch's low needs a
    confirming read, and the poll is that read (docs/development.md, "Samplers")."""

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
                listed = kube.request("GET", DEPLOYMENTS)
            except (OSError, ServerUnavailable):  # a cluster that is down shows nothing
                continue
            for d in listed.get("items", []):
                seen[d["metadata"]["name"]][cname] = available(d)
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


def available(deployment: dict[str, Any]) -> int:
    """A Deployment's available replicas, as its status says (0: none said)."""
    return int((deployment.get("status") or {}).get("availableReplicas", 0))
