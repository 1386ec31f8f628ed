"""What clusters on one API server share (their watches, their Nodes and Pods): made once,
closed when the last reader leaves — also when a reader's connection moves elsewhere."""

from __future__ import annotations

from berth.controllers.propagator.watches import Sharing


class Thing:
    def __init__(self, server: str) -> None:
        self.server, self.open = server, True


def sharing() -> tuple[Sharing[Thing], list[tuple[str, Thing]]]:
    closed: list[tuple[str, Thing]] = []

    def close(server: str, thing: Thing) -> None:
        thing.open = False
        closed.append((server, thing))

    return Sharing(close), closed


def alive(thing: Thing) -> bool:
    return thing.open


def test_clusters_on_one_server_share_one_thing_until_the_last_leaves() -> None:
    shared, closed = sharing()
    first, fresh = shared.join("a", "s1", lambda: Thing("s1"), alive)
    assert fresh
    again, fresh = shared.join("b", "s1", lambda: Thing("s1"), alive)
    assert again is first and not fresh
    assert shared.members("s1") == {"a", "b"}
    assert shared.of("a") is shared.of("b") is first
    shared.leave("a")
    assert not closed and shared.members("s1") == {"b"}
    shared.leave("b")
    assert closed == [("s1", first)] and shared.members("s1") == frozenset()
    assert shared.of("b") is None
    shared.leave("b")  # twice: nothing more
    assert len(closed) == 1


def test_a_cluster_whose_connection_reaches_another_server_leaves_the_first() -> None:
    shared, closed = sharing()
    old, _ = shared.join("a", "s1", lambda: Thing("s1"), alive)
    new, fresh = shared.join("a", "s2", lambda: Thing("s2"), alive)
    assert fresh and new is not old
    assert closed == [("s1", old)]  # it was the last on s1
    assert shared.members("s1") == frozenset() and shared.members("s2") == {"a"}
    assert shared.clusters() == ["a"]


def test_a_thing_that_stopped_is_closed_and_made_anew() -> None:
    shared, closed = sharing()
    first, _ = shared.join("a", "s1", lambda: Thing("s1"), alive)
    first.open = False  # e.g. its watches were closed under it
    second, fresh = shared.join("b", "s1", lambda: Thing("s1"), alive)
    assert fresh and second is not first and closed == [("s1", first)]
    assert shared.members("s1") == {"a", "b"}
    assert shared.clear() == [second] and shared.members("s1") == frozenset()
    assert shared.of("a") is None
