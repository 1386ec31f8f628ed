"""What a provider is to the cache: fetch current values for metric names.

``fetch`` returns, for each name asked, a float or a :class:`Failure` with
Krake's reason code. It may block (a network call); each provider is polled
from its own thread, so a slow or dead one never delays the others.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

UNREACHABLE = "UNREACHABLE_METRICS_PROVIDER"
UNKNOWN_PROVIDER = "UNKNOWN_METRICS_PROVIDER"
UNKNOWN_METRIC = "UNKNOWN_METRIC"
INVALID = "INVALID_METRIC"


@dataclass(frozen=True, slots=True)
class Failure:
    reason: str
    message: str = ""


Reading = float | Failure


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
