"""How a candidate reads a metric: its definition and its published value, as one
:class:`MetricReading` (a value in [0, 1], or the reason there is none)."""

from __future__ import annotations

from berth.controllers.scheduler.framework import MetricReading
from berth.controllers.scheduler.subjects import ValueView
from berth.controllers.scheduler.views import MetricDefView
from berth.store.documents import MetricRef
from berth.store.documents.metrics import MEASURES, normalized


def reading(ref: MetricRef, ns: str | None, definition: MetricDefView | None,
            v: ValueView | None, expired: str) -> MetricReading:
    """``ref`` read in namespace ``ns`` (None: a GlobalMetric) from its ``definition``
    and published value ``v``; ``expired``: why the published values were dropped,
    while they are."""
    if ref.namespaced and not ns:
        return MetricReading(ref.name, ref.weight, reason="UNKNOWN_METRIC",
                             message="a namespaced metric on a global resource")
    if definition is None:
        return MetricReading(ref.name, ref.weight, reason="UNKNOWN_METRIC",
                             message=f"no {'Metric' if ns else 'GlobalMetric'} {ref.name}")
    if v is None:
        return MetricReading(
            ref.name, ref.weight, reason="MISSING_METRIC_VALUE",
            message=expired or "no current value (metrics-cache down, value "
            "expired, or no complete picture of the values yet)")
    if v.error is not None and v.value is None:
        return MetricReading(ref.name, ref.weight, reason=v.error.reason,
                             message=v.error.message)
    if v.value is None:
        return MetricReading(ref.name, ref.weight, reason="INVALID_METRIC",
                             message="the value is empty")
    lo, hi = definition.spec.min, definition.spec.max
    scaled = normalized(v.value, lo, hi)
    if scaled is None:
        return MetricReading(ref.name, ref.weight, v.value, reason="INVALID_METRIC",
                             message=f"min ({lo:g}) is not below max ({hi:g})")
    value01, outside = scaled
    message = f"value {v.value:g} outside [{lo:g}, {hi:g}]; clamped" if outside else ""
    if v.error is not None:  # the metrics-cache keeps a value stale_after seconds
        message = "; ".join(filter(None, (
            f"last value kept after {v.error.reason}: {v.error.message}", message)))
    return MetricReading(ref.name, ref.weight, v.value, value01, message=message,
                         measures=definition.metadata.labels.get(MEASURES, ""),
                         forecast=v.forecast)


__all__ = ["reading"]
