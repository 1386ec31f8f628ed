"""unschedulableQ: subjects nothing fits now; flushed on relevant changes, and each
one after it waited ``flush_every`` seconds (so thousands that became unschedulable
at different times do not come back all at once)."""

from __future__ import annotations


class UnschedulableQueue:
    def __init__(self) -> None:
        self._since: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._since)

    def __contains__(self, key: str) -> bool:
        return key in self._since

    def add(self, key: str, now: float) -> None:
        self._since.setdefault(key, now)

    def discard(self, key: str) -> None:
        self._since.pop(key, None)

    def drain(self) -> list[str]:
        keys = list(self._since)
        self._since.clear()
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
        return keys

    def oldest(self) -> float | None:
        return next(iter(self._since.values()), None)
