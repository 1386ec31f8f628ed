"""The capacity index answers as a scan of every cluster's Room does, through updates
(its arrays and lists too)."""

from __future__ import annotations

import random

import pytest

from berth.controllers.scheduler.framework.rooms import LIMIT, STEP, Rooms, shortfall
from berth.controllers.scheduler.framework.types import Room
from berth.store.documents.resources import Resources


def _room(rng: random.Random) -> Room | None:
    if rng.random() < 0.1:
        return None
    alloc = Resources(rng.choice([4000, 8000]), rng.choice([1, 2, 1 << 30]) << 30, 110)
    # few values: ties; below 0: over-committed; 2**60: beyond the score's int64 arrays
    return Room(alloc, Resources(rng.choice([-500, 0, 100, 250, 1000, 4000]),
                                 rng.choice([-1, 0, 1, 2, 1 << 31]) << 29,
                                 rng.choice([0, 1, 50])))


@pytest.mark.parametrize("seed", range(30))
def test_short_agrees_with_a_scan_through_random_updates(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, STEP - 1, STEP, STEP + 1, 3 * STEP + 7, 300])
    rooms = [_room(rng) for _ in range(n)]
    index = Rooms(rooms)
    for _ in range(200):
        if n and rng.random() < 0.5:
            i = rng.randrange(n)
            rooms[i] = _room(rng)
            index.set(i, rooms[i])
        name = rng.choice(["cpu", "memory", "pods", "nvidia.com/gpu"])
        amount = rng.choice([-600, 0, 1, 100, 250, 1000, 4001, 1 << 29])
        want = sum(1 << i for i, r in enumerate(rooms) if r is not None and r.free.get(name)
                   < amount)
        assert index.short(name, amount) == want, (name, amount)
        assert index.judged == sum(1 << i for i, r in enumerate(rooms) if r is not None)
        free = index.free(name)
        assert free.tolist() == [r.free.get(name) if r else 0 for r in rooms]
        if any(abs(v) >= LIMIT for v in free.tolist()):  # the score's int64 would overflow
            assert free.dtype == object
        assert index.allocatable(name).tolist() == [r.allocatable.get(name) if r else 0
                                                    for r in rooms]
        assert index.divisor(name).tolist() == [max(r.allocatable.get(name), 1) if r else 1
                                                for r in rooms]
        assert index.everywhere(name) == all(r.allocatable.get(name) > 0 for r in rooms if r)
        assert index.listed(name) == ([r.allocatable.get(name) if r else 0 for r in rooms],
                                      [r.free.get(name) if r else 0 for r in rooms])
        # a preemption plan's order: 1 << 49 and 1 << 60 asked are summed as Python ints
        need = Resources(rng.choice([0, 500, 3000]), rng.choice([0, 1 << 30, 1 << 49, 1 << 60]),
                         rng.choice([0, 1]))
        bits, limit = rng.getrandbits(max(n, 1)), rng.choice([0, 1, 5, 100])
        scan = sorted((shortfall(need, r.allocatable, r.free), i) for i, r in enumerate(rooms)
                      if r is not None and bits >> i & 1)
        assert index.least_short(need, bits, limit) == scan[:limit], need
