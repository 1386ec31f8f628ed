"""The candidates of each kind and namespace, frozen into a :class:`Fleet` per change.

A Fleet is rebuilt when the candidates or their status change (the candidate
epoch); when only metric definitions or values changed (the metric epoch), the
new Fleet keeps the old one's candidates and structural indexes. Namespaces
with the same candidates — teams whose policies bind the same cluster sets and
that have no cluster of their own (docs/teams.md) — share one Fleet, and with
it every index built on it: fifty teams on one shared fleet cost the indexes of
one (``scripts/bench/tenancy_bench.py``). The Fleet handed out before a change
is kept for the sweep that compares decisions across it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from berth.controllers.scheduler.framework import Candidate, Fleet

Where = tuple[str, str | None]  # (candidate kind, namespace)


class Fleets:
    """Owner of the Fleets handed out; ``build`` lists a kind's candidates in a
    namespace, ``epochs`` says the (candidate, metric) epochs now."""

    def __init__(self, build: Callable[[str, str | None], list[Candidate]],
                 epochs: Callable[[], tuple[int, int]]) -> None:
        self._build = build
        self._epochs = epochs
        self._lock = threading.Lock()
        self._of: dict[Where, Fleet] = {}
        self._before: dict[Where, Fleet] = {}
        # this candidate epoch's Fleets by (kind, their candidates' keys): shared
        self._shared: dict[tuple[str, tuple[str, ...]], Fleet] = {}

    def of(self, kind: str, namespace: str | None) -> Fleet:
        """The candidates of ``kind`` in ``namespace``, frozen, as of now."""
        where = (kind, namespace)
        cand_epoch, metric_epoch = self._epochs()
        with self._lock:
            hit = self._of.get(where)
        if hit is not None and hit.cand_epoch == cand_epoch:
            if hit.metric_epoch == metric_epoch:
                return hit
            candidates, same = hit.candidates, (kind, hit.keys)
        else:
            # Built after reading the epochs: a change meanwhile only makes it rebuilt again.
            candidates = tuple(self._build(kind, namespace))
            same = (kind, tuple(c.key for c in candidates))
        with self._lock:
            shared = self._shared.get(same)
        if shared is not None and shared.cand_epoch != cand_epoch:
            shared = None
        if shared is not None and shared.metric_epoch == metric_epoch:
            fleet = shared  # another namespace's, with the same candidates
        elif shared is not None:
            fleet = shared.with_metrics(metric_epoch)
        elif hit is not None and hit.cand_epoch == cand_epoch:
            fleet = hit.with_metrics(metric_epoch)
        else:
            fleet = Fleet(candidates, cand_epoch=cand_epoch, metric_epoch=metric_epoch)
        with self._lock:
            if hit is not None:
                self._before[where] = hit
            self._of[where] = fleet
            if shared is None:  # those of older candidate epochs are asked for no more
                self._shared = {k: f for k, f in self._shared.items()
                                if f.cand_epoch == cand_epoch}
            self._shared[same] = fleet
        return fleet

    def changed(self) -> bool:
        """Whether a fleet changed (its candidates or metric values) since a sweep last
        took the one before: it has not been taken, or not yet built again."""
        epochs = self._epochs()
        with self._lock:
            return bool(self._before) or any(
                (f.cand_epoch, f.metric_epoch) != epochs for f in self._of.values())

    def take_before(self, kind: str, namespace: str | None) -> Fleet | None:
        """The Fleet :meth:`of` handed out before its last change (of candidates or
        metric values), what the decisions before that change read; once (a sweep reads
        it after the change), so that no old Fleet is kept longer."""
        with self._lock:
            return self._before.pop((kind, namespace), None)
