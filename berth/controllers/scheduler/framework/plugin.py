"""Extension points: one small interface each; a plugin implements what it needs.

The Kubernetes framework's points, in the order one attempt runs them:
queue-sort, pre-filter, filter, post-filter, score (+ normalize), reserve /
unreserve, permit, pre-bind, bind, post-bind. There is no pre-score point: what
Kubernetes' PreScore computes once for an attempt's scorers, a score plugin here
computes once per fleet (``score_base``) or per signature (``cacheable``).

Each point, and each optional form a plugin may offer at one (a set form, a
batch, a description for the explanation), is a Protocol here; :mod:`enabled` binds a profile's
plugins to them once, when the framework is built, and the runner calls each
through the Protocol it was bound as.

A filter or score plugin whose answer depends only on the subject's
``signature`` and the snapshot's ``epoch`` sets ``cacheable = True``: the
runner then evaluates it once per distinct signature per epoch, however many
subjects share it (10,000 applications with the same constraints cost one
pass). What differs per subject comes from non-cacheable plugins, or, for a
cacheable score plugin, from sparse ``adjust`` overrides (stickiness changes
the score of one or two clusters, not of all).

Filters and scores also have *set forms* (``filter_set``, ``score_set``,
``score_base``) that answer for every candidate of a :class:`Fleet` at once
with bitsets; the runner uses them when every plugin at a point has one. A
per-subject score with many values may also offer ``score_values``, one value
per feasible candidate (an array for a large feasible set, a list for a few),
which the runner prefers over ``score_set`` (see ``ranking.Additions``). The per-candidate forms
stay: they are the reference the set forms are tested against, and what a
plugin without a set form is run with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

import msgspec
import numpy as np
import numpy.typing as npt

from berth.controllers.scheduler.framework.fleet import Fleet
from berth.controllers.scheduler.framework.snapshot import Snapshot
from berth.controllers.scheduler.framework.state import CycleState
from berth.controllers.scheduler.framework.status import Status
from berth.controllers.scheduler.framework.types import Candidate, Subject
from berth.store.codec import field_error
from berth.store.documents import Target

if TYPE_CHECKING:
    from berth.controllers.scheduler.framework.ranking import Ranked
    from berth.controllers.scheduler.framework.selection import Pool


class NoArgs(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The arguments of a plugin that takes none; a plugin's own are a Struct like it."""


A = TypeVar("A", bound=msgspec.Struct)


class Plugin:
    """Base of every plugin: a name, its arguments' type, and whether its filter can be
    memoized."""

    name: ClassVar[str] = ""
    cacheable: ClassVar[bool] = False
    Args: ClassVar[type[msgspec.Struct]] = NoArgs  # the arguments it takes, typed
    # Whether new metric values alone can change what its filter says (the Kubernetes
    # scheduler's queueing hints, for the one event berth has that Kubernetes does
    # not): a subject only plugins that do not read them rejected everywhere stays
    # unschedulable through a metric picture. True unless a plugin says otherwise.
    reads_metric_values: ClassVar[bool] = True

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        self.args = dict(args or {})  # as given
        unknown = sorted(set(self.args) - self.takes())
        if unknown:
            raise ValueError(f"plugin {self.name}: unknown argument(s) {', '.join(unknown)}; "
                             f"it takes: {', '.join(sorted(self.takes())) or 'none'}")
        self.typed(self.Args)

    @classmethod
    def takes(cls) -> frozenset[str]:
        """The names of the arguments it takes."""
        return frozenset(cls.Args.__struct_fields__)

    def typed(self, type_: type[A]) -> A:
        """The arguments given, as ``type_`` (its defaults for those not given); a
        ValueError names the plugin and the argument."""
        try:
            return msgspec.convert(self.args, type_)
        except msgspec.ValidationError as exc:
            raise ValueError(f"plugin {self.name}: argument {field_error(exc)}") from None


class Named(Protocol):
    """What the runner reads of every plugin, whatever it implements (:class:`Plugin`
    has it)."""

    @property
    def name(self) -> str: ...

    @property
    def cacheable(self) -> bool: ...

    @property
    def reads_metric_values(self) -> bool: ...


@runtime_checkable
class QueueSort(Protocol):
    def sort_key(self, subject: Subject, enqueued: float, priority: int) -> tuple[Any, ...]:
        """The queue's order of ``subject`` (smaller first), enqueued at ``enqueued``,
        whose priority resolves to ``priority``."""
        ...


