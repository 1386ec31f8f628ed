"""Capacity: does the application fit on a cluster, and how full would it be (seed 002).

The filter (Kubernetes' NodeResourcesFit, at cluster scale) rejects a cluster
whose free CPU, memory, GPUs or pods cannot hold the application: the whole
manifest for a duplicated one, one replica for a divided one (the division
then gives each cluster no more than it has room for). Free is what the
cluster's Nodes offer, minus what its Pods ask, minus what berth placed there
and the cluster has not reported yet (assumed, so that a burst of placements
never over-commits a cluster); what the application holds there now counts
as free for it. A cluster that reports no capacity (no Nodes listed) is not
judged.

The score places the application, as the Kubernetes scheduler places a pod,
by one of (``strategy`` in the plugin's args):

* ``LeastAllocated`` (default): the emptiest cluster — the mean over CPU and
  memory (and GPUs if it asks for them) of the fraction left free after it;
* ``MostAllocated``: the fullest that still fits (bin packing);
* ``BalancedAllocation``: the cluster whose CPU and memory use stay closest to
  each other (1 - their spread).

Scores are in hundredths (the Kubernetes scheduler's 0-100), so the set form
has at most 101 terms. It runs only for applications that ask for resources.
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
from berth.controllers.scheduler.plugins.replicas import current_share, divided
from berth.store.documents.resources import Resources

NAME = "Capacity"
STRATEGIES = ("LeastAllocated", "MostAllocated", "BalancedAllocation")


class Capacity(Plugin):
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.strategy = str(self.args.get("strategy", "LeastAllocated"))
        if self.strategy not in STRATEGIES:
            raise ValueError(f"plugin {NAME}: strategy {self.strategy!r} is not one of "
                             f"{', '.join(STRATEGIES)}")

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
        need = self._need(state, subject, candidate)
        dims = [(alloc.cpu, free.cpu, need.cpu), (alloc.memory, free.memory, need.memory)]
        if need.gpu:
            dims.append((alloc.gpu, free.gpu, need.gpu))
        used = [min(1.0, max(0.0, (a - f + n) / a)) for a, f, n in dims if a > 0]
        if not used:
            return 0.0
        if self.strategy == "MostAllocated":
            score = sum(used) / len(used)
        elif self.strategy == "BalancedAllocation":
            score = 1.0 - (statistics.pstdev(used) if len(used) > 1 else 0.0)
        else:
            score = 1.0 - sum(used) / len(used)
        return round(score, 2)  # in hundredths, as the Kubernetes scheduler's 0-100

    def score_set(self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
                  snapshot: Snapshot) -> list[tuple[int, float]]:
        """Candidates grouped by score: at most 101 terms, whatever the fleet's size."""
        groups: dict[float, int] = {}
        for i in ordinals(feasible):
            v = self.score(state, subject, fleet.candidates[i], snapshot)
            if v:
                groups[v] = groups.get(v, 0) | (1 << i)
        return [(bits, v) for v, bits in groups.items()]

    def describe(self, state: CycleState, subject: Subject, candidate: Candidate,
                 snapshot: Snapshot) -> dict[str, Any]:
        cap = snapshot.capacity(candidate)
        if cap is None or not (subject.demand.whole or subject.demand.per_replica):
            return {}
        return {"free": str(cap.free), "allocatable": str(cap.allocatable)}
