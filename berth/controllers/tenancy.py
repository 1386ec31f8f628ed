"""The namespaces' policies and the cluster sets, as the scheduler and the propagator
read them (both, each from its own informers: a process enforces a rule where it
reads, never trusting that another did).

Where a namespace's applications may be placed: the clusters of the namespace
itself, and those of the ClusterSets its NamespacePolicy binds (none without a
policy: berth as it always was). The scheduler places nowhere else; the
propagator applies nowhere else, and removes a copy from a cluster the namespace
may no longer use. What priority they may take is the scheduler's
(``scheduler/priorities.py``). docs/teams.md.

Policies are trusted only as they are read here: a tenant writes etcd directly,
and an administrator's key that holds what is not a policy stands for the
narrowest one (its own clusters, no class, priority 0, a quota of nothing) until
it is fixed — never for none.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from berth.controllers.runtime import Event, Informer
from berth.store import keys
from berth.store.documents.tenancy import (
    ClusterSet,
    ClusterSetSpec,
    Limit,
    NamespacePolicy,
    NamespacePolicySpec,
)

# What an unreadable policy stands for: nothing beyond the namespace's own.
NARROWEST = NamespacePolicySpec(cluster_sets=[], priority_classes=[], max_priority=0,
                                quota={"cpu": 0, "memory": 0, "pods": 0})


class Named(Protocol):
    """A cluster's metadata, as far as a policy reads it."""

    @property
    def namespace(self) -> str | None: ...
    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...


@dataclass(frozen=True, slots=True)
class Policy:
    """A namespace's policy as the scheduler and the propagator apply it."""

    namespace: str
    spec: NamespacePolicySpec
    sets: tuple[ClusterSetSpec, ...]  # the bound sets that exist
    problem: str = ""  # why it stands for the narrowest (its key held no policy)
    limit: Limit | None = None  # its quota, read once (None: none)
    # each bound set's quota that exists, read once: (name, quota, the set)
    set_limits: tuple[tuple[str, Limit, ClusterSetSpec], ...] = ()

    def admits(self, cid: str, labels: Mapping[str, str]) -> bool:
        """Whether the namespace may place on cluster ``cid`` with ``labels``."""
        return (cid.partition("/")[0] == self.namespace
                or any(s.holds(cid, labels) for s in self.sets))


@dataclass(frozen=True, slots=True)
class _Table:
    version: int
    policies: dict[str, Policy] = field(default_factory=dict)


class Tenancy:
    """The NamespacePolicies and ClusterSets of two informers, resolved per namespace;
    for any thread."""

    def __init__(self, policies: Informer[NamespacePolicy],
                 sets: Informer[ClusterSet]) -> None:
        self._policies = policies
        self._sets = sets
        self.informers = (policies, sets)
        self._lock = threading.Lock()
        self._version = 0
        self._unreadable: set[str] = set()  # namespaces whose policy key holds garbage
        self._table = _Table(-1)
        # Called with the key of each change — a policy or a set written, deleted, or
        # garbage there — and the namespace a policy governs (None: a set's), after it
        # counts (on the informer's thread).
        self.listeners: list[Callable[[keys.Key, str | None], None]] = []
        for inf in (policies, sets):
            inf.add_handler(self._changed)
            inf.add_invalid_handler(self._invalid)
            inf.add_cleared_handler(self._cleared)

    def _namespace_of(self, key: keys.Key) -> str | None:
        """The namespace a policy's key governs; None for a set's (it may bind to any)."""
        prefix = self._policies.prefix
        return key[len(prefix):] if key.startswith(prefix) else None

    def _changed(self, event: Event[Any]) -> None:
        self._count(event.key, readable=True)

    def _invalid(self, key: keys.Key, revision: int) -> None:
        self._count(key, readable=False)

    def _cleared(self, key: keys.Key, revision: int) -> None:
        self._count(key, readable=True)

    def _count(self, key: keys.Key, *, readable: bool) -> None:
        namespace = self._namespace_of(key)
        with self._lock:
            if namespace is not None and readable:
                self._unreadable.discard(namespace)
            elif namespace is not None:
                self._unreadable.add(namespace)
            self._version += 1
        for listener in self.listeners:
            listener(key, namespace)

    def _current(self) -> _Table:
        table = self._table
        if table.version == self._version:
            return table
        with self._lock:
            version, unreadable = self._version, set(self._unreadable)
        sets = {item.obj.metadata.name: item.obj.spec for item in self._sets.items()}
        policies: dict[str, Policy] = {}
        for item in self._policies.items():
            spec = item.obj.spec
            ns = item.obj.metadata.name
            policies[ns] = Policy(ns, spec, tuple(sets[n] for n in spec.cluster_sets
                                                  if n in sets), limit=spec.limit,
                                  set_limits=tuple((n, limit, sets[n]) for n, limit
                                                   in sorted(spec.set_limits.items())
                                                   if n in sets))
        for ns in unreadable:
            policies[ns] = Policy(ns, NARROWEST, (), problem=(
                f"the policy of namespace {ns} "
                f"({self._policies.prefix}{ns}) is not a NamespacePolicy: the narrowest "
                "stands for it"), limit=NARROWEST.limit)
        table = _Table(version, policies)
        self._table = table  # a change meanwhile bumped the version: read again next time
        return table

    def policy(self, namespace: str | None) -> Policy | None:
        """The policy of ``namespace``; None where it has none."""
        return self._current().policies.get(namespace) if namespace else None

    def may_depend(self, namespace: str | None, on: str | None) -> bool:
        """Whether applications of ``namespace`` may depend on those of ``on``: their own,
        or another whose policy names ``namespace`` among its ``dependents``."""
        if namespace == on:
            return True
        policy = self.policy(on)
        return policy is not None and namespace in policy.spec.dependents

    def admitter(self, namespace: str | None) -> Callable[[Named], bool]:
        """Whether applications of ``namespace`` may be placed on a cluster, by its
        metadata."""
        policy = self.policy(namespace)
        if policy is None:
            return lambda meta: meta.namespace == namespace
        return lambda meta: policy.admits(f"{meta.namespace}/{meta.name}", meta.labels)

    def admits(self, namespace: str | None, cid: str, meta: Named | None) -> bool:
        """Whether applications of ``namespace`` may run on cluster ``cid`` (``meta``: its
        metadata; None: it no longer exists, which is not this rule's to judge)."""
        if cid.partition("/")[0] == namespace or meta is None:
            return True
        return self.admitter(namespace)(meta)


__all__ = ["NARROWEST", "Policy", "Tenancy"]
