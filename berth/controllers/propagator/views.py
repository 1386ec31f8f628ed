"""The fields of users' documents the propagator reads; msgspec skips the rest."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from berth.store import keys
from berth.store.documents import DeployedBy, HealthRule
from berth.store.documents.pace import PaceOverride
from berth.store.documents.rollouts import RolloutPolicy


def cluster_id(namespace: str | None, name: str) -> str:
    """A cluster's id in statuses and logs: ``<namespace>/<name>``."""
    return f"{namespace or ''}/{name}"


def cluster_key(cid: str) -> keys.Key:
    """The key of the Cluster ``<namespace>/<name>``."""
    namespace, _, name = cid.partition("/")
    return keys.resource_key("Cluster", name, namespace or None)


class _Meta(msgspec.Struct):
    name: str
    namespace: str | None = None
    labels: dict[str, str] = {}  # what overrides select by
    generation: int = 0
    deleted: Any = None
    finalizers: list[str] = []


class _ClusterSpec(msgspec.Struct):
    kubeconfig: dict[str, Any] | None = None
    mode: str = "Push"  # Pull: its agent carries out its work (pull.py)


class ClusterView(msgspec.Struct):
    metadata: _Meta
    spec: _ClusterSpec = msgspec.field(default_factory=_ClusterSpec)

    @property
    def pull(self) -> bool:
        """Whether only its agent reaches it (``spec.mode: Pull``)."""
        return self.spec.mode == "Pull"

    @property
    def servable(self) -> bool:
        """Whether a replica can serve it: through its kubeconfig, or its agent's work."""
        return self.metadata.deleted is None and (self.pull or bool(self.spec.kubeconfig))


class _Dependency(msgspec.Struct):
    name: str
    when: Literal["Available", "Applied"] = "Available"
    namespace: str | None = None


class _AppSpec(msgspec.Struct):
    manifest: list[Any] = []
    health: list[HealthRule] = []
    conflictResolution: Literal["Abort", "Overwrite"] = "Abort"
    deletionPropagation: Literal["Background", "Foreground"] = "Background"
    rollout: RolloutPolicy | None = None
    pace: PaceOverride | None = None
    dependsOn: list[_Dependency] = []
    deployedBy: DeployedBy | None = None


class AppView(msgspec.Struct):
    metadata: _Meta
    spec: _AppSpec = msgspec.field(default_factory=_AppSpec)


def dependencies(view: AppView) -> tuple[keys.Key, ...]:
    """The keys of the applications ``view`` depends on."""
    ns = view.metadata.namespace or ""
    return tuple(keys.resource_key("Application", d.name, d.namespace or ns)
                 for d in view.spec.dependsOn)
