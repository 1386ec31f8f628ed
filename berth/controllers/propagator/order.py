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

from collections.abc import Iterable, Mapping, Sequence
from enum import IntEnum
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


class Stage(IntEnum):
    """The stages, in the order they are applied (a closed set)."""

    NEEDED = 0  # what others need
    WORKLOADS = 1
    USERS = 2  # what uses them


NEEDED, WORKLOADS, USERS = Stage.NEEDED, Stage.WORKLOADS, Stage.USERS
STAGE_NAMES = {NEEDED: "what others need", WORKLOADS: "workloads", USERS: "what uses them"}
_WORKLOADS = frozenset({"DaemonSet", "Pod", "ReplicationController", "ReplicaSet",
                        "Deployment", "HorizontalPodAutoscaler", "StatefulSet", "Job",
                        "CronJob"})
_LAST_NAMED = frozenset({"IngressClass", "Ingress", "APIService"})
# Built-in kinds of the first stage whose readiness others wait for (the rest: applied).
_WAITED = frozenset({"CustomResourceDefinition", "Namespace"})

Step = tuple[Stage, int]  # (stage, wave)


class WaveError(ValueError):
    """An object's wave annotation is not an integer (the message names it)."""


def stage(kind: str) -> Stage:
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


def step_of(body: Mapping[str, Any], *, strict: bool = True) -> Step:
    """The step a manifest object is applied in by its own kind and wave; WaveError as
    :func:`wave` (``strict=False``: such a wave counts as 0, for what a cluster or a work
    holds, which a manifest could not have brought)."""
    meta = body.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    try:
        return (stage(str(body.get("kind", ""))),
                wave(annotations if isinstance(annotations, Mapping) else {}))
    except WaveError:
        if strict:
            raise
        return stage(str(body.get("kind", ""))), 0


def rank(kind: str) -> int:
    """Where ``kind`` goes within a step (Argo CD's order; kinds it does not name last)."""
    return _RANK.get(kind, len(KINDS))


def places(bodies: Sequence[Mapping[str, Any]], *, strict: bool = True
           ) -> list[tuple[Step, int, int]]:
    """Each body's place in apply order: its step, its kind's rank, its index. A
    Namespace goes in the earliest step of what the manifest puts in it (Argo CD moves
    it so too), never after an object that lives in it."""
    steps = [step_of(b, strict=strict) for b in bodies]
    earliest: dict[str, Step] = {}
    for b, at in zip(bodies, steps, strict=True):
        meta = b.get("metadata")
        ns = meta.get("namespace") if isinstance(meta, Mapping) else None
        if isinstance(ns, str) and ns:
            earliest[ns] = min(at, earliest.get(ns, at))
    out = []
    for i, (b, at) in enumerate(zip(bodies, steps, strict=True)):
        kind = str(b.get("kind", ""))
        meta = b.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if kind == "Namespace" and isinstance(name, str) and name in earliest:
            at = min(at, earliest[name])
        out.append((at, rank(kind), i))
    return out


def ordered(bodies: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``bodies`` in apply order (stable: the manifest's order breaks ties, where Argo CD
    orders by name); WaveError as :func:`wave`."""
    listed = list(bodies)
    return [listed[i] for _, _, i in sorted(places(listed))]


def defines(bodies: Iterable[Mapping[str, Any]], body: Mapping[str, Any]) -> bool:
    """Whether a CustomResourceDefinition among ``bodies`` defines ``body``'s kind."""
    group = str(body.get("apiVersion", "")).rpartition("/")[0]
    for crd in bodies:
        spec = crd.get("spec")
        if crd.get("kind") != "CustomResourceDefinition" or not isinstance(spec, Mapping):
            continue
        names = spec.get("names")
        if (spec.get("group") == group and isinstance(names, Mapping)
                and names.get("kind") == body.get("kind")):
            return True
    return False


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
    """The step of an object as a cluster shows it (its kind and annotations)."""
    return step_of({"kind": kind, "metadata": {"annotations": annotations}}, strict=False)


Located = tuple[Kind | None, KubeObjectRef | None, dict[str, Any]]


def cut(located: list[Located]) -> list[tuple[Step, list[Located]]]:
    """The located objects put in apply order (they come in it, but for a work written
    before the order was berth's) and cut into their steps."""
    out: list[tuple[Step, list[Located]]] = []
    for at, _, i in sorted(places([entry[2] for entry in located], strict=False)):
        if not out or out[-1][0] != at:
            out.append((at, []))
        out[-1][1].append(located[i])
    return out


def behind(judged: list[tuple[KubeObjectRef, Health | None]], following: Step) -> str:
    """Why the step ``following`` may not begin, its step before judged as ``judged``
    says (None: an object not applied, the cluster's RBAC forbids it); "" when it may."""
    for ref, health in judged:
        if health is None:
            said = "not applied: forbidden by the cluster's RBAC"
        elif ready(ref.kind, health):
            continue
        elif ref.job and health.healthy:
            said = "not complete yet"
        else:
            said = f"{health.state}: {health.reason}" if health.reason else health.state
        return f"{named(following)} waits for {ref} ({said})"
    return ""
