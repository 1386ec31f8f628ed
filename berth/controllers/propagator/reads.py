"""The propagator's read view: :class:`~controllers.propagator.facts.Reads` over the
applier's informers, the book of what the clusters showed, the pull clusters' reports
and this replica's shard.

Every read here is of memory, but three: the application's key when its informer
skipped it (does it hold garbage?), a Cluster as etcd has it now (a target joining
a staged rollout), and an earlier generation's manifest from the history (no
informer keeps ten manifests per application).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from berth.controllers.propagator.concern import Judge
from berth.controllers.propagator.credentials import AppSecrets
from berth.controllers.propagator.health import UNKNOWN, Copy, Health
from berth.controllers.propagator.kube import Unavailable
from berth.controllers.propagator.manifests import Manifests
from berth.controllers.propagator.objects import Book
from berth.controllers.propagator.pull import PullClusters
from berth.controllers.propagator.shard import Shard
from berth.controllers.propagator.views import AppView, ClusterView, cluster_key
from berth.controllers.runtime import Informer
from berth.controllers.runtime.transit import Transit
from berth.controllers.tenancy import Tenancy
from berth.store import Invalid, Store, StoreError, decode, keys
from berth.store.dependencies import Dependencies
from berth.store.documents import (
    ApplicationState,
    ApplicationStatus,
    Binding,
    ClusterApplied,
    ClusterStatus,
    HealthRule,
    Reachability,
)
from berth.store.documents.export import ToolVerdict, Verdicts
from berth.store.documents.overrides import GlobalOverride, Override
from berth.store.documents.pace import FLEET, Pace, PaceSpec
from berth.store.documents.rollouts import RolloutControl
from berth.store.documents.tenancy import Identity, NamespacePolicySpec


@dataclass(frozen=True)
class Informed:
    """:class:`~controllers.propagator.facts.Reads` as the applier's informers hold it."""

    store: Store
    bindings: Informer[Binding]
    clusters: Informer[ClusterView]
    cluster_statuses: Informer[ClusterStatus]  # the observer's: ONLINE or not
    namespaced_overrides: Informer[Override]
    global_overrides: Informer[GlobalOverride]
    controls: Informer[RolloutControl]
    paces: Informer[Pace]
    transit: Transit
    secrets: AppSecrets
    manifests: Manifests
    pull: PullClusters
    book: Book
    seen: Judge  # a push cluster's copy as the book shows it now
    shard: Shard | None  # None: this replica serves every cluster
    claimable: Callable[[], list[str]]  # the clusters some replica can serve
    tenancy: Tenancy  # where each namespace may place (docs/teams.md)
    apps: Informer[AppView]
    statuses: Informer[ApplicationStatus]
    dependencies: Dependencies  # who depends on whom (the applications' watch feeds it)
    verdicts_seen: Informer[Verdicts]  # the exporter's: Argo CD's word on its copies

    def binding(self, namespace: str, name: str) -> Binding | None:
        return self.bindings.get(keys.binding_key("Application", namespace, name))

    def cluster(self, cid: str) -> ClusterView | None:
        return self.clusters.get(cluster_key(cid))

    def cluster_now(self, cid: str) -> ClusterView | None:
        key = cluster_key(cid)
        try:
            kv = self.store.get(key)
            return decode(kv.value, ClusterView, key) if kv is not None else None
        except (StoreError, Invalid):
            return None

    def unseen(self, cid: str) -> str:
        st = self._status(cid)
        if st is None or st.status.state in (Reachability.ONLINE, None):
            return ""
        return st.status.state + (f" ({st.status.reason})" if st.status.reason else "")

    def returned(self, cid: str) -> datetime | None:
        """When the cluster last became ONLINE: came back, or was first seen so (a copy's
        time to become available counts from then at the earliest)."""
        st = self._status(cid)
        return (st.status.returned or st.status.joined) if st is not None else None

    def _status(self, cid: str) -> ClusterStatus | None:
        ns, _, name = cid.partition("/")
        return self.cluster_statuses.get(keys.status_key("Cluster", ns, name))

    def overrides(self) -> list[Override]:
        every: list[Override] = [i.obj for i in self.global_overrides.items()]
        return every + [i.obj for i in self.namespaced_overrides.items()]

    def control(self, namespace: str, name: str) -> RolloutControl | None:
        return self.controls.get(keys.rollout_key(namespace, name))

    def pace(self) -> PaceSpec | None:
        fleet = self.paces.get(keys.resource_key("Pace", FLEET))
        return fleet.spec if fleet is not None else None

    def in_transit(self) -> int:
        return self.transit.count()

    def manifest(self, namespace: str, name: str, generation: int, manifest: list[Any]
                 ) -> list[Any]:
        return self.secrets.manifest(namespace, name, generation, manifest)

    def kept(self, namespace: str, name: str, generation: int) -> list[Any] | None:
        return self.manifests.of(namespace, name, generation)

    def app_unreadable(self, key: keys.Key) -> bool:
        return unreadable(self.store, key)

    def copy(self, cid: str, owner: str, have: ClusterApplied, rules: tuple[HealthRule, ...],
             now: datetime) -> Copy:
        if not self.is_pull(cid):
            return self.seen(cid, owner, have, rules, now)
        namespace, _, name = owner.partition("/")
        return self.pull.copy(cid, namespace, name, have) or Copy(
            Health(UNKNOWN, "not reported by its agent yet"))

    def is_pull(self, cid: str) -> bool:
        view = self.clusters.get(cluster_key(cid))
        return view is not None and view.pull

    def admits(self, namespace: str, cid: str) -> bool:
        view = self.clusters.get(cluster_key(cid))
        return self.tenancy.admits(namespace, cid, view.metadata if view else None)

    def limits(self, namespace: str) -> NamespacePolicySpec | None:
        policy = self.tenancy.policy(namespace)
        if policy is None or (policy.spec.kinds is None
                              and policy.spec.target_namespaces is None):
            return None
        return policy.spec

    def identity(self, namespace: str) -> Identity | None:
        policy = self.tenancy.policy(namespace)
        return policy.spec.identity if policy is not None else None

    def resend(self, cid: str, namespace: str, name: str) -> bool:
        return self.pull.resend(cid, namespace, name)

    def unobserved(self, cid: str, have: ClusterApplied | None) -> bool:
        return have is not None and have.generation > 0 and any(
            ref not in have.done and self.book.get(cid, ref) is None for ref in have.objects)

    def owned(self, key: str, cids: set[str]) -> frozenset[str] | None:
        """A cluster nobody can serve (no such Cluster, no kubeconfig) goes with the
        application's own share: its home replica reports it."""
        if self.shard is None:
            return None
        claimable = set(self.claimable())
        home = self.shard.mine(key)
        return frozenset(c for c in cids if self.shard.owns(c) or (home and c not in claimable))

    def home(self, key: str) -> bool:
        return self.shard is None or self.shard.mine(key)

    def application(self, namespace: str, name: str) -> AppView | None:
        return self.apps.get(keys.resource_key("Application", name, namespace))

    def recorded(self, namespace: str, name: str) -> ApplicationState | None:
        st = self.statuses.get(keys.status_key("Application", namespace, name))
        return st.status if st is not None else None

    def dependents(self, key: keys.Key) -> set[keys.Key]:
        return self.dependencies.of(key)

    def cycle(self, key: keys.Key) -> list[str] | None:
        return self.dependencies.cycle(key)

    def may_depend(self, namespace: str, on: str) -> bool:
        return self.tenancy.may_depend(namespace, on)

    def verdicts(self, namespace: str, name: str, export: str
                 ) -> Mapping[str, ToolVerdict] | None:
        doc = self.verdicts_seen.get(keys.verdicts_key(namespace, name))
        return doc.status.clusters if doc is not None and doc.status.export == export \
            else None


def unreadable(store: Store, key: keys.Key) -> bool:
    """Whether ``key`` holds a value an informer skipped (it did not decode);
    Unavailable when etcd does not answer."""
    try:
        return store.get(key) is not None
    except StoreError as exc:
        raise Unavailable(f"{key}: {exc}") from exc
