"""Done work stays done: what the propagator knows of an application's Jobs.

A Job (``batch/v1``) complete at a generation is recorded in that cluster's
``done`` and never created again at that generation — not on the cluster where
it ran, not on one a move or a new share brings in; only a new generation runs
it again. One not complete yet is *working*: the scheduler moves it only by
force, and the propagator stops it where it leaves before it starts it anew
(two copies would both do the work). docs/propagator.md "Done work stays done".
"""

from __future__ import annotations

from collections.abc import Mapping

from berth.store.documents import ClusterApplied, KubeObjectRef


def done_at(applied: Mapping[str, ClusterApplied], gen: int) -> tuple[KubeObjectRef, ...]:
    """The Jobs complete at generation ``gen`` on any cluster: done work, never created
    again — not on the cluster where they ran, and not on one a move or a new share
    brings in (only a new generation runs them again)."""
    return tuple(sorted({r for a in applied.values() if a.generation == gen for r in a.done},
                        key=str))


def finished(applied: Mapping[str, ClusterApplied]) -> int:
    """The generation whose work is all done (0: none): on some cluster, every object
    of it is a Job complete at that generation. The scheduler does not move such an
    application, as the Kubernetes scheduler never moves a finished Pod."""
    return max((a.generation for a in applied.values()
                if a.generation > 0 and a.objects and set(a.objects) <= set(a.done)),
               default=0)


def running_job(have: ClusterApplied) -> bool:
    """Whether a copy holds a Job not complete at its generation."""
    return any(r.job and r not in have.done for r in have.objects)


def working(applied: Mapping[str, ClusterApplied]) -> int:
    """The newest generation with a Job still running (or about to) on some cluster (0:
    none): the scheduler moves such an application only by force."""
    return max((a.generation for a in applied.values() if a.generation > 0
                and running_job(a)), default=0)


__all__ = ["done_at", "finished", "running_job", "working"]
