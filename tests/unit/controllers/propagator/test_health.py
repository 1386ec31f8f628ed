"""Health per kind, table-driven. The workload, Service, Ingress, PersistentVolumeClaim,
Pod and PodDisruptionBudget rows are the cases of Karmada's own health interpreter tests
(``pkg/resourceinterpreter/default/native/healthy_test.go``), written anew here; the rest
are berth's rules (docs/propagator.md "Health")."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from berth.controllers.propagator.health import (
    HEALTHY,
    PROGRESSING,
    UNHEALTHY,
    Health,
    Observed,
    copy_of,
    judge,
    worst,
)
from berth.store.documents import HealthRule, KubeObjectRef


def obj(api: str, kind: str, generation: int = 0, spec: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None) -> Observed:
    return Observed(api, kind, generation, msgspec.Raw(msgspec.json.encode(spec or {})),
                    msgspec.Raw(msgspec.json.encode(status or {})))


def deploy(status: dict[str, Any], replicas: int = 3, kind: str = "Deployment",
           **spec: Any) -> Observed:
    return obj("apps/v1", kind, 1, {"replicas": replicas, **spec}, status)


PARTITION = {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}

KARMADA: list[tuple[str, Observed, bool]] = [
    ("deployment healthy",
     deploy({"availableReplicas": 3, "updatedReplicas": 3, "observedGeneration": 1}), True),
    ("deployment: generation not observed",
     deploy({"availableReplicas": 3, "updatedReplicas": 3, "observedGeneration": 2}), False),
    ("deployment: replicas not updated", deploy({"updatedReplicas": 1, "observedGeneration": 1}),
     False),
    ("deployment: updated not available",
     deploy({"availableReplicas": 0, "updatedReplicas": 3, "observedGeneration": 1}), False),
    ("statefulset healthy", deploy({"availableReplicas": 3, "updatedReplicas": 3,
                                    "observedGeneration": 1}, kind="StatefulSet"), True),
    ("statefulset: generation not observed", deploy(
        {"availableReplicas": 3, "updatedReplicas": 3, "observedGeneration": 2},
        kind="StatefulSet"), False),
    ("statefulset: replicas not updated", deploy(
        {"updatedReplicas": 1, "observedGeneration": 1}, kind="StatefulSet"), False),
    ("statefulset: updated not available", deploy(
        {"availableReplicas": 1, "updatedReplicas": 3, "observedGeneration": 1},
        kind="StatefulSet"), False),
    ("statefulset: partitioned update done above the partition", deploy(
        {"availableReplicas": 3, "updatedReplicas": 1, "observedGeneration": 1},
        kind="StatefulSet", **PARTITION), True),
    ("statefulset: partitioned update in progress", deploy(
        {"availableReplicas": 3, "updatedReplicas": 1, "observedGeneration": 1},
        kind="StatefulSet", updateStrategy={"rollingUpdate": {"partition": 1}}), False),
    ("statefulset: partitioned update with the old pods down", deploy(
        {"availableReplicas": 1, "updatedReplicas": 1, "observedGeneration": 1},
        kind="StatefulSet", **PARTITION), False),
    ("statefulset: partition over every pod, all down", deploy(
        {"availableReplicas": 0, "updatedReplicas": 0, "observedGeneration": 1},
        kind="StatefulSet", updateStrategy={"rollingUpdate": {"partition": 3}}), False),
    ("replicaset healthy", deploy({"availableReplicas": 3, "observedGeneration": 1},
                                  kind="ReplicaSet"), True),
    ("replicaset: generation not observed", deploy(
        {"availableReplicas": 3, "observedGeneration": 2}, kind="ReplicaSet"), False),
    ("replicaset: not every replica available", deploy(
        {"availableReplicas": 2, "observedGeneration": 2}, kind="ReplicaSet"), False),
    ("daemonset healthy", obj("apps/v1", "DaemonSet", 1, status={"observedGeneration": 1}),
     True),
    ("daemonset: generation not observed",
     obj("apps/v1", "DaemonSet", 1, status={"observedGeneration": 2}), False),
    ("daemonset: not every node updated", obj("apps/v1", "DaemonSet", status={
        "updatedNumberScheduled": 3, "desiredNumberScheduled": 5}), False),
    ("daemonset: updated not available", obj("apps/v1", "DaemonSet", status={
        "updatedNumberScheduled": 5, "numberAvailable": 3}), False),
    ("service LoadBalancer with an ingress", obj("v1", "Service", spec={"type": "LoadBalancer"},
                                                 status={"loadBalancer": {"ingress": [
                                                     {"ip": "localhost"}]}}), True),
    ("service not a LoadBalancer", obj("v1", "Service", spec={"type": "NodePort"}), True),
    ("service LoadBalancer without an ingress", obj(
        "v1", "Service", spec={"type": "LoadBalancer"},
        status={"loadBalancer": {"ingress": []}}), False),
    ("ingress with an ingress", obj("networking.k8s.io/v1", "Ingress", status={
        "loadBalancer": {"ingress": [{"ip": "localhost"}]}}), True),
    ("ingress without", obj("networking.k8s.io/v1", "Ingress", status={
        "loadBalancer": {"ingress": []}}), False),
    ("pvc Bound", obj("v1", "PersistentVolumeClaim", status={"phase": "Bound"}), True),
    ("pvc Pending", obj("v1", "PersistentVolumeClaim", status={"phase": "Pending"}), False),
    ("pod Running and Ready", obj("v1", "Pod", status={"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}]}), True),
    ("pod Succeeded", obj("v1", "Pod", status={"phase": "Succeeded"}), True),
    ("pod Running, not Ready", obj("v1", "Pod", status={"phase": "Running", "conditions": [
        {"type": "Ready", "status": "False"}]}), False),
    ("pod Pending with Ready True", obj("v1", "Pod", status={"phase": "Pending", "conditions": [
        {"type": "Ready", "status": "True"}]}), False),
    ("pdb healthy enough", obj("policy/v1", "PodDisruptionBudget", status={
        "currentHealthy": 2, "desiredHealthy": 2}), True),
    ("pdb short", obj("policy/v1", "PodDisruptionBudget", status={
        "currentHealthy": 1, "desiredHealthy": 2}), False),
]


@pytest.mark.parametrize(("o", "healthy"), [r[1:] for r in KARMADA], ids=[r[0] for r in KARMADA])
def test_karmadas_cases(o: Observed, healthy: bool) -> None:
    assert judge(o, age=0.0).healthy is healthy


def cond(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


BERTH: list[tuple[str, Observed, dict[str, Any], str, str]] = [
    ("a deployment past its progress deadline is Unhealthy, in Kubernetes' words",
     deploy({"observedGeneration": 1, "updatedReplicas": 3, "conditions": [cond(
         "Progressing", "False", "ProgressDeadlineExceeded",
         'ReplicaSet "web-1" has timed out progressing.')]}), {}, UNHEALTHY,
     'ProgressDeadlineExceeded: ReplicaSet "web-1" has timed out progressing.'),
    ("a workload whose pods crash is Unhealthy with the pod's reason",
     deploy({"observedGeneration": 1, "updatedReplicas": 3, "availableReplicas": 1}),
     {"pods": "pod web-1: CrashLoopBackOff: back-off 10s"}, UNHEALTHY,
     "1/3 replicas available; pod web-1: CrashLoopBackOff: back-off 10s"),
    ("one whose pod cannot be placed progresses, saying so",
     deploy({"observedGeneration": 1, "updatedReplicas": 3, "availableReplicas": 2}),
     {"pods": "pod web-3: Unschedulable: 0/2 nodes are available"}, PROGRESSING,
     "2/3 replicas available; pod web-3: Unschedulable: 0/2 nodes are available"),
    ("pods the cluster counts available on a Node that is gone are not",
     deploy({"observedGeneration": 1, "updatedReplicas": 3, "availableReplicas": 3}),
     {"lost": 1}, PROGRESSING,
     "2/3 replicas available (1 counted by the cluster are on Nodes that are gone)"),
    ("a Job that completed", obj("batch/v1", "Job", 1, status={"conditions": [
        cond("Complete", "True")]}), {}, HEALTHY, "Complete"),
    ("a Job that failed", obj("batch/v1", "Job", 1, status={"conditions": [
        cond("Failed", "True", "BackoffLimitExceeded", "Job has reached the backoff limit")]}),
     {}, UNHEALTHY, "BackoffLimitExceeded: Job has reached the backoff limit"),
    ("a Job whose pod starts", obj("batch/v1", "Job", 1, status={"active": 1}), {},
     PROGRESSING, "starting"),
    ("a Job whose pod runs Ready: available, not done",
     obj("batch/v1", "Job", 1, status={"active": 1, "ready": 1}), {}, HEALTHY, "running"),
    ("a Job whose pod cannot start", obj("batch/v1", "Job", 1, status={"active": 1}),
     {"pods": "pod once-x: CrashLoopBackOff: back-off"}, UNHEALTHY,
     "starting; pod once-x: CrashLoopBackOff: back-off"),
    ("a pod that failed", obj("v1", "Pod", status={"phase": "Failed"}), {}, UNHEALTHY, "Failed"),
    ("a pvc Lost", obj("v1", "PersistentVolumeClaim", status={"phase": "Lost"}), {}, UNHEALTHY,
     "phase Lost"),
    ("a CRD established", obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", status={
        "conditions": [cond("Established", "True")]}), {}, HEALTHY, ""),
    ("a CRD whose names clash", obj("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                    status={"conditions": [cond(
                                        "NamesAccepted", "False", "MultipleNamesNotAllowed")]}),
     {}, UNHEALTHY, "MultipleNamesNotAllowed"),
    ("config-like kinds are healthy once applied", obj("v1", "ConfigMap"), {}, HEALTHY, ""),
    ("RBAC too", obj("rbac.authorization.k8s.io/v1", "Role"), {}, HEALTHY, ""),
    ("a custom resource Ready", obj("db.example.com/v1", "Database", 2, status={
        "conditions": [cond("Ready", "True")]}), {}, HEALTHY, ""),
    ("a custom resource Available False", obj("db.example.com/v1", "Database", status={
        "conditions": [cond("Available", "False", "Provisioning", "disk 40%")]}), {},
     PROGRESSING, "Available: Provisioning: disk 40%"),
    ("a custom resource whose controller lags a generation", obj(
        "db.example.com/v1", "Database", 3, status={"observedGeneration": 2, "conditions": [
            cond("Ready", "True")]}), {}, PROGRESSING, "generation 3 not yet observed"),
    ("a custom resource judged by the application's field rule",
     obj("db.example.com/v1", "Database", status={"phase": "Failed"}),
     {"rules": (HealthRule("Database", field="status.phase", healthy=["Running"],
                           unhealthy=["Failed"]),)}, UNHEALTHY, "status.phase is Failed"),
    ("... by its condition rule", obj("db.example.com/v1", "Database", status={
        "conditions": [cond("Synced", "True")]}),
     {"rules": (HealthRule("Database", condition="Synced"),)}, HEALTHY, ""),
    ("a rule for another apiVersion does not apply", obj("db.example.com/v2", "Database"),
     {"rules": (HealthRule("Database", api_version="db.example.com/v1", condition="Synced"),),
      "age": 61.0}, HEALTHY, "untracked kind"),
    ("an untracked custom resource, just applied", obj("x.example.com/v1", "Widget"),
     {"age": 5.0}, PROGRESSING, "taken as available 60 s after it was applied"),
    ("... available once the time has passed", obj("x.example.com/v1", "Widget"),
     {"age": 60.0}, HEALTHY, "untracked kind"),
]


@pytest.mark.parametrize(("o", "kw", "state", "reason"), [r[1:] for r in BERTH],
                         ids=[r[0] for r in BERTH])
def test_berths_rules(o: Observed, kw: dict[str, Any], state: str, reason: str) -> None:
    kw.setdefault("age", 0.0)
    h = judge(o, **kw)
    assert h.state == state
    assert reason in h.reason


def test_replicas_are_reported_for_kinds_that_have_them() -> None:
    h = judge(deploy({"observedGeneration": 1, "updatedReplicas": 3, "availableReplicas": 2}),
              age=0.0)
    assert (h.state, h.available, h.desired) == (PROGRESSING, 2, 3)
    assert judge(obj("v1", "ConfigMap"), age=0.0).desired is None


def test_garbage_in_a_status_is_read_as_empty() -> None:
    o = Observed("apps/v1", "Deployment", 1, msgspec.Raw(b'{"replicas": "lots"}'),
                 msgspec.Raw(b'{"availableReplicas": [1]}'))
    assert judge(o, age=0.0).state == PROGRESSING


def test_a_copy_is_as_healthy_as_its_least_healthy_object() -> None:
    cm = KubeObjectRef("v1", "ConfigMap", "c", "default")
    web = KubeObjectRef("apps/v1", "Deployment", "web", "default")
    job = KubeObjectRef("batch/v1", "Job", "once", "default")
    copy = copy_of([(cm, Health(HEALTHY)), (web, Health(PROGRESSING, "1/2 replicas", 1, 2)),
                    (job, Health(HEALTHY, "Complete", done=True)),
                    (KubeObjectRef("batch/v1", "Job", "long", "default"),
                     Health(HEALTHY, "running"))])
    assert (copy.health.state, copy.health.reason) == (PROGRESSING, "1/2 replicas")
    assert (copy.health.available, copy.health.desired) == (1, 2)
    assert copy.unhealthy == {"Deployment default/web": "Progressing: 1/2 replicas"}
    assert copy.complete == (job,)
    assert worst([]).healthy
    assert worst([Health(UNHEALTHY, "x"), Health(PROGRESSING)]).state == UNHEALTHY
