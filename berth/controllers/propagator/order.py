"""The order a copy's objects are applied in, and what each step waits for.

A copy is applied in **steps**: a step is a stage and, within it, a wave. The
stages, by kind (docs/order.md):

1. **what others need**: Namespaces, policies and quotas, ServiceAccounts,
   Secrets, ConfigMaps, storage, CustomResourceDefinitions, RBAC, Services;
2. **workloads**: DaemonSets, Pods, ReplicaSets, Deployments, autoscalers,
   StatefulSets, Jobs, CronJobs;
3. **what uses them**: Ingresses, APIServices, webhooks, custom resources and
   every kind not named here.

Within a stage, an object's wave (the annotation ``berth.dev/wave``, or Argo CD's
``argocd.argoproj.io/sync-wave``; an integer, 0 when absent) orders the steps,
lowest first; within a step, kinds go in Argo CD's order (which is Helm's), then
the manifest's. A step is applied only once every object of the step before it
is **ready for what follows** (:func:`ready`):

* in the first stage, a CustomResourceDefinition once Established and a Namespace
  once Active — the rest once applied: a claim that waits for its first consumer,
  or a Service that waits for a load balancer, must not hold back what would
  consume it;
* a Job once complete (as Argo CD waits for a Job in an earlier wave);
* any other object once healthy by berth's rules per kind (``health.py``): a
  workload available, a custom resource Ready.

Removal goes the other way: a step's objects are deleted only once every object of
the step after it is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from berth.controllers.propagator.health import Health
from berth.controllers.propagator.kube import Kind
from berth.store.documents import KubeObjectRef

WAVE = "berth.dev/wave"
ARGO_WAVE = "argocd.argoproj.io/sync-wave"  # understood the same (berth's own wins)

# Argo CD's kind order (gitops-engine's, after Helm's kind sorter); every kind it does
# not name goes after them, as Argo CD puts custom resources.
KINDS = ("Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
         "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap",
         "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
         "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
         "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList",
         "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
         "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass",
         "Ingress", "APIService")
_RANK = {kind: i for i, kind in enumerate(KINDS)}
NEEDED, WORKLOADS, USERS = 0, 1, 2  # the stages
STAGE_NAMES = ("what others need", "workloads", "what uses them")
_WORKLOADS = frozenset({"DaemonSet", "Pod", "ReplicationController", "ReplicaSet",
                        "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job",
                        "CronJob"})
_LAST_NAMED = frozenset({"IngressClass", "Ingress", "APIService"})
# Built-in kinds of the first stage whose readiness others wait for (the rest: applied).
_WAITED = frozenset({"CustomResourceDefinition", "Namespace"})

Step = tuple[int, int]  # (stage, wave)


class WaveError(ValueError):
    """An object's wave annotation is not an integer (the message names it)."""


def stage(kind: str) -> int:
    """The stage of objects of ``kind``."""
    if kind in _WORKLOADS:
        return WORKLOADS
    if kind in _LAST_NAMED or kind not in _RANK:
        return USERS
    return NEEDED


def wave(annotations: Mapping[str, Any]) -> int:
    """An object's wave from its annotations (0 when it has none); WaveError if the one
    it has is not an integer."""
    for key in (WAVE, ARGO_WAVE):
        if key in annotations:
            text = annotations[key]
            try:
                return int(str(text).strip())
            except ValueError:
                raise WaveError(f"metadata.annotations[{key}]: {text!r} is not an integer "
                                "wave") from None
    return 0


def step_of(body: Mapping[str, Any]) -> Step:
    """The step a manifest object is applied in; WaveError as :func:`wave`."""
    meta = body.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return (stage(str(body.get("kind", ""))),
            wave(annotations if isinstance(annotations, Mapping) else {}))


def rank(kind: str) -> int:
    """Where ``kind`` goes within a step (Argo CD's order; kinds it does not name last)."""
    return _RANK.get(kind, len(KINDS))


def key(body: Mapping[str, Any], index: int) -> tuple[int, int, int, int]:
    """Where ``body`` (the ``index``-th of its manifest) goes in apply order."""
    return (*step_of(body), rank(str(body.get("kind", ""))), index)


def ordered(bodies: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``bodies`` in apply order (stable: the manifest's order breaks ties)."""
    pairs = [(key(b, i), b) for i, b in enumerate(bodies)]
    return [b for _, b in sorted(pairs, key=lambda p: p[0])]


def ready(kind: str, health: Health) -> bool:
    """Whether an object of ``kind``, judged ``health``, lets the next step begin."""
    if stage(kind) == NEEDED:
        return kind not in _WAITED or health.healthy
    if kind == "Job":
        return health.done
    return health.healthy


def named(step: Step) -> str:
    """A step as the status says it: its stage, and its wave when it has one."""
    at, w = step
    return STAGE_NAMES[at] + (f", wave {w}" if w else "")


def on_cluster(kind: str, annotations: Mapping[str, Any]) -> Step:
    """The step of an object on a cluster (a wave that is no integer: 0, as one that a
    manifest cannot bring; someone else wrote it)."""
    try:
        return stage(kind), wave(annotations)
    except WaveError:
        return stage(kind), 0


Located = tuple[Kind | None, KubeObjectRef | None, dict[str, Any]]


def cut(located: list[Located]) -> list[list[Located]]:
    """The located objects put in apply order (they come in it, but for a work written
    before the order was berth's) and cut into their steps."""
    placed = []
    for i, entry in enumerate(located):
        kind = str(entry[2].get("kind", ""))
        meta = entry[2].get("metadata") or {}
        placed.append(((on_cluster(kind, meta.get("annotations") or {}), rank(kind), i),
                       entry))
    out: list[list[Located]] = []
    last: Step | None = None
    for (at, _, _), entry in sorted(placed, key=lambda p: p[0]):
        if at != last:
            out.append([])
            last = at
        out[-1].append(entry)
    return out


def behind(judged: list[tuple[KubeObjectRef, Health | None]], following: dict[str, Any]
            ) -> str:
    """Why the step of ``following`` may not begin, its step before judged as ``ready``
    says (None: an object not applied, the cluster's RBAC forbids it); "" when it may."""
    for ref, health in judged:
        if health is None or not ready(ref.kind, health):
            meta = following.get("metadata") or {}
            at = on_cluster(str(following.get("kind", "")), meta.get("annotations") or {})
            if health is None:
                said = "not applied: forbidden by the cluster's RBAC"
            elif ref.job and health.healthy:
                said = "not complete yet"
            else:
                said = f"{health.state}: {health.reason}" if health.reason else health.state
            return f"{named(at)} waits for {ref} ({said})"
    return ""
