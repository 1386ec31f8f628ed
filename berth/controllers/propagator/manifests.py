"""Earlier generations' manifests, read from an application's history when a rollout
needs one: the I/O the pure rollout decision (``rollout.py``) is spared."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

from berth.controllers.propagator.kube import Unavailable
from berth.store import Store, StoreError, decode, keys
from berth.store.documents.rollouts import ApplicationHistory

log = logging.getLogger(__name__)

KEPT = 1024  # earlier generations' manifests kept in memory (they never change)


class Manifests:
    """Earlier generations' manifests, read from the application's history when a
    rollout needs one (holding a generation back, or rolling back to it). A
    generation's manifest never changes, so what was read is kept (the last
    :data:`KEPT`); a history that is missing or holds no such generation is asked
    again next time (it may be written meanwhile). A history that does not decode is
    said once per value written there, not at every reconcile that asks."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, str, int], list[dict[str, Any]]] = OrderedDict()
        self._garbage: dict[str, int] = {}  # history key → the revision said not to decode

    def of(self, namespace: str, name: str, generation: int) -> list[dict[str, Any]] | None:
        """The manifest of ``generation`` (None: not kept); Unavailable if etcd fails."""
        at = (namespace, name, generation)
        with self._lock:
            if at in self._kept:
                self._kept.move_to_end(at)
                return self._kept[at]
        key = keys.history_key(namespace, name)
        try:
            kv = self.store.get(key)
        except StoreError as exc:
            raise Unavailable(f"{key}: {exc}") from exc
        try:
            history = decode(kv.value, ApplicationHistory, key) if kv is not None else None
        except StoreError as exc:  # a value that is not a history: nothing kept
            assert kv is not None
            with self._lock:
                said = self._garbage.get(key) == kv.mod_revision
                self._garbage[key] = kv.mod_revision
                if len(self._garbage) > KEPT:  # forget the oldest said
                    del self._garbage[next(iter(self._garbage))]
            if not said:
                log.warning("%s: %s", key, exc)
            return None
        revision = history.revision(generation) if history is not None else None
        if revision is None:
            return None
        with self._lock:
            self._kept[at] = revision.manifest
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return revision.manifest


__all__ = ["KEPT", "Manifests"]
