"""Whether an object berth applied is available, judged per kind as Kubernetes reports it.

:func:`judge` is pure: an object as a cluster last showed it (:class:`Observed`:
its kind, generation, and its ``spec`` and ``status`` undecoded), when berth
applied it, and what its Pods say, to a :class:`Health`:

* **Healthy**, **Progressing** (not yet; the plan gives it a deadline),
  **Unhealthy** (Kubernetes says it failed, with Kubernetes' own reason) or
  **Unknown** (not observed yet).

The rules, as Kubernetes' controllers report progress (the same as Karmada's
health interpreters where both judge a kind):

* Deployment, StatefulSet, ReplicaSet: the controller observed this
  generation (``observedGeneration == generation``), every replica is updated
  (a StatefulSet's above its rolling update's partition) and the updated ones
  are available (a StatefulSet's and a ReplicaSet's every replica); a
  Deployment whose ``Progressing`` condition says ``ProgressDeadlineExceeded``
  is Unhealthy. DaemonSet: the same over ``desiredNumberScheduled``.
* Job: Healthy while its pods run Ready (as a Pod is) and once ``Complete`` —
  only then done (``Health.done``: never run again); ``Failed`` Unhealthy (the
  condition's message). Karmada has no Job rule; Argo CD calls a running Job
  Progressing, which would let ``move_timeout`` take any Job that runs longer
  for one that cannot start.
* Pod: Running and Ready, or Succeeded; Failed is Unhealthy.
* PersistentVolumeClaim: Bound (Lost is Unhealthy). Service of type
  LoadBalancer and Ingress: an ingress with an IP or a hostname.
  PodDisruptionBudget: as many healthy pods as it desires.
  CustomResourceDefinition: Established. Namespace: Active.
* Every other built-in kind (ConfigMap, Secret, Service, RBAC, ...): healthy
  once applied.
* A custom resource: by its ``Ready`` or ``Available`` condition when it has
  one; else by a rule the application declares (``spec.health``,
  :class:`~berth.store.documents.HealthRule`); else,
  as KubeFleet does for kinds it cannot track, healthy ``untracked_after``
  seconds after it was applied.

A workload that is not yet available says why from its Pods (``pods``, from the
observer's Pod watch): a container waiting in ``CrashLoopBackOff`` or an image
that cannot be pulled makes it Unhealthy at once; a Pod the scheduler cannot
place says so while it progresses. Pods bound to a Node that no longer exists
are not counted available, though the workload's status counts them until
the cluster's pod garbage collector removes them (``lost``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from berth.store.codec import typed
from berth.store.documents import ClusterApplied, HealthRule, HealthState, KubeObjectRef

HEALTHY, PROGRESSING = HealthState.HEALTHY, HealthState.PROGRESSING
UNHEALTHY, UNKNOWN = HealthState.UNHEALTHY, HealthState.UNKNOWN
# Worst first: a copy is as healthy as its least healthy object.
ORDER = {UNHEALTHY: 0, UNKNOWN: 1, PROGRESSING: 2, HEALTHY: 3}

# Reasons a Pod's container waits with that no amount of waiting fixes.
FATAL_WAITING = frozenset({"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull",
                           "InvalidImageName", "CreateContainerConfigError",
                           "CreateContainerError", "RunContainerError"})

# API groups whose kinds Kubernetes itself defines: a kind of these that is not
# judged below holds configuration, healthy once applied.
BUILTIN_GROUPS = frozenset({
    "", "apps", "batch", "autoscaling", "policy", "rbac.authorization.k8s.io",
    "networking.k8s.io", "storage.k8s.io", "scheduling.k8s.io", "node.k8s.io",
    "discovery.k8s.io", "coordination.k8s.io", "certificates.k8s.io",
    "admissionregistration.k8s.io", "apiextensions.k8s.io", "apiregistration.k8s.io",
    "flowcontrol.apiserver.k8s.io", "resource.k8s.io", "events.k8s.io",
})


class Health(msgspec.Struct, frozen=True, omit_defaults=True):
    """One object's (or one cluster's copy's) health."""

    state: HealthState = UNKNOWN
    reason: str = ""
    available: int | None = None  # replicas available, for kinds that have replicas
    desired: int | None = None
    done: bool = False  # a Job complete: its work is done, never to be run again

    @property
    def healthy(self) -> bool:
        return self.state == HEALTHY


JOB_DONE = Health(HEALTHY, "Complete", done=True)  # a Job complete at its generation


