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


@pytest.mark.parametrize("eager", ["never", "chosen", "always"])
@pytest.mark.parametrize("seed", range(40))
def test_a_banded_ranking_is_every_entry_sorted(seed: int, eager: str) -> None:
    """The bands' walks begun lazily, or their candidates sorted at once (as ``_eager``
    chooses, or always), give the order of sorting every entry. The choice is an
    argument, not a patched function: compiled, a patch would change nothing."""
    from berth.controllers.scheduler.framework import Fleet
    from berth.controllers.scheduler.framework.ranking import BaseOrder, Ranking
    from berth_testkit.fakes.scheduler import cluster

    rng = random.Random(seed)
    n = rng.randint(1, 300)
    fleet = Fleet([cluster(f"c{i:04d}") for i in range(n)])
    grid = rng.choice([None, 4, 20])  # coarse scores tie often
    scores = [rng.randint(0, grid) / grid if grid else rng.random() for _ in range(n)]
    tiers = [rng.choice([0, 0, 1]) for _ in range(n)]
    base = BaseOrder(fleet, tiers, scores, [{} for _ in range(n)])
    bands = [Band(fleet.all)]
    for _ in range(rng.randint(0, 3)):  # a plugin grouped by value, and overlapping terms
        groups: dict[int, int] = {}
        for i in range(n):
            v = rng.randint(-2, 40)
            groups[v] = groups.get(v, 0) | 1 << i
        bands = split_all(bands, [(bits, v / 40) for v, bits in groups.items()],
                          rng.choice([0.5, 1.0]), f"P{_}")
    feasible = rng.getrandbits(n)
    ranking = Ranking.banded(base, feasible, bands, {},
                             {"never": False, "chosen": None, "always": True}[eager])
    got = [(r.ordinal, r.tier, round(r.score, 12)) for r in ranking]
    every = [base.entry(i, b.delta, b.parts) for b in bands for i in range(n)
             if (b.bits & feasible) >> i & 1]
    every.sort(key=lambda r: (-r.tier, -r.score, r.ordinal))
    assert got == [(r.ordinal, r.tier, round(r.score, 12)) for r in every]
