"""Capacity: does the application fit on a cluster, and how full would it be
(the Kubernetes scheduler's NodeResourcesFit, per cluster).

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
for it. A cluster that reports no capacity (no Nodes listed, or not reported
yet) passes the filter and scores 0, as a full cluster would.

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
0-100 integers divided by 100, so the set form has at most 101 terms. The set
form computes the fit score of many candidates at once on the fleet's arrays
(numpy), of a few on its lists, with the same integer arithmetic; the runner
takes those values as they are (``score_values``), not grouped into terms.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

import msgspec
import numpy as np
import numpy.typing as npt
from msgspec import Meta

from berth.controllers.scheduler.framework import (
    SKIP,
    SUCCESS,
    Candidate,
    CycleState,
    Fleet,
    Plugin,
    Room,
    Snapshot,
    Status,
    Subject,
    ordinals,
    unschedulable,
)
from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework.fleet import as_mask, bits_of
from berth.controllers.scheduler.framework.helpers.replicas import current_share, divided
from berth.controllers.scheduler.framework.plugin import NoArgs
from berth.controllers.scheduler.framework.rooms import Rooms
from berth.controllers.scheduler.framework.types import candidate_key
from berth.store.documents.resources import Demand, Resources


class ResourceWeight(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: Annotated[str, Meta(min_length=1)]
    weight: Annotated[int, Meta(ge=1, le=100)] = 1


class CapacityArgs(NoArgs, frozen=True):
    strategy: Literal["LeastAllocated", "MostAllocated", "BalancedAllocation"] = "LeastAllocated"
    resources: Annotated[list[ResourceWeight], Meta(min_length=1)] | None = None


NAME = "Capacity"


def _held(state: CycleState) -> set[str]:
    """The candidates the subject runs on now, by key."""
    return {candidate_key(t.kind, t.namespace, t.name) for t in state.current}


@dataclass(slots=True)
class _Attempt:
    """One attempt's demand, worked out once (the cycle state's entry)."""

    need: Resources  # on one cluster: the whole manifest, or one replica if divided
    asked: list[tuple[str, int]]  # the resources it asks more than 0 of
    scored: list[tuple[str, int, int]]  # (resource, weight, asked) for the score
    held: set[str]  # where it runs now (what it holds there counts as free)
    rooms: dict[str, tuple[Resources, Resources] | None] = field(default_factory=dict)
    index: Rooms | None = None  # the fleet's rooms as the set forms read them
    refusals: dict[tuple[str, ...], Status] = field(default_factory=dict)
    # An override makes it ask something else of some clusters: each candidate is judged
    # by its own demand (``per``: candidate key → that candidate's attempt), one by one.
    varies: bool = False
    per: dict[str, _Attempt] = field(default_factory=dict)

    def short(self, free: Resources) -> tuple[str, ...]:
        """The resources asked for that ``free`` does not hold enough of."""
        return tuple(name for name, amount in self.asked if amount > free.get(name))

    def refusal(self, short: tuple[str, ...]) -> Status:
        """One Status per shortage, shared by the candidates it rejects."""
        found = self.refusals.get(short)
        if found is None:
            found = self.refusals[short] = unschedulable(f"insufficient {', '.join(short)}")
        return found


DEFAULT_RESOURCES = (("cpu", 1), ("memory", 1))  # Kubernetes' scoringStrategy default
_NATIVE: Final = ("cpu", "memory", "pods", "ephemeral-storage")


def _resources(given: list[ResourceWeight]) -> tuple[tuple[str, int], ...]:
    """The ``resources`` argument (``[{name: cpu, weight: 1}, ...]``): each listed once."""
    out: list[tuple[str, int]] = []
    for i, r in enumerate(given):
        if r.name in (n for n, _ in out):
            raise ValueError(f"plugin {NAME}: argument resources[{i}]: {r.name} is listed twice")
        out.append((r.name, r.weight))
    return tuple(out)


def _balanced(terms: list[tuple[int, int, int]]) -> int:
    """NodeResourcesBalancedAllocation's 0-100 score of ``(allocatable, requested,
    weight)`` per resource: how close together the resources' use is."""
    fractions = [min(1.0, r / a) for a, r, _ in terms]
    if len(fractions) == 2:
        std = abs(fractions[0] - fractions[1]) / 2
    elif len(fractions) > 2:
        std = statistics.pstdev(fractions)
    else:
        std = 0.0
    return int((1 - std) * 100)


