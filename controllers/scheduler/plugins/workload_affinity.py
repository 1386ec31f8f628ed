"""WorkloadAffinity: affinity and anti-affinity to other workloads (seed 001).

A term selects workloads by their labels (in the subject's namespace unless
the term's ``namespaces`` says otherwise) and names a cluster label as ``topologyKey``:
"run (or do not run) in a topology domain where such a workload runs".

* required affinity: the candidate's domain must hold a matching workload; a
  candidate without the topology label fails. As in Kubernetes, if no
  matching workload runs anywhere and the subject matches its own term, the
  term holds (the first of a group must land somewhere).
* required anti-affinity: the candidate's domain must hold none.
* preferred terms add (affinity) or subtract (anti-affinity) their weight;
  the score is normalised by the total weight into [-1, 1].

Where workloads run comes from the Bindings, including decisions written but
not yet seen on the watch, so a burst of subjects sees each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from controllers.scheduler.framework import (
    SKIP,
    SUCCESS,
    Candidate,
    CycleState,
    Fleet,
    Placed,
    Plugin,
    Snapshot,
    Status,
    Subject,
    sieve,
    unschedulable,
)
from controllers.scheduler.framework.types import candidate_key
from controllers.scheduler.plugins.selectors import describe, selector_matches
from store.documents import WorkloadAffinityTerm

NAME = "WorkloadAffinity"


@dataclass(slots=True)
class _Term:
    term: WorkloadAffinityTerm
    domains: set[str]  # topology values where a matching workload runs
    matches_self: bool
    weight: float = 0.0
    anti: bool = False

    def label(self) -> str:
        sel = self.term.label_selector
        return f"{describe(sel.match_labels, sel.match_expressions)} by {self.term.topology_key}"


def _domains(term: WorkloadAffinityTerm, subject: Subject, snapshot: Snapshot) -> set[str]:
    sel = term.label_selector
    out: set[str] = set()
    placed: list[Placed] = []
    namespaces: list[str | None] = [*term.namespaces] or [subject.ref.namespace]
    for ns in namespaces:
        placed += snapshot.placed(ns, sel.match_labels)
    for p in placed:
        if p.ref == subject.ref or not selector_matches(sel.match_labels, sel.match_expressions,
                                                        p.labels):
            continue
        for t in p.targets:
            c = snapshot.candidate_by_key(candidate_key(t.kind, t.namespace, t.name))
            value = c.labels.get(term.topology_key) if c else None
            if value is not None:
                out.add(value)
    return out


class WorkloadAffinity(Plugin):
    name = NAME

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        aff = subject.affinity
        if aff is None or (aff.workload_affinity is None and aff.workload_anti_affinity is None):
            return SKIP
        terms: dict[str, list[_Term]] = {"required": [], "preferred": []}
        for anti, group in ((False, aff.workload_affinity), (True, aff.workload_anti_affinity)):
            if group is None:
                continue
            for t in group.required_during_scheduling_ignored_during_execution:
                terms["required"].append(self._term(t, subject, snapshot, anti, 0.0))
            for w in group.preferred_during_scheduling_ignored_during_execution:
                terms["preferred"].append(self._term(w.term, subject, snapshot, anti, w.weight))
        state.data[NAME] = terms
        return SUCCESS

    @staticmethod
    def _term(t: WorkloadAffinityTerm, subject: Subject, snapshot: Snapshot, anti: bool,
              weight: float) -> _Term:
        sel = t.label_selector
        own = selector_matches(sel.match_labels, sel.match_expressions, subject.labels)
        return _Term(t, _domains(t, subject, snapshot), own, weight, anti)

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        for term in state.data[NAME]["required"]:
            value = candidate.labels.get(term.term.topology_key)
            if term.anti:
                if value is not None and value in term.domains:
                    return unschedulable(f"workload anti-affinity ({term.label()})")
            elif value is None:
                return unschedulable(f"workload affinity: no label {term.term.topology_key}")
            elif value not in term.domains and not (not term.domains and term.matches_self):
                return unschedulable(f"workload affinity ({term.label()})")
        return SUCCESS

    def filter_set(self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
                   snapshot: Snapshot) -> list[tuple[Status, int]]:
        return sieve(within, self._checks(fleet, state.data[NAME]["required"]))

    @staticmethod
    def _checks(fleet: Fleet, required: list[_Term]) -> Iterator[tuple[int, Status]]:
        """The per-candidate checks of ``filter``, in its order, as (passing, status)."""
        for term in required:
            key = term.term.topology_key
            if term.anti:
                yield (fleet.all & ~fleet.label_in(key, sorted(term.domains)),
                       unschedulable(f"workload anti-affinity ({term.label()})"))
                continue
            yield fleet.has_label(key), unschedulable(f"workload affinity: no label {key}")
            if term.domains or not term.matches_self:
                yield (fleet.label_in(key, sorted(term.domains)),
                       unschedulable(f"workload affinity ({term.label()})"))

    def score_set(self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
                  snapshot: Snapshot) -> list[tuple[int, float]]:
        preferred: list[_Term] = state.data[NAME]["preferred"]
        total = sum(t.weight for t in preferred)
        if not total:
            return []
        return [(fleet.label_in(t.term.topology_key, sorted(t.domains)),
                 (-t.weight if t.anti else t.weight) / total) for t in preferred if t.domains]

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        preferred: list[_Term] = state.data[NAME]["preferred"]
        total = sum(t.weight for t in preferred)
        if not total:
            return 0.0
        got = 0.0
        for t in preferred:
            value = candidate.labels.get(t.term.topology_key)
            if value is not None and value in t.domains:
                got += -t.weight if t.anti else t.weight
        return got / total
