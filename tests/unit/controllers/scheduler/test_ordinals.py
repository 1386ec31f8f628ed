"""A bitset's ordinals, sparse or dense, short or long: every set bit, lowest first."""

from __future__ import annotations

import itertools
import random

import pytest

from berth.controllers.scheduler.framework.fleet import ordinals


@pytest.mark.parametrize("seed", range(30))
def test_ordinals_are_the_set_bits_lowest_first(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(20):
        n = rng.choice([1, 7, 8, 9, 63, 64, 65, 200, 1000, 10_000])
        density = rng.choice([0.0, 0.001, 0.01, 0.1, 0.3, 0.9, 1.0])
        bits = sum(1 << i for i in range(n) if rng.random() < density)
        assert list(ordinals(bits)) == [i for i in range(n) if bits >> i & 1]
        k = rng.randrange(0, 6)  # as the samples read them: the first few only
        assert list(itertools.islice(ordinals(bits), k)) == [
            i for i in range(n) if bits >> i & 1][:k]


def test_no_bits_no_ordinals() -> None:
    assert list(ordinals(0)) == []
    assert list(ordinals(1 << 4096)) == [4096]