def _fit_array(rooms: Rooms, scored: list[tuple[str, int, int]], idx: npt.NDArray[np.intp],
               most: bool) -> npt.NDArray[np.int64]:
    """NodeResourcesFit's points of the candidates ``idx`` (ordinals): the integer
    arithmetic of :meth:`Capacity._points` on the fleet's arrays (int64, or Python ints
    where a quantity is too large for int64 to stay exact). What is asked is small
    enough for int64 too: each of them has that much free. A candidate not judged has
    nothing (0) in the arrays: 0 points. A resource every judged candidate has weighs
    the same for all of them: no per-candidate weights."""
    total: Any = None  # int64, or Python ints (dtype object)
    constant = 0  # the weights of the resources every judged candidate has
    weights: Any = None  # of the others, per candidate
    for name, weight, asked in scored:  # in place: a fleet's arrays are thousands long
        if most:  # requested after placing it, at most all: alloc - free + asked
            alloc = rooms.allocatable(name)[idx]
            points = alloc - rooms.free(name)[idx]
            points += asked
            np.minimum(points, alloc, out=points)
        else:  # what stays free, none if it does not fit
            points = rooms.free(name)[idx] - asked
            np.maximum(points, 0, out=points)
        points *= 100
        points //= rooms.divisor(name)[idx]
        if rooms.everywhere(name):
            if weight != 1:
                points *= weight
            constant += weight
        else:  # a resource the cluster has none of is left out
            has = (rooms.allocatable(name)[idx] > 0) * weight
            points *= has
            weights = has if weights is None else weights + has
        total = points if total is None else total + points  # int64 + Python ints: ints
    if total is None:
        return np.zeros(len(idx), np.int64)
    if weights is None:
        total //= max(constant, 1)
    else:
        weights += constant
        np.maximum(weights, 1, out=weights)  # none weighed: the total is 0 too
        total //= weights
    out: npt.NDArray[np.int64] = total.astype(np.int64, copy=False)
    return out


def _fit_list(rooms: Rooms, scored: list[tuple[str, int, int]], at: list[int],
              most: bool) -> list[int]:
    """:func:`_fit_array` for a few candidates, on the fleet's lists (indexing a list
    costs less than numpy's setting up), in Python ints (exact). A candidate not judged
    has nothing listed: 0."""
    columns = [(*rooms.listed(name), weight, asked) for name, weight, asked in scored]
    out = [0] * len(at)
    for j, i in enumerate(at):
        total = weights = 0
        for alloc, free, weight, asked in columns:
            a = alloc[i]
            if a > 0:  # a resource the cluster has none of is left out
                f = free[i]
                if most:  # requested = a - f + asked, at most a
                    total += (a if f < asked else a - f + asked) * 100 // a * weight
                elif f >= asked:
                    total += (f - asked) * 100 // a * weight
                weights += weight
        if weights:
            out[j] = total // weights
    return out


def _ordinals_of(held: set[str], fleet: Fleet) -> int:
    """The candidates of ``fleet`` among ``held`` (by key), as a bitset."""
    by_key = fleet.by_key
    return bits_of(i for key in held if (i := by_key.get(key)) is not None)


def _shortages(names: list[str], short: list[int]) -> dict[tuple[str, ...], int]:
    """Candidates grouped by the resources they are short of (``short[j]``: those short
    of ``names[j]``), the names in the order given."""
    union = 0
    for bits in short:
        union |= bits
    if not union:
        return {}
    out: dict[tuple[str, ...], int] = {}
    if len(names) <= 4:  # every combination, by bit operations: at most 15
        for mask in range(1, 1 << len(names)):
            bits = union
            for j, of in enumerate(short):
                bits &= of if mask >> j & 1 else ~of
            if bits:
                out[tuple(n for j, n in enumerate(names) if mask >> j & 1)] = bits
        return out
    for i in ordinals(union):
        key = tuple(n for n, of in zip(names, short, strict=True) if of >> i & 1)
        out[key] = out.get(key, 0) | (1 << i)
    return out


