"""The scheduler's own decisions: its Bindings as seen on the watch, or assumed.

A decision written but not yet delivered by the watch is *assumed* (as
Kubernetes assumes a pod and Karmada a binding): the next attempt reads it at
once. The Binding writer assumes a decision when it is submitted (revision
``PENDING`` while the write is in flight), records the revision it landed at,
or retracts it when it failed; the watch confirms it by delivering that
revision or a later one. Every change is a compare-and-set — on the token of
the write, or on the revision — so that a late watch event or a slow write
never drops a newer decision. One lock guards every change here, and every read
of more than one entry; the readers of one entry (``get``, ``known``,
``stored_revision``, ``usage_version``) take none: each reads a dictionary entry
that changes are made by replacing whole, which a reader sees before or after,
never half made.

It also keeps where every application is placed, indexed by namespace and
label, for workload affinity and spread: a query costs what it returns, not
the size of the fleet's workload; what each placement asks of each
cluster, with the last few changes to it per cluster, so that the cache keeps
a cluster's room by those changes rather than summing its placements again;
and what each namespace's placements ask of the fleet together, assumed ones
included, which its quota limits (docs/teams.md), telling ``on_freed`` when
that falls.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from berth.controllers.runtime import Event, EventType, Source
from berth.controllers.scheduler.framework import Placed, Ref, Subject
from berth.controllers.scheduler.framework.types import candidate_key
from berth.controllers.scheduler.ranks import Rank, Ranks
from berth.controllers.scheduler.views import BindingView
from berth.store import keys
from berth.store.documents import ObjectRef, Preemption
from berth.store.documents.resources import NOTHING, Demand, Resources
from berth.store.documents.tenancy import placements

PENDING = 2**62  # an assumed revision no watch event can reach
SHARED_ASKS = 1 << 14  # distinct asks kept to share (then the table starts afresh)
# The last changes to each candidate's usage kept for a reader to catch up by (the
# Rooms of the deciding thread read them after every placement, so a few suffice).
USAGE_CHANGES_KEPT = 8


@lru_cache(maxsize=1 << 16)
def _ref(kind: str, namespace: str | None, name: str) -> Ref:
    """One Ref per cluster, shared by every placement on it."""
    return Ref(kind, namespace, name)


_candidate_key = lru_cache(maxsize=1 << 16)(candidate_key)  # one key string per cluster

@dataclass(frozen=True, slots=True)
class Usage:
    """What one application placed on a cluster asks of it, since when."""

    app: str  # "<namespace>/<name>", as the cluster's capacity report counts its pods
    ask: Resources
    pods: int
    since: float  # seconds since the epoch when this placement (or its share) was first seen
    # A reservation (room made for a preemptor) counts until then, whatever the report
    # says; a placement is assumed for the scheduler's assume_ttl after ``since``.
    until: float | None = None


class UsageChange(NamedTuple):
    """One placement's usage of a candidate as it was and as it became (None: none)."""

    before: Usage | None
    after: Usage | None


JOURNAL = 4096  # changes a label's journal keeps before it starts again


class _Journal:
    """The changes to where the placements of one label run, from position ``base``."""

    __slots__ = ("base", "changes")

    def __init__(self) -> None:
        self.base = 0
        self.changes: list[tuple[Ref, int]] = []


@dataclass(slots=True, eq=False)
class Token:
    """One submitted write; identity is what compare-and-set compares."""

    doc: BindingView | None  # None: the Binding is being deleted
    # The bytes written: the watch's echo of a write whose answer the writer has not
    # read yet is recognised by them.
    encoded: bytes | None = None


