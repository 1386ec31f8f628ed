"""The scheduling framework: extension points, statuses, cycle state, runner."""

from berth.controllers.scheduler.framework.enabled import Registry
from berth.controllers.scheduler.framework.evaluation import Evaluation
from berth.controllers.scheduler.framework.fleet import Fleet, ordinals, sieve
from berth.controllers.scheduler.framework.plugin import Plugin
from berth.controllers.scheduler.framework.ranking import Ranked, Ranking
from berth.controllers.scheduler.framework.runner import Framework
from berth.controllers.scheduler.framework.snapshot import Snapshot
from berth.controllers.scheduler.framework.state import CycleState
from berth.controllers.scheduler.framework.status import (
    SKIP,
    SUCCESS,
    Code,
    Status,
    error,
    unresolvable,
    unschedulable,
    wait,
)
from berth.controllers.scheduler.framework.types import (
    Candidate,
    MetricReading,
    Placed,
    Quota,
    Ref,
    Room,
    SetQuota,
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
    "Quota",
    "Ranked",
    "Ranking",
    "Ref",
    "Registry",
    "Room",
    "SetQuota",
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
