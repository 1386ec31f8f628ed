"""The static provider: values from the provider's own spec (Krake).

``metrics`` are fixed values; a ``series`` is a list of timed values whose
value now is its last point at or before now, and whose later points are its
forecast (a price schedule, a published carbon-intensity forecast, a trace
replayed).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from berth.controllers.metrics_cache.providers.base import (
    UNKNOWN_METRIC,
    Failure,
    Reading,
    at_time,
    number,
)
from berth.store.documents.metrics import StaticSpec


class StaticProvider:
    type = "static"

    def __init__(self, spec: StaticSpec) -> None:
        self.values = dict(spec.metrics)
        self.series = {name: sorted((p.at.timestamp(), p.value) for p in points)
                       for name, points in spec.series.items()}

    def fetch(self, metrics: Sequence[str]) -> Mapping[str, Reading]:
        now = time.time()
        found: dict[str, Reading] = {}
        for m in metrics:
            if m in self.values:
                found[m] = number(self.values[m], m)
            elif m in self.series:
                found[m] = at_time(self.series[m], now, m)
            else:
                found[m] = Failure(UNKNOWN_METRIC, f"{m} is not among the provider's static "
                                                   "metrics or series")
        return found

    def close(self) -> None:
        pass
