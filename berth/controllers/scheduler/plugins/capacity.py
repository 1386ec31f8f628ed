"""Capacity: does the application fit on a cluster, and how full would it be (seed 002).

The filter (Kubernetes' NodeResourcesFit, at cluster scale) rejects a cluster
without room for what the application asks — the whole manifest for a
duplicated one, one replica for a divided one (the division then gives each
cluster no more than it has room for) — in each resource it asks for more
than 0 of (CPU, memory, pods, and every other by its name: ``amd.com/gpu`` is
met by ``amd.com/gpu`` alone); what it does not ask for is not checked,
however over-committed the cluster is in it. Free is what the cluster's Nodes
offer, minus what its Pods ask, minus what berth placed there and the cluster
has not reported yet (assumed, so that a burst of placements never
over-commits a cluster); what the application holds there now counts as free
for it. A cluster that reports no capacity (no Nodes listed) is not judged.

The score is the Kubernetes scheduler's NodeResourcesFit score (or
NodeResourcesBalancedAllocation's) with its integer arithmetic, over the
cluster's totals, by ``strategy``:

* ``LeastAllocated`` (default): the emptiest cluster, ``(allocatable -
  requested) * 100 / allocatable`` per resource, weighted;
* ``MostAllocated``: the fullest that still fits (bin packing), ``requested *
  100 / allocatable``;
* ``BalancedAllocation``: the cluster whose resources' use stays closest
  together, ``(1 - their standard deviation) * 100``;

``requested`` includes the application. ``resources`` (as Kubernetes'
``scoringStrategy.resources``: ``[{name, weight}]``, weights 1-100) names the
resources scored, by default CPU and memory with weight 1; a resource the
cluster has none of is left out, and so is an extended resource the
application does not ask for. Where berth differs: a container without
requests counts as 0, not Kubernetes' 100m CPU and 200 MB for scoring (an
application that asks for nothing is not scored here at all). Scores are the
0-100 integers divided by 100, so the set form has at most 101 terms.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any

from berth.controllers.scheduler.framework import (
    SKIP,
    SUCCESS,
    Candidate,
    CycleState,
    Fleet,
    Plugin,
    Snapshot,
    Status,
    Subject,
    ordinals,
    unschedulable,
)
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.plugins.replicas import current_share, divided
from berth.store.documents.resources import Resources

NAME = "Capacity"
STRATEGIES = ("LeastAllocated", "MostAllocated", "BalancedAllocation")


def _held(state: CycleState) -> set[str]:
    """The candidates the subject runs on now, by key."""
    return {candidate_key(t.kind, t.namespace, t.name) for t in state.current}


DEFAULT_RESOURCES = (("cpu", 1), ("memory", 1))  # Kubernetes' scoringStrategy default
_NATIVE = ("cpu", "memory", "pods", "ephemeral-storage")


def _resources(value: Any) -> tuple[tuple[str, int], ...]:
    """The ``resources`` argument: ``[{name: cpu, weight: 1}, ...]``."""
    if not isinstance(value, list) or not value:
        raise ValueError(f"plugin {NAME}: resources must be a non-empty list of "
                         f"{{name, weight}}, not {value!r}")
    out: list[tuple[str, int]] = []
    for i, item in enumerate(value):
        name = item.get("name") if isinstance(item, dict) else None
        weight = item.get("weight", 1) if isinstance(item, dict) else None
        if (not isinstance(name, str) or not name or set(item) - {"name", "weight"}
                or not isinstance(weight, int) or isinstance(weight, bool)
                or not 1 <= weight <= 100):
            raise ValueError(f"plugin {NAME}: resources[{i}] must be {{name: RESOURCE, "
                             f"weight: 1-100}}, not {item!r}")
        if name in (n for n, _ in out):
            raise ValueError(f"plugin {NAME}: resources[{i}]: {name} is listed twice")
        out.append((name, weight))
    return tuple(out)


class Capacity(Plugin):
    name = NAME
    ARGS = frozenset({"strategy", "resources"})

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.strategy = self.args.get("strategy", "LeastAllocated")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"plugin {NAME}: strategy {self.strategy!r} is not one of "
                             f"{', '.join(STRATEGIES)}")
        self.resources = (_resources(self.args["resources"]) if "resources" in self.args
                          else DEFAULT_RESOURCES)

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        return SUCCESS if subject.demand.whole or subject.demand.per_replica else SKIP

    def _need(self, state: CycleState, subject: Subject, candidate: Candidate
              ) -> Resources:
        """What must be free on ``candidate`` beyond what the subject holds there now."""
        d = subject.demand
        return d.on(1) if divided(subject) else d.whole

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        found = self._room(state, subject, candidate, snapshot)
        if found is None:
            return SUCCESS
        _, free = found
        need = subject.demand.on(1) if divided(subject) else subject.demand.whole
        if need.fits(free):
            return SUCCESS
        return unschedulable(f"insufficient {', '.join(need.short(free)) or 'room'}")

    def _free(self, state: CycleState, subject: Subject, candidate: Candidate,
              free: Resources) -> Resources:
        held = current_share(subject, state.current, candidate)
        return free + subject.demand.on(held) if held is not None else free

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        groups: dict[Status, int] = {}
        for i in ordinals(within):
            status = self.filter(state, subject, fleet.candidates[i], snapshot)
            if not status.ok:
                groups[status] = groups.get(status, 0) | (1 << i)
        return list(groups.items())

    def _room(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> tuple[Resources, Resources] | None:
        """(allocatable, free for the subject) of ``candidate``, once per attempt: the
        filter and the score both ask."""
        memo: dict[str, tuple[Resources, Resources] | None] = state.data.setdefault(
            "capacity", {})
        if candidate.key not in memo:
            cap = snapshot.capacity(candidate)
            memo[candidate.key] = None if cap is None else (
                cap.allocatable, self._free(state, subject, candidate, cap.free))
        return memo[candidate.key]

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        room = self._room(state, subject, candidate, snapshot)
        if room is None:
            return 0.0
        alloc, free = room
        return self.points(alloc, alloc - free + self._need(state, subject, candidate),
                           self._need(state, subject, candidate)) / 100

    def points(self, alloc: Resources, requested: Resources, need: Resources) -> int:
        """The Kubernetes scheduler's 0-100 score of a cluster with ``alloc``
        allocatable and ``requested`` asked of it (the application's ``need``
        included), in its integer arithmetic."""
        scored = [(alloc.get(name), requested.get(name), weight)
                  for name, weight in self.resources
                  if alloc.get(name) > 0 and (name in _NATIVE or need.get(name) > 0)]
        if self.strategy == "BalancedAllocation":
            fractions = [min(1.0, r / a) for a, r, _ in scored]
            if len(fractions) == 2:
                std = abs(fractions[0] - fractions[1]) / 2
            elif len(fractions) > 2:
                std = statistics.pstdev(fractions)
            else:
                std = 0.0
            return int((1 - std) * 100)
        total = weights = 0
        for a, r, weight in scored:
            if self.strategy == "MostAllocated":
                total += min(r, a) * 100 // a * weight
            else:
                total += ((a - r) * 100 // a if r <= a else 0) * weight
            weights += weight
        return total // weights if weights else 0

    def normalize(self, state: CycleState, subject: Subject, scores: dict[str, float]) -> None:
        """Where the subject runs now scores as well as the best candidate: the Kubernetes
        scheduler never moves a running pod for its score, so a placed application moves
        for capacity only when it no longer fits (the filter), never because another
        cluster is emptier — as clusters fill, their scores fall by more than the
        stickiness, and placed applications would chase the emptiest. Among the other
        candidates (a move that metrics or a spec change make) the score still ranks."""
        held = _held(state) & scores.keys()
        if held:
            best = max(scores.values())
            for key in held:
                scores[key] = best

    def score_set(self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
                  snapshot: Snapshot) -> list[tuple[int, float]]:
        """Candidates grouped by score: at most 101 terms, whatever the fleet's size."""
        scores = {fleet.keys[i]: self.score(state, subject, fleet.candidates[i], snapshot)
                  for i in ordinals(feasible)}
        self.normalize(state, subject, scores)
        groups: dict[float, int] = {}
        for key, v in scores.items():
            if v:
                groups[v] = groups.get(v, 0) | (1 << fleet.by_key[key])
        return [(bits, v) for v, bits in groups.items()]

    def describe(self, state: CycleState, subject: Subject, candidate: Candidate,
                 snapshot: Snapshot) -> dict[str, Any]:
        cap = snapshot.capacity(candidate)
        if cap is None or not (subject.demand.whole or subject.demand.per_replica):
            return {}
        return {"free": str(cap.free), "allocatable": str(cap.allocatable)}
