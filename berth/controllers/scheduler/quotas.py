"""What a namespace's quotas leave its next decision (docs/teams.md "Quota").

The namespace's use of the whole fleet is kept by :class:`Decisions` as it
changes; the use of a cluster set its policy gives a quota of (``setQuotas``) is
summed when asked, over the namespace's placements, with the set's membership
as the clusters' labels say now.
"""

from __future__ import annotations

from collections.abc import Callable

from berth.controllers.runtime import Informer
from berth.controllers.scheduler.decisions import Decisions
from berth.controllers.scheduler.framework import Quota, SetQuota, Subject
from berth.controllers.scheduler.views import ClusterView
from berth.controllers.tenancy import Tenancy
from berth.store import keys
from berth.store.documents.resources import NOTHING
from berth.store.documents.tenancy import ClusterSetSpec


def quota_of(subject: Subject, tenancy: Tenancy, decisions: Decisions,
             clusters: Informer[ClusterView]) -> Quota | None:
    """The quotas of ``subject``'s namespace and what its other applications use of
    them (None: it has none)."""
    ns = subject.ref.namespace
    policy = tenancy.policy(ns) if subject.ref.kind == "Application" else None
    if ns is None or policy is None or (policy.limit is None and not policy.set_limits):
        return None
    sets = []
    for name, limit, spec in policy.set_limits:
        holds = in_set(spec, clusters)
        sets.append(SetQuota(name, limit, decisions.used_in(ns, holds,
                                                            but=subject.binding_key), holds))
    used = decisions.used(ns, but=subject.binding_key) if policy.limit else NOTHING
    return Quota(ns, policy.limit, used, tuple(sets))


def in_set(spec: ClusterSetSpec, clusters: Informer[ClusterView]) -> Callable[[str], bool]:
    """Whether a candidate (by key) is a cluster of the set ``spec``, by its labels now;
    remembered per key for one quota's reading."""
    seen: dict[str, bool] = {}

    def holds(key: str) -> bool:
        found = seen.get(key)
        if found is None:
            kind, _, rest = key.partition("/")
            ns, _, name = rest.rpartition("/")
            view = clusters.get(keys.resource_key("Cluster", name, ns)) if (
                kind == "Cluster" and ns) else None
            found = seen[key] = view is not None and spec.holds(f"{ns}/{name}",
                                                                view.metadata.labels)
        return found
    return holds
