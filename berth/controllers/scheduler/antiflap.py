"""Anti-flap: when an optional move waits, and how often moves come back.

A move is *optional* when the subject's spec has not changed and every
target it runs on is still feasible: it would move only because another
candidate now scores better. Stickiness already asks for a better score by
its weight; this policy can ask more, each part off by default so that a real
change moves at once (the flapping after a restart is prevented by deciding
only on whole metric pictures, not by slowing every move down):

* ``margin``: the new targets must score higher than the current ones by
  more than this (on the same tier; a better tier always counts);
* ``hold``: the better targets must stay the decision this long;
* ``min_dwell``: no optional move within this long of the last move
  (``spec.scheduled`` of the Binding: when its targets last changed);
* ``budget``: at most this many optional moves per ``budget_interval``,
  fleet-wide;
* ``settle`` (on by default, 60 s): no optional move *to* a cluster within
  this long of its coming back ONLINE after it was not. A cluster that went
  away and returns is not trusted at once: if it goes away again, nothing
  moved back to it has to move again. Moves between clusters that stayed
  up (a metric change) are not slowed.

And the fleet's pace (a document, ``/berth/v1/paces/fleet``; docs/pace.md), for
moves and rollouts alike:

* ``windows``: no optional move starts within one;
* ``inTransition``: no optional move starts while that many copies are in
  transition fleet-wide (moves in flight, rollout steps);
* ``perMinute``: no optional move starts once that many moves, forced ones
  included, started in the last minute.

A forced move is never held, and it counts. ``budget`` is the same rule as
``perMinute`` for optional moves only, over ``budget_interval``, set in the
scheduler's configuration: the pace is the fleet's, for every process.

A move held back is recorded in the Binding (its reason says why, and when
it is tried again). A move back to targets left less than ``flap_window``
ago counts as a flap (``berth_scheduler_flaps_total``), whatever caused it.

What ``perMinute`` and ``budget`` count outlives a leader: :meth:`AntiFlap.record`
says it by the second (:class:`~berth.store.documents.MovesStarted`), the
scheduler writes that with each move's Binding, and the next leader starts
from it (:meth:`AntiFlap.started_before`) — a Binding would not do, as an
application's deletion takes its Binding with it.

Owned by the scheduling loop: one thread, no lock.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec
from prometheus_client import Counter

from berth.store.documents import HeldBy, MovesStarted
from berth.store.documents.pace import PaceSpec, closed_until

FLAPS = Counter("berth_scheduler_flaps_total",
                "Moves back to targets left within the flap window")
HELD = Counter("berth_scheduler_moves_held_total", "Optional moves held back, by rule",
               ["rule"])
HELD_PREFIX = "Held back"
PACE_RETRY = 1.0  # seconds: a move held by the copies in transition is tried again so soon


class AntiFlapConfig(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    margin: float = 0.0  # score a move must gain beyond stickiness
    hold: float = 0.0  # seconds the better targets must stay better
    min_dwell: float = 0.0  # seconds after a move before another optional one
    budget: int = 0  # optional moves per budget_interval, fleet-wide; 0: unlimited
    budget_interval: float = 60.0
    flap_window: float = 300.0  # a move back within this counts as a flap
    settle: float = 60.0  # seconds a cluster back ONLINE receives no optional move

    def __post_init__(self) -> None:
        if min(self.margin, self.hold, self.min_dwell, self.budget, self.settle) < 0:
            raise ValueError("anti_flap: margin, hold, min_dwell, budget and settle must not "
                             "be negative")
        if self.budget_interval <= 0 or self.flap_window < 0:
            raise ValueError("anti_flap: budget_interval must be positive, flap_window not "
                             "negative")

    @property
    def active(self) -> bool:
        return bool(self.margin or self.hold or self.min_dwell or self.budget or self.settle)


Refs = frozenset[tuple[str, str | None, str]]


@dataclass(frozen=True, slots=True)
class Held:
    rule: HeldBy
    reason: str  # stable while the same move is held the same way (compared before a write)
    retry_after: float | None  # seconds; None: only a later change can release it


class AntiFlap:
    def __init__(self, config: AntiFlapConfig, *,
                 clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.config = config
        self.clock = clock
        self.now = now
        self._better: dict[str, tuple[Refs, float]] = {}  # key → held move and since when
        self._moves: deque[float] = deque()  # times of optional moves within the budget
        self._started: deque[float] = deque()  # times of every move in the last minute
        # The same, by the wall clock's second (``record``): [second, moves], oldest first
        self._started_s: deque[list[int]] = deque()
        self._optional_s: deque[list[int]] = deque()
        self._left: dict[str, tuple[Refs, float]] = {}  # key → targets it left, and when
        self._prune_at = 1024

    def check(self, key: str, new: Refs, names: str, gain: float,
              last_move: datetime | None, returned: float | None = None,
              pace: PaceSpec | None = None, transit: int = 0) -> Held | None:
        """Whether the optional move of ``key`` to ``new`` (``names``) waits, and why.
        ``returned``: when (``clock``) the last of ``new`` came back ONLINE, if it did;
        ``pace``: the fleet's, with ``transit`` copies in transition now."""
        c = self.config
        to = f"would move to {names}"
        if pace is not None:
            held = self.paced(pace, transit, to)
            if held is not None:
                return held
        if not c.active:
            return None
        if c.settle and returned is not None:
            back = self.clock() - returned
            if back < c.settle:
                return self._held(
                    HeldBy.SETTLE, f"{HELD_PREFIX}: a target came back ONLINE less than "
                    f"{c.settle:g}s ago (settle); {to}", c.settle - back)
        if c.margin and gain <= c.margin:
            self._better.pop(key, None)
            return self._held(
                HeldBy.MARGIN, f"{HELD_PREFIX}: gains {c.margin:g} or less in score (margin); "
                f"{to}", None)
        t = self.clock()
        if c.hold:
            seen = self._better.get(key)
            if seen is None or seen[0] != new:
                self._better[key] = seen = (new, t)
            if t - seen[1] < c.hold:
                return self._held(
                    HeldBy.HOLD, f"{HELD_PREFIX} until better for {c.hold:g}s (hold); {to}",
                    seen[1] + c.hold - t)
        if c.min_dwell and last_move is not None:
            stayed = (self.now() - last_move).total_seconds()
            if stayed < c.min_dwell:
                return self._held(
                    HeldBy.MIN_DWELL, f"{HELD_PREFIX}: moved less than {c.min_dwell:g}s ago "
                    f"(min_dwell); {to}", c.min_dwell - stayed)
        if c.budget:
            while self._moves and t - self._moves[0] >= c.budget_interval:
                self._moves.popleft()
            if len(self._moves) >= c.budget:
                return self._held(
                    HeldBy.BUDGET, f"{HELD_PREFIX}: {c.budget} moves per "
                    f"{c.budget_interval:g}s spent (budget); {to}",
                    self._moves[0] + c.budget_interval - t)
        return None

    def paced(self, pace: PaceSpec, transit: int, to: str) -> Held | None:
        """The fleet's pace: a window, the copies in transition, the moves per minute."""
        if pace.windows:
            now = self.now()
            until = closed_until(pace.windows, now)
            if until is not None:
                return self._held(
                    HeldBy.WINDOW, f"{HELD_PREFIX}: no optional change starts until "
                    f"{until:%Y-%m-%d %H:%M} UTC (pace window); {to}",
                    (until - now).total_seconds())
        if pace.in_transition and transit >= pace.in_transition:
            return self._held(
                HeldBy.IN_TRANSITION, f"{HELD_PREFIX}: {pace.in_transition} copies in "
                f"transition, the pace's limit (inTransition); {to}", PACE_RETRY)
        if pace.per_minute:
            t = self.clock()
            while self._started and t - self._started[0] >= 60.0:
                self._started.popleft()
            if len(self._started) >= pace.per_minute:
                return self._held(
                    HeldBy.PER_MINUTE, f"{HELD_PREFIX}: {pace.per_minute} moves started in "
                    f"the last minute (perMinute); {to}", self._started[0] + 60.0 - t)
        return None

    @staticmethod
    def _held(rule: HeldBy, reason: str, retry_after: float | None) -> Held:
        HELD.labels(rule).inc()
        return Held(rule, reason, retry_after)

    def settled(self, key: str) -> None:
        """The decision for ``key`` is where it runs: no move is waiting."""
        self._better.pop(key, None)

    def moved(self, key: str, old: Refs, new: Refs, *, optional: bool) -> None:
        """``key`` moves from ``old`` to ``new`` (counted against the budget if optional)."""
        t = self.clock()
        self._better.pop(key, None)
        second = math.ceil(self.now().timestamp())  # by its end: counted a moment longer
        if optional and self.config.budget:
            self._moves.append(t)
            _add(self._optional_s, second)
        if old:  # a move (not a first placement): counted for the pace, forced or not
            self._started.append(t)
            _add(self._started_s, second)
            while self._started and t - self._started[0] >= 60.0:
                self._started.popleft()
        window = self.config.flap_window
        left = self._left.get(key)
        if left is not None and new and left[0] == new and t - left[1] <= window:
            FLAPS.inc()
        if old:
            self._left[key] = (old, t)
        if len(self._left) > self._prune_at:  # drop what aged out, now and then
            self._left = {k: v for k, v in self._left.items() if t - v[1] <= window}
            self._prune_at = 2 * len(self._left) + 1024

    def record(self) -> MovesStarted:
        """The moves still counted here — every one of the last minute, the optional ones
        the budget counts — by the second, for whoever leads next."""
        now = self.now().timestamp()
        while self._started_s and self._started_s[0][0] + 60 <= now:
            self._started_s.popleft()
        c = self.config
        optional = self._optional_s
        while optional and optional[0][0] + c.budget_interval <= now:
            optional.popleft()
        total = sum(n for _, n in optional)
        while optional and total - optional[0][1] >= c.budget:  # the newest budget do
            total -= optional.popleft()[1]
        return MovesStarted(started=[(s, n) for s, n in self._started_s],
                            optional=[(s, n) for s, n in optional])

    def started_before(self, record: MovesStarted) -> None:
        """Start from an earlier leader's :meth:`record`: its moves of the last minute
        count for ``perMinute`` here too, its optional ones for the ``budget`` within
        its interval, so a new leader does not spend them again. A second a clock ahead
        of this one put in the future counts from now."""
        now, t = self.now().timestamp(), self.clock()
        started = [(s, n) for s, n in sorted(record.started) if n > 0 and now - s < 60.0]
        optional = ([(s, n) for s, n in sorted(record.optional)
                     if n > 0 and now - s < self.config.budget_interval]
                    if self.config.budget else [])
        for buckets, exact, seconds in ((started, self._started, self._started_s),
                                        (optional, self._moves, self._optional_s)):
            exact.extendleft(t - max(0.0, now - s) for s, n in reversed(buckets)
                             for _ in range(n))
            seconds.extendleft([s, n] for s, n in reversed(buckets))

    def forget(self, key: str) -> None:
        self._better.pop(key, None)
        self._left.pop(key, None)


def _add(seconds: deque[list[int]], second: int) -> None:
    """One move more in ``second`` (a clock set back: in the latest second said)."""
    if seconds and seconds[-1][0] >= second:
        seconds[-1][1] += 1
    else:
        seconds.append([second, 1])


__all__ = ["HELD_PREFIX", "AntiFlap", "AntiFlapConfig", "Held"]
