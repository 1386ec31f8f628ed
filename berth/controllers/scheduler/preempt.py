"""Making room: where a more important application could fit if less important ones left.

When an application fits nowhere and may preempt (:mod:`priorities`),
:func:`plan` looks, on one frozen snapshot, at each cluster it was refused
for room alone (the Capacity filter) — Kubernetes' DefaultPreemption, at
cluster scale, and with victims moved rather than killed:

1. Every application placed there at a strictly lower priority that gives
   something up (``spec.preemptible``; ``migration: false`` is never moved),
   and has not made room for another lately, is a possible victim. If the
   application does not fit with all of them gone, the cluster is no
   candidate.
2. Victims are reprieved from the most important down (higher priority, then
   placed earlier), each as long as the application still fits without it:
   what is left is the smallest set the order allows.
3. Each victim, the most important first, is decided by the scheduler's own
   ``decide`` as if the cluster were closed to it (:class:`~overlay.Overlay`),
   counting the room earlier victims take where they go, never the room freed
   for the application: one with a place elsewhere is moved there, one without
   is stopped — or, if it refuses that, the cluster is no candidate.
4. The candidates' drafts are ordered: the fewest victims stopped first, then
   the lowest priority of a stopped one, the fewest moved, the lowest priority
   of any victim, the lowest sum of the victims' priorities, the cluster least
   short of room, and its name.
5. The application itself is decided with the best draft's room freed and
   taken: the first draft that places it on its cluster is the plan (a draft
   that does not is no plan; the next is tried).

Step 3 is nearly all of a plan's cost (a decision per victim), and reading a
candidate's occupants most of the rest, so both are done best first. Before its
occupants are read, a candidate's place in the order of step 4 is bounded below
by one victim, moved, of the lowest priority placed there (``lowest``); once
they are read and its victims chosen, by what it would be were every victim that
may move moved (one that may not is stopped in any draft). A candidate is read,
and a draft made, only when nothing is below its bound; a draft is tried for the
application (step 5) only when it is below every bound left: the plan is the one
ordering every draft would choose, and most candidates are never read (at 1,000
clusters a plan's CPU fell from 39 to 18 ms by drafting best first, and to 2.4-2.7
ms by reading best first, how short each candidate is taken from the fleet's room
arrays: docs/benchmarks.md).

Nothing is written here: the scheduler carries the plan out
(docs/scheduler.md "Priority and preemption").
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from berth.controllers.scheduler.decide import Decision, decide
from berth.controllers.scheduler.framework import (
    Candidate,
    Evaluation,
    Framework,
    Subject,
)
from berth.controllers.scheduler.framework.helpers.replicas import divided, total_replicas
from berth.controllers.scheduler.framework.rooms import shortfall
from berth.controllers.scheduler.framework.snapshot import Snapshot
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.overlay import Overlay
from berth.store.documents import Target, Yield
from berth.store.documents.resources import Demand, Resources

CAPACITY = "Capacity"  # the filter whose refusals room can cure
NOTHING_LOWER = "no less important application to make room"
_ZERO = Resources()


@dataclass(frozen=True, slots=True)
class Occupant:
    """An application placed on a candidate, as a possible victim."""

    subject: Subject
    priority: int
    ask: Resources  # what its copy there asks of the cluster
    targets: list[Target]  # everywhere it runs now
    since: float  # when it was placed there (seconds since the epoch)
    exempt: str = ""  # why it is no victim ("" : it may be one)


@dataclass(frozen=True, slots=True)
class Planned:
    """A victim of a plan, and what it gives up."""

    occupant: Occupant
    action: Yield
    decision: Decision | None = None  # a move: where it goes

    @property
    def moved_to(self) -> list[Target]:
        """The targets a move adds (none for a stop)."""
        if self.decision is None:
            return []
        was = {(t.kind, t.namespace, t.name) for t in self.occupant.targets}
        return [t for t in self.decision.targets if (t.kind, t.namespace, t.name) not in was]


@dataclass(slots=True)
class Plan:
    """Room made on ``cluster`` for the preemptor, by ``victims``."""

    cluster: Candidate
    victims: list[Planned]
    decision: Decision  # the preemptor's, with the room made
    reserved: Resources  # what the preemptor takes on the cluster

    @property
    def stopped(self) -> list[Planned]:
        return [v for v in self.victims if v.action is Yield.STOP]

    @property
    def moved(self) -> list[Planned]:
        return [v for v in self.victims if v.action is Yield.MOVE]


@dataclass(slots=True)
class NoPlan:
    """Why no room can be made: per candidate considered, in a few words."""

    reasons: dict[str, str] = field(default_factory=dict)
    nothing_lower: set[str] = field(default_factory=set)  # clusters with nothing below it

    @property
    def reason(self) -> str:
        """The reasons, the most common first (then in text order); "" when there was
        nothing to weigh (no cluster refused for room alone, or none holding anything
        less important: a fleet without priorities is not told so at every attempt)."""
        counts: dict[str, int] = {}
        for key, why in self.reasons.items():
            if key not in self.nothing_lower:
                counts[why] = counts.get(why, 0) + 1
        return "; ".join(f"{n} cluster{'s' if n > 1 else ''}: {why}"
                         for why, n in sorted(counts.items(), key=lambda c: (-c[1], c[0])))


def need_of(subject: Subject, d: Demand) -> Resources:
    """What the preemptor, asking ``d`` of a cluster, needs of it: its whole manifest; a
    divided one, every replica (room is made on one cluster)."""
    return d.on(total_replicas(subject)) if divided(subject) else d.whole


def plan(framework: Framework, preemptor: Subject, priority: int, evaluation: Evaluation,
         snapshot: Snapshot, occupants: Callable[[str], Sequence[Occupant]], *,
         limit: int = 100, lowest: Callable[[str], float] | None = None) -> Plan | NoPlan:
    """The best plan to make room for ``preemptor`` (at ``priority``), nothing fitting it
    in ``evaluation``; ``occupants``: who is placed on a candidate (by key); ``lowest``:
    no application placed on it is less important (None: no bound known). At most
    ``limit`` candidates are tried, those least short of room first; the preemptor is
    decided with the room made on the best first, then the next, until it fits."""
    out = NoPlan()
    fleet = evaluation.fleet
    refused = 0
    for status, bits in evaluation.groups():
        if status.plugin == CAPACITY:
            refused |= bits
    rooms = snapshot.rooms(fleet)
    tried: list[tuple[int, Candidate, Resources, Resources]] = []
    # what it needs of each cluster, the same everywhere unless its overrides vary it
    if not snapshot.demand_varies(preemptor):
        need = need_of(preemptor, preemptor.demand)
        for short, i in rooms.least_short(need, refused, limit):
            room = rooms.rooms[i]
            assert room is not None  # (least_short lists only those judged)
            tried.append((short, fleet.candidates[i], room.free, need))
    else:
        for i, room in rooms.members(refused):
            c = fleet.candidates[i]
            need = need_of(preemptor, snapshot.demand_on(preemptor, c))
            tried.append((shortfall(need, room.allocatable, room.free), c, room.free, need))
        tried.sort(key=lambda t: (t[0], t[1].key))
    overlay = Overlay(snapshot)
    # Best first (the module's doc): each entry's order is unique (it ends in the
    # cluster's key), so no two entries compare further.
    heap: list[tuple[_Order, _Unread | _Victims | _Draft]] = []
    for short, c, free, need in tried[:limit]:
        unread = _Unread(c, free, need, short)
        heap.append((unread.bound(lowest(c.key) if lowest else float("-inf")), unread))
    heapq.heapify(heap)
    while heap:
        _, entry = heapq.heappop(heap)
        if isinstance(entry, _Unread):
            c = entry.cluster
            found = _victims(priority, preemptor, entry.need, c, entry.free,
                             occupants(c.key), entry.short)
            if isinstance(found, str):
                out.reasons[c.key] = found
                if found is NOTHING_LOWER:
                    out.nothing_lower.add(c.key)
            else:
                heapq.heappush(heap, (found.bound(), found))
            continue
        if isinstance(entry, _Victims):
            draft = _draft(framework, entry, overlay)
            if isinstance(draft, str):
                out.reasons[entry.cluster.key] = draft
            else:
                heapq.heappush(heap, (draft.order(), draft))
            continue
        made = _placed(framework, preemptor, entry, overlay)
        if isinstance(made, Plan):
            return made
        out.reasons[entry.cluster.key] = made
    return out


_Order = tuple[int, float, int, float, float, int, str]


def _order(stopped: list[int], every: list[int], short: int, key: str) -> _Order:
    """How drafts compare (smaller is better), by the rules in the module's doc, from the
    priorities of the victims stopped and of every victim."""
    return (len(stopped), max(stopped, default=float("-inf")), len(every) - len(stopped),
            max(every, default=float("-inf")), sum(every), short, key)


@dataclass(slots=True)
class _Unread:
    """A candidate whose occupants are not read yet."""

    cluster: Candidate
    free: Resources
    need: Resources
    short: int

    def bound(self, lowest: float) -> _Order:
        """The best order a draft here can have, no application placed here being less
        important than ``lowest``: short of room, a draft has a victim, so with none
        stopped at least one moved, and were it one, of priority ``lowest`` at least."""
        if self.need.fits(self.free):  # (the Capacity filter saw less free: no bound)
            return (0, float("-inf"), 0, float("-inf"), float("-inf"), self.short,
                    self.cluster.key)
        return (0, float("-inf"), 1, lowest, lowest, self.short, self.cluster.key)


@dataclass(slots=True)
class _Victims:
    """The victims that make room on a candidate, before each is decided."""

    cluster: Candidate
    victims: list[Occupant]  # the most important first
    short: int  # how short of room for the preemptor the cluster was

    def bound(self) -> _Order:
        """The best order a draft of these victims can have: every victim that may move
        moved (one that may not is stopped in any draft, or there is none)."""
        every = [o.priority for o in self.victims]
        stopped = [o.priority for o in self.victims
                   if not (o.subject.preemptible.move and o.subject.migration)]
        return _order(stopped, every, self.short, self.cluster.key)


@dataclass(slots=True)
class _Draft:
    """A plan before the preemptor is decided with its room made: its victims, and the
    room their moves take elsewhere."""

    cluster: Candidate
    victims: list[Planned]
    taken: list[tuple[str, Resources]]  # (candidate key, room a move takes there)
    freed: Resources  # the victims' room on the cluster
    short: int = 0  # how short of room for the preemptor the cluster was

    def order(self) -> _Order:
        """How drafts compare (smaller is better), by the rules in the module's doc."""
        return _order([v.occupant.priority for v in self.victims if v.action is Yield.STOP],
                      [v.occupant.priority for v in self.victims], self.short,
                      self.cluster.key)


