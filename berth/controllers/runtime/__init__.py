"""The controller runtime: kind-agnostic machinery every berth process shares.

An informer keeps a prefix in memory, a work queue hands keys to workers one
at a time, leader election keeps one replica active, and an HTTP endpoint
reports health and metrics. Nothing here knows a resource kind.
"""

from berth.controllers.runtime.election import LeaderElection
from berth.controllers.runtime.health import HealthServer
from berth.controllers.runtime.informer import Event, EventType, Informer, Item, Source
from berth.controllers.runtime.workqueue import (
    PermanentError,
    Retry,
    TemporaryError,
    WorkQueue,
    run_worker,
    start_workers,
)

__all__ = [
    "Event",
    "EventType",
    "HealthServer",
    "Informer",
    "Item",
    "LeaderElection",
    "PermanentError",
    "Retry",
    "Source",
    "TemporaryError",
    "WorkQueue",
    "run_worker",
    "start_workers",
]
