"""Time as a process reads it: one clock, given to the parts that decide by it.

A process reads the system's clocks; a test gives a clock it moves itself, so
that what happens after a timeout (a gang given up on, a hold that ends, an
assumption that expires) is tested by moving time rather than waiting for it.
Time that paces I/O (retries, batching, watch timeouts) stays the system's.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds that only go forward, for durations and deadlines."""
        ...

    def time(self) -> float:
        """Seconds since the epoch, for what is written or compared with written times."""
        ...

    def now(self) -> datetime:
        """:meth:`time` as an aware UTC datetime."""
        ...


class SystemClock:
    """The system's clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def now(self) -> datetime:
        return datetime.now(UTC)


SYSTEM = SystemClock()

__all__ = ["SYSTEM", "Clock", "SystemClock"]
