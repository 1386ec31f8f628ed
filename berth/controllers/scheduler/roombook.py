"""What room each cluster has, as a decision counts it: its report, less what berth
placed there that the report does not count yet.

A cluster reports its allocatable and requested resources and the pods of each
application it runs (the propagator writes them into its status). A placement
berth made that the report does not count yet is assumed for ``assume_ttl``
seconds at most; past that, the report is believed (the pods may never come).
A candidate's :class:`Room` is worked out once per report and placements'
version and kept (:class:`_RoomMemo`); a placement made adds to it rather than
summing every placement on the cluster again. A fleet's :class:`Rooms` index is
kept in the fleet and caught up from a log of the candidates whose Room may
have changed (their placements, their report, an assumption expired).
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from berth.controllers.runtime import Informer
from berth.controllers.scheduler.decisions import Decisions, Usage, UsageChange
from berth.controllers.scheduler.framework import Candidate, Fleet, Room
from berth.controllers.scheduler.framework.rooms import Rooms
from berth.store import keys
from berth.store.documents import ClusterStatus
from berth.store.documents.resources import Resources

ROOM_LOG = 1 << 16  # changed candidates remembered for Rooms indexes to catch up on


class RoomBook:
    """The Rooms of the candidates, from the clusters' reports (``status``) and berth's
    placements (``decisions``). ``changed`` may be called from any thread; ``capacity``
    and ``rooms`` from the one that decides."""

    def __init__(self, status: Informer[ClusterStatus], decisions: Decisions,
                 assume_ttl: float, *, clock: Callable[[], float] = time.time) -> None:
        self.status = status
        self.clock = clock  # seconds since the epoch, as assumptions are dated
        self.decisions = decisions
        # How long a placement's resources are assumed on a cluster that has not reported
        # its pods: past that, its report is believed (the pods may never come).
        self.assume_ttl = assume_ttl
        # Candidates whose Room may have changed (their placements, or the capacity they
        # report), in order: what Rooms indexes catch up on (see ``rooms``).
        self._log: list[str] = []
        self._log_base = 0  # the position of _log[0]
        self._log_lock = threading.Lock()
        self._lock = threading.Lock()
        self._memo: dict[str, _RoomMemo] = {}  # candidate key → its Room, worked out
        # (when a Room's oldest assumption expires, the candidate): a Room is read again
        # when time, not a change, makes it different (see ``rooms``)
        self._expiring: list[tuple[float, str]] = []
        self._status_keys: dict[str, str] = {}  # candidate key → its status key

    def capacity(self, candidate: Candidate) -> Room | None:
        """The cluster's capacity as it last reported it, less what berth placed there
        that the report does not count yet (for ``assume_ttl`` seconds at most)."""
        ref = candidate.ref
        if ref.kind != "Cluster" or ref.namespace is None:
            return None
        skey = self._status_keys.get(candidate.key)
        if skey is None:
            skey = self._status_keys[candidate.key] = keys.status_key(
                "Cluster", ref.namespace, ref.name)
        item = self.status.item(skey)
        cap = item.obj.status.capacity if item is not None else None
        if item is None or cap is None or cap.nodes == 0:
            return None  # no Nodes listed: nothing to judge by
        now, ttl = self.clock(), self.assume_ttl
        hit = self._memo.get(candidate.key)
        version = self.decisions.usage_version(candidate.key)
        if hit is not None and hit.revision == item.mod_revision and now <= hit.until:
            if hit.version == version:
                return hit.room
            # The report is the same and nothing counted has expired: add the changes to
            # the placements since, rather than sum every placement on the cluster again
            # (it may hold hundreds; this runs after every placement made on it).
            caught = self.decisions.usage_changes(candidate.key, hit.version)
            if caught is not None:
                version, changes = caught
                pending = hit.pending.updated(changes, cap.placed, now, ttl)
                return self._remember(candidate.key, item.mod_revision, version,
                                      hit.reported, pending, hit)
        version, usage = self.decisions.usage(candidate.key)
        if hit is not None and hit.revision == item.mod_revision:
            reported = hit.reported  # the report is the same: only what berth placed changed
        else:
            alloc = Resources.counted(cap.allocatable)
            reported = Room(alloc, alloc - Resources.counted(cap.requested))
        pending = _NONE_PENDING.updated([UsageChange(None, u) for u in usage], cap.placed,
                                        now, ttl)
        return self._remember(candidate.key, item.mod_revision, version, reported, pending,
                              hit)

    def _remember(self, key: str, revision: int, version: int, reported: Room,
                  pending: _Pending, hit: _RoomMemo | None) -> Room | None:
        """Keep and return the Room of candidate ``key``: ``reported`` less ``pending``."""
        room = reported
        if pending.cpu or pending.memory or pending.pods or pending.scalar:
            room = Room(reported.allocatable, reported.free - Resources(
                pending.cpu, pending.memory, pending.pods,
                tuple(sorted((k, v) for k, v in pending.scalar.items() if v))))
        until = pending.expires
        self._memo[key] = _RoomMemo(revision, version, until, room, reported, pending)
        if until != math.inf and (hit is None or hit.until != until):
            with self._log_lock:
                heapq.heappush(self._expiring, (until, key))
        return room

    def changed(self, candidate: str) -> None:
        """Candidate ``candidate``'s Room may have changed (its placements did)."""
        with self._log_lock:
            self._log.append(candidate)
            self._trim_log()

    def _trim_log(self) -> None:
        """Start the room log again once it is long (lock held): readers this far behind
        read every Room again."""
        if len(self._log) > ROOM_LOG:
            self._log_base += len(self._log)
            self._log.clear()

    def _changes(self, since: int) -> tuple[int, list[str] | None]:
        """(the log's end, the candidates changed from ``since`` on; None: too many)."""
        with self._log_lock:
            end = self._log_base + len(self._log)
            if since < self._log_base:
                return end, None
            return end, self._log[since - self._log_base:]

    def rooms(self, fleet: Fleet) -> Rooms:
        """``capacity`` of every candidate of ``fleet``, indexed, kept in the fleet and
        brought up to date here: only candidates whose placements or reported capacity
        changed since, or whose oldest assumption has expired, are read again. For the
        one thread that decides."""
        self._expire(self.clock())
        with self._lock:
            tracked: _TrackedRooms | None = fleet.structural.get(("rooms",))
            if tracked is None:
                end, _ = self._changes(0)
                tracked = fleet.structural[("rooms",)] = _TrackedRooms(
                    Rooms([self.capacity(c) for c in fleet.candidates]), end)
                return tracked.rooms
            end, changed = self._changes(tracked.seen)
            if changed is None:
                for i, c in enumerate(fleet.candidates):
                    tracked.rooms.set(i, self.capacity(c))
            else:
                by_key = fleet.by_key
                for key in set(changed):
                    at = by_key.get(key)
                    if at is not None:
                        tracked.rooms.set(at, self.capacity(fleet.candidates[at]))
            tracked.seen = end
            return tracked.rooms

    def _expire(self, now: float) -> None:
        """Log the candidates whose oldest assumption has expired by ``now`` as changed."""
        expiring = self._expiring
        with self._log_lock:
            while expiring and expiring[0][0] < now:
                _, key = heapq.heappop(expiring)
                self._log.append(key)
            self._trim_log()


