"""Who overtook whom in a fleet's order: what a sweep after a change decides first.

A subject placed on the best candidate it could have sits there because those
ahead of it did not fit it. After a change of the scores that do not depend on
the subject (metric values), it can move only to a candidate that is ahead of
its target now and was not before: one that *overtook* the target. Those ahead
before and still ahead were no fit then and are none now (its constraints on
them aside); those that fell behind take nothing. So the number of candidates
that overtook a target is how likely its subjects are to move, and a target
nothing overtook keeps them (unless it stops fitting them). The net fall of
the target's place, which counted the overtaken against the overtakers, ranked
a target that ten passed and ten fell behind with one nobody passed.
"""

from __future__ import annotations

from itertools import groupby


def overtaken(now: dict[str, int], was: dict[str, int]) -> dict[str, int]:
    """For each candidate of ``now`` (its place, 0 the best), how many candidates are
    ahead of it now that were not before (behind it or not in the fleet, ``was``).
    All 0 when nothing is known of before (``was`` empty)."""
    if not was:
        return dict.fromkeys(now, 0)
    # Places before, ranked 1..m (tied places alike: neither was ahead of the other); a
    # candidate new to the fleet ranks after all of them.
    rank_of = {place: rank for rank, place in enumerate(sorted(set(was.values())), 1)}
    before = {key: rank_of[place] for key, place in was.items()}
    newcomer = len(rank_of) + 1
    size = newcomer
    tree = [0] * (size + 1)  # a Fenwick tree over the ranks before: how many seen so far
    out: dict[str, int] = {}
    seen = 0
    # In order of place now; candidates tied in place now are not ahead of each other.
    for _, tied in groupby(sorted(now, key=now.__getitem__), key=now.__getitem__):
        group = list(tied)
        for key in group:
            rank = before.get(key)
            if rank is None:
                out[key] = 0  # not in the fleet before: no subject was placed on it then
                continue
            ahead_before = 0  # of those seen (ahead now), how many were ahead before too
            i = rank - 1
            while i > 0:
                ahead_before += tree[i]
                i -= i & -i
            out[key] = seen - ahead_before
        for key in group:
            i = before.get(key, newcomer)
            while i <= size:
                tree[i] += 1
                i += i & -i
            seen += 1
    return out


__all__ = ["overtaken"]
