"""CycleState: scratch space the plugins of one scheduling attempt share.

Thrown away after the attempt. Besides free-form ``data`` (keyed by plugin
name, so plugins never collide), it gathers the explanation: per candidate,
the score breakdown each plugin reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from controllers.scheduler.framework.fleet import Fleet
from store.documents import Target


@dataclass(slots=True)
class CycleState:
    data: dict[str, Any] = field(default_factory=dict)
    breakdown: dict[str, dict[str, Any]] = field(default_factory=dict)
    record: bool = True  # False when nobody will read the explanation
    current: list[Target] = field(default_factory=list)  # the subject's targets before
    allow: list[str] = field(default_factory=list)  # waiting subjects a permit released
    fleet: Fleet | None = None  # the frozen candidates this attempt decides on

    def explain(self, candidate_key: str, plugin: str, detail: Any) -> None:
        if self.record:
            self.breakdown.setdefault(candidate_key, {})[plugin] = detail
