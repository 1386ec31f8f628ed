"""A Snapshot in memory, for table-driven plugin and pipeline tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.framework import (
    Candidate,
    CycleState,
    Evaluation,
    Fleet,
    Framework,
    MetricReading,
    Placed,
    Quota,
    Ranking,
    Ref,
    Room,
    Subject,
)
from berth.controllers.scheduler.framework.rooms import Rooms
from berth.controllers.scheduler.framework.selection import select
from berth.controllers.scheduler.plugins import REGISTRY
from berth.store import keys
from berth.store.documents import MetricRef, Reachability, Target
from berth.store.documents.resources import Demand


def cluster(name: str, *, labels: dict[str, str] | None = None, state: Reachability | None = Reachability.ONLINE,
            metrics: dict[str, float] | None = None, **kw: object) -> Candidate:
    """A cluster whose metrics are given as {name: weight}."""
    refs = tuple(MetricRef(m, w) for m, w in (metrics or {}).items())
    return Candidate(Ref("Cluster", "default", name), labels or {}, refs, state=state,
                     **kw)  # type: ignore[arg-type]


def app(name: str = "app", **kw: object) -> Subject:
    return Subject(Ref("Application", "default", name), keys.resource_key("Application", name, "default"),
                   "Cluster", **kw)  # type: ignore[arg-type]


@dataclass
class FakeSnapshot:
    clusters: list[Candidate]
    values: dict[tuple[str, str], MetricReading | float] = field(default_factory=dict)
    targets: dict[str, list[str]] = field(default_factory=dict)  # subject name → cluster names
    others: list[Placed] = field(default_factory=list)  # other placed workloads
    epoch: int = 1
    room_of: dict[str, Room] = field(default_factory=dict)  # cluster name → its capacity
    sets: dict[str, list[str]] = field(default_factory=dict)  # namespace → sets bound to it

    def capacity(self, candidate: Candidate) -> Room | None:
        return self.room_of.get(candidate.ref.name)

    def rooms(self, fleet: Fleet) -> Rooms:
        return Rooms([self.capacity(c) for c in fleet.candidates])

    demands: dict[tuple[str, str], Demand] = field(default_factory=dict)  # (subject, cluster)

    def demand_on(self, subject: Subject, candidate: Candidate) -> Demand:
        return self.demands.get((subject.ref.name, candidate.ref.name), subject.demand)

    def demand_varies(self, subject: Subject) -> bool:
        return any(s == subject.ref.name for s, _ in self.demands)

    def candidates(self, subject: Subject) -> list[Candidate]:
        return [c for c in self.clusters if c.ref.namespace == subject.ref.namespace]

    fleets: dict[tuple[object, ...], Fleet] = field(default_factory=dict)

    def fleet(self, subject: Subject) -> Fleet:
        """One Fleet per namespace, epoch and list of clusters (tests may change them)."""
        mine = sorted(self.candidates(subject), key=lambda c: c.key)
        where = (subject.ref.namespace, self.epoch, tuple(id(c) for c in mine))
        if where not in self.fleets:
            self.fleets[where] = Fleet(mine, metric_epoch=self.epoch)
        return self.fleets[where]

    def namespaces(self, kind: str) -> list[str]:
        return sorted({c.ref.namespace or "" for c in self.clusters} - {""})

    def bound_sets(self, namespace: str | None) -> list[str]:
        return self.sets.get(namespace or "", [])

    quotas: dict[str, Quota] = field(default_factory=dict)  # namespace → its quota, used

    def quota(self, subject: Subject) -> Quota | None:
        return self.quotas.get(subject.ref.namespace or "")

    def candidate_by_key(self, key: str) -> Candidate | None:
        return next((c for c in self.clusters if c.key == key), None)

    def metric(self, candidate: Candidate, ref: MetricRef) -> MetricReading:
        v = self.values.get((candidate.ref.name, ref.name))
        if v is None:
            return MetricReading(ref.name, ref.weight, reason="MISSING_METRIC_VALUE")
        if isinstance(v, MetricReading):
            return v
        return MetricReading(ref.name, ref.weight, value=v, normalized=v)

    failures: dict[str, dict[str, float]] = field(default_factory=dict)  # subject → key → at

    def failed(self, subject: Subject) -> Mapping[str, float]:
        return self.failures.get(subject.ref.name, {})

    def current_targets(self, subject: Subject) -> list[Target]:
        return [Target("Cluster", n, "default") for n in self.targets.get(subject.ref.name, [])]

    def placed_on_since(self, namespace: str | None, label: str, value: str, since: int
                        ) -> tuple[int, list[tuple[Ref, int]], bool]:
        """Always the whole of it: no journal here."""
        whole = Counter(t for p in self.placed(namespace, {label: value}) for t in p.targets)
        return 0, list(whole.items()), True

    def placements_version(self, namespace: str | None, labels: Mapping[str, str]) -> int:
        return hash(tuple(id(p) for p in self.others))

    deps: dict[str, tuple[str, ...]] = field(default_factory=dict)  # subject name → names

    def placed_as(self, key: str) -> list[Target] | None:
        name = keys.parse_key(key).name
        if name not in self.targets:
            return None
        return [Target("Cluster", n, "default") for n in self.targets[name]]

    def depends_on(self, key: str) -> tuple[str, ...]:
        return tuple(keys.resource_key("Application", n, "default")
                     for n in self.deps.get(keys.parse_key(key).name, ()))

    followers: set[str] = field(default_factory=set)  # names placed with their dependents

    def dependents_of(self, key: str) -> list[str]:
        name = keys.parse_key(key).name
        return sorted(keys.resource_key("Application", n, "default")
                      for n, on in self.deps.items() if name in on)

    consents: set[tuple[str, str]] = field(default_factory=set)  # (dependent's ns, its)

    def may_depend(self, namespace: str | None, on: str | None) -> bool:
        return namespace == on or (namespace or "", on or "") in self.consents

    def follows(self, key: str) -> bool:
        return keys.parse_key(key).name in self.followers

    def placed(self, namespace: str | None,
               labels: Mapping[str, str] | None = None) -> list[Placed]:
        return [p for p in self.others if p.ref.namespace == namespace and all(
            p.labels.get(k) == v for k, v in (labels or {}).items())]


HEAT = {"heat": 1.0}  # one metric, weight 1


def ranked_fleet(n: int = 5) -> FakeSnapshot:
    """Clusters c0..c{n-1} scored by ``heat``, c0 the best."""
    return FakeSnapshot([cluster(f"c{i}", metrics=HEAT) for i in range(n)],
                        {(f"c{i}", "heat"): 1.0 - i / 10 for i in range(n)})


def evaluate(snapshot: FakeSnapshot, subject: Subject,
             config: SchedulerConfig | None = None) -> tuple[Evaluation, list[str]]:
    """Run pre-filter, filter, score and selection; return the evaluation and the chosen."""
    fw = Framework(config or SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.1})
    state = CycleState()
    status = fw.pre_filter(state, subject, snapshot)
    if not status.ok:
        fleet = snapshot.fleet(subject)
        return Evaluation(fleet, 0, [], Ranking.of(fleet, []), error=status), []
    ev = fw.evaluate(state, subject, snapshot)
    chosen = select(subject, ev.ranked, snapshot.current_targets(subject),
                    fill=fw.selector(state))
    return ev, [r.candidate.ref.name for r in chosen]


def rejected_both_ways(plugin: Any, subject: Subject, snapshot: FakeSnapshot,
                       state: CycleState | None = None) -> tuple[list[str], list[str]]:
    """The clusters ``plugin`` rejects by its set form (``filter_set``) and one by one
    (``filter``), by name in the fleet's order: a plugin's two forms must agree."""
    state = state or CycleState()
    fleet = snapshot.fleet(subject)
    every = (1 << len(fleet)) - 1
    by_set = [c.ref.name for _, bits in plugin.filter_set(state, subject, fleet, every, snapshot)
              for c in fleet.select(bits)]
    one_by_one = [c.ref.name for c in fleet.select(every)
                  if not plugin.filter(state, subject, c, snapshot).ok]
    return sorted(by_set), sorted(one_by_one)

