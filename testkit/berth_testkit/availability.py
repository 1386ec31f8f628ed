"""How much of each application is available, read from the clusters themselves."""

from __future__ import annotations

import threading
import time
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
    confirming read, and the poll is that read (docs/development.md, "Samplers").

    A sample in which a cluster could not be read (after a few tries) is incomplete:
    what that cluster serves is unknown, not none, so it counts in ``incomplete`` and
    not in ``fewest`` (a busy API server that answered late once counted an
    application served on it as down). ``low`` says, per application, the sample its
    fewest was reached at: seconds since the start and what each cluster showed."""

    def __init__(self, clusters: dict[str, KubeCluster]) -> None:
        self.clusters = clusters
        self.fewest: dict[str, int] = {}
        self.low: dict[str, str] = {}
        self.samples = 0
        self.incomplete = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now(self) -> dict[str, dict[str, int]]:
        """Deployment name → cluster → available replicas (its status, as kubectl shows);
        a cluster that cannot be read shows nothing."""
        return self._read()[0]

    def _read(self) -> tuple[dict[str, dict[str, int]], list[str]]:
        """What :meth:`now` says, and the clusters that could not be read (each tried
        three times)."""
        seen: dict[str, dict[str, int]] = defaultdict(dict)
        unread: list[str] = []
        for cname, kube in self.clusters.items():
            for attempt in range(3):
                try:
                    listed = kube.request("GET", DEPLOYMENTS)
                    break
                except (OSError, ServerUnavailable):
                    if attempt < 2:
                        time.sleep(0.1)
            else:
                unread.append(cname)
                continue
            for d in listed.get("items", []):
                seen[d["metadata"]["name"]][cname] = available(d)
        return seen, unread

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.is_set():
            seen, unread = self._read()
            self.samples += 1
            if unread:
                self.incomplete += 1
            else:
                at = time.monotonic() - start
                for name, where in seen.items():
                    total = sum(where.values())
                    if total < self.fewest.get(name, total + 1):
                        self.fewest[name] = total
                        self.low[name] = f"{total} at {at:.1f} s (" + ", ".join(
                            f"{c} {n}" for c, n in sorted(where.items())) + ")"
            self._stop.wait(0.1)


def available(deployment: dict[str, Any]) -> int:
    """A Deployment's available replicas, as its status says (0: none said)."""
    return int((deployment.get("status") or {}).get("availableReplicas", 0))