class Observed(msgspec.Struct, frozen=True):
    """An object as a cluster last showed it: enough to judge it, nothing more."""

    api_version: str
    kind: str
    generation: int = 0
    spec: msgspec.Raw = msgspec.Raw(b"{}")
    status: msgspec.Raw = msgspec.Raw(b"{}")
    stamp: int | None = None  # the application's generation it was applied for (None: unsaid)


# -- the fields read, per kind ------------------------------------------------------


class _Condition(msgspec.Struct):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class _Partition(msgspec.Struct):
    partition: int = 0


class _Strategy(msgspec.Struct):
    rollingUpdate: _Partition | None = None


class _Replicas(msgspec.Struct):
    replicas: int = 1
    updateStrategy: _Strategy | None = None


class _WorkloadStatus(msgspec.Struct):
    observedGeneration: int = 0
    replicas: int = 0
    updatedReplicas: int = 0
    readyReplicas: int = 0
    availableReplicas: int = 0
    conditions: list[_Condition] = []


class _DaemonStatus(msgspec.Struct):
    observedGeneration: int = 0
    desiredNumberScheduled: int = 0
    updatedNumberScheduled: int = 0
    numberAvailable: int = 0


class _Conditions(msgspec.Struct):
    phase: str = ""
    observedGeneration: int = 0
    conditions: list[_Condition] = []


class _JobStatus(msgspec.Struct):
    conditions: list[_Condition] = []
    ready: int = 0  # its pods Ready (Kubernetes 1.29 and later say so)


class _Ingress(msgspec.Struct):
    ingress: list[dict[str, Any]] = []

    def any(self) -> bool:
        return any(i.get("ip") or i.get("hostname") for i in self.ingress)


class _Budget(msgspec.Struct):
    currentHealthy: int = 0
    desiredHealthy: int = 0


class _ServiceStatus(msgspec.Struct):
    loadBalancer: _Ingress = msgspec.field(default_factory=_Ingress)


class _ServiceSpec(msgspec.Struct):
    type: str = "ClusterIP"


def _decode(raw: msgspec.Raw, type_: type[Any]) -> Any:
    try:
        return typed(raw, type_)
    except msgspec.DecodeError:
        return type_()


def _condition(conditions: Iterable[_Condition], type_: str) -> _Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def _says(c: _Condition) -> str:
    return ": ".join(p for p in (c.reason, c.message) if p)


def _troubled(progress: Health, pods: str) -> Health:
    """A workload not yet available, with what its Pods say: a Pod that cannot start
    makes it Unhealthy."""
    if not pods:
        return progress
    fatal = any(f": {w}" in pods or pods.startswith(w) for w in FATAL_WAITING)
    reason = f"{progress.reason}; {pods}" if progress.reason else pods
    return Health(UNHEALTHY if fatal else progress.state, reason, progress.available,
                  progress.desired)


def _workload(o: Observed, pods: str, lost: int) -> Health:
    spec = _decode(o.spec, _Replicas)
    desired = spec.replicas
    st = _decode(o.status, _WorkloadStatus)
    available = max(0, st.availableReplicas - lost)
    if o.kind == "Deployment":
        stalled = _condition(st.conditions, "Progressing")
        if stalled is not None and stalled.reason == "ProgressDeadlineExceeded":
            return Health(UNHEALTHY, _says(stalled), available, desired)
    if st.observedGeneration != o.generation:
        return _troubled(Health(PROGRESSING, f"generation {o.generation} not yet observed by "
                                "its controller", available, desired), pods)
    want_updated = desired
    if o.kind == "StatefulSet" and spec.updateStrategy and spec.updateStrategy.rollingUpdate:
        want_updated -= spec.updateStrategy.rollingUpdate.partition
    updated = desired if o.kind == "ReplicaSet" else st.updatedReplicas
    if updated < want_updated:
        return _troubled(Health(PROGRESSING, f"{updated}/{desired} replicas updated",
                                available, desired), pods)
    if o.kind == "Deployment" and st.replicas > updated:
        # kubectl rollout status's rule: old replicas still count as available until
        # they are gone, so until then the new ones are not known to be
        return _troubled(Health(PROGRESSING, f"{st.replicas - updated} old replicas pending "
                                "termination", available, desired), pods)
    want_available = updated if o.kind == "Deployment" else max(updated, desired)
    if available < want_available:
        gone = f" ({lost} counted by the cluster are on Nodes that are gone)" if lost else ""
        return _troubled(Health(PROGRESSING, f"{available}/{desired} replicas available{gone}",
                                available, desired), pods)
    return Health(HEALTHY, "", available, desired)


