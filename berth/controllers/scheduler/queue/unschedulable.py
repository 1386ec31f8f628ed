"""unschedulableQ: subjects nothing fits now; flushed on relevant changes, and each
one after it waited ``flush_every`` seconds (so thousands that became unschedulable
at different times do not come back all at once). A subject that new metric values
cannot help (``Framework.metric_blind``) waits out a flush for metric values alone."""

from __future__ import annotations


class UnschedulableQueue:
    def __init__(self) -> None:
        self._since: dict[str, float] = {}
        self._blind: set[str] = set()  # of those, the ones new metric values cannot help

    def __len__(self) -> int:
        return len(self._since)

    def __contains__(self, key: str) -> bool:
        return key in self._since

    def add(self, key: str, now: float, metric_blind: bool = False) -> None:
        self._since.setdefault(key, now)
        if metric_blind:
            self._blind.add(key)
        else:
            self._blind.discard(key)

    def discard(self, key: str) -> None:
        self._since.pop(key, None)
        self._blind.discard(key)

    def drain(self, metrics_only: bool = False) -> list[str]:
        """Every waiting subject; after a change of metric values alone, those that
        new values can help."""
        if metrics_only and self._blind:
            keys = [k for k in self._since if k not in self._blind]
            for key in keys:
                del self._since[key]
            return keys
        keys = list(self._since)
        self._since.clear()
        self._blind.clear()
        return keys

    def drain_older(self, than: float) -> list[str]:
        """The subjects waiting since ``than`` or earlier (oldest first)."""
        keys = []
        for key, since in self._since.items():
            if since > than:
                break
            keys.append(key)
        for key in keys:
            del self._since[key]
            self._blind.discard(key)
        return keys

    def oldest(self) -> float | None:
        return next(iter(self._since.values()), None)
