"""Time in each plugin at each extension point, by the status it returned, measured on
one attempt in :data:`SAMPLE` (as kube-scheduler's
``plugin_execution_duration_seconds`` samples ``pluginMetricsSamplePercent``): an
attempt not measured pays one attribute read per plugin call.

A point a memo answers (a cacheable filter or score, computed once per signature per
fleet) is measured when it runs, not when its answer is reused.
"""

from __future__ import annotations

from time import perf_counter

from prometheus_client import Histogram

SAMPLE = 10  # one attempt in ten is measured
BUCKETS = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0, 3.0)

PLUGIN_DURATION = Histogram(
    "berth_scheduler_plugin_duration_seconds",
    "Time in one plugin at one extension point, by the status it returned (one attempt "
    "in ten measured)", ["plugin", "point", "status"], buckets=BUCKETS)


class Sampled:
    """Whether the attempt under way is measured, and the measuring. One per framework;
    its attempts run on one thread (the scheduling loop's, or a what-if's own)."""

    __slots__ = ("_attempts", "on")

    def __init__(self) -> None:
        self._attempts = 0
        self.on = False

    def next_attempt(self) -> None:
        self._attempts += 1
        self.on = self._attempts % SAMPLE == 0

    @staticmethod
    def start() -> float:
        return perf_counter()

    @staticmethod
    def took(plugin: str, point: str, status: str, since: float) -> None:
        """A call that began at ``since`` (:meth:`start`) returned ``status``."""
        PLUGIN_DURATION.labels(plugin, point, status).observe(perf_counter() - since)

    @staticmethod
    def spent(plugin: str, point: str, status: str, seconds: float) -> None:
        """Calls one candidate at a time took ``seconds`` in all; the worst said ``status``."""
        PLUGIN_DURATION.labels(plugin, point, status).observe(seconds)