@dataclass(slots=True)
class _TrackedRooms:
    """A fleet's Rooms, and how far it has caught up."""

    rooms: Rooms
    seen: int  # the room log's position it has read up to


class _RoomMemo:
    """A candidate's Room as worked out, and from what: valid while the status revision
    and the placements' version are these, and until its oldest assumption expires."""

    __slots__ = ("pending", "reported", "revision", "room", "until", "version")

    def __init__(self, revision: int, version: int, until: float, room: Room,
                 reported: Room, pending: _Pending) -> None:
        self.revision = revision  # of the cluster's status (its report)
        self.version = version  # of berth's placements on it
        self.until = until  # when the oldest assumption counted expires (inf: none is)
        self.room = room
        self.reported = reported  # the report's part
        self.pending = pending  # berth's part: what the report does not count yet


class _Pending:
    """What berth placed (or reserved) on a cluster that its report does not count yet,
    summed in plain integers, and when the first of them stops being counted (inf:
    none)."""

    __slots__ = ("cpu", "expires", "memory", "pods", "scalar")

    def __init__(self, cpu: int, memory: int, pods: int, scalar: dict[str, int],
                 expires: float) -> None:
        self.cpu = cpu
        self.memory = memory
        self.pods = pods
        self.scalar = scalar  # never changed once made: updated() copies it
        self.expires = expires

    def updated(self, changes: list[UsageChange], placed: Mapping[str, int], now: float,
                ttl: float) -> _Pending:
        """These sums after ``changes``, as the report counting ``placed`` pods per
        application leaves them unreported. A usage taken away was counted exactly as
        when it was added: the report is the same, and nothing counted has expired."""
        cpu, memory, pods, expires = self.cpu, self.memory, self.pods, self.expires
        scalar: dict[str, int] | None = None
        for before, after in changes:
            for u, sign in ((before, -1), (after, 1)):
                if u is None:
                    continue
                ask = _unreported(u, placed, now, ttl)
                if ask is None:
                    continue
                if sign > 0:
                    expires = min(expires, u.since + ttl if u.until is None else u.until)
                cpu, memory, pods = (cpu + sign * ask.cpu, memory + sign * ask.memory,
                                     pods + sign * ask.pods)
                if ask.scalar:
                    if scalar is None:
                        scalar = dict(self.scalar)
                    for name, amount in ask.scalar:
                        scalar[name] = scalar.get(name, 0) + sign * amount
        return _Pending(cpu, memory, pods, self.scalar if scalar is None else scalar, expires)


_NONE_PENDING = _Pending(0, 0, 0, {}, math.inf)


def _unreported(u: Usage, placed: Mapping[str, int], now: float,
                ttl: float) -> Resources | None:
    """What usage ``u`` asks that a report counting ``placed`` pods per application does
    not count yet (None: nothing, or its assumption is older than ``ttl``). A reservation
    counts whole until it ends, whatever the report says."""
    if u.until is not None:
        return u.ask if now <= u.until else None
    seen = placed.get(u.app, 0)
    if seen >= u.pods > 0 or (u.pods == 0 and seen) or now - u.since > ttl:
        return None
    whole = u.pods or 1
    missing = u.pods - seen if u.pods else 1
    return u.ask if missing == whole else u.ask.part(missing, whole)


__all__ = ["ROOM_LOG", "RoomBook"]
