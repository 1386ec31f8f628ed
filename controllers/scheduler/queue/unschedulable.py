"""unschedulableQ: subjects nothing fits now; flushed on relevant changes or every 60 s."""

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
