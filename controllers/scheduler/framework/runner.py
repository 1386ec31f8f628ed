"""Runs the enabled plugins of each extension point for one scheduling attempt.

A crashing plugin becomes an ERROR status naming it; every status is stamped
with its plugin's name. Cacheable filters and scores are evaluated once per
distinct subject signature per snapshot epoch (a bounded memo); then the
per-subject plugins run on top: the other filters on the survivors, sparse
score overrides (stickiness), the other scores. Scores are combined as the
weighted sum of each score plugin's [0, 1] score; candidates are ranked by
tier, then score. Ties are left for the selection to break at random.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from controllers.scheduler.config import SchedulerConfig
from controllers.scheduler.framework import plugin as points
from controllers.scheduler.framework.plugin import Plugin
from controllers.scheduler.framework.state import CycleState
from controllers.scheduler.framework.status import SKIP, SUCCESS, Code, Status, error
from controllers.scheduler.framework.types import Candidate, Snapshot, Subject
from store.documents import Target

log = logging.getLogger(__name__)

Registry = Mapping[str, Callable[..., Plugin]]
MEMO_SIGNATURES = 1024


@dataclass(slots=True)
class Ranked:
    candidate: Candidate
    tier: int
    score: float
    scores: dict[str, float] = field(default_factory=dict)  # plugin → weighted score

    @property
    def order(self) -> tuple[int, float]:
        return (self.tier, self.score)


@dataclass(slots=True)
class Evaluation:
    """Feasible candidates ranked best first, and why the others were rejected."""

    ranked: list[Ranked]
    rejected: dict[str, Status]  # candidate key → the status that rejected it
    considered: int = 0
    index: dict[str, Ranked] = field(default_factory=dict)  # candidate key → entry
    counts: Counter[str] = field(default_factory=Counter)  # rejection reason → candidates
    derived: dict[str, Any] = field(default_factory=dict)  # memoized views of this result

    @staticmethod
    def count(rejected: Mapping[str, Status]) -> Counter[str]:
        return Counter(s.reason or s.code.value for s in rejected.values())


class _PluginScores(Mapping[str, float]):
    """One plugin's cached (unweighted) scores, read lazily from the memo."""

    def __init__(self, index: Mapping[str, Ranked], plugin: str, weight: float) -> None:
        self._index, self._plugin, self._weight = index, plugin, weight or 1.0

    def __getitem__(self, key: str) -> float:
        return self._index[key].scores.get(self._plugin, 0.0) / self._weight

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


@dataclass(slots=True)
class FilterResult:
    feasible: list[Candidate]
    rejected: dict[str, Status]


def _guard(name: str, call: Callable[[], Status]) -> Status:
    try:
        return call().named(name)
    except Exception as exc:  # a plugin bug must not take the scheduler down
        log.exception("plugin %s failed", name)
        return error(f"plugin crashed: {exc!r}").named(name)