@runtime_checkable
class PreFilter(Named, Protocol):
    def pre_filter(self, state: CycleState, subject: Subject, snapshot: Snapshot) -> Status:
        """Once per attempt, before any candidate is looked at. SUCCESS: go on. SKIP: this
        plugin's filter and score are not run for this subject. UNSCHEDULABLE,
        UNRESOLVABLE or ERROR (a crash is one): the attempt stops there, nothing fits,
        its reason names the plugin (retried as any unschedulable subject is). WAIT is
        not a pre-filter's word: taken as UNSCHEDULABLE."""
        ...


@runtime_checkable
class Filter(Named, Protocol):
    def filter(
        self, state: CycleState, subject: Subject, candidate: Candidate, snapshot: Snapshot
    ) -> Status:
        """Whether ``candidate`` can take ``subject``. SUCCESS or SKIP: it can, as far as
        this plugin knows. UNSCHEDULABLE: not now (another may, or this one later);
        UNRESOLVABLE: not until the subject changes (berth treats the two alike);
        ERROR (a crash is one): this candidate is rejected with the error as its reason,
        the others are still judged. Every rejection is one line of the explanation.
        WAIT is not a filter's word: it rejects."""
        ...


@runtime_checkable
class FilterSet(Named, Protocol):
    def filter_set(
        self, state: CycleState, subject: Subject, fleet: Fleet, within: int,
        snapshot: Snapshot,
    ) -> list[tuple[Status, int]]:
        """The set form of ``filter``: which candidates of ``within`` it rejects, and why.

        Groups of candidates (bitsets over ``fleet``'s ordinals, disjoint),
        each with exactly the status ``filter`` returns for each of them; the
        candidates in no group pass. Must agree with ``filter`` (a property
        test holds every built-in plugin to it).
        """
        ...


@runtime_checkable
class PostFilter(Named, Protocol):
    def post_filter(
        self, state: CycleState, subject: Subject, rejected: Mapping[str, Status]
    ) -> Status:
        """Told, when nothing fits, why each candidate was rejected. What it returns is
        not acted on (the first SUCCESS ends the round; anything else asks the next):
        berth makes room by its own plan (:mod:`berth.controllers.scheduler.preempt`),
        not at this point."""
        ...


@runtime_checkable
class Score(Named, Protocol):
    def score(
        self, state: CycleState, subject: Subject, candidate: Candidate, snapshot: Snapshot
    ) -> float:
        """A score in [0, 1] (after normalize); breakdowns go to ``state.explain``. A
        score has no status: one that raises fails the attempt, retried after a
        backoff."""
        ...


@runtime_checkable
class ScoreBase(Named, Protocol):
    def score_base(self, fleet: Fleet, snapshot: Snapshot) -> tuple[list[float], list[int]]:
        """Per ordinal: the score (as ``score``) and tier, which must not depend on
        the subject; computed once per fleet and metric values."""
        ...


@runtime_checkable
class ScoreSet(Named, Protocol):
    def score_set(
        self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
        snapshot: Snapshot,
    ) -> list[tuple[int, float]]:
        """The set form of ``score`` (after ``normalize``): additive terms, each
        ``(candidates, value)``; a feasible candidate in no term scores 0."""
        ...


@runtime_checkable
class ScoreValues(Named, Protocol):
    def score_values(
        self, state: CycleState, subject: Subject, fleet: Fleet, feasible: int,
        at: npt.NDArray[np.intp] | list[int], snapshot: Snapshot,
    ) -> npt.NDArray[np.float64] | list[float] | None:
        """``score_set`` as one value per feasible candidate (``at``: their ordinals,
        ascending), or None when this plugin has no such form for the subject. The
        values in the form ``at`` comes in: an array for a large feasible set, a list
        for a few."""
        ...


@runtime_checkable
class Normalize(Named, Protocol):
    def normalize(self, state: CycleState, subject: Subject, scores: dict[str, float]) -> None:
        """Rescale ``scores`` (candidate key → raw score) into [0, 1] in place."""
        ...


@runtime_checkable
class Tier(Named, Protocol):
    def tier(self, state: CycleState, subject: Subject, candidate: Candidate) -> int:
        """A rank class: candidates of a higher tier always beat lower ones."""
        ...


