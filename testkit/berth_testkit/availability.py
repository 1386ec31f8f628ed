"""How much of each application is available, read from the clusters themselves."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

from berth_testkit.mirror import Mirror, Objects, mirrored
from berth_testkit.servers.etcd import ServerUnavailable
from berth_testkit.servers.kube import KubeCluster

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


class Sampler:
    """Every Deployment's available replicas on every cluster, as each change happens
    (``mirror.py``): per application, the fewest available over all clusters at any
    moment, however short."""

    def __init__(self, clusters: dict[str, KubeCluster]) -> None:
        self.clusters = clusters
        self.fewest: dict[str, int] = {}
        self.samples = 0  # states counted: each cluster's lists and each change after
        self._lock = threading.Lock()  # owns fewest, samples and _on
        self._on: dict[str, dict[str, int]] = {c: {} for c in clusters}  # cluster → name → available
        self._mirrors = [Mirror(c, kube, DEPLOYMENTS, self._count)
                         for c, kube in clusters.items()]

    def now(self) -> dict[str, dict[str, int]]:
        """Deployment name → cluster → available replicas (its status, as kubectl shows),
        read from each cluster now."""
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
        mirrored(self._mirrors)  # counting starts once every cluster was listed
        return self

    def __exit__(self, *exc: object) -> None:
        for m in self._mirrors:
            m.stop()

    def _count(self, cname: str, objects: Objects, changed: set[str]) -> None:
        """Cluster ``cname`` changed: count every application it touched at its new total."""
        with self._lock:
            self._on[cname] = {n: available(d) for n, d in objects.items()}
            for name in changed:
                total = sum(where.get(name, 0) for where in self._on.values())
                self.fewest[name] = min(self.fewest.get(name, total), total)
            self.samples += 1


def available(deployment: dict[str, Any]) -> int:
    """A Deployment's available replicas, as its status says (0: none said)."""
    return int((deployment.get("status") or {}).get("availableReplicas", 0))
