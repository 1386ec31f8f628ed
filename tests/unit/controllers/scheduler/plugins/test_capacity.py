"""Capacity as the Kubernetes scheduler counts it.

Cases written from the Kubernetes scheduler's own tests (``noderesources``:
least_allocated_test.go, most_allocated_test.go, balanced_allocation_test.go,
fit_test.go) and the pod request rules of ``resourcehelper.PodRequests``
(sidecars, pod-level resources, overhead), at cluster scale: one cluster is one
Node there.
"""

from __future__ import annotations

from typing import Any

import pytest

from berth.controllers.scheduler.config import PluginSpec, SchedulerConfig
from berth.controllers.scheduler.decide import Decision, NoFit, decide
from berth.controllers.scheduler.framework import Framework, Room
from berth.controllers.scheduler.plugins import REGISTRY
from berth.controllers.scheduler.plugins.capacity import Capacity
from berth.store.documents import Target
from berth.store.documents.resources import Demand, Resources, demand, pod_requests
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster

# The Kubernetes tests' nodes: 4000m/10000 bytes and 6000m/10000 bytes.
NODE1 = Resources(cpu=4000, memory=10000, pods=110)
NODE2 = Resources(cpu=6000, memory=10000, pods=110)
ASK = Resources(cpu=3000, memory=5000, pods=1)  # "cpuAndMemory": 1000m+2000m, 2000+3000


def points(strategy: str, alloc: Resources, requested: Resources, need: Resources = ASK,
           resources: list[dict[str, Any]] | None = None) -> int:
    args: dict[str, Any] = {"strategy": strategy}
    if resources is not None:
        args["resources"] = resources
    return Capacity(args).points(alloc, requested + need, need)


@pytest.mark.parametrize(("strategy", "expected"), [
    # nothing scheduled, resources requested, differently sized nodes
    ("LeastAllocated", (37, 50)),  # (25 + 50) // 2, (50 + 50) // 2
    ("MostAllocated", (62, 50)),   # (75 + 50) // 2, (50 + 50) // 2
    ("BalancedAllocation", (87, 100)),  # 1 - |0.75 - 0.5| / 2; 1 - 0
])
def test_scores_agree_with_the_kubernetes_scheduler(strategy: str,
                                                    expected: tuple[int, int]) -> None:
    assert (points(strategy, NODE1, Resources()), points(strategy, NODE2, Resources())
            ) == expected


def test_weights_and_over_requested_resources_as_kubernetes() -> None:
    weighted = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 2}]
    assert points("LeastAllocated", NODE1, Resources(), resources=weighted) == (25 + 2 * 50) // 3
    # requested beyond allocatable: 0 for that resource (least), capped (most)
    busy = Resources(cpu=2000, memory=0)
    assert points("LeastAllocated", NODE1, busy) == (0 + 50) // 2
    assert points("MostAllocated", NODE1, busy) == (100 + 50) // 2
    assert points("BalancedAllocation", NODE1, busy) == int((1 - abs(1.0 - 0.5) / 2) * 100)


def test_an_extended_resource_is_scored_only_when_asked_for() -> None:
    gpus = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
            {"name": "nvidia.com/gpu", "weight": 2}]
    alloc = Resources(4000, 10000, 110, (("nvidia.com/gpu", 4),))
    # not asked: cpu and memory alone, as without the entry
    assert points("LeastAllocated", alloc, Resources(), resources=gpus) == 37
    one_gpu = Resources(3000, 5000, 1, (("nvidia.com/gpu", 1),))
    # asked: (25 + 50 + 2 * 75) // 4
    assert points("LeastAllocated", alloc, Resources(), one_gpu, gpus) == (25 + 50 + 150) // 4
    # a resource the cluster has none of is left out, not scored 0
    assert points("LeastAllocated", NODE1, Resources(), one_gpu, gpus) == 37


def fw(*entries: tuple[str, dict[str, Any]]) -> Framework:
    config = SchedulerConfig()
    for point, args in entries:
        config.plugins[point] = [PluginSpec(p.name, p.weight, args) if p.name == "Capacity"
                                 else p for p in config.plugins[point]]
    return Framework(config, REGISTRY, {"stickiness_weight": 0.1})


def test_arguments_on_the_score_entry_count() -> None:
    capacity = fw(("score", {"strategy": "MostAllocated"})).instances["Capacity"]
    assert isinstance(capacity, Capacity) and capacity.strategy == "MostAllocated"
    with pytest.raises(ValueError, match="plugin Capacity: argument strategy: Invalid enum "
                                         "value 'Bogus'"):
        fw(("score", {"strategy": "Bogus"}))
    with pytest.raises(ValueError, match="'strategy' is 'MostAllocated' in plugins.preFilter "
                                         "and 'LeastAllocated' in plugins.filter"):
        fw(("preFilter", {"strategy": "MostAllocated"}), ("filter", {"strategy": "LeastAllocated"}))