class Capacity(Plugin, points.PreFilter, points.Filter, points.FilterSet, points.Score,
               points.ScoreSet, points.ScoreValues, points.Normalize, points.Describe):
    name = NAME
    Args = CapacityArgs

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        typed = self.typed(CapacityArgs)
        self.strategy: str = typed.strategy
        self.resources = (_resources(typed.resources) if typed.resources is not None
                          else DEFAULT_RESOURCES)
        # candidate key → (the Room described, its explanation entry): built once per Room
        self._described: dict[str, tuple[Room, dict[str, Any]]] = {}

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        d = subject.demand
        return SUCCESS if d.whole or d.per_replica or snapshot.demand_varies(subject) else SKIP

    def _attempt(self, state: CycleState, subject: Subject,
                 snapshot: Snapshot | None = None) -> _Attempt:
        """What one attempt asks, worked out once: the filter and the score both ask
        (``snapshot``: where to read whether an override makes it ask something else of
        some cluster; the first call, by the filter, gives it)."""
        found: _Attempt | None = state.data.get(NAME)
        if found is None:
            found = state.data[NAME] = self._asking(subject, subject.demand, _held(state))
            found.varies = snapshot is not None and snapshot.demand_varies(subject)
        return found

    def _asking(self, subject: Subject, d: Demand, held: set[str]) -> _Attempt:
        need = d.on(1) if divided(subject) else d.whole
        return _Attempt(need, [(name, amount) for name, amount in need.items() if amount > 0],
                        [(name, weight, need.get(name)) for name, weight in self.resources
                         if name in _NATIVE or need.get(name) > 0], held)

    def _on(self, a: _Attempt, subject: Subject, candidate: Candidate, snapshot: Snapshot
            ) -> _Attempt:
        """The attempt as ``candidate`` sees it: its own demand, if an override makes one."""
        if not a.varies:
            return a
        found = a.per.get(candidate.key)
        if found is None:
            found = a.per[candidate.key] = self._asking(
                subject, snapshot.demand_on(subject, candidate), a.held)
            found.refusals = a.refusals  # one Status per shortage, shared
        return found

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        found = self._room(state, subject, candidate, snapshot)
        if found is None:
            return SUCCESS
        a = self._on(self._attempt(state, subject, snapshot), subject, candidate, snapshot)
        short = a.short(found[1])
        return a.refusal(short) if short else SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        """Per resource asked for, those short of it are a prefix of the fleet sorted by
        what is free of it (:class:`Rooms`); where the subject runs now, one by one — and
        every candidate one by one where an override makes it ask something else."""
        a = self._attempt(state, subject, snapshot)
        if a.varies:
            a.index = self._index(a, fleet, snapshot)
            refused: dict[Status, int] = {}
            for i in ordinals(within):
                status = self.filter(state, subject, fleet.candidates[i], snapshot)
                if not status.ok:
                    refused[status] = refused.get(status, 0) | (1 << i)
            return list(refused.items())
        rooms = a.index = self._index(a, fleet, snapshot)
        held = _ordinals_of(a.held, fleet) & within
        judged = rooms.judged & within & ~held
        groups = _shortages([name for name, _ in a.asked],
                            [rooms.short(name, amount) & judged for name, amount in a.asked])
        for i in ordinals(held):
            found = self._room(state, subject, fleet.candidates[i], snapshot)
            short = a.short(found[1]) if found is not None else ()
            if short:
                groups[short] = groups.get(short, 0) | (1 << i)
        return [(a.refusal(short), bits) for short, bits in groups.items()]

    @staticmethod
    def _index(a: _Attempt, fleet: Fleet, snapshot: Snapshot) -> Rooms:
        """The fleet's rooms as the attempt reads them: brought up to date once, at the
        first set form, so that the filter and the score read the same."""
        return a.index if a.index is not None else snapshot.rooms(fleet)

    def _room(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> tuple[Resources, Resources] | None:
        """(allocatable, free for the subject) of ``candidate``, once per attempt: what
        the subject holds there now counts as free for it."""
        a = self._attempt(state, subject, snapshot)
        memo = a.rooms
        key = candidate.key
        if key not in memo:
            cap = snapshot.capacity(candidate)
            if cap is None:
                memo[key] = None
            else:
                free = cap.free
                if key in a.held:
                    held = current_share(subject, state.current, candidate)
                    if held is not None:
                        d = snapshot.demand_on(subject, candidate) if a.varies else (
                            subject.demand)
                        free = free + d.on(held)
                memo[key] = (cap.allocatable, free)
        return memo[key]

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        room = self._room(state, subject, candidate, snapshot)
        if room is None:
            return 0.0
        alloc, free = room
        a = self._on(self._attempt(state, subject, snapshot), subject, candidate, snapshot)
        return self._points(alloc, free, a.scored) / 100

    def points(self, alloc: Resources, requested: Resources, need: Resources) -> int:
        """The Kubernetes scheduler's 0-100 score of a cluster with ``alloc``
        allocatable and ``requested`` asked of it (the application's ``need``
        included), in its integer arithmetic."""
        scored = [(name, weight, need.get(name)) for name, weight in self.resources
                  if name in _NATIVE or need.get(name) > 0]
        return self._points(alloc, alloc - requested + need, scored)

    def _points(self, alloc: Resources, free: Resources,
                scored: list[tuple[str, int, int]]) -> int:
        """:meth:`points` from what is free before the application (``scored``: each
        resource scored, its weight and what the application asks of it)."""
        terms = []
        for name, weight, asked in scored:
            a = alloc.get(name)
            if a > 0:  # a resource the cluster has none of is left out
                terms.append((a, a - free.get(name) + asked, weight))
        return _balanced(terms) if self.strategy == "BalancedAllocation" else self._fit(terms)

    def _fit(self, terms: list[tuple[int, int, int]]) -> int:
        """NodeResourcesFit's 0-100 score of ``(allocatable, requested, weight)`` per
        resource, by the strategy."""
        total = weights = 0
        most = self.strategy == "MostAllocated"
        for a, r, weight in terms:
            if most:
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
        held = self._attempt(state, subject).held & scores.keys()
        if held:
            best = max(scores.values())
            for key in held:
                scores[key] = best

    def score_set(self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
                  snapshot: Snapshot) -> list[tuple[int, float]]:
        """Candidates grouped by score: at most 101 terms, whatever the fleet's size. The
        integer arithmetic of :meth:`_points` on the fleet's per-ordinal lists (the
        runner reads :meth:`score_values` instead, but for BalancedAllocation)."""
        groups: dict[float, int] = {}
        if self.strategy != "BalancedAllocation":
            at = list(ordinals(feasible))
            values = self.score_values(state, subject, fleet, feasible, at, snapshot)
            assert isinstance(values, list)  # asked with a list
            for i, value in zip(at, values, strict=True):
                groups[value] = groups.get(value, 0) | (1 << i)
            return [(bits, v) for v, bits in groups.items() if v]
        a = self._attempt(state, subject, snapshot)
        rooms = a.index = self._index(a, fleet, snapshot)
        held = _ordinals_of(a.held, fleet) & feasible
        points: dict[int, int] = {}
        if a.varies:
            at = list(ordinals(feasible))
            for i, p in zip(at, self._each(state, subject, fleet, at, held, snapshot),
                            strict=True):
                points[p] = points.get(p, 0) | (1 << i)
            return [(bits, v / 100) for v, bits in points.items() if v]
        columns = [(*rooms.listed(name), weight, asked) for name, weight, asked in a.scored]
        for i in ordinals(feasible & rooms.judged & ~held):
            terms = [(al[i], al[i] - fr[i] + asked, w) for al, fr, w, asked in columns
                     if al[i] > 0]  # a resource the cluster has none of is left out
            p = _balanced(terms)
            points[p] = points.get(p, 0) | (1 << i)
        if held:  # where it runs now scores as the best (normalize), its own included
            best = max([*points, *self._held_points(state, subject, fleet, held, snapshot)])
            points[best] = points.get(best, 0) | held
        return [(bits, v / 100) for v, bits in points.items() if v]

    def score_values(self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
                     at: npt.NDArray[np.intp] | list[int], snapshot: Snapshot
                     ) -> npt.NDArray[np.float64] | list[float] | None:
        """:meth:`score_set` as one value per feasible candidate (``at``): no grouping
        into 101 bitsets; an array for a large feasible set, a list for a few. None for
        BalancedAllocation."""
        if self.strategy == "BalancedAllocation":
            return None
        a = self._attempt(state, subject, snapshot)
        rooms = a.index = self._index(a, fleet, snapshot)
        held = _ordinals_of(a.held, fleet) & feasible
        if a.varies:  # each candidate by its own demand
            each = self._each(state, subject, fleet, list(at), held, snapshot)
            if isinstance(at, list):
                return [p / 100 for p in each]
            out: npt.NDArray[np.float64] = np.array(each, dtype=np.float64) / 100
            return out
        most = self.strategy == "MostAllocated"
        if isinstance(at, list):  # a few: a candidate not judged has nothing listed (0)
            listed = _fit_list(rooms, a.scored, at, most)
            if held:  # where it runs now scores as the best (normalize), its own included
                top = max([*(p for i, p in zip(at, listed, strict=True) if not held >> i & 1),
                           *self._held_points(state, subject, fleet, held, snapshot)])
                listed = [top if held >> i & 1 else p for i, p in zip(at, listed, strict=True)]
            return [p / 100 for p in listed]
        points = _fit_array(rooms, a.scored, at, most)
        if held:  # where it runs now scores as the best (normalize), its own included
            mine = as_mask(held, len(fleet.candidates))[at]
            others = points[~mine]
            points[mine] = max([*([int(others.max())] if others.size else []),
                                *self._held_points(state, subject, fleet, held, snapshot)])
        values: npt.NDArray[np.float64] = points / 100
        return values

    def _each(self, state: CycleState, subject: Subject, fleet: Fleet, at: list[int],
              held: int, snapshot: Snapshot) -> list[int]:
        """The 0-100 points of candidates ``at``, each scored one by one (by its own
        demand); where it runs now (``held``) as the best of them (normalize)."""
        points = [round(100 * self.score(state, subject, fleet.candidates[i], snapshot))
                  for i in at]
        if held and points:
            top = max(points)
            points = [top if held >> i & 1 else p for i, p in zip(at, points, strict=True)]
        return points

    def _held_points(self, state: CycleState, subject: Subject, fleet: Fleet, held: int,
                     snapshot: Snapshot) -> list[int]:
        """The 0-100 points of the candidates ``held`` (where the subject runs now), with
        what it holds there counted as free."""
        return [round(100 * self.score(state, subject, fleet.candidates[i], snapshot))
                for i in ordinals(held)]

    def describe(self, state: CycleState, subject: Subject, candidate: Candidate,
                 snapshot: Snapshot) -> dict[str, Any]:
        if not (subject.demand.whole or subject.demand.per_replica):
            return {}  # not judged by capacity: nothing to say
        index, fleet = self._attempt(state, subject, snapshot).index, state.fleet
        at = fleet.by_key.get(candidate.key) if index is not None and fleet is not None else None
        # What the decision read, from the index its set forms used; else the cache's.
        cap = index.rooms[at] if index is not None and at is not None else snapshot.capacity(
            candidate)
        if cap is None:
            return {}
        hit = self._described.get(candidate.key)
        if hit is None or hit[0] is not cap:  # the cache keeps a Room while it holds
            hit = self._described[candidate.key] = (cap, {
                "free": str(cap.free), "allocatable": str(cap.allocatable)})
        return hit[1]
