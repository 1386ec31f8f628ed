"""Bands: refining by all of a plugin's terms at once gives what one term at a time gives."""

from __future__ import annotations

import random

import pytest

from berth.controllers.scheduler.framework.ranking import Band, split, split_all


def _by_candidate(bands: list[Band], n: int) -> dict[int, tuple[float, dict[str, float]]]:
    out = {}
    for band in bands:
        for i in range(n):
            if band.bits >> i & 1:
                assert i not in out, "bands must not overlap"
                out[i] = (round(band.delta, 9), {k: round(v, 9) for k, v in band.parts.items()})
    return out


@pytest.mark.parametrize("seed", range(40))
def test_split_all_is_split_term_by_term(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 200)
    bands = [Band((1 << n) - 1)]
    for plugin in ("A", "B", "C"):
        disjoint = rng.random() < 0.6
        terms: list[tuple[int, float]] = []
        if disjoint:  # a score grouped by value: each candidate in one group at most
            groups: dict[int, int] = {}
            for i in range(n):
                if rng.random() < 0.8:
                    v = rng.randint(0, 100)
                    groups[v] = groups.get(v, 0) | 1 << i
            terms = [(bits, v / 100) for v, bits in groups.items()]
        else:
            terms = [(rng.getrandbits(n), rng.choice([0.0, 0.5, 1.0, -1.0]))
                     for _ in range(rng.randint(0, 5))]
        weight = rng.choice([0.0, 1.0, 2.5])
        one_by_one = bands
        for bits, value in terms:
            if value:
                one_by_one = split(one_by_one, bits, weight * value, plugin)
        at_once = split_all(bands, terms, weight, plugin)
        assert _by_candidate(at_once, n) == _by_candidate(one_by_one, n)
        assert len(at_once) <= len(one_by_one)
        bands = at_once
