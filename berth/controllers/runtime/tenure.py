"""How long a lease surely lives, by this process's own clock.

etcd fences what a replica writes to etcd (a term compared in every
transaction), but nothing fences what it sends to a cluster's API: a replica
paused past its lease (SIGSTOP, a stalled VM, a long collection) resumes with
requests half made, and the cluster takes them, though another replica leads
by then and may have undone what they do. So such a request goes out only
while the lease surely lives.

etcd counts a lease's TTL from when it receives the grant or the keep-alive,
which is after this process sent it: the lease lives at least until the
sending time plus the TTL etcd answered, on any clock that runs at this one's
pace (``time.monotonic``, which a pause does not stop). :meth:`Tenure.holds`
is true until then, less a margin for the request's way to the cluster.

What is left is a pause between the check and the request leaving the
process: no client of an API without fencing tokens can close that (client-go's
leader election says the same of itself); it is microseconds wide, where a
paused process resumes at any point of seconds of work.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


def margin_for(ttl: float) -> float:
    """The margin a request to a cluster is given: a tenth of the TTL, at most 1 s."""
    return min(1.0, ttl / 10)


class Tenure:
    def __init__(self, margin: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.margin = margin
        self.clock = clock
        self._lock = threading.Lock()
        self._until = -math.inf  # the lease surely lives until then (clock's time)

    def renewed(self, sent: float, ttl: float) -> None:
        """etcd answered a grant or keep-alive sent at ``sent`` (the clock's time before
        sending) with ``ttl`` seconds left."""
        with self._lock:
            self._until = max(self._until, sent + ttl)

    def end(self) -> None:
        """The lease is over (stepped down, expired, revoked): nothing holds until renewed."""
        with self._lock:
            self._until = -math.inf

    def left(self) -> float:
        """Seconds the lease surely lives still (negative: maybe over)."""
        with self._lock:
            return self._until - self.clock()

    def holds(self) -> bool:
        """Whether a request sent now surely reaches its cluster within the lease."""
        return self.left() > self.margin


__all__ = ["Tenure", "margin_for"]
