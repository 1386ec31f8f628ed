"""What one credential of the console may see and do (docs/console.md, "Teams").

The console's own credential (its token, or a client certificate) sees the
whole fleet. A team's token sees its namespaces alone: their applications,
with their Bindings, statuses, moves and metrics; the clusters of those
namespaces and of the ClusterSets their policies bind (as the scheduler admits
them, :mod:`berth.controllers.tenancy`), with no other namespace's
applications in what a cluster reports; global metrics. Its actions (approve,
pause, resume) reach its namespaces' applications alone. Every page is built
from a snapshot narrowed here, once per request, so no page can show what its
credential may not see by forgetting to filter.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import msgspec

from berth.console import views as V
from berth.console.fleet import Snapshot
from berth.store import keys

Admits = Callable[[str, V.Meta], bool]  # whether namespace may use a cluster, by its metadata


@dataclass(frozen=True, slots=True)
class Scope:
    """The namespaces a request may see (None: every one) and whether it may act."""

    namespaces: frozenset[str] | None
    can_act: bool

    def sees(self, namespace: str | None) -> bool:
        return self.namespaces is None or (namespace or "") in self.namespaces

    def narrow(self, snap: Snapshot, admits: Admits) -> Snapshot:
        """``snap`` as this scope may see it."""
        mine = self.namespaces
        if mine is None:
            return snap
        clusters = [i for i in snap.clusters if any(admits(ns, i.obj.metadata) for ns in mine)]
        shown = {f"{i.obj.metadata.namespace}/{i.obj.metadata.name}" for i in clusters}
        metric_prefixes = (keys.resource_prefix("GlobalMetric"),
                           *(keys.resource_prefix("Metric", ns) for ns in mine))
        value_prefixes = (keys.metric_value_prefix(),
                          *(keys.metric_value_prefix(ns) for ns in mine))

        def value_seen(key: str) -> bool:
            return key.startswith(value_prefixes)

        def own(key: str) -> bool:  # a "<ns>/<name>" of an application
            return key.split("/", 1)[0] in mine

        return replace(
            snap, clusters=clusters,
            cluster_status={k: self._status(v, own) for k, v in snap.cluster_status.items()
                            if k in shown},
            apps=[i for i in snap.apps if (i.obj.meta.namespace or "") in mine],
            bindings={k: v for k, v in snap.bindings.items() if own(k)},
            app_status={k: v for k, v in snap.app_status.items() if own(k)},
            metrics={k: v for k, v in snap.metrics.items() if k.startswith(metric_prefixes)},
            values={k: v for k, v in snap.values.items() if value_seen(k)},
            history={k: v for k, v in snap.history.items() if value_seen(k)},
            moves=[m for m in snap.moves if own(m.application)])

    @staticmethod
    def _status(view: V.ClusterStatusView, own: Callable[[str], bool]) -> V.ClusterStatusView:
        """A cluster's status without what other namespaces' applications run there."""
        cap = view.status.capacity
        if cap is None or all(own(app) for app in cap.placed):
            return view
        placed = {app: n for app, n in cap.placed.items() if own(app)}
        return msgspec.structs.replace(view, status=msgspec.structs.replace(
            view.status, capacity=msgspec.structs.replace(cap, placed=placed)))


EVERYTHING = Scope(None, can_act=False)

__all__ = ["EVERYTHING", "Admits", "Scope"]