def _daemonset(o: Observed, pods: str, lost: int) -> Health:
    st = _decode(o.status, _DaemonStatus)
    want, available = st.desiredNumberScheduled, max(0, st.numberAvailable - lost)
    if st.observedGeneration != o.generation:
        return _troubled(Health(PROGRESSING, f"generation {o.generation} not yet observed "
                                "by its controller", available, want), pods)
    if st.updatedNumberScheduled < want or available < max(want, st.updatedNumberScheduled):
        return _troubled(Health(PROGRESSING, f"{available}/{want} pods available", available,
                                want), pods)
    return Health(HEALTHY, "", available, want)


def _job(o: Observed, pods: str) -> Health:
    st = _decode(o.status, _JobStatus)
    failed = _condition(st.conditions, "Failed")
    if failed is not None and failed.status == "True":
        return Health(UNHEALTHY, _says(failed) or "Failed")
    complete = _condition(st.conditions, "Complete")
    if complete is not None and complete.status == "True":
        return JOB_DONE
    if st.ready:  # its pods run, Ready: available as a Pod is, its work not done yet
        return Health(HEALTHY, "running")
    return _troubled(Health(PROGRESSING, "starting"), pods)


def _pod(o: Observed, pods: str) -> Health:
    st = _decode(o.status, _Conditions)
    if st.phase == "Succeeded":
        return Health(HEALTHY, "Succeeded")
    if st.phase == "Failed":
        return Health(UNHEALTHY, "Failed")
    ready = _condition(st.conditions, "Ready")
    if st.phase == "Running" and ready is not None and ready.status == "True":
        return Health(HEALTHY)
    return _troubled(Health(PROGRESSING, f"phase {st.phase or 'Pending'}"), pods)


def _phase(o: Observed, good: str, bad: str = "") -> Health:
    phase = _decode(o.status, _Conditions).phase
    if phase == good:
        return Health(HEALTHY)
    if bad and phase == bad:
        return Health(UNHEALTHY, f"phase {phase}")
    return Health(PROGRESSING, f"phase {phase or 'not set'}")


def _ingress(o: Observed) -> Health:
    if _decode(o.status, _ServiceStatus).loadBalancer.any():
        return Health(HEALTHY)
    return Health(PROGRESSING, "no load balancer ingress yet")


def _budget(o: Observed) -> Health:
    st = _decode(o.status, _Budget)
    if st.currentHealthy >= st.desiredHealthy:
        return Health(HEALTHY)
    return Health(PROGRESSING, f"{st.currentHealthy}/{st.desiredHealthy} pods healthy")


def _crd(o: Observed) -> Health:
    st = _decode(o.status, _Conditions)
    c = _condition(st.conditions, "Established")
    if c is not None and c.status == "True":
        return Health(HEALTHY)
    names = _condition(st.conditions, "NamesAccepted")
    if names is not None and names.status == "False":
        return Health(UNHEALTHY, _says(names))
    return Health(PROGRESSING, "not yet established")


def _custom(o: Observed, rules: Sequence[HealthRule], age: float, untracked_after: float
            ) -> Health:
    st = _decode(o.status, _Conditions)
    if st.observedGeneration and st.observedGeneration != o.generation:
        return Health(PROGRESSING, f"generation {o.generation} not yet observed")
    for rule in rules:
        if rule.matches(o.api_version, o.kind):
            return _by_rule(o, rule, st)
    for type_ in ("Ready", "Available"):
        c = _condition(st.conditions, type_)
        if c is not None:
            if c.status == "True":
                return Health(HEALTHY)
            return Health(PROGRESSING, f"{type_}: {_says(c) or c.status}")
    if age >= untracked_after:
        return Health(HEALTHY, f"untracked kind: taken as available {untracked_after:g} s "
                      "after it was applied")
    return Health(PROGRESSING, f"untracked kind: taken as available {untracked_after:g} s "
                  "after it was applied (no Ready or Available condition, no health rule)")


def _by_rule(o: Observed, rule: HealthRule, st: _Conditions) -> Health:
    if rule.condition is not None:
        c = _condition(st.conditions, rule.condition)
        if c is not None and c.status == "True":
            return Health(HEALTHY)
        return Health(PROGRESSING, f"{rule.condition}: {_says(c) or c.status}" if c else
                      f"no {rule.condition} condition yet")
    assert rule.field is not None
    value = _at(o, rule.field)
    text = "" if value is None else str(value)
    if text in rule.healthy:
        return Health(HEALTHY)
    if text in rule.unhealthy:
        return Health(UNHEALTHY, f"{rule.field} is {text}")
    return Health(PROGRESSING, f"{rule.field} is {text or 'not set'}")


