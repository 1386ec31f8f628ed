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

It runs only for applications that ask for resources.
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
from berth.controllers.scheduler.plugins.replicas import current_share, divided, room
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
        cap = snapshot.capacity(candidate)
        if cap is None:
            return SUCCESS
        if divided(subject):
            if room(subject, candidate, snapshot, state.current) >= 1:
                return SUCCESS
        else:
            free = self._free(state, subject, candidate, cap.free)
            if subject.demand.whole.fits(free):
                return SUCCESS
            return unschedulable(f"insufficient {', '.join(subject.demand.whole.short(free))}")
        short = subject.demand.on(1).short(self._free(state, subject, candidate, cap.free))
        return unschedulable(f"insufficient {', '.join(short) or 'room'}")

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

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        cap = snapshot.capacity(candidate)
        if cap is None:
            return 0.0
        alloc = cap.allocatable
        free = self._free(state, subject, candidate, cap.free)
        need = self._need(state, subject, candidate)
        dims = [(alloc.cpu, free.cpu, need.cpu), (alloc.memory, free.memory, need.memory)]
        if need.gpu:
            dims.append((alloc.gpu, free.gpu, need.gpu))
        used = [min(1.0, max(0.0, (a - f + n) / a)) for a, f, n in dims if a > 0]
        if not used:
            return 0.0
        if self.strategy == "MostAllocated":
            return sum(used) / len(used)
        if self.strategy == "BalancedAllocation":
            return 1.0 - (statistics.pstdev(used) if len(used) > 1 else 0.0)
        return 1.0 - sum(used) / len(used)

    def score_set(self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
                  snapshot: Snapshot) -> list[tuple[int, float]]:
        return [(1 << i, v) for i in ordinals(feasible)
                if (v := self.score(state, subject, fleet.candidates[i], snapshot))]

    def describe(self, state: CycleState, subject: Subject, candidate: Candidate,
                 snapshot: Snapshot) -> dict[str, Any]:
        cap = snapshot.capacity(candidate)
        if cap is None or not (subject.demand.whole or subject.demand.per_replica):
            return {}
        return {"free": str(cap.free), "allocatable": str(cap.allocatable)}
