"""A connection replaced while other workers use it is closed only after their requests
could have timed out."""

from __future__ import annotations

from berth.controllers.propagator.kube import Connections


class Conn:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_a_retired_connection_is_closed_later_and_all_at_the_end() -> None:
    now = [0.0]
    conns = Connections(timeout=5.0, clock=lambda: now[0])
    old, newer, last = Conn(), Conn(), Conn()
    conns._retire(old)  # type: ignore[arg-type]
    assert not old.closed  # a worker may be in a request on it
    now[0] = 10.0
    conns._retire(newer)  # type: ignore[arg-type]
    assert not old.closed  # twice the timeout + 5 s: not yet over
    now[0] = 15.0
    conns._retire(last)  # type: ignore[arg-type]
    assert old.closed and not newer.closed
    conns.close()
    assert newer.closed and last.closed
