"""What entitles a propagator replica, or an agent, to send requests to a cluster.

It serves the cluster (a propagator replica: the shard's claim, ``shard.py``; an
agent: its lease) and, by its own clock, its lease surely lives — a replica
paused past its lease sends nothing more when it resumes
(``execute.Guarded`` asks before each write).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

# Whether this replica serves a cluster, held while requests go there (shard.py).
Gate = Callable[[str], AbstractContextManager[bool]]
HANDED_OVER = "served by another propagator replica now"
LAPSED = "this replica's lease may have ended (not renewed in time): nothing sent"


def always(_cid: str) -> AbstractContextManager[bool]:
    return nullcontext(True)


class Authority(Protocol):
    """What entitles this replica to send requests to a cluster."""

    def serving(self, cid: str) -> AbstractContextManager[bool]:
        """True while this replica serves ``cid``: a hand-over waits for the block to end."""
        ...

    def holds(self, cid: str) -> bool:
        """Whether a write sent to ``cid`` now surely arrives within this replica's lease,
        by its own clock: asked before each write, so that a replica paused past its
        lease sends nothing more when it resumes (``runtime/tenure.py``)."""
        ...


class Leased:
    """A leader's authority (an agent's): every cluster, each write while its lease holds
    (``holds``: always, without a lease)."""

    def __init__(self, holds: Callable[[], bool] | None = None) -> None:
        self._holds = holds

    def serving(self, cid: str) -> AbstractContextManager[bool]:
        return nullcontext(True)

    def holds(self, cid: str) -> bool:
        return self._holds is None or self._holds()
