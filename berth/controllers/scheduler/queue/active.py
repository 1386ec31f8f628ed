"""activeQ: subjects ready to be scheduled, best first by the queue-sort plugin."""

from __future__ import annotations

import heapq
import itertools
from typing import Any


class ActiveQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[tuple[Any, ...], int, str]] = []
        self._members: set[str] = set()
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: str) -> bool:
        return key in self._members

    def push(self, key: str, sort_key: tuple[Any, ...]) -> None:
        if key not in self._members:
            self._members.add(key)
            heapq.heappush(self._heap, (sort_key, next(self._seq), key))

    def pop(self) -> str | None:
        while self._heap:
            _, _, key = heapq.heappop(self._heap)
            if key in self._members:
                self._members.discard(key)
                return key
        return None

    def discard(self, key: str) -> None:
        self._members.discard(key)  # its heap entry is skipped when popped
