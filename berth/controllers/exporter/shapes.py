"""The objects an Export writes, built from frozen facts: nothing here reads or writes.

Every object carries the labels ``app.kubernetes.io/managed-by: berth`` and
``berth.io/export: <export>`` (what the exporter lists as its own) and, for an
application's, the annotation ``berth.io/application: <namespace>/<name>``.
Names are Kubernetes names made from berth's (:func:`kube_name`): lower case,
``_`` as ``-``, and a short digest of the original when that changed it, it is
too long or it already ends as a digest does, so two berth names never share one.
A cluster's exported name — its ClusterProfile's, the ``clusterName`` of every
decision, the name Argo CD must know it by — is made by :func:`cluster_name`
alone.

Per application (``<namespace>.<name>`` as its base name):

- SIG PlacementDecision slices ``<base>-<i>`` of at most 100 decisions, labelled
  with one ``multicluster.x-k8s.io/decision-key`` and their
  ``multicluster.x-k8s.io/decision-index`` (0, 1, ...), and the application as
  ``multicluster.x-k8s.io/placement-key``; each decision names the
  ClusterProfile of its cluster;
- OCM PlacementDecisions ``<base>-decision-<i+1>`` (OCM's own naming), labelled
  ``cluster.open-cluster-management.io/placement: <base>``, their decisions in
  ``status.decisions`` as ``{clusterName, reason}``: what Argo CD reads.

Decisions are ordered by cluster name, so slices are stable; an application with no
decision yet still has its first slice, empty (a consumer tells "nothing chosen"
from "not exported").
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

MANAGED_BY = "app.kubernetes.io/managed-by"
EXPORT_LABEL = "berth.io/export"
APPLICATION_ANNOTATION = "berth.io/application"
CLUSTER_ANNOTATION = "berth.io/cluster"
TERM_ANNOTATION = "berth.io/term"  # the exporter's term that wrote it (fencing, not compared)

SIG_GROUP = "multicluster.x-k8s.io"
SIG_VERSION = f"{SIG_GROUP}/v1alpha1"
DECISION_KEY = f"{SIG_GROUP}/decision-key"
DECISION_INDEX = f"{SIG_GROUP}/decision-index"
PLACEMENT_KEY = f"{SIG_GROUP}/placement-key"
CLUSTER_MANAGER_LABEL = "x-k8s.io/cluster-manager"
OCM_GROUP = "cluster.open-cluster-management.io"
OCM_VERSION = f"{OCM_GROUP}/v1beta1"
OCM_PLACEMENT = f"{OCM_GROUP}/placement"
SCHEDULER_NAME = "berth"

PER_SLICE = 100  # decisions per object: both APIs' limit
REASON_LENGTH = 300  # a decision's reason, at most (an explanation in one line)

_NAME_OK = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
_DIGESTED = re.compile(r".*-[0-9a-f]{8}")  # what kube_name's made names look like
DEFAULT_NAMESPACE = "default"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def kube_name(text: str, limit: int = 63) -> str:
    """A Kubernetes name (and label value) for ``text``: itself when it is one (and does
    not end as a made one does), else lower case with ``_`` as ``-``, cut to fit, and
    ``-<digest of text>``. Two texts meet in one name only if their digests do."""
    if len(text) <= limit and _NAME_OK.fullmatch(text) and not _DIGESTED.fullmatch(text):
        return text
    clean = re.sub(r"[^a-z0-9.-]", "-", text.lower()).strip("-.") or "x"
    return f"{clean[:limit - 9].rstrip('-.')}-{_digest(text)}"


def cluster_name(cid: str) -> str:
    """The exported name of berth's cluster ``cid`` (``<namespace>/<name>``): its name,
    for a cluster of the namespace ``default`` whose name has no dot; ``<namespace>.
    <name>`` for any other (a namespace has no dot, so the two forms never meet); made
    a Kubernetes name (:func:`kube_name`)."""
    namespace, _, name = cid.partition("/")
    plain = namespace == DEFAULT_NAMESPACE and "." not in name
    return kube_name(name if plain else f"{namespace}.{name}")


class Role(StrEnum):
    """Which of an application's copies a decision names: during a move both."""

    CURRENT = "current"  # chosen, and its copy is (or was) available there
    ARRIVING = "arriving"  # chosen; its copy is not available there yet
    LEAVING = "leaving"  # no longer chosen; its copy goes once the new one is available


@dataclass(frozen=True, slots=True)
class Decision:
    cluster: str  # the cluster's exported name (its ClusterProfile's)
    role: Role
    reason: str  # berth's explanation, one line

    @property
    def text(self) -> str:
        return f"{self.role.value}: {self.reason}"[:REASON_LENGTH]


@dataclass(frozen=True, slots=True)
class Placement:
    """What an application's decisions are, frozen."""

    app: str  # <namespace>/<name>
    decisions: tuple[Decision, ...]
    # clusters berth chose (or that hold a copy) with no exported name: never named as
    # another, said in the Export's status instead
    unexported: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Property:
    name: str
    value: str
    observed: datetime | None = None


@dataclass(frozen=True, slots=True)
class Access:
    """An access provider a cluster is reached through (KEP-4322's ``accessProviders``):
    its name, as the consumers' provider file knows it, and where the cluster is."""

    name: str
    server: str
    ca: str = ""  # base64 PEM, as certificate-authority-data


@dataclass(frozen=True, slots=True)
class Profile:
    """What a berth Cluster is, for its ClusterProfile."""

    cluster: str  # <namespace>/<name>
    name: str  # its exported name
    healthy: str  # "True", "False", "Unknown"
    reason: str  # OCM-style: a word
    message: str
    version: str = ""
    properties: tuple[Property, ...] = ()
    access: tuple[Access, ...] = ()