class Decisions:
    def __init__(self, bindings: Source[BindingView], applications: Source[Subject],
                 on_usage: Callable[[str], None] | None = None, *,
                 clock: Callable[[], float] = time.time,
                 demand_on: Callable[[Subject, str], Demand] | None = None) -> None:
        self._clock = clock  # seconds since the epoch: when a placement was first seen
        self._bindings = bindings
        self._on_usage = on_usage  # told each candidate whose usage changed (lock held)
        # what an application asks of a candidate (by key), its overrides rendered; never
        # calls back here
        self._demand_on = demand_on or (lambda app, _: app.demand)
        self._applications = applications
        self._lock = threading.Lock()
        self._assumed: dict[str, tuple[Token, int]] = {}  # binding key → (write, revision)
        self._placed: dict[str | None, dict[str, Placed]] = {}  # namespace → binding key → …
        self._namespace: dict[str, str | None] = {}  # binding key → namespace in _placed
        self._by_label: dict[tuple[str | None, str, str], set[str]] = {}
        self._versions: dict[tuple[str | None, str, str] | str | None, int] = {}
        self._on: dict[tuple[str | None, str, str], dict[Ref, int]] = {}  # label → where, how many
        # The changes to ``_on`` of the labels someone follows (placed_on_since), in order.
        self._journal: dict[tuple[str | None, str, str], _Journal] = {}
        self._garbage: dict[str, int] = {}  # binding key → revision of a value that won't decode
        # What each placement asks of its clusters, for the capacity the cluster has not
        # reported yet: candidate key → binding key → (app id, ask, pods, since).
        self._usage: dict[str, dict[str, Usage]] = {}
        self._usage_at: dict[str, tuple[str, ...]] = {}  # binding key → its candidate keys
        self._usage_version: Counter[str] = Counter()  # candidate key → changes
        # candidate key → its last changes: (version after it, the usage before, after)
        self._usage_changes: dict[str, list[UsageChange]] = {}
        # What each namespace's placements ask of the fleet together (a quota limits it):
        # binding key → (its application's namespace, what it asks of all its targets)
        self._asks: dict[str, tuple[str | None, Resources]] = {}
        self._asks_seen: dict[Resources, Resources] = {}  # each ask once (``_shared``)
        self._namespace_use: dict[str | None, Resources] = {}
        self._asked_in: dict[str | None, set[str]] = {}  # namespace → its keys in _asks
        # binding key → its application as last seen (what a Binding that outlives its
        # application still holds: the application is deleted first)
        self._last_app: dict[str, Subject] = {}
        # told each namespace whose use fell (lock held: quick, and never calling back here)
        self.on_freed: list[Callable[[str | None], None]] = []
        self.passes = 0  # index passes so far (one per _reindex)
        self._plans: dict[str, Preemption] = {}  # binding key → its room-making plan
        # each placed application's rank, counted fleet-wide and on each candidate it asks
        # something of (``_usage_at``): what a plan reads (ranks.py)
        self._ranks = Ranks()
        bindings.add_handler(self._binding_event)
        bindings.add_invalid_handler(self._garbage_seen)
        bindings.add_cleared_handler(self._garbage_gone)
        applications.add_handler(self._application_event)

    # -- reading ------------------------------------------------------------------

    def get(self, key: str) -> tuple[BindingView | None, int]:
        """The Binding at ``key`` as last decided (assumed) or seen, and its revision."""
        hit = self._assumed.get(key)
        if hit is not None:
            return hit[0].doc, (hit[1] if hit[0].doc is not None else 0)
        if key in self._garbage:
            return None, 0  # garbage is no decision: decide anew, and replace it
        item = self._bindings.item(key)
        return (item.obj, item.mod_revision) if item else (None, 0)

    def known(self, key: str) -> bool:
        """Whether a Binding (or garbage in its place) exists or is being written at ``key``."""
        hit = self._assumed.get(key)
        if hit is not None:
            return hit[0].doc is not None
        return key in self._bindings or key in self._garbage

    def stored_revision(self, key: str) -> int:
        """The revision of what is stored at ``key`` as last seen, garbage included."""
        item = self._bindings.item(key)
        return max(item.mod_revision if item is not None else 0, self._garbage.get(key, 0))

    def assumed(self) -> int:
        with self._lock:
            return len(self._assumed)

    def placed(self, namespace: str | None,
               labels: Mapping[str, str] | None = None) -> list[Placed]:
        """Applications of ``namespace`` with targets (and all of ``labels``, if given)."""
        with self._lock:
            where = self._placed.get(namespace, {})
            if not labels:
                return list(where.values())
            sets = [self._by_label.get((namespace, k, v), set()) for k, v in labels.items()]
            smallest = min(sets, key=len)
            return [where[k] for k in smallest if all(k in s for s in sets)]

    def placed_on(self, namespace: str | None, label: str, value: str) -> Counter[Ref]:
        """Where the applications of ``namespace`` labelled ``label=value`` run: target →
        how many of them run there."""
        with self._lock:
            return Counter(self._on.get((namespace, label, value), ()))

    def placed_on_since(self, namespace: str | None, label: str, value: str, since: int
                        ) -> tuple[int, list[tuple[Ref, int]], bool]:
        """What changed in ``placed_on(namespace, label, value)`` since position ``since``
        of its journal: (the position now, the changes as (target, +n or -n), False);
        or, for a reader new or too far behind (``since`` -1), (the position now, the
        whole of it, True). The first call starts the label's journal."""
        key = (namespace, label, value)
        with self._lock:
            journal = self._journal.get(key)
            if journal is None:
                journal = self._journal[key] = _Journal()
            end = journal.base + len(journal.changes)
            if journal.base <= since <= end:
                return end, journal.changes[since - journal.base:], False
            return end, list(self._on.get(key, {}).items()), True

    def _note(self, key: tuple[str | None, str, str], targets: tuple[Ref, ...],
              n: int) -> None:
        """Journal that ``targets`` gained ``n`` placements labelled ``key`` (lock held)."""
        journal = self._journal.get(key)
        if journal is None:
            return  # nobody follows it
        if len(journal.changes) >= JOURNAL:  # readers this far behind read it whole
            journal.base += len(journal.changes)
            journal.changes = []
        journal.changes.extend((t, n) for t in targets)

    def version(self, namespace: str | None, labels: Mapping[str, str]) -> int:
        """Changes whenever ``placed(namespace, labels)`` may have changed."""
        with self._lock:
            if not labels:
                return self._versions.get(namespace, 0)
            return sum(self._versions.get((namespace, k, v), 0) for k, v in labels.items())

    def _bump(self, namespace: str | None, labels: Mapping[str, str]) -> None:
        versions = self._versions
        versions[namespace] = versions.get(namespace, 0) + 1
        for k, v in labels.items():
            versions[(namespace, k, v)] = versions.get((namespace, k, v), 0) + 1

    # -- the writer's side ---------------------------------------------------------

    def assume(self, key: str, doc: BindingView | None, encoded: bytes | None = None
               ) -> Token:
        """A decision for ``key`` was submitted (``encoded``: the bytes to be written):
        attempts see it from now on."""
        token = Token(doc, encoded)
        with self._lock:
            self._assumed[key] = (token, PENDING)
            self._reindex(key)
        return token

    def written(self, key: str, token: Token, revision: int) -> None:
        """``token``'s write landed at ``revision``: assumed until the watch has it."""
        with self._lock:
            hit = self._assumed.get(key)
            if hit is None or hit[0] is not token:
                return  # a newer decision replaced it
            item = self._bindings.item(key)
            seen = item.mod_revision if item is not None else 0
            if (token.doc is None and item is None) or seen >= revision:
                del self._assumed[key]  # the watch was faster
                if item is None or item.obj is not token.doc:  # else: indexed as it is
                    self._reindex(key)
            else:  # still assumed, as indexed
                self._assumed[key] = (token, revision)

    def echo(self, key: str, revision: int, read: Callable[[], bytes]) -> BindingView | None:
        """What this writer wrote at ``key`` if the watch's event at ``revision`` is its
        echo, which then needs no decoding: the write landed at exactly that revision
        (nobody else can have written it), or — the watch faster than the writer reading
        etcd's answer, a fifth of the echoes in a burst — the stored bytes (``read()``)
        are the ones written (the same document, whoever wrote them)."""
        with self._lock:
            hit = self._assumed.get(key)
        if hit is None:
            return None
        token, landed = hit
        if token.doc is None:
            return None
        if landed == revision:
            return token.doc
        if landed == PENDING and token.encoded is not None and read() == token.encoded:
            return token.doc
        return None

    def retract(self, key: str, token: Token) -> None:
        """``token``'s write failed: forget it, unless a newer decision replaced it."""
        with self._lock:
            hit = self._assumed.get(key)
            if hit is not None and hit[0] is token:
                del self._assumed[key]
                self._reindex(key)

    # -- watch events -----------------------------------------------------------------

    def _garbage_seen(self, key: str, revision: int) -> None:
        with self._lock:
            self._garbage[key] = revision
            self._reindex(key)

    def _garbage_gone(self, key: str, revision: int) -> None:
        """The garbage at ``key`` was deleted: a write guards on "absent" again."""
        with self._lock:
            if self._garbage.get(key, 0) <= revision:
                self._garbage.pop(key, None)
                self._reindex(key)

    def _binding_event(self, event: Event[BindingView]) -> None:
        """A Binding seen on the watch. Its echo (the document this writer assumed, not
        decoded again: :meth:`echo`) changes no index: none is computed again."""
        with self._lock:
            garbage = False  # whether garbage stood where this value now is
            if self._garbage.get(event.key, 0) <= event.revision:
                garbage = self._garbage.pop(event.key, None) is not None
            hit = self._assumed.get(event.key)
            if hit is not None and event.revision >= hit[1]:
                del self._assumed[event.key]
                if garbage or event.obj is not hit[0].doc or event.type is EventType.DELETED:
                    self._reindex(event.key)
            elif hit is None or garbage:
                self._reindex(event.key)

    def _application_event(self, event: Event[Subject]) -> None:
        if event.type is EventType.MODIFIED and event.old is not None and (
                event.old.labels == event.obj.labels and event.old.demand == event.obj.demand
                and (event.old.priority, event.old.priority_class)
                == (event.obj.priority, event.obj.priority_class)):
            return
        binding = keys.under(keys.BINDINGS, event.key)
        if not binding:
            return
        with self._lock:
            # no Binding, none decided: nothing is indexed of it (every index is cleared
            # with its Binding) — a new application's event, the common case
            if binding in self._assumed or self._bindings.item(binding) is not None:
                self._reindex(binding)

    def usage_version(self, candidate: str) -> int:
        """Changes whenever ``usage(candidate)`` may have changed (cheap: no copy)."""
        return self._usage_version.get(candidate, 0)

    def usage(self, candidate: str) -> tuple[int, list[Usage]]:
        """What the placements on ``candidate`` ask of it, and a version of that answer."""
        with self._lock:
            return self._usage_version[candidate], list(self._usage.get(candidate, {}).values())

    def occupants(self, candidate: str) -> list[tuple[str, Usage]]:
        """The placements on ``candidate`` (reservations left out): (binding key, usage)."""
        with self._lock:
            return [(k, u) for k, u in self._usage.get(candidate, {}).items() if u.until is None]

    def usage_changes(self, candidate: str, since: int) -> tuple[int, list[UsageChange]] | None:
        """The changes to ``usage(candidate)`` after its version ``since``, in order, and
        the version they lead to; None if no longer kept (read ``usage`` again)."""
        with self._lock:
            version = self._usage_version[candidate]
            kept = self._usage_changes.get(candidate, [])
            if version - since > len(kept):
                return None
            return version, kept[len(kept) - (version - since):]

    def used(self, namespace: str | None, *, but: str = "") -> Resources:
        """What the placements of ``namespace``'s applications ask of the fleet together,
        assumed ones and rooms reserved included, Binding ``but``'s left out."""
        with self._lock:
            total = self._namespace_use.get(namespace, NOTHING)
            mine = self._asks.get(but)
            return total - mine[1] if mine is not None and mine[0] == namespace else total

    def used_in(self, namespace: str | None, inside: Callable[[str], bool], *,
                but: str = "") -> Resources:
        """What the placements of ``namespace``'s applications ask of the candidates
        ``inside`` says (by key) — assumed ones and rooms reserved included, Binding
        ``but``'s left out — with the applications that have a copy there and the copies
        (a cluster set's quota). It sums them: it costs what the namespace has placed."""
        total = NOTHING
        with self._lock:
            for key in self._asked_in.get(namespace, ()):
                if key == but:
                    continue
                on = [c for c in self._usage_at.get(key, ()) if inside(c)]
                for c in on:
                    total += self._usage[c][key].ask
                placed = self._placed.get(namespace, {}).get(key)
                copies = sum(1 for t in placed.targets if inside(
                    _candidate_key(t.kind, t.namespace, t.name))) if placed else 0
                total += placements(copies)
        return total

    def recount(self) -> None:
        """What every placement asks counted again (the overrides, or a cluster's labels,
        changed what an application asks there)."""
        with self._lock:
            for key in list(self._usage_at):
                self._reindex(key)

    def ranks(self) -> list[Rank]:
        """The distinct ranks (namespace, own priority, class name) of the placed
        applications (a namespace's policy limits what they may take)."""
        with self._lock:
            return self._ranks.placed()

    def ranks_on(self, candidate: str) -> list[Rank]:
        """The distinct ranks of the applications whose placements ask something of
        ``candidate`` (its possible victims are among them)."""
        with self._lock:
            return self._ranks.on(candidate)

    def plans(self) -> list[Preemption]:
        """The plans making room, as their Bindings say (running or out of time)."""
        with self._lock:
            return list(self._plans.values())

    def _reusage(self, key: str, doc: BindingView | None, app: Subject | None) -> None:
        """Index what the application of Binding ``key`` asks of each target (lock held)."""
        if doc is not None and doc.status.preemption is not None:
            self._plans[key] = doc.status.preemption
        else:
            self._plans.pop(key, None)
        old = self._usage_at.pop(key, ())
        new: dict[str, Usage] = {}
        if doc is not None and app is not None and (app.demand.whole or app.demand.per_replica):
            app_id = f"{app.ref.namespace}/{app.ref.name}"
            for t in doc.spec.targets:
                where = _candidate_key(t.kind, t.namespace, t.name)
                ask = self._shared(self._demand_on(app, where).on(t.replicas))
                new[where] = Usage(app_id, ask, ask.pods, self._clock())
            plan = doc.status.preemption
            if plan is not None:  # the room made for it is reserved until the deadline
                ns, _, name = plan.cluster.rpartition("/")
                ask = Resources.counted(plan.reserved)
                where = _candidate_key("Cluster", ns or None, name)
                if where not in new and ask:
                    new[where] = Usage(app_id, ask, ask.pods, self._clock(),
                                       plan.deadline.timestamp())
        changed: list[tuple[str, Usage | None, Usage | None]] = [
            (c, self._usage[c].pop(key, None), None) for c in old if c not in new]
        for c, u in new.items():
            was = self._usage.setdefault(c, {}).get(key)
            if was is not None and (was.app, was.ask, was.until) == (u.app, u.ask, u.until):
                continue  # unchanged: it keeps its time
            self._usage[c][key] = u
            changed.append((c, was, u))
        for c, before, after in changed:
            self._usage_version[c] += 1
            if not self._usage[c]:  # nothing placed there: nothing to catch up with
                del self._usage[c]
                self._usage_changes.pop(c, None)
            else:
                kept = self._usage_changes.setdefault(c, [])
                kept.append(UsageChange(before, after))
                if len(kept) > 2 * USAGE_CHANGES_KEPT:
                    del kept[:-USAGE_CHANGES_KEPT]
            if self._on_usage is not None:
                self._on_usage(c)
        if new:
            self._usage_at[key] = tuple(new)
        # a Binding counts against its namespace's quota until it goes: one whose
        # application is gone and was never seen here (a new leader's) counts itself and
        # its copies, what they asked unknown
        copies = len(doc.spec.targets) if doc is not None else 0
        namespace = (app.ref.namespace if app is not None
                     else doc.spec.resource.namespace if doc is not None else None)
        self._ask(key, namespace,
                  self._shared(sum((u.ask for u in new.values()), placements(copies))))

    def _shared(self, ask: Resources) -> Resources:
        """``ask``, or an equal one already kept (lock held): applications alike ask
        alike, and what each placement asks is kept as long as it runs (at 100,000
        placements, a Resources and its tuples each, about 20 MB shared)."""
        found = self._asks_seen.get(ask)
        if found is None:
            if len(self._asks_seen) >= SHARED_ASKS:
                self._asks_seen.clear()
            found = self._asks_seen[ask] = ask
        return found

    def _ask(self, key: str, namespace: str | None, ask: Resources) -> None:
        """Binding ``key``'s application, of ``namespace``, asks ``ask`` of the fleet
        (lock held)."""
        was = self._asks.pop(key, None)
        if was is not None:
            left = self._namespace_use.get(was[0], NOTHING) - was[1]
            if left.listed():
                self._namespace_use[was[0]] = left
            else:
                self._namespace_use.pop(was[0], None)
            keys_of = self._asked_in[was[0]]
            keys_of.discard(key)
            if not keys_of:
                del self._asked_in[was[0]]
        if ask.listed():
            self._asks[key] = (namespace, ask)
            self._namespace_use[namespace] = self._namespace_use.get(namespace, NOTHING) + ask
            self._asked_in.setdefault(namespace, set()).add(key)
        if was is not None and (was[0] != namespace or any(
                ask.get(name) < amount for name, amount in was[1].items())):
            for listener in self.on_freed:
                listener(was[0])

    def _reindex(self, key: str) -> None:
        """Recompute where the application of Binding ``key`` is placed (lock held)."""
        self.passes += 1
        hit = self._assumed.get(key)
        if hit is not None:
            doc = hit[0].doc
        elif key in self._garbage:
            doc = None
        else:
            item = self._bindings.item(key)
            doc = item.obj if item is not None else None
        ns = self._namespace.get(key, "")
        old = self._placed[ns].get(key) if ns != "" else None
        self._ranks.uncount(key, self._usage_at.get(key, ()))  # (before its usage changes)
        if doc is None or doc.spec.resource.kind != "Application" or not doc.spec.targets:
            ref = doc.spec.resource if doc is not None else None
            if ref is not None and ref.kind == "Application" and doc is not None and (
                    doc.status.preemption is not None):  # room reserved for it
                self._reusage(key, doc, self._application(key, ref))
            else:
                self._reusage(key, None, None)
                self._last_app.pop(key, None)
            self._drop(key)
            return
        ref = doc.spec.resource
        app = self._application(key, ref)
        self._reusage(key, doc, app)
        if app is not None:
            self._ranks.count(key, (app.ref.namespace, app.priority, app.priority_class),
                              self._usage_at.get(key, ()))
        labels = app.labels if app is not None else (old.labels if old else None)
        targets = tuple(_ref(t.kind, t.namespace, t.name) for t in doc.spec.targets)
        if old is not None and old.targets == targets and old.labels == labels:
            return  # our own write coming back on the watch, usually
        self._drop(key)
        if labels is None:
            return
        placed = Placed(app.ref if app is not None else Ref(ref.kind, ref.namespace, ref.name),
                        labels, targets)
        self._placed.setdefault(ref.namespace, {})[key] = placed
        self._bump(ref.namespace, labels)
        for k, v in labels.items():
            on = self._on.get((ref.namespace, k, v))
            if on is None:
                on = self._on[(ref.namespace, k, v)] = {}
            for t in targets:
                on[t] = on.get(t, 0) + 1
            self._note((ref.namespace, k, v), targets, 1)
        self._namespace[key] = ref.namespace
        for k, v in labels.items():
            self._by_label.setdefault((ref.namespace, k, v), set()).add(key)

    def _application(self, key: str, ref: ObjectRef) -> Subject | None:
        """The application Binding ``key`` places: as the informer has it, else — deleted,
        its Binding not yet — as it was last seen, so that what it holds (capacity, its
        namespace's quota) is not free before its Binding goes (lock held)."""
        app = self._applications.get(keys.resource_key("Application", ref.name, ref.namespace))
        if app is None:
            return self._last_app.get(key)
        self._last_app[key] = app
        return app

    def _drop(self, key: str) -> Placed | None:
        if key not in self._namespace:
            return None
        ns = self._namespace.pop(key)
        old = self._placed[ns].pop(key)
        self._bump(ns, old.labels)
        for k, v in old.labels.items():
            on = self._on.get((ns, k, v))
            if on is not None:
                for t in old.targets:
                    left = on.get(t, 0) - 1
                    if left > 0:
                        on[t] = left
                    else:
                        on.pop(t, None)
                if not on:
                    del self._on[(ns, k, v)]
                self._note((ns, k, v), old.targets, -1)
        for k, v in old.labels.items():
            members = self._by_label.get((ns, k, v))
            if members is not None:
                members.discard(key)
                if not members:
                    del self._by_label[(ns, k, v)]
        return old


__all__ = ["PENDING", "Decisions", "Token", "Usage"]
