"""An in-memory cluster for the executor's unit tests: the ClusterClient protocol,
with a journal of what was done (shared with a status sink) to check the order."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import msgspec

from berth.controllers.propagator.health import HEALTHY, JOB_DONE, Health
from berth.controllers.propagator.kube import (
    OWNER,
    Exists,
    Forbidden,
    Kind,
    KubeObject,
    NotServed,
    ObjectMeta,
    Rejected,
    Unavailable,
)
from berth.controllers.runtime import Retry
from berth.store.documents import ApplicationState, HealthRule, KubeObjectRef
from berth.store.documents.tenancy import Identity

Journal = list[tuple[str, ...]]

BUILT_IN = {("v1", "ConfigMap"): Kind("/api/v1", "configmaps", True),
            ("apps/v1", "Deployment"): Kind("/apis/apps/v1", "deployments", True),
            ("batch/v1", "Job"): Kind("/apis/batch/v1", "jobs", True),
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
    # object names the cluster's RBAC forbids each impersonated user ("": berth's own)
    forbid: dict[str, set[str]] = field(default_factory=dict)
    acted: list[tuple[str, str, str]] = field(default_factory=list)  # (user, verb, name)
    version: int = 100
    health: Health = field(default_factory=lambda: Health(HEALTHY))  # every object judged so
    judged: dict[str, Health] = field(default_factory=dict)  # but these (by name)
    held: set[str] = field(default_factory=set)  # names a finalizer keeps after a delete
    stuck: set[str] = field(default_factory=set)  # names whose delete fails (no answer)
    unlisted: set[str] = field(default_factory=set)  # kinds discovery does not list yet
    jobs: Health = JOB_DONE  # but Jobs (batch/v1): complete
    uids: dict[KubeObjectRef, str] = field(default_factory=dict)
    uncached: set[KubeObjectRef] = field(default_factory=set)  # not in the watch cache yet
    calls: list[tuple[str, str]] = field(default_factory=list)  # ("create"/"apply", name)
    _lock: threading.Lock = field(default_factory=threading.Lock)  # a creation is atomic

    def acting_as(self, identity: Identity | None) -> FakeCluster | Acting:
        """This cluster's calls made as ``identity`` (None: as berth)."""
        return self if identity is None else Acting(self, identity.username)

    def _up(self) -> None:
        if self.down:
            raise Unavailable(f"cluster {self.name}: connection refused")

    def locate(self, body: dict[str, Any]) -> tuple[Kind, KubeObjectRef]:
        self._up()
        kind = self.kinds.get((body["apiVersion"], body["kind"]))
        if kind is None or body["kind"] in self.unlisted:
            raise NotServed(f"the cluster serves no kind {body['kind']}")
        ns = (body["metadata"].get("namespace") or "default") if kind.namespaced else None
        return kind, KubeObjectRef(body["apiVersion"], body["kind"], body["metadata"]["name"], ns)

    def create(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> KubeObject:
        self._up()
        with self._lock:
            if ref in self.objects:
                raise Exists(f"{ref}: HTTP 409: configmaps {ref.name!r} already exists")
            return self._write("create", kind, ref, body)

    def apply(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> KubeObject:
        self._up()
        with self._lock:
            return self._write("apply", kind, ref, body)

    def _write(self, how: str, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]
               ) -> KubeObject:
        if ref.name in self.refuse:
            raise Rejected(f"{ref}: spec.replicas: Invalid value")
        self.calls.append((how, ref.name))
        self.uncached.discard(ref)
        self.version += 1
        self.objects[ref] = body
        self.uids.setdefault(ref, f"uid-{self.version}")
        if ref.kind == "CustomResourceDefinition":  # now the cluster serves the kind
            spec = body["spec"]
            self.kinds[(f"{spec['group']}/v1", spec["names"]["kind"])] = Kind(
                f"/apis/{spec['group']}/v1", spec["names"]["plural"], True)
        self.journal.append(("apply", self.name, ref.name))
        stored = self.get(ref)
        assert stored is not None
        return stored

    def get(self, ref: KubeObjectRef, *, cached: bool = False) -> KubeObject | None:
        self._up()
        body = self.objects.get(ref)
        if body is None or (cached and ref in self.uncached):
            return None
        meta = body.get("metadata") or {}
        return KubeObject(ref.api_version, ref.kind, ObjectMeta(
            ref.name, ref.namespace, self.uids.get(ref, ""), str(self.version), 0,
            dict(meta.get("annotations") or {})), msgspec.Raw(b"{}"), msgspec.Raw(b"{}"))

    def exists(self, ref: KubeObjectRef) -> bool:
        return self.get(ref) is not None

    def delete(self, ref: KubeObjectRef, *, propagation: str = "Background",
               uid: str = "") -> None:
        self._up()
        if uid and self.uids.get(ref) not in (None, uid):
            return
        if ref.name in self.stuck:
            raise Unavailable(f"cluster {self.name}: DELETE {ref.name}: timed out")
        self.journal.append(("delete", self.name, ref.name))
        if ref.name in self.held:  # marked deleted; there until its finalizer is done
            return
        self.objects.pop(ref, None)
        self.uids.pop(ref, None)

    def place(self, ref: KubeObjectRef, owner: str, *, cached: bool = True) -> None:
        """An object someone else made (``owner``: the application of berth's its
        annotation names; "" for none: someone outside berth); ``cached=False``: a
        moment ago, so that the API server's watch cache does not show it yet."""
        if not cached:
            self.uncached.add(ref)
        meta: dict[str, Any] = {"name": ref.name, "annotations": {OWNER: owner} if owner else {}}
        self.objects[ref] = {"apiVersion": ref.api_version, "kind": ref.kind, "metadata": meta}
        self.version += 1
        self.uids[ref] = f"uid-{self.version}"


@dataclass
class Acting:
    """A fake cluster's calls made as one user: those its ``forbid`` names are refused
    as the cluster's RBAC refuses them (HTTP 403)."""

    cluster: FakeCluster
    user: str  # "": berth's own credential

    def _may(self, verb: str, ref: KubeObjectRef) -> None:
        if ref.name in self.cluster.forbid.get(self.user, set()):
            raise Forbidden(f"{ref}: HTTP 403: User {self.user!r} cannot {verb} it")

    def locate(self, body: dict[str, Any]) -> tuple[Kind, KubeObjectRef]:
        return self.cluster.locate(body)

    def create(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> KubeObject:
        self._may("create", ref)
        self.cluster.acted.append((self.user, "create", ref.name))
        return self.cluster.create(kind, ref, body)

    def apply(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> KubeObject:
        self._may("patch", ref)
        self.cluster.acted.append((self.user, "patch", ref.name))
        return self.cluster.apply(kind, ref, body)

    def get(self, ref: KubeObjectRef, *, cached: bool = False) -> KubeObject | None:
        self._may("get", ref)
        return self.cluster.get(ref, cached=cached)

    def exists(self, ref: KubeObjectRef) -> bool:
        return self.get(ref) is not None

    def delete(self, ref: KubeObjectRef, *, propagation: str = "Background",
               uid: str = "") -> None:
        self._may("delete", ref)
        self.cluster.acted.append((self.user, "delete", ref.name))
        self.cluster.delete(ref, propagation=propagation, uid=uid)


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

    def client(self, cid: str, identity: Identity | None = None
               ) -> FakeCluster | Acting | None:
        cluster = self.clusters.get(cid)
        return cluster.acting_as(identity) if cluster is not None else None

    def unreadable(self, cid: str) -> bool:
        return False

    def judge(self, cid: str, ref: KubeObjectRef, obj: KubeObject,
              rules: tuple[HealthRule, ...]) -> Health:
        cluster = self.clusters[cid]
        if ref.name in cluster.judged:
            return cluster.judged[ref.name]
        return cluster.jobs if (ref.api_version, ref.kind) == ("batch/v1", "Job") else (
            cluster.health)

    def seen_owner(self, cid: str, ref: KubeObjectRef) -> str | None:
        return None


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
            self.journal.append(("status", state.state or "", ",".join(
                f"{c}:{'+'.join(o.name for o in a.objects)}"
                for c, a in sorted(state.applied.items()))))
        return None