@runtime_checkable
class Adjust(Named, Protocol):
    def adjust(
        self, state: CycleState, subject: Subject, scores: Mapping[str, float],
        snapshot: Snapshot,
    ) -> dict[str, float]:
        """Sparse per-subject overrides of a cacheable score plugin's scores.

        ``scores`` maps candidate keys to the plugin's cached score; return the
        few that differ for this subject (stickiness: its current clusters).
        """
        ...


@runtime_checkable
class ScoreAll(Named, Protocol):
    def score_all(
        self, state: CycleState, subject: Subject, candidates: list[Candidate],
        snapshot: Snapshot,
    ) -> dict[str, float]:
        """``score`` for every candidate in one call (an extender: one HTTP request), by
        key; a candidate left out scores 0."""
        ...


@runtime_checkable
class FilterAll(Named, Protocol):
    def filter_all(
        self, state: CycleState, subject: Subject, candidates: list[Candidate],
        snapshot: Snapshot,
    ) -> dict[str, Status]:
        """The filter for every candidate left in one call (an extender: one HTTP
        request): the rejected ones by key, each with its status."""
        ...


@runtime_checkable
class Selects(Named, Protocol):
    def select(self, subject: Subject, pool: Pool, n: int,
               chosen: Sequence[Ranked]) -> list[Ranked]:
        """A filter plugin that also fills a selection: ``chosen`` up to ``n`` from
        ``pool`` (best first), as the constraint it filters by needs."""
        ...


@runtime_checkable
class Describe(Named, Protocol):
    def describe(self, state: CycleState, subject: Subject, candidate: Candidate,
                 snapshot: Snapshot) -> dict[str, Any]:
        """What the explanation says of a chosen candidate beyond its scores."""
        ...


@runtime_checkable
class Reserve(Named, Protocol):
    def reserve(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        """Hold what the decision takes on ``targets`` before it is written. SUCCESS or
        SKIP: held. Anything else: the plugins that reserved are unreserved, last first,
        and the attempt is retried after a backoff (``berth_scheduler_attempts_total
        {result="not_permitted"}``)."""
        ...

    def unreserve(self, state: CycleState, subject: Subject, targets: list[Target]) -> None:
        """Let go of what ``reserve`` held: the decision was refused later, or a wait at
        permit ran out. Must not fail (an exception is logged and ignored)."""
        ...


@runtime_checkable
class Permit(Named, Protocol):
    def permit(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        """Whether the decision may be written now. SUCCESS or SKIP: yes. WAIT (with a
        timeout): held, reserved, until a later attempt's permit allows it
        (``state.allow``) or the timeout passes (then unreserved, rejected, and written
        Unschedulable). UNSCHEDULABLE, UNRESOLVABLE or ERROR: unreserved and retried
        after a backoff."""
        ...


@runtime_checkable
class Reject(Named, Protocol):
    def reject(self, subject: Subject) -> None:
        """The scheduler gave up waiting for ``subject`` at permit: forget it."""
        ...


@runtime_checkable
class PreBind(Named, Protocol):
    def pre_bind(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        """Just before the Binding is written. SUCCESS or SKIP: go on. Anything else:
        nothing is written, the decision is unreserved and retried after a backoff."""
        ...


@runtime_checkable
class Bind(Named, Protocol):
    def bind(self, state: CycleState, subject: Subject, targets: list[Target]) -> Status:
        """Bind (berth's DefaultBinder: the Binding is written through the one writer),
        or SKIP to let the next bind plugin do it. SUCCESS: bound, post-bind follows.
        Anything else: unreserved and retried after a backoff. No bind plugin binding
        is an ERROR."""
        ...


@runtime_checkable
class PostBind(Named, Protocol):
    def post_bind(self, state: CycleState, subject: Subject, targets: list[Target]) -> None:
        """Told that the subject was bound; informational (an exception is logged)."""
        ...


EXTENSION_POINTS: dict[str, type] = {
    "queueSort": QueueSort,
    "preFilter": PreFilter,
    "filter": Filter,
    "postFilter": PostFilter,
    "score": Score,
    "reserve": Reserve,
    "permit": Permit,
    "preBind": PreBind,
    "bind": Bind,
    "postBind": PostBind,
}
