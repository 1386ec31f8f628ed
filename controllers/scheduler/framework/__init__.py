"""The scheduling framework: extension points, statuses, cycle state, runner."""

from controllers.scheduler.framework.plugin import Plugin
from controllers.scheduler.framework.runner import Evaluation, Framework, Ranked, Registry
from controllers.scheduler.framework.state import CycleState
from controllers.scheduler.framework.status import (
    SKIP,
    SUCCESS,
    Code,
    Status,
    error,
    unresolvable,
    unschedulable,
    wait,
)
from controllers.scheduler.framework.types import (
    Candidate,
    MetricReading,
    Placed,
    Ref,
    Snapshot,
    Subject,
)

__all__ = [
    "SKIP",
    "SUCCESS",
    "Candidate",
    "Code",
    "CycleState",
    "Evaluation",
    "Framework",
    "MetricReading",
    "Placed",
    "Plugin",
    "Ranked",
    "Ref",
    "Registry",
    "Snapshot",
    "Status",
    "Subject",
    "error",
    "unresolvable",
    "unschedulable",
    "wait",
]
