"""Runs the enabled plugins of each extension point for one scheduling attempt.

A crashing plugin becomes an ERROR status naming it; every status is stamped
with its plugin's name. An attempt decides on one frozen :class:`Fleet` (the
candidates with their bitset indexes). Filters run in their set forms when
all have one: each answers for every candidate at once, and the rejections
are groups of candidates per status, not one status per candidate. Scores
are the weighted sum of each score plugin's score; the subject-independent
part is one order of the whole fleet (:class:`BaseOrder`), the per-subject
parts are bands and sparse overrides on it (see ``ranking``). Candidates are
ranked by tier, then score; ties are left for the selection to break at
random.

Cacheable filters and scores are evaluated once per distinct subject
signature per fleet (a bounded memo); then the per-subject plugins run on
top. ``reference=True`` runs every plugin one candidate at a time: the
straightforward evaluation that the set forms are tested against.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework import ranking as rankings
from berth.controllers.scheduler.framework.enabled import Registry, enable
from berth.controllers.scheduler.framework.evaluation import Evaluation, FeasibleScores, Static
from berth.controllers.scheduler.framework.fleet import Fleet, ordinals
from berth.controllers.scheduler.framework.profile import Profile
from berth.controllers.scheduler.framework.ranking import (
    Additions,
    Band,
    BaseOrder,
    FewAdditions,
    Ranked,
    Ranking,
    lookup,
    split_all,
)
from berth.controllers.scheduler.framework.sampled import Sampled
from berth.controllers.scheduler.framework.snapshot import Snapshot
from berth.controllers.scheduler.framework.state import CycleState
from berth.controllers.scheduler.framework.status import SKIP, SUCCESS, Code, Status, error
from berth.controllers.scheduler.framework.types import Subject
from berth.store.documents import Target

if TYPE_CHECKING:
    from berth.controllers.scheduler.framework.selection import Fill

log = logging.getLogger(__name__)

MEMO_SIGNATURES = 1024


def _worst(statuses: Any) -> str:
    """What a set of rejections says, for the sampled time of the filter that made them:
    Success (none), else the code of the first (an ERROR before any other)."""
    codes = [(s[0] if isinstance(s, tuple) else s).code for s in statuses]
    if Code.ERROR in codes:
        return Code.ERROR.value
    return codes[0].value if codes else Code.SUCCESS.value


def _guard(name: str, call: Callable[[], Status]) -> Status:
    try:
        return call().named(name)
    except Exception as exc:  # a plugin bug must not take the scheduler down
        log.exception("plugin %s failed", name)
        return error(f"plugin crashed: {exc!r}").named(name)


class Framework:
    """One profile's plugins run for each attempt: pre-filter, filter and score into an
    :class:`Evaluation`; post-filter; then reserve, permit and bind for the decision
    made. Built once (:func:`enabled.enable`); the plugins keep their own state."""

    def __init__(self, profile: Profile, registry: Registry,
                 shared: Mapping[str, Any] | None = None, *, reference: bool = False) -> None:
        self.profile = profile
        self.reference = reference  # every plugin one candidate at a time (for tests)
        on = self.on = enable(profile, registry, shared)
        self.instances = on.instances
        # (candidate kind, namespace) → (the fleet it was computed on, signature → result)
        self._memo: dict[tuple[str, str | None],
                         tuple[Fleet, OrderedDict[bytes, Static]]] = {}
        self._static_filters = [p for p in on.filters if p.cacheable]
        self._dynamic_filters = [p for p in on.filters if not p.cacheable]
        self._static_batch = [p for p in on.batch_filters if p.cacheable]
        self._dynamic_batch = [p for p in on.batch_filters if not p.cacheable]
        self._static_scores = [(p, w) for p, w in on.scores if p.cacheable]
        self._dynamic_scores = [(p, w) for p, w in on.scores if not p.cacheable]
        self._adjusters = [(on.adjusters[p.name], w) for p, w in on.scores
                           if p.cacheable and p.name in on.adjusters]
        self.sampled = Sampled()  # per plugin and point: time and status, now and then

    def _run(self, point: str, name: str, call: Callable[[], Status]) -> Status:
        """One plugin at one point (a crash an ERROR naming it), timed when sampled."""
        if not self.sampled.on:
            return _guard(name, call)
        since = self.sampled.start()
        status = _guard(name, call)
        self.sampled.took(name, point, status.code.value, since)
        return status

    @property
    def describers(self) -> tuple[points.Describe, ...]:
        """What the explanation says of a chosen candidate beyond its scores."""
        return self.on.describers

    def selector(self, state: CycleState) -> Fill | None:
        """The first enabled filter plugin that fills selections, unless it skipped."""
        skipped: set[str] = state.data.get("skip", set())
        for p in self.on.selectors:
            if p.name not in skipped:
                return p.select
        return None

    # -- queue sort -------------------------------------------------------------

    def sort_key(self, subject: Subject, enqueued: float, priority: int) -> tuple[Any, ...]:
        sorter = self.on.queue_sort
        return (sorter.sort_key(subject, enqueued, priority) if sorter is not None
                else (enqueued,))

    def metric_blind(self, evaluation: Evaluation | None) -> bool:
        """Whether new metric values alone cannot make fit a subject nothing fit in
        ``evaluation``: no candidate was feasible, and every one was rejected by a
        plugin that does not read metric values (``Plugin.reads_metric_values``).
        Not when pre-filter refused it (None) or a selection did (some feasible)."""
        if evaluation is None or evaluation.feasible or not evaluation.rejections:
            return False
        blind = self.on.metric_blind
        return all(status.plugin in blind for status, _ in evaluation.rejections)

    # -- filtering ----------------------------------------------------------------

    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        """The first point of an attempt (where the sample is drawn)."""
        self.sampled.next_attempt()
        skipped: set[str] = state.data.setdefault("skip", set())
        for p in self.on.pre_filters:
            status = self._run("preFilter", p.name,
                               partial(p.pre_filter, state, subject, snapshot))
            if status.code is Code.SKIP:
                skipped.add(p.name)
            elif not status.ok:
                return status
        return SUCCESS

    def evaluate(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Evaluation:
        """Filter and score on one frozen fleet: cached parts from the memo, per-subject on top."""
        fleet = state.fleet
        if fleet is None:
            fleet = state.fleet = snapshot.fleet(subject)
        skipped: set[str] = state.data.get("skip", set())
        static = self._memoized(subject, fleet)
        if static is None:
            static = self._static(state, subject, fleet, snapshot, skipped)
            self._remember(subject, fleet, static)
        if static.error is not None:
            return Evaluation(fleet, 0, static.rejections, Ranking.of(fleet, []), len(fleet),
                              static.error, static.views)
        feasible, rejections = static.feasible, static.rejections
        dynamic_filters = [p for p in self._dynamic_filters if p.name not in skipped]
        dynamic_batch = [p for p in self._dynamic_batch if p.name not in skipped]
        if dynamic_filters or dynamic_batch:
            feasible, more = self._filter(state, subject, fleet, snapshot, feasible,
                                          dynamic_filters, dynamic_batch)
            if more:  # else the static part's own: its views are shared
                rejections = rejections + more
        dynamic_scores = [(p, w) for p, w in self._dynamic_scores if p.name not in skipped]
        per_candidate = [(p, w) for p, w in dynamic_scores if self.reference or static.dense
                         is not None or p.name not in self.on.score_sets]
        bands: list[Band] = static.bands
        adds: Additions | FewAdditions | None = None
        additive = static.base is not None and not per_candidate
        for p, weight in dynamic_scores:
            if (p, weight) in per_candidate:
                continue
            values: Any = None  # an array or a list, as ``adds.idx`` is
            terms: list[tuple[int, float]] = []
            by_value = self.on.score_values.get(p.name)
            since = self.sampled.start() if self.sampled.on else 0.0
            try:
                if additive and adds is None and by_value is not None:
                    assert static.base is not None  # from here on, one addition per candidate
                    adds = (Additions(static.base, feasible, bands)
                            if feasible.bit_count() >= rankings.DENSE_FROM
                            else FewAdditions(static.base, feasible, bands))
                if adds is not None and by_value is not None:
                    values = by_value.score_values(state, subject, fleet, feasible, adds.idx,
                                                   snapshot)
                if values is None:
                    terms = self.on.score_sets[p.name].score_set(state, subject, fleet,
                                                                 feasible, snapshot)
            except Exception as exc:
                log.exception("plugin %s failed", p.name)
                if since:
                    self.sampled.took(p.name, "score", Code.ERROR.value, since)
                return self._failed(fleet, rejections, error(f"plugin crashed: {exc!r}").named(
                    p.name))
            if since:
                self.sampled.took(p.name, "score", Code.SUCCESS.value, since)
            if adds is None:
                bands = split_all(bands, terms, weight, p.name)
            elif values is not None:
                adds.add_values(values, weight, p.name)
            else:
                adds.add_terms(terms, weight, p.name)
        if static.dense is not None or per_candidate:
            return self._dense(state, subject, fleet, snapshot, static, feasible, rejections,
                               bands, per_candidate, skipped)
        assert static.base is not None
        find = adds.lookup if adds is not None else lookup(static.base, bands)
        by_ordinal = fleet.by_key

        def get(key: str) -> Ranked | None:
            i = by_ordinal.get(key)
            return find(i) if i is not None and feasible >> i & 1 else None

        overrides = self._overrides(state, subject, fleet, snapshot, feasible, get, skipped)
        ranking = (Ranking.added(static.base, adds, overrides) if adds is not None
                   else Ranking.banded(static.base, feasible, bands, overrides))
        return Evaluation(fleet, feasible, rejections, ranking, len(fleet),
                          views=static.views_of(rejections))

    def _dense(self, state: CycleState, subject: Subject, fleet: Fleet, snapshot: Snapshot,
               static: Static, feasible: int, rejections: list[tuple[Status, int]],
               bands: list[Band], per_candidate: list[tuple[points.Score, float]],
               skipped: set[str]) -> Evaluation:
        """Every feasible candidate scored one by one (the reference, or a plugin
        without a set form)."""
        if static.dense is not None:
            entries = [Ranked(r.candidate, r.tier, r.score, dict(r.scores), r.ordinal)
                       for r in static.dense if feasible >> r.ordinal & 1]
        else:
            assert static.base is not None
            entries = [Ranked(r.candidate, r.tier, r.score, dict(r.scores), r.ordinal)
                       for r in Ranking.banded(static.base, feasible, bands, {})]
        by_key = {r.candidate.key: r for r in entries}
        overrides = self._overrides(state, subject, fleet, snapshot, feasible, by_key.get,
                                    skipped)
        if overrides:
            entries = [overrides.get(r.ordinal, r) for r in entries]
        if per_candidate:
            status = self._score(state, subject, entries, snapshot, per_candidate)
            if not status.ok:
                return self._failed(fleet, rejections, status)
        if overrides or per_candidate:
            entries.sort(key=lambda r: r.order, reverse=True)
        return Evaluation(fleet, feasible, rejections, Ranking.of(fleet, entries), len(fleet),
                          views=static.views_of(rejections))

    @staticmethod
    def _failed(fleet: Fleet, rejections: list[tuple[Status, int]], status: Status) -> Evaluation:
        return Evaluation(fleet, 0, rejections, Ranking.of(fleet, []), len(fleet), status)

    def _overrides(self, state: CycleState, subject: Subject, fleet: Fleet, snapshot: Snapshot,
                   feasible: int, lookup: Callable[[str], Ranked | None],
                   skipped: set[str]) -> dict[int, Ranked]:
        """Sparse per-subject changes of cached scores (stickiness), by ordinal."""
        overrides: dict[int, Ranked] = {}
        for p, weight in self._adjusters:
            if p.name in skipped:
                continue
            mine = FeasibleScores(lookup, fleet, feasible, p.name, weight)
            for key, value in p.adjust(state, subject, mine, snapshot).items():
                i = fleet.by_key.get(key)
                if i is None or not feasible >> i & 1:
                    continue
                r = overrides.get(i) or lookup(key)
                if r is None:
                    continue
                new = Ranked(r.candidate, r.tier, r.score, dict(r.scores), i)
                new.score += weight * value - new.scores.get(p.name, 0.0)
                new.scores[p.name] = weight * value
                overrides[i] = new
        return overrides

    def _static(self, state: CycleState, subject: Subject, fleet: Fleet, snapshot: Snapshot,
                skipped: set[str]) -> Static:
        filters = [p for p in self._static_filters if p.name not in skipped]
        batch = [p for p in self._static_batch if p.name not in skipped]
        feasible, rejections = self._filter(state, subject, fleet, snapshot, fleet.all, filters,
                                            batch, limit=self._sample_size(len(fleet)))
        scorers = [(p, w) for p, w in self._static_scores if p.name not in skipped]
        on = self.on
        if self.reference or any(p.name not in on.score_bases and p.name not in on.score_sets
                                 for p, _ in scorers):
            entries = [Ranked(fleet.candidates[i], 0, 0.0, {}, i) for i in ordinals(feasible)]
            status = self._score(state, subject, entries, snapshot, scorers)
            if not status.ok:
                return Static(0, rejections, [], error=status)
            entries.sort(key=lambda r: r.order, reverse=True)
            return Static(feasible, rejections, [], dense=entries)
        base_scorers = tuple((on.score_bases[p.name], w) for p, w in scorers
                             if p.name in on.score_bases)
        try:
            base = self._base_order(fleet, snapshot, base_scorers)
            bands = [Band(fleet.all)]
            for p, weight in scorers:
                if p.name in on.score_bases:
                    continue
                since = self.sampled.start() if self.sampled.on else 0.0
                terms = on.score_sets[p.name].score_set(state, subject, fleet, feasible, snapshot)
                if since:  # (a crash is said by the attempt's error, as the plugin's)
                    self.sampled.took(p.name, "score", Code.SUCCESS.value, since)
                bands = split_all(bands, terms, weight, p.name)
        except Exception as exc:
            log.exception("a score plugin failed")
            return Static(0, rejections, [], error=error(f"plugin crashed: {exc!r}"))
        return Static(feasible, rejections, bands, base)

    @staticmethod
    def _base_order(fleet: Fleet, snapshot: Snapshot,
                    scorers: tuple[tuple[points.ScoreBase, float], ...]) -> BaseOrder:
        """The fleet ranked by ``scorers``' subject-independent scores, once per fleet and
        metric values."""
        return fleet.cached(_base_key(scorers), lambda: _base_order(fleet, snapshot, scorers),
                            metric=True)

    def standing(self, fleet: Fleet, snapshot: Snapshot, *, read: bool = False
                 ) -> dict[str, int]:
        """Each candidate's place in ``fleet`` (0: the best), by key, by the scores that
        do not depend on the subject (metric values and the like), from the entry
        decisions read (``read``: only if a decision read it; else computed, as a
        decision would). Empty without such scores."""
        bases = self.on.score_bases
        scorers = tuple((bases[p.name], w) for p, w in self._static_scores if p.name in bases)
        if not scorers:
            return {}
        base: BaseOrder | None
        try:
            base = (fleet.built(_base_key(scorers), metric=True) if read
                    else self._base_order(fleet, snapshot, scorers))
        except Exception:  # a decision reports the plugin's failure
            log.debug("no standing of the candidates", exc_info=True)
            return {}
        return dict(zip(fleet.keys, base.position, strict=True)) if base is not None else {}

    def _score(self, state: CycleState, subject: Subject, ranked: list[Ranked],
               snapshot: Snapshot, scorers: list[tuple[points.Score, float]]) -> Status:
        on = self.on
        for p, weight in scorers:
            since = self.sampled.start() if self.sampled.on else 0.0
            try:
                bulk = on.score_alls.get(p.name)
                if bulk is not None:
                    got = bulk.score_all(state, subject, [r.candidate for r in ranked], snapshot)
                    raw = {r.candidate.key: got.get(r.candidate.key, 0.0) for r in ranked}
                else:
                    raw = {r.candidate.key: p.score(state, subject, r.candidate, snapshot)
                           for r in ranked}
                normalizer = on.normalizers.get(p.name)
                if normalizer is not None:
                    normalizer.normalize(state, subject, raw)
                tier = on.tiers.get(p.name)
                for r in ranked:
                    value = weight * raw[r.candidate.key]
                    r.scores[p.name] = value
                    r.score += value
                    if tier is not None:
                        r.tier += tier.tier(state, subject, r.candidate)
            except Exception as exc:
                log.exception("plugin %s failed", p.name)
                if since:
                    self.sampled.took(p.name, "score", Code.ERROR.value, since)
                return error(f"plugin crashed: {exc!r}").named(p.name)
            if since:
                self.sampled.took(p.name, "score", Code.SUCCESS.value, since)
        return SUCCESS

    def _sample_size(self, n: int) -> int | None:
        pct = self.profile.percentage_of_clusters_to_score
        if pct >= 100:
            return None
        return max(min(100, n), int(n * pct / 100))

    def _filter(self, state: CycleState, subject: Subject, fleet: Fleet, snapshot: Snapshot,
                within: int, single: list[points.Filter], batch: list[points.FilterAll],
                limit: int | None = None) -> tuple[int, list[tuple[Status, int]]]:
        """Run ``filters`` over the candidates in ``within``: (feasible, rejections).

        Set forms when every filter has one, else one call per candidate and
        filter (the reference). With ``limit``, candidates are considered in
        ordinal order until that many are feasible; the rest are not considered.
        """
        rejections: list[tuple[Status, int]] = []
        sets = self.on.filter_sets
        if not self.reference and all(p.name in sets for p in single):
            for p in single:
                if not within:
                    break
                since = self.sampled.start() if self.sampled.on else 0.0
                try:
                    out = sets[p.name].filter_set(state, subject, fleet, within, snapshot)
                except Exception as exc:
                    log.exception("plugin %s failed", p.name)
                    out = [(error(f"plugin crashed: {exc!r}"), within)]
                if since:
                    self.sampled.took(p.name, "filter", _worst(out), since)
                for status, bits in out:
                    bits &= within
                    if bits:
                        rejections.append((status.named(p.name), bits))
                        within &= ~bits
            if limit is not None and within.bit_count() > limit:
                cut = _nth(within, limit)
                mask = (1 << (cut + 1)) - 1
                within &= mask
                rejections = [(st, b & mask) for st, b in rejections if b & mask]
        else:
            groups: dict[Status, int] = {}
            feasible = 0
            found = 0
            spent: dict[str, list[Any]] = {}  # sampled: plugin → [seconds, worst code]
            for i in ordinals(within):
                c = fleet.candidates[i]
                for p in single:
                    since = self.sampled.start() if self.sampled.on else 0.0
                    try:
                        status = p.filter(state, subject, c, snapshot)
                    except Exception as exc:
                        log.exception("plugin %s failed", p.name)
                        status = error(f"plugin crashed: {exc!r}")
                    if since:
                        took = spent.setdefault(p.name, [0.0, Code.SUCCESS])
                        took[0] += self.sampled.start() - since
                        if took[1] is not Code.ERROR and not status.ok:
                            took[1] = status.code
                    if not status.ok:
                        status = status.named(p.name)
                        groups[status] = groups.get(status, 0) | (1 << i)
                        break
                else:
                    feasible |= 1 << i
                    found += 1
                    if limit is not None and found >= limit:
                        break
            within = feasible
            rejections = list(groups.items())
            for name, (seconds, code) in spent.items():
                self.sampled.spent(name, "filter", code.value, seconds)
        for b in batch:  # one call for all survivors (an extender: one HTTP request)
            if not within:
                break
            since = self.sampled.start() if self.sampled.on else 0.0
            try:
                answers = b.filter_all(state, subject, fleet.select(within), snapshot)
            except Exception as exc:
                log.exception("plugin %s failed", b.name)
                answers = {fleet.keys[i]: error(f"plugin crashed: {exc!r}")
                           for i in ordinals(within)}
            if since:
                self.sampled.took(b.name, "filter", _worst(answers.values()), since)
            groups = {}
            for key, status in answers.items():
                at = fleet.by_key.get(key)
                if at is not None and within >> at & 1:
                    status = status.named(b.name)
                    groups[status] = groups.get(status, 0) | (1 << at)
            for status, bits in groups.items():
                rejections.append((status, bits))
                within &= ~bits
        return within, rejections

    def _memoized(self, subject: Subject, fleet: Fleet) -> Static | None:
        if not subject.signature:
            return None
        memo = self._memo.get((subject.candidate_kind, subject.ref.namespace))
        if memo is None or memo[0] is not fleet:
            return None
        hit = memo[1].get(subject.signature)
        if hit is not None:
            memo[1].move_to_end(subject.signature)
        return hit

    def _remember(self, subject: Subject, fleet: Fleet, result: Static) -> None:
        """Keep ``result`` for the subjects alike; a new fleet drops the old results."""
        if not subject.signature:
            return
        where = (subject.candidate_kind, subject.ref.namespace)
        memo = self._memo.get(where)
        if memo is None or memo[0] is not fleet:
            memo = self._memo[where] = (fleet, OrderedDict())
        memo[1][subject.signature] = result
        while len(memo[1]) > MEMO_SIGNATURES:
            memo[1].popitem(last=False)

    def post_filter(self, state: CycleState, subject: Subject,
                    rejected: Mapping[str, Status]) -> Status:
        for p in self.on.post_filters:
            status = self._run("postFilter", p.name,
                               partial(p.post_filter, state, subject, rejected))
            if status.code is Code.SUCCESS:
                return status
        return Status(Code.UNSCHEDULABLE)

    # -- after the decision ----------------------------------------------------------

    def reserve(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        done: list[points.Reserve] = []
        for p in self.on.reserves:
            status = self._run("reserve", p.name, partial(p.reserve, state, subject, targets))
            if not status.ok:
                for q in done[::-1]:
                    q.unreserve(state, subject, targets)
                return status
            done.append(p)
        return SUCCESS

    def unreserve(self, state: CycleState, subject: Subject, targets: list[Target]) -> None:
        for p in self.on.reserves[::-1]:
            try:
                p.unreserve(state, subject, targets)
            except Exception:
                log.exception("plugin %s failed to unreserve", p.name)

    def permit(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        waiting: Status | None = None
        for p in self.on.permits:
            status = self._run("permit", p.name, partial(p.permit, state, subject, targets))
            if status.code is Code.WAIT:
                waiting = status
            elif not status.ok:
                return status
        return waiting or SUCCESS

    def bind(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        for p in self.on.pre_binds:
            status = self._run("preBind", p.name, partial(p.pre_bind, state, subject, targets))
            if not status.ok:
                return status
        for b in self.on.binds:
            status = self._run("bind", b.name, partial(b.bind, state, subject, targets))
            if status.code is not Code.SKIP:
                if status.ok:
                    for q in self.on.post_binds:
                        try:
                            q.post_bind(state, subject, targets)
                        except Exception:
                            log.exception("plugin %s failed in post-bind", q.name)
                return status
        return error("no bind plugin bound the subject")


def _nth(bits: int, n: int) -> int:
    """The ordinal of the ``n``-th (1-based) member of ``bits``."""
    for k, i in enumerate(ordinals(bits), 1):
        if k == n:
            return i
    raise ValueError("fewer members than asked for")


def _base_key(scorers: tuple[tuple[points.ScoreBase, float], ...]) -> tuple[Any, ...]:
    """The fleet's cache key of :func:`_base_order` by ``scorers``."""
    return ("base-order", tuple((p.name, w) for p, w in scorers))


def _base_order(fleet: Fleet, snapshot: Snapshot,
                scorers: tuple[tuple[points.ScoreBase, float], ...]) -> BaseOrder:
    n = len(fleet)
    tiers, scores = [0] * n, [0.0] * n
    parts: list[dict[str, float]] = [{} for _ in range(n)]
    for p, weight in scorers:
        raw, tier = p.score_base(fleet, snapshot)
        for i in range(n):
            value = weight * raw[i]
            scores[i] += value
            tiers[i] += tier[i]
            parts[i][p.name] = value
    return BaseOrder(fleet, tiers, scores, parts)


__all__ = ["SKIP", "Evaluation", "Framework", "Ranked", "Ranking"]
