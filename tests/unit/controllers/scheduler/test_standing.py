"""What a sweep decides first: how many candidates overtook each one (framework.standing)."""

from __future__ import annotations

import random

from berth.controllers.scheduler.framework.standing import overtaken


def by_definition(now: dict[str, int], was: dict[str, int]) -> dict[str, int]:
    """The count as defined, pair by pair."""
    if not was:
        return dict.fromkeys(now, 0)
    return {c: 0 if c not in was else sum(
        1 for d in now if now[d] < now[c] and (d not in was or was[d] >= was[c]) and d != c)
        for c in now}


def places(*keys: str) -> dict[str, int]:
    return {k: i for i, k in enumerate(keys)}


def test_nothing_known_of_before_orders_nothing() -> None:
    assert overtaken(places("a", "b"), {}) == {"a": 0, "b": 0}
    assert overtaken({}, places("a")) == {}


def test_an_unchanged_order_overtakes_nobody() -> None:
    assert overtaken(places("a", "b", "c"), places("a", "b", "c")) == {"a": 0, "b": 0, "c": 0}


def test_one_that_rose_past_two_counts_for_both_and_not_for_itself() -> None:
    assert overtaken(places("c", "a", "b", "d"), places("a", "b", "c", "d")) == {
        "c": 0, "a": 1, "b": 1, "d": 0}


def test_what_fell_behind_does_not_make_up_for_what_passed() -> None:
    """b: one fell behind it and one passed it (net fall 0); d: nobody passed it."""
    assert overtaken(places("c", "b", "a", "d"), places("a", "b", "c", "d")) == {
        "c": 0, "b": 1, "a": 2, "d": 0}


def test_a_reversal_is_everyone_passed_by_all_ahead() -> None:
    assert overtaken(places("d", "c", "b", "a"), places("a", "b", "c", "d")) == {
        "d": 0, "c": 1, "b": 2, "a": 3}


def test_a_newcomer_ahead_overtakes_and_is_itself_overtaken_by_nobody() -> None:
    assert overtaken(places("n", "a", "b"), places("a", "b")) == {"n": 0, "a": 1, "b": 1}
    assert overtaken(places("a", "n", "b"), places("a", "b", "gone")) == {
        "a": 0, "n": 0, "b": 1}


def test_tied_places_are_not_ahead_of_each_other() -> None:
    assert overtaken({"a": 0, "b": 0, "c": 2}, places("c", "a", "b")) == {
        "a": 0, "b": 0, "c": 2}


def test_it_counts_as_defined_on_random_orders() -> None:
    rng = random.Random(7)
    for _ in range(300):
        keys = [f"c{i}" for i in range(rng.randint(0, 30))]
        was = {k: rng.randrange(len(keys)) for k in keys if rng.random() < 0.9}
        now = {k: rng.randrange(len(keys)) for k in keys if rng.random() < 0.9}
        assert overtaken(now, was) == by_definition(now, was), (now, was)
