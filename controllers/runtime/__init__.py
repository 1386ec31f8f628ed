"""The controller runtime: kind-agnostic machinery every berth process shares.

An informer keeps a prefix in memory, a work queue hands keys to workers one
at a time, leader election keeps one replica active, and an HTTP endpoint
reports health and metrics. Nothing here knows a resource kind.
"""

from controllers.runtime.election import LeaderElection
from controllers.runtime.health import HealthServer
from controllers.runtime.informer import Event, EventType, Informer, Item
from controllers.runtime.workqueue import (
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
    "TemporaryError",
    "WorkQueue",
    "run_worker",
    "start_workers",
]
