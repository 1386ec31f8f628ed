"""A fleet-wide count of copies in transition, kept current from two event streams.

Each item (an application) has targets (where it is to run: its Binding, or
the scheduler's decision a moment before the Binding lands) and, from its
status, whether it runs anywhere yet and where its copy is not in transition
(``ok``). Its copies in transition are its targets outside ``ok`` — none for
an item that runs nowhere yet (a first placement is no change). The total
is kept as items change, so asking for it costs nothing however many items
there are (docs/pace.md).

Fed from informer threads and read by a deciding thread: one lock, held for
a few dictionary operations.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

_NONE: frozenset[str] = frozenset()


class Transit:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._targets: dict[str, frozenset[str]] = {}
        # targets decided and not yet seen in an event: older events do not undo them
        self._decided: dict[str, frozenset[str]] = {}
        self._ok: dict[str, frozenset[str]] = {}  # only items that run somewhere
        self._n: dict[str, int] = {}  # only items with copies in transition
        self._total = 0
        self._interned: dict[frozenset[str], frozenset[str]] = {}

    def _intern(self, cids: Iterable[str]) -> frozenset[str]:
        s = frozenset(cids)
        if not s:
            return _NONE
        return self._interned.setdefault(s, s)

    def targets(self, key: str, targets: Iterable[str] | None) -> None:
        """Where ``key`` is to run now, as its Binding says (None: it is gone). An
        event older than a decision (:meth:`decided`) does not undo it."""
        with self._lock:
            if targets is None:
                self._targets.pop(key, None)
                self._decided.pop(key, None)
            else:
                now = self._intern(targets)
                decided = self._decided.get(key)
                if decided is not None and decided != now:
                    return  # an echo from before the decision: it is on its way
                self._decided.pop(key, None)
                self._targets[key] = now
            self._update(key)

    def decided(self, key: str, targets: Iterable[str]) -> None:
        """Where the deciding process has just decided ``key`` is to run: counted at once,
        before its Binding lands (and is seen again)."""
        with self._lock:
            self._decided[key] = self._targets[key] = self._intern(targets)
            self._update(key)

    def status(self, key: str, ok: Iterable[str] | None) -> None:
        """Where ``key``'s copies are not in transition (None: it runs nowhere yet)."""
        with self._lock:
            if ok is None:
                self._ok.pop(key, None)
            else:
                self._ok[key] = self._intern(ok)
            self._update(key)

    def _update(self, key: str) -> None:
        ok = self._ok.get(key)
        n = len(self._targets.get(key, _NONE) - ok) if ok is not None else 0
        self._total += n - self._n.get(key, 0)
        if n:
            self._n[key] = n
        else:
            self._n.pop(key, None)

    def count(self) -> int:
        """Copies in transition now, fleet-wide."""
        with self._lock:
            return self._total

    def of(self, key: str) -> int:
        with self._lock:
            return self._n.get(key, 0)


def transit_id(key: str) -> str:
    """``<plural>/<namespace>/<name>`` of a resource's, Binding's or status's key: the
    same item whichever of them an event is about."""
    return "/".join(key.rsplit("/", 3)[-3:])
