"""Cluster groups, room, and dividing replicas among clusters (a helper, not a plugin).

**Groups** (``placement.clusterGroups``): clusters in order of preference. A
candidate belongs to the first group that names it (by name or labels);
:func:`grouped` re-ranks a ranking group first, so that a whole application
goes to the best cluster of the first group that has a feasible one.

**Room**: how many replicas of the subject a cluster has room for — its free
resources as the cache reports them (allocatable, minus what its pods ask,
minus what berth placed there that it has not reported yet), plus what the
subject itself already holds there.

**Division** (``replicaScheduling.type: Divided``): the replicas are given
out group by group — the first group gets as many as it has room for, the
rest overflow to the next — and within a group by one of:

* ``Weighted``: static weights, by Webster's method (Sainte-Laguë): seat after
  seat goes to the cluster with the highest ``weight / (seats + 0.5)``, among
  those with room. A cluster weighs as Karmada weighs it: the largest weight
  of the rules that match it, 0 if none does (it gets no replicas), and every
  cluster 1 if no rule matches any. A divisor method is *house-monotone*: the division of
  n + 1 replicas is that of n plus one seat, so scaling up never takes a
  replica from a cluster and scaling down takes back the seats given last —
  from the cluster with the weakest claim, ties going against the least
  preferred. Webster is the divisor method without a bias towards large or
  small weights (D'Hondt favours large ones, Adams small ones), which is why
  it and not D'Hondt.
* ``Capacity``: the same, with each cluster's room as its weight (dynamic
  weights from available capacity) — applied to the change only: the shares
  held now stay, as Karmada scales dynamic weights, so replicas do not chase
  every change of free capacity.
* ``Aggregated``: the fewest clusters that hold them: those that run it now
  first, then the roomiest.

Ties go to a cluster that holds the seat now (no churn), then to the better
ranked one. Computed afresh from the same inputs, a division is the same:
nothing moves without a reason.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace

from berth.controllers.scheduler.framework.fleet import Fleet
from berth.controllers.scheduler.framework.helpers.selectors import selector_bits, selector_matches
from berth.controllers.scheduler.framework.ranking import Ranked
from berth.controllers.scheduler.framework.snapshot import Snapshot
from berth.controllers.scheduler.framework.types import Candidate, Subject, candidate_key
from berth.store.documents import ClusterGroup, Target
from berth.store.documents.resources import UNLIMITED

GROUP_TIER = 1 << 20  # above every plugin's tier: group order decides first


def in_group(group: ClusterGroup, candidate: Candidate) -> bool:
    if candidate.ref.name in group.cluster_names:
        return True
    sel = group.label_selector
    return sel is not None and selector_matches(sel.match_labels, sel.match_expressions,
                                                candidate.labels)


def group_bits(fleet: Fleet, group: ClusterGroup) -> int:
    """The set form of :func:`in_group`."""
    names = fleet.group("name", lambda c: c.ref.name)
    bits = 0
    for n in group.cluster_names:
        bits |= names.get(n, 0)
    sel = group.label_selector
    if sel is not None:
        bits |= selector_bits(fleet, sel.match_labels, sel.match_expressions)
    return bits


def group_of(subject: Subject, candidate: Candidate) -> int:
    """The index of the first group naming ``candidate`` (0 without groups; -1: none)."""
    groups = subject.placement.cluster_groups
    if not groups:
        return 0
    return next((i for i, g in enumerate(groups) if in_group(g, candidate)), -1)


def grouped(subject: Subject, ranked: Sequence[Ranked]) -> list[Ranked]:
    """``ranked`` with the first group's candidates above the second's, and so on."""
    n = len(subject.placement.cluster_groups)
    out = []
    for r in ranked:
        g = group_of(subject, r.candidate)
        if g >= 0:
            out.append(replace(r, tier=r.tier + (n - g) * GROUP_TIER, shared=False))
    out.sort(key=lambda r: (-r.tier, -r.score, r.ordinal))
    return out


def current_share(subject: Subject, current: Sequence[Target], candidate: Candidate
                  ) -> int | None:
    """The replicas the subject has on ``candidate`` now (None: not there, or whole)."""
    for t in current:
        if candidate_key(t.kind, t.namespace, t.name) == candidate.key:
            return t.replicas if t.replicas is not None else subject.demand.replicas
    return None


def room(subject: Subject, candidate: Candidate, snapshot: Snapshot,
         current: Sequence[Target]) -> int:
    """How many of the subject's replicas fit on ``candidate`` (UNLIMITED if unknown), by
    what it asks there (an override may make it ask more or less per replica)."""
    d = snapshot.demand_on(subject, candidate)
    cap = snapshot.capacity(candidate)
    if cap is None or not d.per_replica:
        return UNLIMITED
    free = cap.free
    held = current_share(subject, current, candidate)
    if held is not None:
        free = free + d.on(held)  # what it holds there now is its own to re-divide
    if not d.fixed.fits(free):
        return 0
    return d.per_replica.how_many(free - d.fixed)


@dataclass(frozen=True, slots=True)
class Division:
    shares: list[tuple[Ranked, int]]  # chosen entries with their replicas (> 0), best first
    unplaced: int  # replicas no cluster had room for


def divide(subject: Subject, chosen: Sequence[Ranked], current: Sequence[Target],
           rooms: Sequence[int], total: int) -> Division:
    """``total`` replicas over ``chosen`` (best first; ``rooms`` their room), group by group."""
    rs = subject.placement.replica_scheduling
    mode = rs.division if rs is not None else "Weighted"
    held = {candidate_key(t.kind, t.namespace, t.name): t.replicas or 0 for t in current}
    by_group: dict[int, list[int]] = {}
    for i, r in enumerate(chosen):
        by_group.setdefault(max(group_of(subject, r.candidate), 0), []).append(i)
    static = _static_weights(subject, chosen) if mode == "Weighted" else []
    shares = [0] * len(chosen)
    left = total
    for g in sorted(by_group):
        members = by_group[g]
        if left <= 0:
            break
        if mode == "Aggregated":
            given = _aggregated(chosen, members, rooms, held, left)
        else:
            weights = [static[i] if static else _weight(rooms[i], rooms) for i in members]
            if mode == "Capacity":
                given = _adjusted(chosen, members, weights, rooms, held, left)
            else:
                given = _webster(chosen, members, weights, rooms, held, left)
        for i, n in zip(members, given, strict=True):
            shares[i] = n
        left -= sum(given)
    return Division([(r, n) for r, n in zip(chosen, shares, strict=True) if n > 0], left)


def _weight(cap: int, rooms: Sequence[int]) -> float:
    """A cluster's dynamic weight: its room (unknown: as much as the roomiest)."""
    if cap < UNLIMITED:
        return float(cap)
    known = [r for r in rooms if r < UNLIMITED]
    return float(max(known)) if known else 1.0


