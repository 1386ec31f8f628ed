"""An in-memory cluster for the executor's unit tests: the ClusterClient protocol,
with a journal of what was done (shared with a status sink) to check the order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.controllers.propagator.kube import Kind, NotServed, Rejected, Unavailable
from berth.controllers.runtime import Retry
from berth.store.documents import ApplicationState, KubeObjectRef

Journal = list[tuple[str, ...]]

BUILT_IN = {("v1", "ConfigMap"): Kind("/api/v1", "configmaps", True),
            ("apps/v1", "Deployment"): Kind("/apis/apps/v1", "deployments", True),
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
                Kind("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", False)}


@dataclass
class FakeCluster:
    name: str
    journal: Journal
    kinds: dict[tuple[str, str], Kind] = field(default_factory=lambda: dict(BUILT_IN))
    objects: dict[KubeObjectRef, dict[str, Any]] = field(default_factory=dict)
    down: bool = False
    refuse: set[str] = field(default_factory=set)  # object names refused as invalid
    version: int = 100

    def _up(self) -> None:
        if self.down:
            raise Unavailable(f"cluster {self.name}: connection refused")

    def locate(self, body: dict[str, Any]) -> tuple[Kind, KubeObjectRef]:
        self._up()
        kind = self.kinds.get((body["apiVersion"], body["kind"]))
        if kind is None:
            raise NotServed(f"the cluster serves no kind {body['kind']}")
        ns = (body["metadata"].get("namespace") or "default") if kind.namespaced else None
        return kind, KubeObjectRef(body["apiVersion"], body["kind"], body["metadata"]["name"], ns)

    def apply(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> str:
        self._up()
        if ref.name in self.refuse:
            raise Rejected(f"{ref}: spec.replicas: Invalid value")
        self.version += 1
        self.objects[ref] = body
        if ref.kind == "CustomResourceDefinition":  # now the cluster serves the kind
            spec = body["spec"]
            self.kinds[(f"{spec['group']}/v1", spec["names"]["kind"])] = Kind(
                f"/apis/{spec['group']}/v1", spec["names"]["plural"], True)
        self.journal.append(("apply", self.name, ref.name))
        return str(self.version)

    def exists(self, ref: KubeObjectRef) -> bool:
        self._up()
        return ref in self.objects

    def delete(self, ref: KubeObjectRef) -> None:
        self._up()
        self.objects.pop(ref, None)
        self.journal.append(("delete", self.name, ref.name))


@dataclass
class Fleet:
    """The Clients protocol over fake clusters named "default/<name>"."""

    journal: Journal = field(default_factory=list)
    clusters: dict[str, FakeCluster] = field(default_factory=dict)

    def add(self, *names: str) -> Fleet:
        for name in names:
            self.clusters[f"default/{name}"] = FakeCluster(name, self.journal)
        return self

    def __getitem__(self, name: str) -> FakeCluster:
        return self.clusters[f"default/{name}"]

    def client(self, cid: str) -> FakeCluster | None:
        return self.clusters.get(cid)

    def unreadable(self, cid: str) -> bool:
        return False


@dataclass
class Sink:
    """A status key: what was written, in the shared journal too."""

    journal: Journal
    written: list[ApplicationState] = field(default_factory=list)
    fail: bool = False

    def write(self, state: ApplicationState) -> Retry | None:
        if self.fail:
            return Retry("changed meanwhile", after=0.1)
        if not self.written or self.written[-1] != state:
            self.written.append(state)
            self.journal.append(("status", state.state, ",".join(
                f"{c}:{'+'.join(o.name for o in a.objects)}"
                for c, a in sorted(state.applied.items()))))
        return None
