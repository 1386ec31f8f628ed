"""The arguments the built-in plugins take, as types: what a configuration may give each,
checked when the configuration is read (a wrong type or a value out of range names
the plugin and the argument).

msgspec Structs, in a module of their own: the plugins are compiled (berth.native),
and mypyc compiles no Struct.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from berth.controllers.scheduler.framework.plugin import NoArgs


class GangArgs(NoArgs, frozen=True):
    timeout: Annotated[float, Meta(gt=0)] = 30.0  # seconds a member waits for the others


class MetricScoreArgs(NoArgs, frozen=True):
    # how much a subject's current cluster is preferred (the scheduler's stickiness_weight)
    stickiness_weight: Annotated[float, Meta(ge=0)] = 0.1


class FailedTargetsArgs(NoArgs, frozen=True):
    # seconds a cluster an application could not become available on is avoided
    backoff: Annotated[float, Meta(ge=0)] = 900.0


class ResourceWeight(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: Annotated[str, Meta(min_length=1)]
    weight: Annotated[int, Meta(ge=1, le=100)] = 1


class CapacityArgs(NoArgs, frozen=True):
    strategy: Literal["LeastAllocated", "MostAllocated", "BalancedAllocation"] = "LeastAllocated"
    resources: Annotated[list[ResourceWeight], Meta(min_length=1)] | None = None


__all__ = ["CapacityArgs", "FailedTargetsArgs", "GangArgs", "MetricScoreArgs",
           "ResourceWeight"]
