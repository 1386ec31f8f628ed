"""Durations as people write them in YAML: ``90``, ``90s``, ``15m``, ``8h``, ``1h30m``, ``2d``."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class DurationError(ValueError):
    pass


def seconds(value: str | float | int) -> float:
    """``value`` in seconds; a bare number is seconds. Raises DurationError."""
    if isinstance(value, bool):
        raise DurationError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        total = float(value)
    else:
        text = value.strip()
        try:
            total = float(text)
        except ValueError:
            parts = _PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise DurationError(
                    f"{value!r} is not a duration (say 90, 90s, 15m, 8h, 1h30m or 2d)") from None
            total = sum(float(n) * _UNIT[u] for n, u in parts)
    if total < 0 or total != total or total == float("inf"):
        raise DurationError(f"{value!r} is not a duration >= 0")
    return total


__all__ = ["DurationError", "seconds"]
