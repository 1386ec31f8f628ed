"""The order a sweep decides placed subjects in: the likeliest to move first.

After a change of the fleet or of metric values every placed subject is
decided again (:meth:`Scheduler._sweeping`); :func:`swept` says in which order,
so that the moves come at the start of a sweep rather than spread through it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

import numpy as np

from berth.controllers.runtime import Item
from berth.controllers.scheduler.cache import Cache
from berth.controllers.scheduler.framework import Framework, Subject
from berth.controllers.scheduler.framework.standing import overtaken
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.views import BindingView
from berth.store import keys
from berth.store.documents import BindingState

ORDER_STEP = 64  # subjects a sweep orders per subject it decides before it has its order
MOVES = 1 << 62  # a sweep's likelihood of a subject that moves or is decided in full
# A sweep's standings per (candidate kind, namespace): each candidate in the fleet now,
# and how many candidates overtook it since the decisions before the change.
_Standings = dict[tuple[str, str | None], dict[str, int]]


def swept(items: list[Item[BindingView]], cache: Cache, framework: Framework
          ) -> Iterator[str]:
    """The keys of the subjects a sweep decides, in the order it decides them.

    The likeliest to move first: those whose targets the most candidates
    overtook in their fleet's order by the subject-independent scores
    (:meth:`Framework.standing`, such as metric values) since the decisions
    before the change (:func:`~.framework.standing.overtaken`): a subject can
    move only to one of those. So the moves come early in the sweep, not
    spread through it. Ordering takes a few microseconds a
    subject, which the first move after a change should not wait for: until
    the order is known, subjects are decided in the cache's order from the
    front while the order is worked out from the back, ``ORDER_STEP``
    subjects per decision; a periodic sweep, with no fleet changed, keeps the
    cache's order. Deferred work (no targets yet: a forecast may have
    changed) and subjects whose target left the fleet come first of the rest;
    ties keep the cache's order. Last, those whose placement depends on where
    others run (workload affinity or anti-affinity, dependencies), decided on where the
    others now run: decided in turn with the rest, one could move on a
    placement the sweep then changed, and move again in the next sweep.
    """
    last: list[tuple[int, str]] = []
    if not cache.fleets_changed():  # a periodic sweep: no order to work out
        for n, item in enumerate(items):
            found = _entry(item, cache)
            if found is not None and found[2]:
                last.append((n, found[0]))
            elif found is not None:
                yield found[0]
        yield from (key for _, key in last)
        return
    # Ordinals and likelihoods as int64 arrays: a sweep over 100,000 subjects in tuples of
    # Python objects would cost the scheduler 15 MB of RSS it never gives back.
    at, likely = array("q"), array("q")
    standings: _Standings = {}
    front, back = 0, len(items)
    while front < back:
        found = _entry(items[front], cache)
        if found is not None and found[2]:
            last.append((front, found[0]))
        elif found is not None:
            yield found[0]
        front += 1
        for _ in range(min(ORDER_STEP, back - front)):
            back -= 1
            found = _entry(items[back], cache)
            if found is not None and found[2]:
                last.append((back, found[0]))
            elif found is not None:
                at.append(back)
                likely.append(-_likelihood(items[back], found[1], standings, cache, framework))
    for n in np.array(at)[np.lexsort((at, likely))].tolist():
        yield subject_key(items[n])
    last.sort()
    yield from (key for _, key in last)


def _likelihood(item: Item[BindingView], subject: Subject | None, standings: _Standings,
                cache: Cache, framework: Framework) -> int:
    """How many candidates overtook the most overtaken of the Binding's targets in
    its fleet's order (see :func:`swept`); ``MOVES`` if it must move or be decided
    in full."""
    targets = item.obj.spec.targets
    if subject is None or not targets:
        return MOVES  # deferred, or gone: a full attempt sorts it out
    where = (subject.candidate_kind, subject.ref.namespace)
    passed = standings.get(where)
    if passed is None:  # as decisions read it now, and before the change
        now = framework.standing(cache.fleet(subject), cache)
        fleet = cache.take_fleet_before(subject)
        passed = standings[where] = overtaken(now, framework.standing(
            fleet, cache, read=True) if fleet is not None and now else {})
    most = 0
    for t in targets:
        by = passed.get(candidate_key(t.kind, t.namespace, t.name))
        if by is None:
            return MOVES if passed else most  # it left the fleet: it moves
        most = max(most, by)
    return most


def _entry(item: Item[BindingView], cache: Cache) -> tuple[str, Subject | None, bool] | None:
    """(key, subject, whether its placement depends on where others run) of a
    Binding a sweep decides; None for a Binding of no application, or settled
    work with no targets (deferred work is decided again: a forecast may have
    changed)."""
    if item.obj.spec.resource.kind != "Application" or (
            not item.obj.spec.targets and item.obj.status.state != BindingState.PENDING):
        return None
    key = subject_key(item)
    subject = cache.subject(key)
    return key, subject, subject is not None and depends_on_placements(subject)


def subject_key(item: Item[BindingView]) -> str:
    """The key of the resource a Binding is for."""
    ref = item.obj.spec.resource
    return keys.resource_key(ref.kind, ref.name, ref.namespace)


def depends_on_placements(subject: Subject) -> bool:
    """Whether where ``subject`` may run depends on where other workloads run (workload
    affinity, or its dependencies)."""
    aff = subject.affinity
    return bool(subject.depends_on or subject.placement.follow_dependents) or (
        aff is not None and bool(aff.workload_affinity or aff.workload_anti_affinity))
