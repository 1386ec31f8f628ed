"""The set-at-a-time engine decides exactly as the per-candidate reference does.

Random fleets (labels present and missing, metrics usable, missing, errored
and equal, custom resources, taints of every effect, every health state,
deleted clusters, two namespaces, capacity reported or not, over-committed
too) and random subjects (every constraint grammar form, selectors, required
and preferred cluster affinity, workload affinity and anti-affinity against
placed workloads, tolerations, every placement policy, topology spread,
workloads with requests, duplicated and divided every way, current targets
for stickiness and held capacity, sampling)
are evaluated by ``Framework(reference=True)`` — every plugin called once per
candidate — and by the default engine. They must agree on the feasible set,
on why each rejected candidate was rejected, and on the ranking up to ties.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from berth.controllers.scheduler.config import PluginSpec, SchedulerConfig
from berth.controllers.scheduler.framework import (
    CycleState,
    Evaluation,
    Framework,
    Placed,
    Ref,
    ranking,
)
from berth.controllers.scheduler.framework.selection import explanation, select, summary
from berth.controllers.scheduler.framework.types import MetricReading, Room, Subject
from berth.controllers.scheduler.plugins import REGISTRY
from berth.store.documents import (
    Affinity,
    ClusterAffinity,
    ClusterSelector,
    ClusterSelectorTerm,
    MatchExpression,
    Placement,
    PreferredTerm,
    ReplicaScheduling,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WorkloadAffinity,
    WorkloadAffinityTerm,
)
from berth.store.documents.application import WeightedWorkloadTerm, WorkloadSelector
from berth.store.documents.resources import NOTHING, Demand, Resources
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster

LABELS = {"location": ["DE", "FR", "IT"], "zone": ["a", "b", "c", "d"], "tier": ["1", "2", "3"],
          "gpu": ["yes", "no"], "env": ["prod", "dev"], "team": ["x", "y"]}
METRICS = ["heat", "cost", "load", "odd"]
RESOURCES = ["crontabs.stable.example.com", "certs.cm.io", "dbs.example.org"]
LABEL_FORMS = ["{k} is {v}", "{k} = {v}", "{k} == {v}", "{k} is not {v}", "{k} != {v}",
               "{k} in ({v}, {w})", "{k} not in ({v}, {w})", "{k} IN ({v})"]
METRIC_OPS = ["=", "!=", ">", ">=", "=>", "<", "<=", "=<", "gt", "gte", "lt", "lte",
              "greater than", "less than or equal", "is", "is not", "=="]


def random_fleet(rng: random.Random) -> FakeSnapshot:
    clusters = []
    values: dict[tuple[str, str], MetricReading | float] = {}
    for i in range(rng.randint(0, 60)):
        name = f"c{i:02d}"
        labels = {k: rng.choice(vs) for k, vs in LABELS.items() if rng.random() < 0.75}
        metrics = {m: rng.choice([0.0, 0.2, 0.5, 1.0]) for m in METRICS if rng.random() < 0.6}
        taints = tuple(Taint(rng.choice(["gpu", "maint"]),
                             rng.choice(["NoSchedule", "NoExecute", "PreferNoSchedule"]),
                             rng.choice([None, "yes", "no"]))
                       for _ in range(rng.choice([0, 0, 0, 1, 2])))
        c = cluster(name, labels=labels, metrics=metrics,
                    state=rng.choice(["ONLINE"] * 7 + ["OFFLINE", "UNHEALTHY", ""]),
                    custom_resources=frozenset(r for r in RESOURCES if rng.random() < 0.5),
                    taints=taints, deleted=rng.random() < 0.05)
        if rng.random() < 0.1:
            c.ref = Ref("Cluster", "other", name)
            c.key = f"Cluster/other/{name}"
        clusters.append(c)
        for m in metrics:
            roll = rng.random()
            if roll < 0.1:
                continue  # MISSING_METRIC_VALUE
            if roll < 0.15:
                values[(name, m)] = MetricReading(m, metrics[m], rng.choice([None, 3.0]),
                                                  reason=rng.choice(["UNKNOWN_METRIC",
                                                                     "INVALID_METRIC"]))
            elif roll < 0.18:
                values[(name, m)] = MetricReading(m, metrics[m], math.nan, 0.0)
            else:  # few distinct values: ties and equal thresholds happen
                raw = float(rng.randint(0, 10)) if rng.random() < 0.5 else rng.uniform(0, 10)
                values[(name, m)] = MetricReading(m, metrics[m], raw, raw / 10)
    snap = FakeSnapshot(clusters, values)
    for c in clusters:  # capacity: most clusters report it; few values, so ties and
        if rng.random() < 0.8:  # exact fits happen; some over-committed (free < 0)
            # 2**62: beyond the int64 arrays the set form scores on (Python ints then)
            alloc = Resources(rng.choice([4000, 8000, 16000]),
                              rng.choice([8, 16, 32, 8, 16, 32, 1 << 32]) << 30,
                              rng.choice([0, 110, 220]),
                              (("nvidia.com/gpu", rng.choice([1, 4])),) if rng.random() < 0.3
                              else ())
            used = Resources(rng.choice([0, 1000, 2000, 4000, 9000]),
                             rng.choice([0, 4, 8, 40]) << 30, rng.choice([0, 10, 200]),
                             (("nvidia.com/gpu", rng.choice([0, 1, 2])),))
            snap.room_of[c.ref.name] = Room(alloc, alloc - used)
    return snap
    names = [c.ref.name for c in clusters if c.ref.namespace == "default"]
    for j in range(rng.randint(0, 6)):  # other workloads, for workload (anti-)affinity
        where = tuple(Ref("Cluster", "default", n) for n in rng.sample(names, min(len(names),
                                                                                  rng.randint(1, 2))))
        snap.others.append(Placed(Ref("Application", "default", f"w{j}"),
                                  {"app": rng.choice(["db", "web", "cache"])}, where))
    return snap


def _expression(rng: random.Random) -> MatchExpression:
    key = rng.choice([*LABELS, "nolabel"])
    op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])
    if op in ("Exists", "DoesNotExist"):
        return MatchExpression(key, op)
    if op in ("Gt", "Lt"):
        return MatchExpression("tier" if rng.random() < 0.8 else key, op,
                               [rng.choice(["1", "2", "x"])])
    return MatchExpression(key, op, rng.sample(LABELS.get(key, ["q"]), 1))


def _workload_term(rng: random.Random) -> WorkloadAffinityTerm:
    return WorkloadAffinityTerm(WorkloadSelector({"app": rng.choice(["db", "web", "cache"])}),
                                rng.choice(["location", "zone", "nolabel"]))


def random_subject(rng: random.Random, snap: FakeSnapshot) -> Subject:
    def value(k: str) -> str:
        return rng.choice(LABELS.get(k, ["q"]))

    keys = [*LABELS, "nolabel"]
    labels = tuple(rng.choice(LABEL_FORMS).format(k=(k := rng.choice(keys)), v=value(k),
                                                  w=value(k))
                   for _ in range(rng.choice([0, 1, 1, 2, 3])))
    metrics = tuple(f"{rng.choice([*METRICS, 'nometric'])} {rng.choice(METRIC_OPS)} "
                    f"{rng.choice(['0', '3', '5', '7.5', '10', '4.25'])}"
                    for _ in range(rng.choice([0, 1, 1, 2])))
    placement = rng.choice([
        Placement(), Placement(), Placement(policy="PickAll"),
        Placement(policy="PickN", number_of_clusters=rng.randint(1, 4)),
        Placement(policy="PickN", number_of_clusters=4, topology_spread_constraints=[
            TopologySpreadConstraint(1, "zone", "DoNotSchedule")]),
        Placement(policy="PickN", number_of_clusters=2, replica_scheduling=ReplicaScheduling(
            "Divided", rng.choice(["Weighted", "Capacity", "Aggregated"]))),
        Placement(policy="PickN", number_of_clusters=3, topology_spread_constraints=[
            TopologySpreadConstraint(rng.randint(1, 2), rng.choice(["zone", "location"]),
                                     rng.choice(["DoNotSchedule", "ScheduleAnyway"]))]),
        Placement(policy="PickFixed", cluster_names=[*rng.sample([c.ref.name for c in snap.clusters] or ["none"], 1), "nope"])])
    aff = Affinity()
    if rng.random() < 0.3:
        required = ClusterSelector([ClusterSelectorTerm(
            match_labels={"zone": value("zone")} if rng.random() < 0.3 else {},
            match_expressions=[_expression(rng) for _ in range(rng.randint(0, 2))])
            for _ in range(rng.randint(1, 2))]) if rng.random() < 0.6 else None
        preferred = [PreferredTerm(rng.choice([1, 5, 50]), ClusterSelectorTerm(
            match_expressions=[_expression(rng)])) for _ in range(rng.randint(0, 3))]
        aff.cluster_affinity = ClusterAffinity(required, preferred)
    for attr in ("workload_affinity", "workload_anti_affinity"):
        if rng.random() < 0.15:
            setattr(aff, attr, WorkloadAffinity(
                [_workload_term(rng) for _ in range(rng.randint(0, 1))],
                [WeightedWorkloadTerm(rng.choice([1, 10]), _workload_term(rng))
                 for _ in range(rng.randint(0, 2))]))
    tolerations = tuple(rng.choice([
        Toleration(key="gpu", operator="Exists"), Toleration(key="maint", value="yes"),
        Toleration(operator="Exists"), Toleration(key="gpu", value="no", effect="NoSchedule"),
        Toleration(key="maint", operator="Exists", effect="PreferNoSchedule")])
        for _ in range(rng.choice([0, 0, 1, 2])))
    subject = app("subject", label_constraints=labels, metric_constraints=metrics,
                  custom_resources=tuple(rng.sample(RESOURCES, rng.choice([0, 0, 1, 2]))),
                  cluster_selector={k: value(k) for k in rng.sample(list(LABELS),
                                                                    rng.choice([0, 0, 1]))},
                  affinity=aff, tolerations=tolerations, placement=placement,
                  labels={"app": "web"})
    if rng.random() < 0.6:
        one = Resources(rng.choice([0, 250, 1000, 4000]),
                        rng.choice([0, 1, 4, 16, 0, 1, 4, 16, 1 << 32]) << 30,
                        scalar=(("nvidia.com/gpu", 1),) if rng.random() < 0.2 else ())
        replicas = rng.randint(1, 6)
        subject.demand = Demand(replicas, one, NOTHING, one.times(replicas))
    placed = [c.ref.name for c in snap.clusters if c.ref.namespace == "default"]
    if placed and rng.random() < 0.5:
        snap.targets["subject"] = rng.sample(placed, min(len(placed), rng.randint(1, 2)))
    return subject


def run(fw: Framework, snap: FakeSnapshot, subject: Subject) -> tuple[object, Evaluation | None]:
    state = CycleState(current=snap.current_targets(subject))
    status = fw.pre_filter(state, subject, snap)
    if not status.ok:
        return status, None
    return status, fw.evaluate(state, subject, snap)


def tie_groups(ev: Evaluation) -> list[tuple[int, float, frozenset[str]]]:
    """The ranking as (tier, score, candidates) per run of equal scores."""
    out: list[tuple[int, float, set[str]]] = []
    for r in ev.ranked:
        if out and out[-1][0] == r.tier and abs(out[-1][1] - r.score) <= 1e-9:
            out[-1][2].add(r.candidate.key)
        else:
            out.append((r.tier, r.score, {r.candidate.key}))
    return [(t, s, frozenset(k)) for t, s, k in out]


@pytest.mark.parametrize("seed", range(400))
def test_the_engine_decides_as_the_reference(seed: int, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    if seed % 4 >= 2:  # per-subject scores as arrays, not lists, as for a large fleet
        monkeypatch.setattr(ranking, "DENSE_FROM", 0)
    rng = random.Random(seed)
    snap = random_fleet(rng)
    subject = random_subject(rng, snap)
    pct = rng.choice([100.0, 100.0, 100.0, 50.0])
    config = SchedulerConfig(percentage_of_clusters_to_score=pct)
    strategy: dict[str, Any] = {"strategy": rng.choice(["LeastAllocated", "MostAllocated",
                                                        "BalancedAllocation"])}
    if rng.random() < 0.5:  # scoringStrategy.resources: weighted, extended ones too
        strategy["resources"] = [{"name": n, "weight": rng.randint(1, 5)} for n in
                                 rng.sample(["cpu", "memory", "pods", "nvidia.com/gpu"],
                                            rng.randint(1, 4))]
    config.plugins["score"] = [PluginSpec(p.name, p.weight, strategy) if p.name == "Capacity"
                               else p for p in config.plugins["score"]]
    shared = {"stickiness_weight": 0.1}
    ref_status, ref = run(Framework(config, REGISTRY, shared, reference=True), snap, subject)
    fast_status, fast = run(Framework(config, REGISTRY, shared), snap, subject)
    assert fast_status == ref_status
    if ref is None or fast is None:
        assert ref is fast
        return
    assert fast.error == ref.error
    assert bin(fast.feasible) == bin(ref.feasible)
    assert dict(fast.groups()) == dict(ref.groups())
    assert fast.rejected == ref.rejected
    # one candidate's rejection, as the ledger's records ask it, agrees with the map
    assert {k: fast.rejection(k) for k in fast.fleet.keys} == {
        k: ref.rejected.get(k) for k in fast.fleet.keys}
    assert fast.rejection("Cluster:nowhere/none") is None
    assert fast.counts == ref.counts
    assert summary("Cluster", fast) == summary("Cluster", ref)
    assert len(fast.ranked) == len(ref.ranked)
    got, want = tie_groups(fast), tie_groups(ref)
    assert [(t, k) for t, _, k in got] == [(t, k) for t, _, k in want]
    assert [s for _, s, _ in got] == pytest.approx([s for _, s, _ in want], abs=1e-9)
    for a, b in zip(fast.ranked, ref.ranked, strict=True):
        if a.candidate.key == b.candidate.key:
            nonzero = {k: v for k, v in b.scores.items() if abs(v) > 1e-12}
            assert {k: v for k, v in a.scores.items() if abs(v) > 1e-12} == pytest.approx(
                nonzero, abs=1e-9)
    assert explanation(fast, 10)[len(got) and min(10, len(fast.ranked)):] == \
        explanation(ref, 10)[min(10, len(ref.ranked)):]
    if all(len(k) == 1 for _, _, k in want):  # no ties: the choice is determined
        current = snap.current_targets(subject)
        assert [r.candidate.key for r in select(subject, fast.ranked, current)] == \
            [r.candidate.key for r in select(subject, ref.ranked, current)]


@pytest.mark.parametrize("seed", range(120))
def test_capacity_set_forms_score_as_its_per_candidate_form(seed: int) -> None:
    """Capacity's terms (``score_set``) and values, as a list and as an array
    (``score_values``), give every feasible candidate its per-candidate ``score`` after
    ``normalize`` (where the subject runs now scores as the best), in each strategy."""
    from berth.controllers.scheduler.framework.fleet import ordinals
    from berth.controllers.scheduler.plugins.capacity import Capacity

    rng = random.Random(seed)
    snap = random_fleet(rng)
    subject = random_subject(rng, snap)
    if not (subject.demand.whole or subject.demand.per_replica):
        return
    strategy = ("LeastAllocated", "MostAllocated", "BalancedAllocation")[seed % 3]
    plugin = Capacity({"strategy": strategy})
    fleet = snap.fleet(subject)
    feasible = sum(1 << i for i in range(len(fleet.candidates)) if rng.random() < 0.8)

    def state() -> CycleState:
        return CycleState(current=snap.current_targets(subject), fleet=fleet)

    one = state()
    want = {fleet.candidates[i].key: plugin.score(one, subject, fleet.candidates[i], snap)
            for i in ordinals(feasible)}
    plugin.normalize(one, subject, want)
    terms = {fleet.candidates[i].key: v for bits, v in
             plugin.score_set(state(), subject, fleet, feasible, snap) for i in ordinals(bits)}
    assert {k: terms.get(k, 0.0) for k in want} == want
    at = list(ordinals(feasible))
    for form in (at, np.array(at, np.intp)):
        values = plugin.score_values(state(), subject, fleet, feasible, form, snap)
        if strategy == "BalancedAllocation":
            assert values is None
            continue
        assert values is not None
        assert dict(zip([fleet.candidates[i].key for i in at], [float(v) for v in values],
                        strict=True)) == want


def test_the_fleets_are_varied_enough() -> None:
    """The generator reaches every kind of rejection the property is about."""
    reasons: set[str] = set()
    for seed in range(400):
        rng = random.Random(seed)
        snap = random_fleet(rng)
        subject = random_subject(rng, snap)
        _, ev = run(Framework(SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.1}), snap,
                    subject)
        if ev is not None:
            reasons.update(s.plugin for s, _ in ev.rejections)
    assert reasons >= {"CandidateOnline", "LabelConstraints", "MetricConstraints",
                       "CustomResources", "ClusterSelector", "ClusterAffinity",
                       "TaintToleration", "TopologySpread", "PlacementFixed", "WorkloadAffinity",
                       "Capacity"}


def test_a_ranking_is_built_only_as_far_as_it_is_read() -> None:
    """Picking the best of 2,000 clusters does not score the 2,000 one by one: the
    ranking holds only the entries read (``_done``: a compiled class cannot be
    subclassed to count them), and finds one by key without walking."""
    from berth.controllers.scheduler.framework import Fleet
    from berth.controllers.scheduler.framework.ranking import BaseOrder, Ranking

    n = 2000
    fleet = Fleet([cluster(f"c{i:04d}") for i in range(n)])
    base = BaseOrder(fleet, [0] * n, [i / n for i in range(n)], [{} for _ in range(n)])
    feasible = fleet.all & ~((1 << 1999) | (1 << 1998))  # the two best are not feasible
    ranking = Ranking.banded(base, feasible, [], {})
    assert len(ranking) == n - 2
    assert ranking[0].candidate.ref.name == "c1997"
    assert len(ranking._done) == 1
    assert [r.candidate.ref.name for r in ranking[:3]] == ["c1997", "c1996", "c1995"]
    assert len(ranking._done) == 3
    assert ranking.get("Cluster/default/c1999") is None  # infeasible, found without walking
    assert ranking.get("Cluster/default/c0000") is not None
    assert len(ranking._done) == 3


@pytest.mark.parametrize("few", [False, True], ids=["arrays", "lists"])
def test_additions_rank_exactly_as_bands(few: bool) -> None:
    """Per-subject scores one per feasible candidate, as arrays (``Additions``) or
    lists (``FewAdditions``), give the same ranking, float for float, as the bands they
    replace: tiers, bands from a static score, a score of many values, overlapping
    terms and overrides, read in full."""
    from berth.controllers.scheduler.framework import Fleet
    from berth.controllers.scheduler.framework.ranking import (
        Additions,
        Band,
        BaseOrder,
        FewAdditions,
        Ranking,
        split_all,
    )

    rng = random.Random(7)
    n = 3000
    fleet = Fleet([cluster(f"c{i:04d}") for i in range(n)])
    base = BaseOrder(fleet, [rng.choice([0, 0, 0, 1]) for _ in range(n)],
                     [rng.choice([0.1, 0.2, 0.3]) for _ in range(n)],
                     [{"MetricScore": 0.0} for _ in range(n)])
    feasible = sum(1 << i for i in range(n) if rng.random() < 0.8)
    preferred = sum(1 << i for i in range(n) if rng.random() < 0.3)
    bands = split_all([Band(fleet.all)], [(preferred, 5.0)], 0.2, "ClusterAffinity")
    values = [rng.randrange(101) / 100 for _ in range(n)]
    overlapping = [(sum(1 << i for i in range(n) if rng.random() < 0.1), 1.0)
                   for _ in range(3)]
    by_value: dict[float, int] = {}
    for i in range(n):
        by_value[values[i]] = by_value.get(values[i], 0) | 1 << i
    banded = split_all(split_all(bands, [(b, v) for v, b in by_value.items()], 0.7, "Capacity"),
                       overlapping, 0.3, "WorkloadAffinity")
    adds: Additions | FewAdditions
    if few:
        adds = FewAdditions(base, feasible, bands)
        adds.add_values([values[i] for i in adds.idx], 0.7, "Capacity")
    else:
        adds = Additions(base, feasible, bands)
        adds.add_values(np.array([values[int(i)] for i in adds.idx]), 0.7, "Capacity")
    adds.add_terms(overlapping, 0.3, "WorkloadAffinity")
    pick = next(i for i in range(n) if feasible >> i & 1)
    override = base.entry(pick, 9.0, {"MetricScore": 9.0})
    want = [(r.candidate.key, r.tier, r.score, r.scores) for r in
            Ranking.banded(base, feasible, banded, {pick: override})]
    got = Ranking.added(base, adds, {pick: override})
    assert [(r.candidate.key, r.tier, r.score, r.scores) for r in got] == want
    assert len(got) == len(want) == feasible.bit_count()
    for r in got[:50]:
        found = got.get(r.candidate.key)
        assert found is not None and (found.score, found.scores) == (r.score, r.scores)


def test_scores_are_written_as_round_writes_them_never_an_error() -> None:
    """The 9 decimals of an explanation's or a target's score: ``round(x, 9)``, for
    ordinary scores, huge ones (a huge weight), infinite ones and NaN alike."""
    import math

    from berth.controllers.scheduler.framework.selection import _rounded

    rng = random.Random(3)
    for x in [rng.uniform(-20, 20) for _ in range(20_000)] + [0.1 + 0.2, 0.7, -0.0]:
        assert _rounded(x) == round(x, 9)
    for x in (1e300, -1e300, 9.1e6 + 0.123456789, math.inf, -math.inf):
        assert _rounded(x) == round(x, 9)
    assert math.isnan(_rounded(math.nan))
