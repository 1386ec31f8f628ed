"""How much of its cluster an agent removes at once (docs/agents.md "Coming back").

An agent that comes back after a long time away may find many of its works
saying Delete — the applications were moved away while it was cut off, or a
mistake upstream emptied its work. Karmada's agent, coming back, carried out
every queued deletion at once and emptied its member cluster (karmada #5406).
berth's removes at most a share of the applications on the cluster within a
window (never fewer than a few); the rest wait for the window to move on, and
the agent says why in each held work's report and in its heartbeat.

The removals of the window are kept in etcd (``/berth/v1/agents/<cluster>/removals``,
written before each removal begins, fenced by the leader's term): a restarted
agent, or one that lost and won its lease again, starts from them, not afresh
— else an agent that restarts again and again would remove a share each time.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import msgspec

from berth.store import Conflict, Put, Store, StoreError, encode, keys
from berth.store.documents import StatusMeta
from berth.store.documents.work import Removals

log = logging.getLogger(__name__)


class Budget:
    def __init__(self, share: float, least: int, window: float,
                 clock: Callable[[], float] = time.time, taken: Iterable[float] = ()) -> None:
        self.share = share
        self.least = least
        self.window = window
        self.clock = clock  # wall time: what is kept in etcd outlives the process
        self._lock = threading.Lock()
        # when each removal in the window began (seconds since the epoch)
        self._taken: deque[float] = deque(sorted(taken))

    def allowed(self, on_cluster: int) -> int:
        """Removals allowed per window with ``on_cluster`` applications there."""
        return max(self.least, math.floor(self.share * on_cluster))

    def take(self, on_cluster: int) -> tuple[str, float]:
        """Take one removal: ("", when) if it may go on now, else (why it is held, 0)."""
        now = self.clock()
        with self._lock:
            while self._taken and self._taken[0] <= now - self.window:
                self._taken.popleft()
            allowed = self.allowed(on_cluster)
            if len(self._taken) < allowed:
                self._taken.append(now)
                return "", now
        return (f"held: {len(self._taken)} applications removed in the last "
                f"{self.window:g} s, at most {allowed} at once ({self.share:.0%} of the "
                f"{on_cluster} here)"), 0.0

    def times(self) -> list[float]:
        """The removals of the window, to keep."""
        with self._lock:
            return list(self._taken)

    def give_back(self, at: float) -> None:
        """A removal taken at ``at`` that was not recorded (so not begun)."""
        with self._lock, contextlib.suppress(ValueError):
            self._taken.remove(at)

    def retry_after(self) -> float:
        """Seconds until a removal may be taken again."""
        now = self.clock()
        with self._lock:
            return max(0.5, self._taken[0] + self.window - now) if self._taken else 0.5


class Kept:
    """The window's removals in etcd (``/berth/v1/agents/<cluster>/removals``): read when
    an agent begins to lead, written — fenced by its term — before each removal."""

    def __init__(self, store: Store, cid: str) -> None:
        self.store = store
        self.cid = cid
        self.key = keys.removals_key(cid)
        self._lock = threading.Lock()  # one write at a time, and the revision it guards
        self._revision = 0

    def read(self) -> list[float]:
        """The removals kept (seconds since the epoch); the next write is guarded by
        what was read."""
        kv = self.store.get(self.key)
        with self._lock:
            self._revision = kv.mod_revision if kv is not None else 0
        if kv is None:
            return []
        try:
            kept = msgspec.json.decode(kv.value, type=Removals)
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.error("%s held a value that is not the agent's removals: replaced", self.key)
            return []
        return [t.timestamp() for t in kept.times]

    def write(self, times: list[float]) -> bool:
        """Keep ``times``; False if that could not be done (then nothing is removed)."""
        namespace, _, name = self.cid.partition("/")
        body = encode(Removals(StatusMeta(name, namespace),
                               [datetime.fromtimestamp(t, UTC) for t in times]))
        with self._lock:
            try:
                self._revision = self.store.commit([Put(self.key, body, self._revision)])
            except Conflict:
                kv = self.store.get(self.key)
                self._revision = kv.mod_revision if kv is not None else 0
                return False
            except StoreError as exc:
                log.warning("%s not written: %s", self.key, exc)
                return False
        return True