def _static_weights(subject: Subject, chosen: Sequence[Ranked]) -> list[float]:
    """Karmada's static weights: a cluster weighs the largest weight among the rules
    that match it, 0 (no replicas) if none does; if no chosen cluster weighs anything
    (no rules, or none matches), they all weigh 1."""
    rs = subject.placement.replica_scheduling
    rules = rs.static_weights if rs is not None else []
    weights = [float(max((w.weight for w in rules if in_group(w.target_cluster, r.candidate)),
                         default=0)) for r in chosen]
    return weights if any(weights) else [1.0] * len(chosen)


def _webster(chosen: Sequence[Ranked], members: list[int], weights: list[float],
             rooms: Sequence[int], held: dict[str, int], total: int) -> list[int]:
    """Seats one at a time to the highest ``weight / (seats + 0.5)`` with room."""
    seats = [0] * len(members)
    # (-priority, -holds this seat now, rank) — a min-heap gives the best first.
    heap = [(-w / 0.5, -int(held.get(chosen[i].candidate.key, 0) > 0), j, j)
            for j, (i, w) in enumerate(zip(members, weights, strict=True))
            if w > 0 and rooms[i] > 0]
    heapq.heapify(heap)
    for _ in range(total):
        if not heap:
            break
        _, _, rank, j = heapq.heappop(heap)
        seats[j] += 1
        i = members[j]
        if seats[j] < rooms[i]:
            has = int(held.get(chosen[i].candidate.key, 0) > seats[j])
            heapq.heappush(heap, (-weights[j] / (seats[j] + 0.5), -has, rank, j))
    return seats


def _adjusted(chosen: Sequence[Ranked], members: list[int], weights: list[float],
              rooms: Sequence[int], held: dict[str, int], total: int) -> list[int]:
    """Dynamic weights: the shares held now, adjusted to the new total.

    Free capacity changes all the time; dividing afresh by it would move
    replicas between clusters whenever another application lands. So, as
    Karmada scales dynamically weighted replicas, the shares held now stay
    (up to each cluster's room), new replicas are added by Webster on the
    clusters' room, and removed ones are the seats Webster would have given
    last: where ``weight / (seats - 0.5)`` is lowest, the least preferred first.
    """
    seats = [min(held.get(chosen[i].candidate.key, 0), rooms[i]) for i in members]
    have = sum(seats)
    if have < total:
        heap = [(-weights[j] / (seats[j] + 0.5), j) for j, i in enumerate(members)
                if weights[j] > 0 and seats[j] < rooms[i]]
        heapq.heapify(heap)
        for _ in range(total - have):
            if not heap:
                break
            _, j = heapq.heappop(heap)
            seats[j] += 1
            if seats[j] < rooms[members[j]]:
                heapq.heappush(heap, (-weights[j] / (seats[j] + 0.5), j))
    while have > total:
        j = min((j for j in range(len(seats)) if seats[j] > 0),
                key=lambda j: (weights[j] / (seats[j] - 0.5), -j))
        seats[j] -= 1
        have -= 1
    return seats


def _aggregated(chosen: Sequence[Ranked], members: list[int], rooms: Sequence[int],
                held: dict[str, int], total: int) -> list[int]:
    """The fewest clusters: those holding replicas now first, then the roomiest."""
    order = sorted(range(len(members)), key=lambda j: (
        -held.get(chosen[members[j]].candidate.key, 0), -rooms[members[j]], j))
    seats = [0] * len(members)
    left = total
    for j in order:
        if left <= 0:
            break
        seats[j] = min(left, rooms[members[j]])
        left -= seats[j]
    return seats


def divided(subject: Subject) -> bool:
    rs = subject.placement.replica_scheduling
    return rs is not None and rs.type == "Divided"


def total_replicas(subject: Subject) -> int:
    rs = subject.placement.replica_scheduling
    if rs is not None and rs.replicas is not None:
        return rs.replicas
    return subject.demand.replicas


__all__ = ["Division", "divide", "divided", "group_bits", "group_of", "grouped", "in_group",
           "room", "total_replicas"]
