"""CustomResources: the candidate must serve every ``<plural>.<group>`` required.

A cluster serves what its spec declares (as in Krake) plus what the
propagator discovered from its CRDs (its status key).
"""

from __future__ import annotations

from controllers.scheduler.framework import (
    SUCCESS,
    Candidate,
    CycleState,
    Plugin,
    Snapshot,
    Status,
    Subject,
    unschedulable,
)

NAME = "CustomResources"


class CustomResources(Plugin):
    name = NAME
    cacheable = True

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        missing = [r for r in subject.custom_resources if r not in candidate.custom_resources]
        if missing:
            return unschedulable(f"custom resource {', '.join(missing)} not served")
        return SUCCESS
