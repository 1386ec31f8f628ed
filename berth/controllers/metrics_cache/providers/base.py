"""What a provider is to the cache: fetch current values for metric names.

``fetch`` returns, for each name asked, a float or a :class:`Failure` with
Krake's reason code, or a :class:`Forecasted` value: the value now and the
values the provider expects later. It may block (a network call); each provider is polled
from its own thread, so a slow or dead one never delays the others.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

UNREACHABLE = "UNREACHABLE_METRICS_PROVIDER"
UNKNOWN_PROVIDER = "UNKNOWN_METRICS_PROVIDER"
UNKNOWN_METRIC = "UNKNOWN_METRIC"
INVALID = "INVALID_METRIC"


@dataclass(frozen=True, slots=True)
class Failure:
    reason: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class Forecasted:
    """A value now, and ``points`` the provider expects later: (seconds since the epoch,
    value), oldest first."""

    value: float
    points: tuple[tuple[float, float], ...]


Reading = float | Failure | Forecasted


class NotYet(Exception):
    """The provider has no answer yet (e.g. a consumer still reading a topic's history):
    its poll is skipped, and a picture waiting for it stays incomplete."""


class Provider(Protocol):
    type: str

    def fetch(self, metrics: Sequence[str]) -> Mapping[str, Reading]: ...

    def close(self) -> None: ...


def number(raw: Any, what: str) -> Reading:
    """``raw`` as a finite float, or an INVALID_METRIC failure naming ``what``."""
    if isinstance(raw, bool):
        return Failure(INVALID, f"{what}: {raw!r} is not a number")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return Failure(INVALID, f"{what}: {str(raw)[:80]!r} is not a number")
    if not math.isfinite(value):
        return Failure(INVALID, f"{what}: {value} is not finite")
    return value


def stamp(raw: Any) -> float | None:
    """A time as seconds since the epoch: a number of seconds or milliseconds (as Kafka's
    own timestamps), or ISO 8601 with a zone; None if it is neither."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int | float):
        t = float(raw)
        return (t / 1000.0 if t > 1e11 else t) if math.isfinite(t) else None
    if isinstance(raw, str):
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed.timestamp() if parsed.tzinfo is not None else None
    return None


def series(raw: Any, what: str) -> tuple[tuple[float, float], ...] | Failure:
    """Timed values given as ``[[time, value], ...]`` or ``[{"at": time, "value": v}, ...]``
    (a time as :func:`stamp` reads it), sorted by time; INVALID_METRIC naming ``what`` and
    the point at fault otherwise."""
    if not isinstance(raw, list):
        return Failure(INVALID, f"{what}: the series is not a list")
    points: list[tuple[float, float]] = []
    for i, item in enumerate(raw):
        if isinstance(item, dict):
            at, value = item.get("at"), item.get("value")
        elif isinstance(item, list) and len(item) == 2:
            at, value = item
        else:
            return Failure(INVALID, f"{what}: point {i} is not [time, value] or "
                                    "{at, value}")
        t, v = stamp(at), number(value, f"{what} point {i}")
        if t is None:
            return Failure(INVALID, f"{what}: point {i}: {str(at)[:40]!r} is not a time")
        if isinstance(v, Failure):
            return v
        points.append((t, float(v)))  # type: ignore[arg-type]
    points.sort()
    return tuple(points)


def at_time(points: Sequence[tuple[float, float]], now: float, what: str) -> Reading:
    """A series read at ``now``: the value of its last point at or before ``now``, with
    the later points as its forecast. A series that starts later has no value yet."""
    i = bisect_right(points, (now, math.inf))
    if i == 0:
        start = datetime.fromtimestamp(points[0][0], UTC).isoformat() if points else "never"
        return Failure(INVALID, f"{what}: the series starts later ({start})")
    return Forecasted(points[i - 1][1], tuple(points[i:]))


def chunks(items: Sequence[str], size: int, chars: int, extra: int = 0) -> Iterator[list[str]]:
    """``items`` in runs of at most ``size`` items and about ``chars`` characters, each
    item counting its length plus ``extra`` (what wrapping it in a request adds)."""
    run: list[str] = []
    length = 0
    for item in items:
        if run and (len(run) >= size or length + len(item) + extra > chars):
            yield run
            run, length = [], 0
        run.append(item)
        length += len(item) + extra
    if run:
        yield run