def test_unknown_or_malformed_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown argument.*weights; it takes: resources, "
                                         "strategy"):
        fw(("score", {"weights": [1]}))
    with pytest.raises(ValueError, match=r"argument resources\[0\]\.weight: Expected 'int' >= 1"):
        fw(("score", {"resources": [{"name": "cpu", "weight": 0}]}))
    with pytest.raises(ValueError, match=r"argument resources\[1\]: cpu is listed twice"):
        fw(("score", {"resources": [{"name": "cpu"}, {"name": "cpu", "weight": 2}]}))
    with pytest.raises(ValueError, match="argument resources: Expected 'array' of length >= 1"):
        fw(("score", {"resources": []}))
    with pytest.raises(ValueError, match="unknown argument"):
        fw(("filter", {"strategy": "MostAllocated", "extra": 1}))


def decide_on(rooms: dict[str, Room], need: Resources) -> Decision | NoFit:
    snap = FakeSnapshot([cluster(n) for n in rooms], room_of=rooms)
    return decide(fw(), app(demand=Demand(1, need, whole=need)), snap, [])


def test_what_is_not_asked_for_is_not_checked() -> None:
    """fit_test.go: a pod asking for an extended resource alone fits a node whose CPU
    and memory are over-committed (requested counts Pending pods)."""
    alloc = Resources(4000, 10000, 110, (("nvidia.com/gpu", 2),))
    over = Room(alloc, alloc - Resources(6000, 20000, 10))  # free: -2000m, -10000
    gpu_only = Resources(pods=1, scalar=(("nvidia.com/gpu", 1),))
    outcome = decide_on({"c": over}, gpu_only)
    assert isinstance(outcome, Decision) and [t.name for t in outcome.targets] == ["c"]
    cpu_too = decide_on({"c": over}, Resources(cpu=100, pods=1))
    assert isinstance(cpu_too, NoFit) and "insufficient cpu" in cpu_too.reason
    assert "memory" not in cpu_too.reason


def test_one_gpu_vendor_does_not_stand_in_for_another() -> None:
    nvidia = Resources(8000, 1 << 34, 110, (("nvidia.com/gpu", 4),))
    amd = Resources(8000, 1 << 34, 110, (("amd.com/gpu", 4),))
    need = Resources(cpu=500, pods=1, scalar=(("amd.com/gpu", 1),))
    outcome = decide_on({"n": Room(nvidia, nvidia), "a": Room(amd, amd)}, need)
    assert isinstance(outcome, Decision) and [t.name for t in outcome.targets] == ["a"]
    none = decide_on({"n": Room(nvidia, nvidia)}, need)
    assert isinstance(none, NoFit) and "insufficient amd.com/gpu" in none.reason


