"""The static provider: values from the provider's own spec (seed 000)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from berth.controllers.metrics_cache.providers.base import UNKNOWN_METRIC, Failure, Reading, number
from berth.store.documents.metrics import StaticSpec


class StaticProvider:
    type = "static"

    def __init__(self, spec: StaticSpec) -> None:
        self.values = dict(spec.metrics)

    def fetch(self, metrics: Sequence[str]) -> Mapping[str, Reading]:
        return {m: number(self.values[m], m) if m in self.values
                else Failure(UNKNOWN_METRIC, f"{m} is not among the provider's static metrics")
                for m in metrics}

    def close(self) -> None:
        pass
