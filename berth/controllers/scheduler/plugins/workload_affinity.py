"""WorkloadAffinity: affinity and anti-affinity to other workloads (Crossplane's
workload scheduler).

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

from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from berth.controllers.scheduler.framework import (
    SKIP,
    SUCCESS,
    Candidate,
    CycleState,
    Fleet,
    Plugin,
    Ref,
    Snapshot,
    Status,
    Subject,
    sieve,
    unschedulable,
)
from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework.helpers.selectors import describe, selector_matches
from berth.controllers.scheduler.framework.types import candidate_key
from berth.store.documents import Target, WorkloadAffinityTerm

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


CACHED_TERMS = 4096


def _value_of(snapshot: Snapshot, t: Ref | Target, key: str) -> str | None:
    c = snapshot.candidate_by_key(candidate_key(t.kind, t.namespace, t.name))
    return c.labels.get(key) if c else None


def _counts(term: WorkloadAffinityTerm, ns: str | None, snapshot: Snapshot,
            fleet: Fleet) -> Counter[str]:
    """Topology value → how many matching workloads of ``ns`` run there (by target)."""
    sel = term.label_selector
    out: Counter[str] = Counter()
    for p in snapshot.placed(ns, sel.match_labels):
        if not selector_matches(sel.match_labels, sel.match_expressions, p.labels):
            continue
        for t in p.targets:
            value = _value_of(snapshot, t, term.topology_key)
            if value is not None:
                out[value] += 1
    return out


def _tally(counts: Counter[str], changes: list[tuple[Ref, int]], topology_key: str,
           snapshot: Snapshot, fleet: Fleet) -> None:
    """Add ``changes`` (target, how many more) to ``counts`` by topology value."""
    for t, n in changes:
        i = fleet.by_key.get(candidate_key(t.kind, t.namespace, t.name))
        value = fleet.candidates[i].labels.get(topology_key) if i is not None else (
            _value_of(snapshot, t, topology_key))
        if value is not None:
            counts[value] += n


class WorkloadAffinity(Plugin, points.PreFilter, points.Filter, points.FilterSet, points.Score,
                       points.ScoreSet):
    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        # Where the workloads a term selects run, by topology value: shared by every
        # subject with that term until those placements or the candidates change.
        self._cache: OrderedDict[tuple[Any, ...], Counter[str]] = OrderedDict()
        # The same for a term of one label (the common case), kept up to date from the
        # placements' journal rather than counted again after every placement of the
        # label: (namespace, label, value, topology key, candidates' epoch) → (the
        # journal's position, the counts).
        self._tallies: OrderedDict[tuple[Any, ...], tuple[int, Counter[str]]] = OrderedDict()

    def _domains(self, term: WorkloadAffinityTerm, subject: Subject, snapshot: Snapshot,
                 fleet: Fleet) -> set[str]:
        sel = term.label_selector
        counts: Counter[str] = Counter()
        namespaces: list[str | None] = [*term.namespaces] or [subject.ref.namespace]
        for ns in namespaces:
            if len(sel.match_labels) == 1 and not sel.match_expressions:
                counts.update(self._tallied(term, ns, snapshot, fleet))
                continue
            key = (ns, tuple(sorted(sel.match_labels.items())),
                   msgspec.json.encode(sel.match_expressions), term.topology_key,
                   snapshot.placements_version(ns, sel.match_labels), fleet.cand_epoch)
            hit = self._cache.get(key)
            if hit is None:
                hit = self._cache[key] = _counts(term, ns, snapshot, fleet)
                while len(self._cache) > CACHED_TERMS:
                    self._cache.popitem(last=False)
            counts.update(hit)
        if subject.ref.namespace in namespaces and selector_matches(
                sel.match_labels, sel.match_expressions, subject.labels):
            for t in snapshot.current_targets(subject):  # not its own neighbour
                value = _value_of(snapshot, t, term.topology_key)
                if value is not None:
                    counts[value] -= 1
        return {value for value, n in counts.items() if n > 0}

    def _tallied(self, term: WorkloadAffinityTerm, ns: str | None, snapshot: Snapshot,
                 fleet: Fleet) -> Counter[str]:
        """:func:`_counts` of a term of one label, brought up to date by the changes to
        its placements since it was last read."""
        ((label, wanted),) = term.label_selector.match_labels.items()
        key = (ns, label, wanted, term.topology_key, fleet.cand_epoch)
        hit = self._tallies.pop(key, None)
        end, changes, whole = snapshot.placed_on_since(ns, label, wanted,
                                                       hit[0] if hit is not None else -1)
        counts = hit[1] if hit is not None and not whole else Counter()
        _tally(counts, changes, term.topology_key, snapshot, fleet)
        self._tallies[key] = (end, counts)  # the most recently used last
        while len(self._tallies) > CACHED_TERMS:
            self._tallies.popitem(last=False)
        return counts

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        aff = subject.affinity
        if aff is None or (aff.workload_affinity is None and aff.workload_anti_affinity is None):
            return SKIP
        fleet = state.fleet if state.fleet is not None else snapshot.fleet(subject)
        terms: dict[str, list[_Term]] = {"required": [], "preferred": []}
        for anti, group in ((False, aff.workload_affinity), (True, aff.workload_anti_affinity)):
            if group is None:
                continue
            for t in group.required_during_scheduling_ignored_during_execution:
                terms["required"].append(self._term(t, subject, snapshot, fleet, anti, 0.0))
            for w in group.preferred_during_scheduling_ignored_during_execution:
                terms["preferred"].append(self._term(w.term, subject, snapshot, fleet, anti,
                                                     w.weight))
        state.data[NAME] = terms
        return SUCCESS

    def _term(self, t: WorkloadAffinityTerm, subject: Subject, snapshot: Snapshot, fleet: Fleet,
              anti: bool, weight: float) -> _Term:
        sel = t.label_selector
        own = selector_matches(sel.match_labels, sel.match_expressions, subject.labels)
        return _Term(t, self._domains(t, subject, snapshot, fleet), own, weight, anti)

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
        total = sum((t.weight for t in preferred), 0.0)
        if not total:
            return []
        return [(fleet.label_in(t.term.topology_key, sorted(t.domains)),
                 (-t.weight if t.anti else t.weight) / total) for t in preferred if t.domains]

    def score(self, state: CycleState, subject: Subject, candidate: Candidate,
              snapshot: Snapshot) -> float:
        preferred: list[_Term] = state.data[NAME]["preferred"]
        total = sum((t.weight for t in preferred), 0.0)
        if not total:
            return 0.0
        got = 0.0
        for t in preferred:
            value = candidate.labels.get(t.term.topology_key)
            if value is not None and value in t.domains:
                got += -t.weight if t.anti else t.weight
        return got / total
