"""CandidateOnline: only ONLINE, undeleted candidates (seed 000's first step).

A cluster is ONLINE when its status key (written by the propagator) says so;
a cluster without a status key is not. Clouds have no health state and are
always eligible unless deleted.
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

NAME = "CandidateOnline"


class CandidateOnline(Plugin):
    name = NAME
    cacheable = True

    def filter(self, state: CycleState, subject: Subject, candidate: Candidate,
               snapshot: Snapshot) -> Status:
        if candidate.deleted:
            return unschedulable("deleted")
        if candidate.state != "ONLINE":
            return unschedulable(f"not ONLINE ({candidate.state or 'no status'})")
        return SUCCESS
