"""The event recorder: events correlated in memory and written a second at a time, each
on a lease that expires it (docs/events.md).

A process calls :meth:`Recorder.emit` wherever something happens that an operator
should see; it never blocks and never fails, and costs its caller an append to a
queue (the scheduler's one Binding writer calls it for every Binding). The
recorder's thread then does, at each flush, what Kubernetes' event correlator
does:

* the same event again (object, source, type, reason, message) is one event with
  a ``count`` and its first and last time;
* more than :data:`SIMILAR` different messages of one object, source, type and
  reason within :data:`SIMILAR_WINDOW` seconds become one event,
  ``(combined from similar events): <the latest message>`` — a condition that
  flaps, or a reason that carries a changing number, is one line, not a flood;
* an event is written at most every ``min_interval`` seconds (its count rises in
  memory meanwhile), in transactions of up to etcd's limit, by one thread;
* at most ``rate`` events are written a second, the longest waiting first: a
  burst (10,000 applications placed at once) is told over the seconds after
  it rather than doubling etcd's writes while it lasts — as Kubernetes' event
  recorder sheds load. More events waiting than the recorder keeps
  (:data:`KNOWN`) drops the oldest, counted and said once a minute: the ledger
  has every decision; events are the recent summary.

Each write is attached to the newest of a rotation of leases (a new one every
``ttl / 6`` seconds, of ``ttl + ttl / 6``): etcd deletes an event between
``ttl`` and ``ttl + ttl / 6`` after it last happened, with no one deleting it.
Writes go through the process's store, fenced where the process writes as a
leader: a deposed leader's events are refused with its other writes. Events
are best effort: a write that fails is tried again at the next flush, its
failure said once a minute at most, and nothing waits for it.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass
from datetime import datetime

from berth.controllers.runtime.clock import SYSTEM, Clock
from berth.controllers.runtime.supervise import Loop
from berth.store import Put, Store, StoreError, encode, keys
from berth.store.events import Event, InvolvedObject, key

log = logging.getLogger(__name__)

SIMILAR = 10  # different messages of one object and reason before they are combined
SIMILAR_WINDOW = 600.0  # seconds
COMBINED = "(combined from similar events)"
KNOWN = 4096  # events remembered for correlation (the least recently seen go first)
RATE = 500  # events written a second at most
INCOMING = 16 * KNOWN  # emitted and not yet correlated, at most (more are dropped, counted)


@dataclass(slots=True)
class _Known:
    event: Event
    written: float = float("-inf")  # monotonic time it was last written


class Recorder:
    def __init__(self, store: Store, source: str, *, ttl: float = 3600.0,
                 min_interval: float = 10.0, every: float = 1.0, rate: int = RATE,
                 clock: Clock = SYSTEM) -> None:
        self.store = store
        self.source = source
        self.ttl = ttl
        self.min_interval = min_interval
        self.every = every
        self.rate = rate
        self.clock = clock
        self._lock = threading.Lock()
        # what was emitted, not yet correlated: (object, type, reason, message, when
        # monotonic, when); appended by any thread, taken by the flush (deque: no lock)
        self._incoming: deque[tuple[InvolvedObject, str, str, str, float, datetime]] = deque()
        self._overflow = itertools.count()  # emitted while the queue was full (next: atomic)
        self._overflowed = 0  # of those, already counted into ``_dropped``
        self._known: OrderedDict[keys.Key, _Known] = OrderedDict()
        # keys of known events changed since written, the longest waiting first
        self._dirty: dict[keys.Key, None] = {}
        self._dropped = 0  # events evicted before they were written, not yet said
        self._said_dropped = float("-inf")  # when that was last said
        self._similar: dict[tuple[str, str | None, str, str, str], deque[tuple[float, str]]] = {}
        self._lease = 0
        self._lease_at = float("-inf")
        self._said = float("-inf")  # when a failed write was last said
        self._loop = Loop(f"events-{source}", self._step, deadline=120.0)
        self._stop = threading.Event()

    # -- any thread ----------------------------------------------------------------------

    def emit(self, obj: InvolvedObject, type_: str, reason: str, message: str) -> None:
        """Record that ``reason`` happened to ``obj`` (``type_``: Normal or Warning)."""
        if len(self._incoming) >= INCOMING:  # the flush stopped or fell behind: counted
            next(self._overflow)
            return
        self._incoming.append((obj, type_, reason, message, self.clock.monotonic(),
                               self.clock.now()))

    def _correlate(self) -> None:
        """Count what was emitted into the events kept (under the lock)."""
        while self._incoming:
            self._count(*self._incoming.popleft())
        overflowed = next(self._overflow)  # one more than emitted into a full queue
        self._dropped += overflowed - self._overflowed
        self._overflowed = overflowed + 1

    def _count(self, obj: InvolvedObject, type_: str, reason: str, message: str,
               now_m: float, now: datetime) -> None:
        """Count one emitted event into the events kept (under the lock)."""
        ident = (obj.kind, obj.namespace, obj.name, type_, reason)
        seen = self._similar.setdefault(ident, deque())
        while seen and seen[0][0] < now_m - SIMILAR_WINDOW:
            seen.popleft()
        if all(m != message for _, m in seen):
            seen.append((now_m, message))
        if len(seen) > SIMILAR:
            k = key(obj, self.source, type_, reason, COMBINED)
            message = f"{COMBINED}: {message}"
        else:
            k = key(obj, self.source, type_, reason, message)
        found = self._known.get(k)
        if found is None:
            self._known[k] = _Known(Event(obj, type_, reason, message, self.source, now,
                                          now))
            while len(self._known) > KNOWN:
                gone = self._known.popitem(last=False)[0]
                if gone in self._dirty:
                    del self._dirty[gone]
                    self._dropped += 1
            if len(self._similar) > KNOWN:
                self._similar.pop(next(iter(self._similar)))
        else:
            self._known.move_to_end(k)
            e = found.event
            e.count += 1
            e.lastTimestamp, e.message = now, message
        self._dirty.setdefault(k, None)

    # -- its thread ----------------------------------------------------------------------

    def start(self) -> Recorder:
        self._loop.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._loop.stop()
        self.flush(force=True)

    def alive(self) -> bool:
        return self._loop.alive()

    def _step(self) -> None:
        self._stop.wait(self.every)
        self.flush()

    def flush(self, *, force: bool = False) -> int:
        """Write the events due (``force``: every changed one); returns how many."""
        now_m = self.clock.monotonic()
        most = None if force else max(1, round(self.rate * self.every))
        with self._lock:
            self._correlate()
            due: list[tuple[keys.Key, Event, float]] = []
            for k in self._dirty:
                k_ = self._known[k]
                if force or now_m - k_.written >= self.min_interval:
                    due.append((k, k_.event, k_.written))
                    if most is not None and len(due) >= most:
                        break
            for k, _, _ in due:
                del self._dirty[k]
                self._known[k].written = now_m
            puts = [Put(k, encode(e), None, 0) for k, e, _ in due]  # encoded under the lock
            dropped = self._dropped if now_m - self._said_dropped >= 60.0 else 0
            if dropped:
                self._dropped, self._said_dropped = 0, now_m
        if dropped:
            log.warning("%s: %d events dropped unwritten (more waiting than the %d kept, "
                        "at most %d written a second; said once a minute): the ledger has "
                        "every decision", self.source, dropped, KNOWN, self.rate)
        if not puts:
            return 0
        try:
            lease = self._current_lease(now_m)
            room = self.store.room
            for i in range(0, len(puts), room):
                self.store.commit([Put(p.key, p.value, None, lease) for p in puts[i:i + room]])
        except StoreError as exc:
            with self._lock:  # tried again at the next flush (counts kept meanwhile)
                for k, _, was in due:
                    if k in self._known:
                        self._dirty.setdefault(k, None)
                        self._known[k].written = was
            if now_m - self._said >= 60.0:
                self._said = now_m
                log.warning("%d events of %s not written, tried again at the next flush "
                            "(said once a minute): %s", len(puts), self.source, exc)
            return 0
        return len(puts)

    def _current_lease(self, now_m: float) -> int:
        if not self._lease or now_m - self._lease_at >= self.ttl / 6:
            self._lease = self.store.grant(int(self.ttl + self.ttl / 6))
            self._lease_at = now_m
        return self._lease


__all__ = ["COMBINED", "SIMILAR", "Recorder"]