def c(cpu: str, restart: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Mi"}}}
    if restart:
        out["restartPolicy"] = restart
    return out


@pytest.mark.parametrize(("spec", "cpu"), [
    ({"containers": [c("100m"), c("200m")]}, 300),
    # an init container runs alone: the larger
    ({"containers": [c("100m")], "initContainers": [c("500m")]}, 500),
    # a sidecar runs with the containers: added
    ({"containers": [c("100m")], "initContainers": [c("200m", "Always")]}, 300),
    # an init container after a sidecar runs beside it: 500m + 200m
    ({"containers": [c("100m")], "initContainers": [c("200m", "Always"), c("500m")]}, 700),
    # one before it does not
    ({"containers": [c("100m")], "initContainers": [c("500m"), c("200m", "Always")]}, 500),
    # pod-level requests stand in for the containers' (cpu here, memory from them)
    ({"containers": [c("100m")], "resources": {"requests": {"cpu": "2"}}}, 2000),
    # overhead is added after all
    ({"containers": [c("100m")], "initContainers": [c("200m", "Always")],
      "overhead": {"cpu": "50m"}}, 350),
])
def test_pod_requests_as_the_kubernetes_scheduler_counts_them(spec: dict[str, Any],
                                                              cpu: int) -> None:
    asked = pod_requests(spec, "spec")
    assert asked.cpu == cpu and asked.pods == 1


def test_sidecars_count_for_memory_and_in_a_manifest() -> None:
    deployment = {"kind": "Deployment", "spec": {"replicas": 2, "template": {"spec": {
        "containers": [{"name": "a", "resources": {"requests": {"memory": "1Gi"}}}],
        "initContainers": [{"name": "proxy", "restartPolicy": "Always",
                            "resources": {"requests": {"memory": "256Mi",
                                                       "ephemeral-storage": "1Gi"}}}]}}}}
    d = demand([deployment])
    assert d.per_replica.memory == (1 << 30) + (256 << 20)
    assert d.per_replica.get("ephemeral-storage") == 1 << 30
    assert d.whole.get("ephemeral-storage") == 2 << 30


def test_a_placed_application_does_not_chase_an_emptier_cluster() -> None:
    """#26 item 5: as clusters fill their Capacity score falls by more than the
    stickiness; a placed application stays where it fits, as a running pod does."""
    alloc = Resources(4000, 8 << 30, 110)
    busy = Room(alloc, Resources(500, 1 << 30, 100))  # 3.5 cores and 7 Gi asked there
    empty = Room(alloc, alloc)
    need = Resources(cpu=1000, memory=1 << 30, pods=1)
    snap = FakeSnapshot([cluster("busy"), cluster("empty")],
                        room_of={"busy": busy, "empty": empty})
    subject = app(demand=Demand(1, need, whole=need))
    new = decide(fw(), subject, snap, [])
    assert isinstance(new, Decision) and [t.name for t in new.targets] == ["empty"]
    placed_there = [Target("Cluster", "busy", "default")]
    snap.targets = {"app": ["busy"]}  # where the snapshot says it runs (stickiness)
    stays = decide(fw(), subject, snap, placed_there)
    assert isinstance(stays, Decision) and [t.name for t in stays.targets] == ["busy"]
    # It no longer fits there (what it holds counts as free: 1.5 cores, 2 Gi): it moves.
    shrunk = Room(alloc, Resources(-600, 0, 100))
    gone = decide(fw(), subject, FakeSnapshot([cluster("busy"), cluster("empty")],
                                             room_of={"busy": shrunk, "empty": empty},
                                             targets={"app": ["busy"]}), placed_there)
    assert isinstance(gone, Decision) and [t.name for t in gone.targets] == ["empty"]


def test_the_explanation_gives_the_chosen_cluster_its_room() -> None:
    alloc = Resources(4000, 8 << 30, 110)
    rooms = {"busy": Room(alloc, Resources(2000, 3 << 30, 100)),
             "empty": Room(alloc, alloc), "full": Room(alloc, Resources(0, 0, 0))}
    snap = FakeSnapshot([cluster(n) for n in rooms], room_of=rooms)
    need = Resources(cpu=1000, memory=1 << 30, pods=1)
    framework = fw()
    decision = decide(framework, app(demand=Demand(1, need, whole=need)), snap, [])
    assert isinstance(decision, Decision) and [t.name for t in decision.targets] == ["empty"]
    listed = {e["candidate"].rsplit("/", 1)[1]: e
              for e in decision.explained(framework, snap, 10) if "candidate" in e}
    assert set(listed) == {"busy", "empty"}  # full is rejected
    assert (listed["empty"]["free"], listed["empty"]["allocatable"]) == (
        str(rooms["empty"].free), str(alloc))
    assert "free" not in listed["busy"] and listed["busy"]["score"] < listed["empty"]["score"]


def test_subjects_of_one_signature_share_the_views_of_its_rejections() -> None:
    """The reason's counts and the explanation's rejected groups are built once per
    signature: equal subjects' evaluations share them — unless a filter of the subject's
    own (capacity) rejected more, whose counts the shared views do not hold."""
    from berth.controllers.scheduler.framework import CycleState
    from berth.controllers.scheduler.framework.selection import summary

    alloc = Resources(4000, 8 << 30, 110)
    snap = FakeSnapshot([cluster(f"de{i}", labels={"location": "DE"}) for i in range(2)]
                        + [cluster("fr", labels={"location": "FR"})],
                        room_of={"de0": Room(alloc, alloc),
                                 "de1": Room(alloc, Resources(500, 1 << 30, 10)),
                                 "fr": Room(alloc, alloc)})
    framework = fw()

    def evaluated(name: str, need: Resources) -> Any:
        subject = app(name, label_constraints=("location = DE",),
                      demand=Demand(1, need, whole=need))
        subject.signature = b"same"
        state = CycleState()
        framework.pre_filter(state, subject, snap)
        return framework.evaluate(state, subject, snap)

    none = Resources(0, 0, 0)
    first, second = evaluated("a", none), evaluated("b", none)
    assert second.views is first.views
    assert summary("Cluster", second) == (
        "2/3 clusters are available: 1 label constraint 'location == DE'")
    fits = evaluated("e", Resources(cpu=100, memory=1 << 20, pods=1))  # judged, fits both
    assert fits.views is first.views
    needy = evaluated("c", Resources(cpu=1000, memory=1 << 30, pods=1))  # not on de1
    assert needy.views is not first.views
    assert summary("Cluster", needy) == ("1/3 clusters are available: 1 insufficient cpu, "
                                         "1 label constraint 'location == DE'")
    assert summary("Cluster", evaluated("d", none)) == summary("Cluster", first)
