"""WorkloadAffinity: an application follows, or avoids, the topology domain of the
workloads its terms select (Kubernetes' inter-pod affinity, by cluster)."""

from __future__ import annotations

import msgspec
import pytest

from berth.store.documents import Affinity, Placement
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate


def workload_affinity(kind: str, required: list[dict[str, object]] | None = None,
                      preferred: list[dict[str, object]] | None = None) -> Affinity:
    body: dict[str, object] = {}
    if required is not None:
        body["requiredDuringSchedulingIgnoredDuringExecution"] = required
    if preferred is not None:
        body["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return msgspec.convert({kind: body}, Affinity)


def zoned() -> FakeSnapshot:
    from berth.controllers.scheduler.framework import Placed, Ref

    snap = FakeSnapshot([cluster("a1", labels={"zone": "a"}), cluster("a2", labels={"zone": "a"}),
                         cluster("b1", labels={"zone": "b"}), cluster("nozone")])
    snap.others = [Placed(Ref("Application", "default", "backend"), {"app": "backend"},
                          (Ref("Cluster", "default", "a1"),))]
    return snap


BACKEND = {"labelSelector": {"matchLabels": {"app": "backend"}}, "topologyKey": "zone"}


def test_required_workload_affinity_follows_the_backend_into_its_zone() -> None:
    ev, _ = evaluate(zoned(), app(affinity=workload_affinity("workloadAffinity", [BACKEND]),
                                  placement=Placement(policy="PickAll")))
    assert {r.candidate.ref.name for r in ev.ranked} == {"a1", "a2"}


def test_required_workload_anti_affinity_avoids_the_backends_zone() -> None:
    ev, _ = evaluate(zoned(), app(affinity=workload_affinity("workloadAntiAffinity", [BACKEND]),
                                  placement=Placement(policy="PickAll")))
    assert {r.candidate.ref.name for r in ev.ranked} == {"b1", "nozone"}


def test_the_first_of_a_group_may_land_anywhere() -> None:
    snap = zoned()
    snap.others = []
    me = app(labels={"app": "backend"}, placement=Placement(policy="PickAll"),
             affinity=workload_affinity("workloadAffinity", [BACKEND]))
    ev, _ = evaluate(snap, me)
    assert {r.candidate.ref.name for r in ev.ranked} == {"a1", "a2", "b1"}  # not "nozone"


def test_preferred_workload_affinity_and_anti_affinity_score() -> None:
    pref = [{"weight": 2, "workloadAffinityTerm": BACKEND}]
    _, chosen = evaluate(zoned(), app(affinity=workload_affinity("workloadAffinity", preferred=pref)))
    assert chosen[0] in ("a1", "a2")
    ev, _ = evaluate(zoned(), app(affinity=workload_affinity("workloadAntiAffinity",
                                                             preferred=pref)))
    assert ev.ranked[-1].candidate.labels.get("zone") == "a"
    assert ev.ranked[-1].score == pytest.approx(-1.0)