def _at(o: Observed, path: str) -> Any:
    head, _, rest = path.partition(".")
    if head not in ("spec", "status"):
        return None
    value: Any = msgspec.json.decode(o.spec if head == "spec" else o.status)
    for part in rest.split(".") if rest else ():
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


# How each built-in kind is judged, by (API group, kind): (observed, its pods' trouble,
# how many of its pods are on Nodes that are gone) → Health. A built-in kind not here is
# healthy once applied; a kind of another group is a custom resource (``_custom``).
Judge = Callable[[Observed, str, int], Health]


def _service(o: Observed, pods: str, lost: int) -> Health:
    lb = _decode(o.spec, _ServiceSpec).type == "LoadBalancer"
    return _ingress(o) if lb else Health(HEALTHY)


KINDS: Mapping[tuple[str, str], Judge] = {
    ("apps", "Deployment"): _workload,
    ("apps", "StatefulSet"): _workload,
    ("apps", "ReplicaSet"): _workload,
    ("apps", "DaemonSet"): _daemonset,
    ("batch", "Job"): lambda o, pods, _lost: _job(o, pods),
    ("", "Pod"): lambda o, pods, _lost: _pod(o, pods),
    ("", "PersistentVolumeClaim"): lambda o, _pods, _lost: _phase(o, "Bound", "Lost"),
    ("", "Service"): _service,
    ("", "Namespace"): lambda o, _pods, _lost: _phase(o, "Active"),
    ("networking.k8s.io", "Ingress"): lambda o, _pods, _lost: _ingress(o),
    ("policy", "PodDisruptionBudget"): lambda o, _pods, _lost: _budget(o),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): lambda o, _pods, _lost: _crd(o),
}


def judge(o: Observed, *, age: float, pods: str = "", rules: Sequence[HealthRule] = (),
          untracked_after: float = 60.0, lost: int = 0) -> Health:
    """The health of one observed object; ``age``: seconds since berth applied it;
    ``pods``: why its pods are not Ready; ``lost``: how many of its pods the cluster
    counts are bound to Nodes that are gone (not available, whatever the status says)."""
    group = o.api_version.rpartition("/")[0]
    if group not in BUILTIN_GROUPS:
        return _custom(o, rules, age, untracked_after)
    rule = KINDS.get((group, o.kind))
    return rule(o, pods, lost) if rule is not None else Health(HEALTHY)


def worst(healths: Iterable[Health]) -> Health:
    """A copy's health from its objects': the least healthy one's state and reason;
    replicas from the objects that have them."""
    out: Health | None = None
    available = desired = None
    for h in healths:
        if h.desired is not None:
            available = (available or 0) + (h.available or 0)
            desired = (desired or 0) + h.desired
        if out is None or ORDER[h.state] < ORDER[out.state]:
            out = h
    if out is None:
        return Health(HEALTHY)
    return Health(out.state, out.reason, available, desired)


class Copy(msgspec.Struct, frozen=True):
    """One cluster's copy of an application, judged: its health, the objects that are not
    healthy (``"<Kind> <ns>/<name>"`` → ``"<state>: <reason>"``) and the Jobs complete."""

    health: Health = Health()
    unhealthy: dict[str, str] = {}
    complete: tuple[KubeObjectRef, ...] = ()


def gated(health: Health, waiting: str) -> Health:
    """A copy's health while a step of it waits to be applied (``waiting``: for what;
    "": none waits): not available yet, saying why, unless it is worse off already."""
    if not waiting or ORDER[health.state] < ORDER[PROGRESSING]:
        return health
    return Health(PROGRESSING, waiting, health.available, health.desired)


def with_copy(have: ClusterApplied, copy: Copy, unready: str = "") -> ClusterApplied:
    """``have`` with its health as judged: Jobs complete now counted done, and a copy
    that became available no longer ``new``; while a step of it waits, or the tool
    that deploys it does not call it available (``unready``: why), not available."""
    h = gated(copy.health, have.waiting or unready)
    done = sorted({*have.done, *copy.complete}, key=str) if h.healthy or copy.complete \
        else have.done
    return msgspec.structs.replace(
        have, health=h.state, reason=h.reason, available=h.available, desired=h.desired,
        unhealthy=dict(copy.unhealthy), new=have.new and not h.healthy, done=list(done))


def copy_of(judged: Iterable[tuple[KubeObjectRef, Health]]) -> Copy:
    """A copy's judgement from its objects' (in apply order)."""
    pairs = list(judged)
    unhealthy = {str(ref): f"{h.state}: {h.reason}" if h.reason else h.state
                 for ref, h in pairs if not h.healthy}
    complete = tuple(ref for ref, h in pairs if h.done)
    return Copy(worst(h for _, h in pairs), unhealthy, complete)
