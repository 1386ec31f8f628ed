"""TopologySpread: spread a multi-cluster placement across topology domains (the
Kubernetes scheduler, Fleet).

For ``topologySpreadConstraints`` ``{maxSkew, topologyKey, whenUnsatisfiable}``
the clusters a PickN/PickAll placement chooses are spread over the values of
the ``topologyKey`` cluster label so that, counting the chosen clusters per
domain, ``max - min <= maxSkew`` (min over every domain a feasible cluster
is in). Batch mode: the clusters are picked greedily from the one ranking,
best first, skipping those that would break a constraint — each pick read
from the ranking restricted to the domains it may be in (the best clusters
often share a zone, as they share its metrics: walking past them read
hundreds of entries per pick in a fleet of thousands).

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
from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework.selection import Pool

NAME = "TopologySpread"


class TopologySpread(Plugin, points.PreFilter, points.Filter, points.FilterSet, points.Selects):
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

        Each pick is the best entry that keeps the skew, read among the clusters of
        the domains that keep it.
        """
        constraints = subject.placement.topology_spread_constraints
        if not constraints:
            return list(chosen)
        picked = list(chosen)
        taken = {r.candidate.key for r in picked}
        domains = {c.topology_key: pool.values(c.topology_key) for c in constraints}

        def allowed(hard_only: bool) -> dict[str, set[str]]:
            """Per topology key, the values a next pick may have without breaking a
            constraint (only the DoNotSchedule ones: ``hard_only``)."""
            out: dict[str, set[str]] = {}
            for c in constraints:
                if hard_only and c.when_unsatisfiable != "DoNotSchedule":
                    continue
                counts = dict.fromkeys(domains[c.topology_key], 0)
                for p in picked:
                    v = p.candidate.labels.get(c.topology_key)
                    if v is not None:
                        counts[v] = counts.get(v, 0) + 1
                ok = set()
                for value in domains[c.topology_key]:
                    counts[value] += 1
                    if max(counts.values()) - min(counts.values()) <= c.max_skew:
                        ok.add(value)
                    counts[value] -= 1
                out[c.topology_key] = out[c.topology_key] & ok if c.topology_key in out else ok
            return out

        # Each pick: the best entry that keeps every constraint, else (ScheduleAnyway
        # given up) the best that keeps the DoNotSchedule ones — read among the
        # clusters of the domains allowed, not down the whole ranking.
        while len(picked) < n:
            nxt = None
            for hard_only in (False, True):
                nxt = next((r for r in pool.within(allowed(hard_only))
                            if r.candidate.key not in taken), None)
                if nxt is not None:
                    break
            if nxt is None:
                break
            picked.append(nxt)
            taken.add(nxt.candidate.key)
        return picked