@dataclass(frozen=True, slots=True, order=True)
class Ref:
    """Where an object lives in the export's API (its namespace is the export's)."""

    api_version: str
    plural: str
    name: str


@dataclass(slots=True)
class Wanted:
    """One object the export is to hold: its body without status, and its status
    (None: the kind has none, or it is part of the body)."""

    ref: Ref
    kind: str
    body: dict[str, Any]  # metadata (name, labels, annotations) and the top-level fields
    status: dict[str, Any] | None = None
    source: str = ""  # what it is made from: "app:<ns>/<name>", "cluster:<ns>/<name>", "argocd"
    lag_from: datetime | None = field(default=None, compare=False)


def _time(at: datetime) -> str:
    """A timestamp as the API server keeps one (seconds, UTC, ``Z``)."""
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(name: str, export: str, labels: Mapping[str, str],
          annotations: Mapping[str, str]) -> dict[str, Any]:
    return {"name": name, "labels": {MANAGED_BY: "berth", EXPORT_LABEL: export, **labels},
            "annotations": dict(annotations)}


def profile(export: str, manager: str, p: Profile, transition: datetime) -> Wanted:
    """A berth Cluster as a ClusterProfile; ``transition``: when its health last changed
    (kept from what was written while it has not)."""
    status: dict[str, Any] = {
        "conditions": [{"type": "ControlPlaneHealthy", "status": p.healthy,
                        "reason": p.reason, "message": p.message[:1024],
                        "lastTransitionTime": _time(transition)}],
        "properties": [{"name": q.name, "value": q.value,
                        **({"lastObservedTime": _time(q.observed)} if q.observed else {})}
                       for q in p.properties],
    }
    if p.version:
        status["version"] = {"kubernetes": p.version}
    if p.access:  # credentials never: the consumer's provider brings its own
        status["accessProviders"] = [
            {"name": a.name, "cluster": {"server": a.server, **(
                {"certificate-authority-data": a.ca} if a.ca else {})}} for a in p.access]
    body = {"metadata": _meta(p.name, export, {CLUSTER_MANAGER_LABEL: manager},
                              {CLUSTER_ANNOTATION: p.cluster}),
            "spec": {"displayName": p.cluster, "clusterManager": {"name": manager}}}
    return Wanted(Ref(SIG_VERSION, "clusterprofiles", p.name), "ClusterProfile", body,
                  status, f"cluster:{p.cluster}")


def _slices(decisions: tuple[Decision, ...]) -> Iterator[tuple[int, tuple[Decision, ...]]]:
    ordered = tuple(sorted(decisions, key=lambda d: (d.cluster, d.role)))
    yield 0, ordered[:PER_SLICE]
    for i in range(1, -(-len(ordered) // PER_SLICE)):
        yield i, ordered[i * PER_SLICE:(i + 1) * PER_SLICE]


def base_name(app: str) -> str:
    """An application's objects' base name: ``<namespace>.<name>``, made a Kubernetes
    name (short enough for the suffixes the slices add)."""
    return kube_name(app.replace("/", "."), 50)


def sig_decisions(export: str, namespace: str, placement: Placement) -> list[Wanted]:
    """An application's decisions as SIG PlacementDecision slices."""
    base = base_name(placement.app)
    out = []
    for i, part in _slices(placement.decisions):
        labels = {DECISION_KEY: base, DECISION_INDEX: str(i), PLACEMENT_KEY: base}
        body = {"metadata": _meta(f"{base}-{i}", export, labels,
                                  {APPLICATION_ANNOTATION: placement.app}),
                "decisions": [{"clusterProfileRef": {"name": d.cluster, "namespace": namespace},
                               "reason": d.text} for d in part],
                "schedulerName": SCHEDULER_NAME}
        out.append(Wanted(Ref(SIG_VERSION, "placementdecisions", f"{base}-{i}"),
                          "PlacementDecision", body, None, f"app:{placement.app}"))
    return out


def ocm_decisions(export: str, placement: Placement) -> list[Wanted]:
    """An application's decisions as OCM PlacementDecisions (what Argo CD reads)."""
    base = base_name(placement.app)
    out = []
    for i, part in _slices(placement.decisions):
        name = f"{base}-decision-{i + 1}"
        body = {"metadata": _meta(name, export, {OCM_PLACEMENT: base},
                                  {APPLICATION_ANNOTATION: placement.app})}
        status = {"decisions": [{"clusterName": d.cluster, "reason": d.text} for d in part]}
        out.append(Wanted(Ref(OCM_VERSION, "placementdecisions", name), "PlacementDecision",
                          body, status, f"app:{placement.app}"))
    return out


def argocd_config_map(export: str, name: str) -> Wanted:
    """The ConfigMap Argo CD's clusterDecisionResource generator names: read OCM
    PlacementDecisions' ``status.decisions``, matching ``clusterName``."""
    body = {"metadata": _meta(name, export, {}, {}),
            "data": {"apiVersion": OCM_VERSION, "kind": "placementdecisions",
                     "statusListKey": "decisions", "matchKey": "clusterName"}}
    return Wanted(Ref("v1", "configmaps", name), "ConfigMap", body, None, "argocd")


__all__ = ["APPLICATION_ANNOTATION", "DECISION_INDEX", "DECISION_KEY", "EXPORT_LABEL",
           "MANAGED_BY", "OCM_PLACEMENT", "OCM_VERSION", "PER_SLICE", "PLACEMENT_KEY",
           "SIG_VERSION", "TERM_ANNOTATION", "Access", "Decision", "Placement", "Profile",
           "Property", "Ref", "Role", "Wanted", "argocd_config_map", "base_name",
           "cluster_name", "kube_name", "ocm_decisions", "profile", "sig_decisions"]