def _victims(priority: int, preemptor: Subject, need: Resources, c: Candidate,
             free: Resources, here: Sequence[Occupant], short: int) -> _Victims | str:
    """The victims that make room on ``c`` (steps 1 and 2), or why there are none."""
    lower = [o for o in here if o.priority < priority and o.subject.key != preemptor.key]
    pool = [o for o in lower if not o.exempt]
    if not pool:
        return ("the less important applications here may not go ("
                + "; ".join(sorted({o.exempt for o in lower})) + ")") if lower else NOTHING_LOWER
    gone = free
    for o in pool:
        gone = gone + o.ask
    if not need.fits(gone):
        return "not enough room even without every less important application"
    # Reprieve the most important first (higher priority, then placed earlier).
    pool.sort(key=lambda o: (-o.priority, o.since, o.subject.key))
    victims: list[Occupant] = []
    for o in pool:
        if need.fits(gone - o.ask):
            gone = gone - o.ask
        else:
            victims.append(o)
    return _Victims(c, victims, short)


def _draft(framework: Framework, v: _Victims, overlay: Overlay) -> _Draft | str:
    """What each victim on ``v``'s cluster gives up (step 3), or why the cluster is no
    candidate."""
    mark = overlay.mark()
    try:
        planned: list[Planned] = []
        for o in v.victims:  # the most important first: it has the first pick of room
            p = _yield(framework, o, v.cluster, overlay)
            if p is None:
                return (f"{o.subject.ref} would have to go, and has nowhere else to go "
                        "and may not be stopped")
            planned.append(p)
        freed = _ZERO
        for o in v.victims:
            freed = freed + o.ask
        return _Draft(v.cluster, planned, overlay.since(mark), freed, v.short)
    finally:
        overlay.undo(mark)


