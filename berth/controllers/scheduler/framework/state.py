"""CycleState: scratch space the plugins of one scheduling attempt share.

Thrown away after the attempt: free-form ``data`` keyed by plugin name (so
plugins never collide), the subject's targets before the attempt, the
waiting subjects a permit released, and the frozen fleet the attempt decides
on (set by the first evaluation, read by every later step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.controllers.scheduler.framework.fleet import Fleet
from berth.store.documents import Target


@dataclass(slots=True)
class CycleState:
    data: dict[str, Any] = field(default_factory=dict)
    current: list[Target] = field(default_factory=list)  # the subject's targets before
    allow: list[str] = field(default_factory=list)  # waiting subjects a permit released
    fleet: Fleet | None = None  # the frozen candidates this attempt decides on

