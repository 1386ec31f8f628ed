"""Metrics read from what the leading controller holds, at scrape time.

State an operator alerts on ("which cluster is OFFLINE", "how many
applications FAILED", "how deep is the queue") is already in the leader's
informers and queues; counting it again on every change would be a second
copy to keep right. A controller that implements :class:`Observed` yields
metric families from its own state when Prometheus scrapes; a standby (no
controller running) yields nothing, so summing over replicas counts once.

A collect that raises is logged and skipped: a scrape never fails because of
one controller's bug. ``berth_build_info`` says which berth and Python run.
:class:`Stopwatch` times changes from one key to another (an application's
generation to its Binding, a Binding to RUNNING) into a histogram.
:class:`Labelled` keeps a labelled metric's children for the paths that count
once per event. :class:`Lines` logs many lines in one record.
"""

from __future__ import annotations

import logging
import platform
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from importlib import metadata
from typing import Any, Protocol, runtime_checkable

from prometheus_client import REGISTRY, Histogram, Info
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

BUILD = Info("berth_build", "The berth version and Python that run this process")


def _version() -> str:
    try:
        return metadata.version("berth")
    except metadata.PackageNotFoundError:
        return "unknown"


BUILD.info({"version": _version(), "python": platform.python_version()})


@runtime_checkable
class Observed(Protocol):
    def collect(self) -> Iterable[Metric]:
        """Metric families describing the controller's state now."""
        ...


class LeaderState:
    """The one collector per process, pointed at the running controller (or nothing)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._source: Observed | None = None

    def attach(self, controller: object) -> None:
        with self._lock:
            self._source = controller if isinstance(controller, Observed) else None

    def detach(self) -> None:
        with self._lock:
            self._source = None

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            source = self._source
        if source is None:
            return
        try:
            families = list(source.collect())
        except Exception:
            log.exception("collecting the controller's state for /metrics failed")
            return
        yield from families


LEADER_STATE = LeaderState()
REGISTRY.register(LEADER_STATE)  # a collector: it has collect()


def counts(name: str, doc: str, label: str, values: dict[str, int],
           always: Iterable[str] = ()) -> GaugeMetricFamily:
    """A gauge family with one sample per label value (``always`` ones even at 0)."""
    family = GaugeMetricFamily(name, doc, labels=[label])
    for value in sorted(set(values) | set(always)):
        family.add_metric([value], values.get(value, 0))
    return family


def states(name: str, doc: str, label: str, current: dict[str, str],
           known: Iterable[str]) -> GaugeMetricFamily:
    """A state-set gauge: for each object, 1 for its state and 0 for the other known
    ones (so an alert on ``{state="OFFLINE"} == 1`` sees a change to 0 at once)."""
    family = GaugeMetricFamily(name, doc, labels=[label, "state"])
    known = tuple(known)
    for obj, state in sorted(current.items()):
        for s in (*known, *(() if state in known else (state,))):
            family.add_metric([obj, s], 1 if s == state else 0)
    return family


LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
                   300.0)


class Labelled:
    """A labelled metric's children, each looked up once (prometheus_client's
    ``labels()`` takes a lock and checks its arguments at every call: a few per cent
    of a path that counts every event)."""

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:  # two threads may both look it up: labels() gives both the same
            child = self._children[values] = self._metric.labels(*values)
        return child


class Lines(tuple[str, ...]):
    """Log lines given to logging as one record's message, for a path that says a line
    per item of a batch (the scheduler: one per Binding written): logging's own cost,
    several microseconds a record, is paid once per batch. berth's formatters write
    each line with its own prefix (time, level, logger), or as its own JSON object; any
    other formatter writes them one below the other."""

    __slots__ = ()

    def __str__(self) -> str:
        return "\n".join(self)


class Stopwatch:
    """Times from one event about a key to a later one, into a histogram.

    ``start(key, mark)`` notes when a change (``mark``: e.g. a generation) was seen;
    ``stop(key, mark)`` observes the time since, if the same change is still the one
    timed (a newer change restarts the watch). At most ``limit`` keys are timed at
    once; beyond, the oldest is dropped. Called from any thread.
    """

    def __init__(self, histogram: Histogram, *, limit: int = 200_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.histogram = histogram
        self.limit = limit
        self.clock = clock
        self._open: dict[str, tuple[Hashable, float]] = {}
        self._lock = threading.Lock()

    def start(self, key: str, mark: Hashable) -> None:
        with self._lock:
            if key in self._open and self._open[key][0] == mark:
                return
            self._open[key] = (mark, self.clock())
            if len(self._open) > self.limit:
                del self._open[next(iter(self._open))]

    def stop(self, key: str, mark: Hashable) -> None:
        with self._lock:
            began = self._open.get(key)
            if began is None or began[0] != mark:
                return
            del self._open[key]
            took = self.clock() - began[1]
        self.histogram.observe(took)

    def cancel(self, key: str) -> None:
        with self._lock:
            self._open.pop(key, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)
