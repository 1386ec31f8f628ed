"""The scheduling framework: extension points, statuses, cycle state, runner."""

from controllers.scheduler.framework.fleet import Fleet, ordinals, sieve
from controllers.scheduler.framework.plugin import Plugin
from controllers.scheduler.framework.ranking import Ranked, Ranking
from controllers.scheduler.framework.runner import Evaluation, Framework, Registry
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
    "Fleet",
    "Framework",
    "MetricReading",
    "Placed",
    "Plugin",
    "Ranked",
    "Ranking",
    "Ref",
    "Registry",
    "Snapshot",
    "Status",
    "Subject",
    "error",
    "ordinals",
    "sieve",
    "unresolvable",
    "unschedulable",
    "wait",
]