class Framework:
    def __init__(self, config: SchedulerConfig, registry: Registry,
                 shared: Mapping[str, Any] | None = None) -> None:
        self.config = config
        self.instances: dict[str, Plugin] = {}
        self.points: dict[str, list[tuple[Plugin, float]]] = {}
        for point, specs in config.plugins.items():
            proto = points.EXTENSION_POINTS.get(point)
            if proto is None:
                raise ValueError(f"plugins: unknown extension point {point!r}; known: "
                                 f"{', '.join(points.EXTENSION_POINTS)}")
            enabled = []
            for spec in specs:
                factory = registry.get(spec.name)
                if factory is None:
                    raise ValueError(f"plugins.{point}: unknown plugin {spec.name!r}")
                instance = self.instances.get(spec.name)
                if instance is None:
                    instance = factory({**(shared or {}), **spec.args})
                    self.instances[spec.name] = instance
                if not isinstance(instance, proto):
                    raise ValueError(f"plugins.{point}: {spec.name} does not implement {point}")
                enabled.append((instance, spec.weight))
            self.points[point] = enabled
        if config.extenders:
            from controllers.scheduler.plugins.extender import Extender

            for i, ext in enumerate(config.extenders):
                plugin = Extender(ext, i)
                self.instances[plugin.name] = plugin
                self.points.setdefault("filter", []).append((plugin, 1.0))
                self.points.setdefault("score", []).append((plugin, ext.weight))
                self.points.setdefault("preBind", []).append((plugin, 1.0))
        self._memo: OrderedDict[bytes, tuple[int, Evaluation]] = OrderedDict()
        self._plugins: dict[str, list[Any]] = {}
        self.describers: list[Callable[..., dict[str, Any]]] = [
            getattr(p, "describe") for p in self.instances.values()  # noqa: B009
            if callable(getattr(p, "describe", None))]
        # What each plugin can do, decided once: isinstance on a Protocol is slow.
        self._normalizes = {n for n, p in self.instances.items() if isinstance(p, points.Normalize)}
        self._tiers = {n for n, p in self.instances.items() if isinstance(p, points.Tier)}
        self._adjusts = {n for n, p in self.instances.items() if isinstance(p, points.Adjust)}
        filters = self.points.get("filter", [])
        scores = self.points.get("score", [])
        self._static_filters = [p for p, _ in filters if p.cacheable]
        self._dynamic_filters = [p for p, _ in filters if not p.cacheable]
        self._static_scores = [(p, w) for p, w in scores if p.cacheable]
        self._dynamic_scores = [(p, w) for p, w in scores if not p.cacheable]
        self._adjusters: list[tuple[Any, float]] = [
            (p, w) for p, w in scores if p.cacheable and p.name in self._adjusts]

    def selector(self, state: CycleState) -> Any:
        """The first enabled filter plugin that fills selections, unless it skipped."""
        skipped: set[str] = state.data.get("skip", set())
        for p in self.plugins("filter"):
            if callable(getattr(p, "select", None)) and p.name not in skipped:
                return p.select
        return None

    def plugins(self, point: str) -> list[Any]:
        cached = self._plugins.get(point)
        if cached is None:
            cached = self._plugins[point] = [p for p, _ in self.points.get(point, [])]
        return cached

    # -- queue sort -------------------------------------------------------------

    def sort_key(self, subject: Subject, enqueued: float) -> tuple[Any, ...]:
        sorters = self.plugins("queueSort")
        return sorters[0].sort_key(subject, enqueued) if sorters else (enqueued,)

    # -- filtering ----------------------------------------------------------------

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        skipped: set[str] = state.data.setdefault("skip", set())
        for p in self.plugins("preFilter"):
            status = _guard(p.name, partial(p.pre_filter, state, subject, snapshot))
            if status.code is Code.SKIP:
                skipped.add(p.name)
            elif not status.ok:
                return status
        return SUCCESS

    def evaluate(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Evaluation:
        """Filter and score: cached parts from the memo, per-subject parts on top."""
        skipped: set[str] = state.data.get("skip", set())
        base = self._memoized(subject, snapshot.epoch)
        if base is None:
            base = self._static(state, subject, snapshot, skipped)
            self._remember(subject, snapshot.epoch, base)
        dynamic_filters = [p for p in self._dynamic_filters if p.name not in skipped]
        dynamic_scores = [(p, w) for p, w in self._dynamic_scores if p.name not in skipped]
        adjusters = [(p, w) for p, w in self._adjusters if p.name not in skipped]
        if not (dynamic_filters or dynamic_scores or adjusters):
            return base
        ranked, rejected = base.ranked, base.rejected
        counts = base.counts
        keep: set[str] | None = None
        if dynamic_filters:
            feasible = [r.candidate for r in ranked]
            rest = self._run_filters(state, subject, feasible, snapshot, dynamic_filters, None)
            keep = {c.key for c in rest.feasible}
            ranked = [r for r in ranked if r.candidate.key in keep]
            rejected = {**rejected, **rest.rejected}
            counts = counts + Evaluation.count(rest.rejected)
        overrides: dict[str, Ranked] = {}
        for p, weight in adjusters:
            mine = _PluginScores(base.index, p.name, weight)
            for key, value in p.adjust(state, subject, mine, snapshot).items():
                r = overrides.get(key) or base.index.get(key)
                if r is None or (keep is not None and key not in keep):
                    continue
                new = Ranked(r.candidate, r.tier, r.score, dict(r.scores))
                new.score += weight * value - new.scores.get(p.name, 0.0)
                new.scores[p.name] = weight * value
                overrides[key] = new
        if not (overrides or dynamic_scores or dynamic_filters):
            return base
        if overrides or dynamic_scores:
            ranked = [overrides.get(r.candidate.key, r) for r in ranked]
        if dynamic_scores:
            ranked = [Ranked(r.candidate, r.tier, r.score, dict(r.scores)) for r in ranked]
            status = self._score(state, subject, ranked, snapshot, dynamic_scores)
            if not status.ok:
                return Evaluation([], {"*": status}, base.considered)
        if overrides or dynamic_scores:
            ranked.sort(key=lambda r: r.order, reverse=True)
        return Evaluation(ranked, rejected, base.considered, counts=counts)

    def _static(self, state: CycleState, subject: Subject, snapshot: Snapshot,
                skipped: set[str]) -> Evaluation:
        candidates = snapshot.candidates(subject)
        filters = [p for p in self._static_filters if p.name not in skipped]
        result = self._run_filters(state, subject, candidates, snapshot, filters,
                                   limit=self._sample_size(len(candidates)))
        ranked = [Ranked(c, 0, 0.0) for c in result.feasible]
        scorers = [(p, w) for p, w in self._static_scores if p.name not in skipped]
        status = self._score(state, subject, ranked, snapshot, scorers)
        if not status.ok:
            return Evaluation([], {"*": status}, len(candidates))
        ranked.sort(key=lambda r: r.order, reverse=True)
        return Evaluation(ranked, result.rejected, len(candidates),
                          {r.candidate.key: r for r in ranked},
                          Evaluation.count(result.rejected))

    def _score(self, state: CycleState, subject: Subject, ranked: list[Ranked],
               snapshot: Snapshot, scorers: list[tuple[Any, float]]) -> Status:
        for p, weight in scorers:
            try:
                if hasattr(p, "score_all"):
                    bulk = p.score_all(state, subject, [r.candidate for r in ranked], snapshot)
                    raw = {r.candidate.key: bulk.get(r.candidate.key, 0.0) for r in ranked}
                else:
                    raw = {r.candidate.key: p.score(state, subject, r.candidate, snapshot)
                           for r in ranked}
                if p.name in self._normalizes:
                    p.normalize(state, subject, raw)
                tiers = p.name in self._tiers
                for r in ranked:
                    value = weight * raw[r.candidate.key]
                    r.scores[p.name] = value
                    r.score += value
                    if tiers:
                        r.tier += p.tier(state, subject, r.candidate)
            except Exception as exc:
                log.exception("plugin %s failed", p.name)
                return error(f"plugin crashed: {exc!r}").named(p.name)
        return SUCCESS

    def _sample_size(self, n: int) -> int | None:
        pct = self.config.percentage_of_clusters_to_score
        if pct >= 100:
            return None
        return max(min(100, n), int(n * pct / 100))

    def _run_filters(self, state: CycleState, subject: Subject, candidates: list[Candidate],
                     snapshot: Snapshot, filters: list[Any], limit: int | None) -> FilterResult:
        feasible: list[Candidate] = []
        rejected: dict[str, Status] = {}
        batch = [p for p in filters if hasattr(p, "filter_all")]
        if batch:
            filters = [p for p in filters if p not in batch]
        for c in candidates:
            for p in filters:
                try:
                    status = p.filter(state, subject, c, snapshot)
                except Exception as exc:
                    log.exception("plugin %s failed", p.name)
                    status = error(f"plugin crashed: {exc!r}")
                if not status.ok:
                    rejected[c.key] = status.named(p.name)
                    break
            else:
                feasible.append(c)
                if limit is not None and len(feasible) >= limit:
                    break
        for p in batch:  # one call for all survivors (an extender: one HTTP request)
            try:
                out = p.filter_all(state, subject, feasible, snapshot)
            except Exception as exc:
                log.exception("plugin %s failed", p.name)
                out = {c.key: error(f"plugin crashed: {exc!r}") for c in feasible}
            for key, status in out.items():
                rejected[key] = status.named(p.name)
            feasible = [c for c in feasible if c.key not in out]
        return FilterResult(feasible, rejected)

    def _memoized(self, subject: Subject, epoch: int) -> Evaluation | None:
        if not subject.signature:
            return None
        hit = self._memo.get(subject.signature)
        if hit is None or hit[0] != epoch:
            return None
        self._memo.move_to_end(subject.signature)
        return hit[1]

    def _remember(self, subject: Subject, epoch: int, result: Evaluation) -> None:
        if not subject.signature:
            return
        self._memo[subject.signature] = (epoch, result)
        self._memo.move_to_end(subject.signature)
        while len(self._memo) > MEMO_SIGNATURES:
            self._memo.popitem(last=False)

    def post_filter(self, state: CycleState, subject: Subject,
                    rejected: Mapping[str, Status]) -> Status:
        for p in self.plugins("postFilter"):
            status = _guard(p.name, partial(p.post_filter, state, subject, rejected))
            if status.code is Code.SUCCESS:
                return status
        return Status(Code.UNSCHEDULABLE)

    # -- after the decision ----------------------------------------------------------

    def reserve(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        done: list[Any] = []
        for p in self.plugins("reserve"):
            status = _guard(p.name, partial(p.reserve, state, subject, targets))
            if not status.ok:
                for q in reversed(done):
                    q.unreserve(state, subject, targets)
                return status
            done.append(p)
        return SUCCESS

    def unreserve(self, state: CycleState, subject: Subject, targets: list[Target]) -> None:
        for p in reversed(self.plugins("reserve")):
            try:
                p.unreserve(state, subject, targets)
            except Exception:
                log.exception("plugin %s failed to unreserve", p.name)

    def permit(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        waiting: Status | None = None
        for p in self.plugins("permit"):
            status = _guard(p.name, partial(p.permit, state, subject, targets))
            if status.code is Code.WAIT:
                waiting = status
            elif not status.ok:
                return status
        return waiting or SUCCESS

    def bind(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        for p in self.plugins("preBind"):
            status = _guard(p.name, partial(p.pre_bind, state, subject, targets))
            if not status.ok:
                return status
        for p in self.plugins("bind"):
            status = _guard(p.name, partial(p.bind, state, subject, targets))
            if status.code is not Code.SKIP:
                if status.ok:
                    for q in self.plugins("postBind"):
                        try:
                            q.post_bind(state, subject, targets)
                        except Exception:
                            log.exception("plugin %s failed in post-bind", q.name)
                return status
        return error("no bind plugin bound the subject")


__all__ = ["SKIP", "Evaluation", "Framework", "Ranked", "Registry"]