def _placed(framework: Framework, preemptor: Subject, d: _Draft, overlay: Overlay
            ) -> Plan | str:
    """``d`` as a plan if the preemptor, decided with its room made, goes there; else
    why not."""
    mark = overlay.mark()
    try:
        for key, room in d.taken:
            overlay.add(key, room)
        overlay.add(d.cluster.key, d.freed)
        got = decide(framework, preemptor, overlay, [])
        if not isinstance(got, Decision) or got.unplaced:
            return "it would still not fit with the room made"
        mine = next((t for t in got.targets if candidate_key(t.kind, t.namespace, t.name)
                     == d.cluster.key), None)
        if mine is None:
            return "it would go elsewhere with the room made"
        return Plan(d.cluster, d.victims, got,
                    overlay.demand_on(preemptor, d.cluster).on(mine.replicas))
    finally:
        overlay.undo(mark)


def _yield(framework: Framework, o: Occupant, c: Candidate, overlay: Overlay
           ) -> Planned | None:
    """What victim ``o`` gives up on ``c``: a move where it fits elsewhere (the room it
    takes there taken in ``overlay``), else a stop; None if it refuses what is left."""
    subject = o.subject
    if subject.preemptible.move and subject.migration:
        overlay.close(subject.key, c.key)
        got = decide(framework, subject, overlay, list(o.targets))
        if isinstance(got, Decision) and not got.unplaced and all(
                candidate_key(t.kind, t.namespace, t.name) != c.key for t in got.targets):
            was = {candidate_key(t.kind, t.namespace, t.name): t for t in o.targets}
            for t in got.targets:
                key = candidate_key(t.kind, t.namespace, t.name)
                before = was.get(key)
                c_t = overlay.candidate_by_key(key)
                d = overlay.demand_on(subject, c_t) if c_t is not None else subject.demand
                grows = d.on(t.replicas) - (d.on(before.replicas) if before is not None
                                            else _ZERO)
                taken = grows.max(_ZERO)  # room it frees elsewhere is not counted
                if taken:
                    overlay.add(key, _ZERO - taken)
            return Planned(o, Yield.MOVE, got)
    if subject.preemptible.stop:
        return Planned(o, Yield.STOP)
    return None


__all__ = ["CAPACITY", "NoPlan", "Occupant", "Plan", "Planned", "need_of", "plan"]
