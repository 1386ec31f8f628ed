"""TopologySpread: spread a multi-cluster placement across topology domains (seeds 002, 003).

For ``topologySpreadConstraints`` ``{maxSkew, topologyKey, whenUnsatisfiable}``
the clusters a PickN/PickAll placement chooses are spread over the values of
the ``topologyKey`` cluster label so that, counting the chosen clusters per
domain, ``max - min <= maxSkew`` (min over every domain a feasible cluster
is in). Batch mode: the clusters are picked greedily from the one ranking,
best first, skipping those that would break a constraint.

``DoNotSchedule``: clusters without the label are filtered out, and the
placement stops short rather than break the skew. ``ScheduleAnyway``: a
preference; when no cluster keeps the skew, the best remaining one is taken.
"""

from __future__ import annotations

from collections.abc import Sequence

from berth.controllers.scheduler.framework import (
    SKIP,
    SUCCESS,
    Candidate,
    CycleState,
    Fleet,
    Plugin,
    Ranked,
    Snapshot,
    Status,
    Subject,
    sieve,
    unschedulable,
)
from berth.controllers.scheduler.selection import Pool

NAME = "TopologySpread"


class TopologySpread(Plugin):
    name = NAME
    cacheable = True  # the constraints are part of the subject's signature
    reads_metric_values = False  # its verdict follows the candidates alone

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        return SUCCESS if subject.placement.topology_spread_constraints else SKIP

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        for c in subject.placement.topology_spread_constraints:
            if c.when_unsatisfiable == "DoNotSchedule" and c.topology_key not in candidate.labels:
                return unschedulable(f"topology spread: no label {c.topology_key}")
        return SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        return sieve(within, (
            (fleet.has_label(c.topology_key), unschedulable(f"topology spread: no label "
                                                            f"{c.topology_key}"))
            for c in subject.placement.topology_spread_constraints
            if c.when_unsatisfiable == "DoNotSchedule"))

    def select(self, subject: Subject, pool: Pool, n: int,
               chosen: Sequence[Ranked]) -> list[Ranked]:
        """Fill ``chosen`` up to ``n`` from ``pool`` (best first), keeping the spread.

        Each pick is the best entry that keeps the skew; the pool is read only
        as far as the picks need.
        """
        constraints = subject.placement.topology_spread_constraints
        if not constraints:
            return list(chosen)
        picked = list(chosen)
        taken = {r.candidate.key for r in picked}
        domains = {c.topology_key: pool.values(c.topology_key) for c in constraints}

        def skew_ok(r: Ranked, *, hard_only: bool) -> bool:
            for c in constraints:
                if hard_only and c.when_unsatisfiable != "DoNotSchedule":
                    continue
                value = r.candidate.labels.get(c.topology_key)
                if value is None:
                    return False
                counts = dict.fromkeys(domains[c.topology_key], 0)
                for p in picked:
                    v = p.candidate.labels.get(c.topology_key)
                    if v is not None:
                        counts[v] = counts.get(v, 0) + 1
                counts[value] = counts.get(value, 0) + 1
                if max(counts.values()) - min(counts.values()) > c.max_skew:
                    return False
            return True

        hard = any(c.when_unsatisfiable == "DoNotSchedule" for c in constraints)
        while len(picked) < n:
            rest = (r for r in pool if r.candidate.key not in taken)
            nxt = next((r for r in rest if skew_ok(r, hard_only=False)), None)
            if nxt is None:
                rest = (r for r in pool if r.candidate.key not in taken)
                nxt = next((r for r in rest if skew_ok(r, hard_only=True)), None) if hard else (
                    next(rest, None))
            if nxt is None:
                break
            picked.append(nxt)
            taken.add(nxt.candidate.key)
        return picked
