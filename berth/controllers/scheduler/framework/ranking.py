"""Rankings: feasible candidates best first, built only as far as someone reads.

Most of a candidate's score does not depend on the subject (Krake's
metric score of a cluster): :class:`BaseOrder` sorts the whole fleet by it
once per change of metric values. A subject's ranking is then that order
restricted to its feasible set, shifted per *band* (the candidates that share
the same per-subject additions, e.g. those matching a preferred affinity
term), with a few *overrides* (stickiness: the clusters it runs on now)
merged in. Picking the best cluster walks the order to the first feasible
candidate — no per-candidate work for the thousands behind it.

A :class:`Ranking` is a lazy ``Sequence[Ranked]``: indexing materializes
entries up to the index; ``len`` is known from the feasible set at once.

Bands suit a per-subject score of a few values. One of many values over many
feasible candidates (Capacity's 101 over thousands of clusters) cuts them into
a hundred bands, each begun by a walk of the whole order, and splitting them
costs an AND per band and value. From ``DENSE_FROM`` feasible candidates the
per-subject scores are therefore :class:`Additions` instead: one array entry
per feasible candidate, summed in the same order as the bands would be (so
the scores are the same floats), and the best read in growing batches. Below
it, a score with values per candidate still cuts a few candidates into
nearly as many bands (31 into 23 at the median with Capacity's), so such a
score makes :class:`FewAdditions`: the same, in lists, sorted at once.

Over 600 lines, on purpose: the three forms of one order (the dense list, the
bands, the additions) are one kernel, held equal by one set of property tests;
they share :class:`Ranked`, the walks and the merge.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, overload

import numpy as np
import numpy.typing as npt

from berth.controllers.scheduler.framework.fleet import Fleet, as_indices, as_mask, ordinals
from berth.controllers.scheduler.framework.types import Candidate

CHUNK: Final = 64  # candidates per step of an ordered walk
FEW: Final = 8  # candidates an ordered walk sorts at once (a chunk step reads the whole bitset;
#         in a large fleet, up to sqrt(n / CHUNK))
EAGER: Final = 64  # feasible candidates up to which a ranking of as many bands as half of them
#            is sorted at once
DENSE_FROM = 128  # feasible candidates from which per-subject values are arrays (Additions),
#                  below which lists (FewAdditions): chosen on whole decisions of the
#                  diverse workload with requests (docs/benchmark-history.md)
FIRST_READ: Final = 16  # entries the first batch of an Additions walk sorts (then 8 times more)


@dataclass(slots=True)
class Ranked:
    candidate: Candidate
    tier: int
    score: float
    scores: dict[str, float] = field(default_factory=dict)  # plugin → weighted score
    ordinal: int = -1
    shared: bool = False  # exactly the fleet's entry for this candidate: the same for all

    @property
    def order(self) -> tuple[int, float]:
        return (self.tier, self.score)


def _sort_key(r: Ranked) -> tuple[int, float, int]:
    return (-r.tier, -r.score, r.ordinal)


class BaseOrder:
    """Every candidate of a fleet ranked by the subject-independent scores."""

    __slots__ = ("_arrays", "chunks", "fleet", "order", "parts", "position", "scores", "tiered",
                 "tiers")

    def __init__(self, fleet: Fleet, tiers: list[int], scores: list[float],
                 parts: list[dict[str, float]]) -> None:
        self.fleet, self.tiers, self.scores, self.parts = fleet, tiers, scores, parts
        self.tiered = len(set(tiers)) > 1  # candidates in more than one tier
        self.order = sorted(range(len(fleet)), key=lambda i: (-tiers[i], -scores[i], i))
        self.position = [0] * len(fleet)
        for pos, i in enumerate(self.order):
            self.position[i] = pos
        self.chunks = []
        for s in range(0, len(self.order), CHUNK):
            mask = 0
            for i in self.order[s : s + CHUNK]:
                mask |= 1 << i
            self.chunks.append(mask)
        self._arrays: tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None = None

    def arrays(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """``tiers`` and ``scores`` as arrays, made on first use (by :class:`Additions`)."""
        found = self._arrays
        if found is None:
            found = self._arrays = (np.array(self.tiers, np.int64),
                                    np.array(self.scores, np.float64))
        return found

    def walk(self, bits: int) -> Iterator[int]:
        """The ordinals in ``bits``, best first (ties in ordinal order)."""
        position = self.position
        k = bits.bit_count()
        if k <= FEW or k * k * CHUNK <= len(position):  # the first of k is found after
            yield from sorted(ordinals(bits), key=position.__getitem__)  # ~n/(CHUNK k) steps
            return
        for mask in self.chunks:
            hit = bits & mask
            if hit:
                yield from sorted(ordinals(hit), key=position.__getitem__)
                bits &= ~mask
                if not bits:
                    return

    def entry(self, i: int, delta: float = 0.0,
              extra: dict[str, float] | None = None) -> Ranked:
        """Candidate ``i``'s entry; its ``scores`` may be shared: copy before changing it."""
        scores = self.parts[i]
        if extra:
            scores = dict(scores)
            for name, value in extra.items():
                scores[name] = scores.get(name, 0.0) + value
        return Ranked(self.fleet.candidates[i], self.tiers[i], self.scores[i] + delta, scores, i,
                      shared=not extra and not delta)


@dataclass(slots=True)
class Band:
    """Feasible candidates that get the same per-subject additions."""

    bits: int
    delta: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)  # plugin → weighted addition


class Lazy(Sequence[Ranked]):
    """A sequence of known length, read from its source only as far as it is indexed."""

    def __init__(self, size: int, source: Iterator[Ranked]) -> None:
        self._size = size
        self._done: list[Ranked] = []
        self._source: Iterator[Ranked] | None = source

    def __len__(self) -> int:
        return self._size

    def _fill(self, n: int) -> None:
        source = self._source
        if source is None:
            return
        done = self._done
        while len(done) < n:
            nxt = next(source, None)
            if nxt is None:
                self._source = None
                return
            done.append(nxt)

    @overload
    def __getitem__(self, index: int) -> Ranked: ...

    @overload
    def __getitem__(self, index: slice) -> list[Ranked]: ...

    def __getitem__(self, index: int | slice) -> Ranked | list[Ranked]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._size)
            self._fill(stop)
            return self._done[start:stop:step]
        if index < 0:
            index += self._size
        self._fill(index + 1)
        return self._done[index]

    def __iter__(self) -> Iterator[Ranked]:
        i = 0
        while True:
            self._fill(i + 1)
            if i >= len(self._done):
                return
            yield self._done[i]
            i += 1


class Ranking(Lazy):
    """Feasible candidates best first, materialized on demand."""

    def __init__(self, fleet: Fleet, feasible: int, source: Iterator[Ranked],
                 lookup: Callable[[int], Ranked],
                 within: Callable[[int], Iterator[Ranked]] | None = None) -> None:
        super().__init__(feasible.bit_count(), source)
        self.fleet = fleet
        self.feasible = feasible
        self._lookup = lookup
        self._within = within

    def within(self, bits: int) -> Iterator[Ranked]:
        """The entries of the candidates in ``bits``, best first, reading none of the
        others (a spread's pick among the clusters of a few zones, when the best of the
        ranking are all in another)."""
        if self._within is None:
            return (r for r in self if bits >> r.ordinal & 1)
        return self._within(self.feasible & bits)

    @classmethod
    def of(cls, fleet: Fleet, ranked: list[Ranked]) -> Ranking:
        """A ranking already computed (sorted best first)."""
        feasible = 0
        by_ordinal: dict[int, Ranked] = {}
        for r in ranked:
            if r.ordinal < 0:
                r.ordinal = fleet.by_key[r.candidate.key]
            feasible |= 1 << r.ordinal
            by_ordinal[r.ordinal] = r
        out = cls(fleet, feasible, iter(()), by_ordinal.__getitem__)
        out._done, out._source = list(ranked), None
        return out

    @classmethod
    def banded(cls, base: BaseOrder, feasible: int, bands: list[Band],
               overrides: dict[int, Ranked], eager: bool | None = None) -> Ranking:
        """``base`` restricted to ``feasible``, shifted per band, with ``overrides``.

        ``bands`` partition the candidates (no bands: one band of all, unshifted).
        ``eager``: whether the bands' candidates are sorted at once rather than their
        walks merged; None lets :func:`_eager` choose by their numbers (a test asks for
        either: the order is the same).
        """
        bands = bands or [Band(base.fleet.all)]
        taken = 0
        for i in overrides:
            taken |= 1 << i

        def walk(bits: int) -> Iterator[Ranked]:
            walks = [(b, band) for band in bands if (b := band.bits & bits & ~taken)]
            source = (iter(()) if not walks else _band_walk(base, *walks[0]) if len(walks) == 1
                      else _sorted(base, walks) if (
                          _eager(bits.bit_count(), len(walks)) if eager is None else eager)
                      else _merged(base, walks))
            return _with(source, _among(overrides, bits)) if overrides else source

        plain = lookup(base, bands)

        def find(i: int) -> Ranked:
            hit = overrides.get(i)
            return hit if hit is not None else plain(i)

        return cls(base.fleet, feasible, walk(feasible), find if overrides else plain, walk)

    @classmethod
    def added(cls, base: BaseOrder, adds: Additions | FewAdditions,
              overrides: dict[int, Ranked]) -> Ranking:
        """:meth:`banded` for per-subject scores held as :class:`Additions`."""
        taken = 0
        for i in overrides:
            taken |= 1 << i

        def walk(bits: int) -> Iterator[Ranked]:
            source = adds.walk(taken | (adds.feasible & ~bits))
            return _with(source, _among(overrides, bits)) if overrides else source

        plain = adds.lookup

        def find(i: int) -> Ranked:
            hit = overrides.get(i)
            return hit if hit is not None else plain(i)

        return cls(base.fleet, adds.feasible, walk(adds.feasible), find if overrides else plain,
                   walk)

    def get(self, key: str) -> Ranked | None:
        """The entry of the candidate ``key`` if it is feasible, without walking."""
        i = self.fleet.by_key.get(key)
        if i is None or not self.feasible >> i & 1:
            return None
        return self._lookup(i)


def lookup(base: BaseOrder, bands: list[Band]) -> Callable[[int], Ranked]:
    """Candidate ordinal → its entry in a banded ranking (without walking it)."""
    def find(i: int) -> Ranked:
        for band in bands:
            if band.bits >> i & 1:
                return base.entry(i, band.delta, band.parts)
        return base.entry(i)
    return find


class Additions:
    """A subject's additions to the base scores of its feasible candidates, one array
    entry per candidate (ordinals ascending): the bands' deltas, then each per-subject
    plugin's weighted values, added in the order :func:`split_all` would add them, so
    every score is the same float. For a large feasible set (``DENSE_FROM``)."""

    __slots__ = ("_band", "_parts", "bands", "base", "delta", "feasible", "idx")

    def __init__(self, base: BaseOrder, feasible: int, bands: list[Band]) -> None:
        n = len(base.fleet)
        self.base, self.feasible = base, feasible
        self.bands = bands = bands or [Band(base.fleet.all)]
        self.idx = idx = as_indices(feasible, n)
        self._band = np.zeros(len(idx), np.intp)
        for b, band in enumerate(bands):
            if b and band.bits & feasible:
                self._band[as_mask(band.bits, n)[idx]] = b
        self.delta: npt.NDArray[np.float64] = (
            np.full(len(idx), bands[0].delta) if len(bands) == 1
            else np.array([band.delta for band in bands], np.float64)[self._band])
        # plugin → (its weighted additions, where it added anything)
        self._parts: list[tuple[str, npt.NDArray[np.float64], npt.NDArray[np.bool_]]] = []

    def add_values(self, values: npt.NDArray[np.float64], weight: float, plugin: str) -> None:
        """``plugin``'s value of each feasible candidate (aligned with ``idx``)."""
        weighted = weight * values
        self.delta = self.delta + weighted
        self._parts.append((plugin, weighted, values != 0))

    def add_terms(self, terms: list[tuple[int, float]], weight: float, plugin: str) -> None:
        """``plugin``'s terms as :func:`split_all` takes them: the candidates of a
        term's bits get ``weight`` times its value more."""
        n, idx = len(self.base.fleet), self.idx
        weighted = np.zeros(len(idx), np.float64)
        touched = np.zeros(len(idx), np.bool_)
        for bits, value in terms:
            if not (value and bits & self.feasible):
                continue
            inside = as_mask(bits, n)[idx]
            self.delta[inside] += weight * value
            weighted[inside] += weight * value
            touched |= inside
        if touched.any():
            self._parts.append((plugin, weighted, touched))

    def entry(self, j: int) -> Ranked:
        """The entry of the ``j``-th feasible candidate."""
        parts = _with_parts(self.bands[self._band[j]].parts, [
            (plugin, float(w[j])) for plugin, w, touched in self._parts if touched[j]])
        return self.base.entry(int(self.idx[j]), float(self.delta[j]), parts)

    def lookup(self, i: int) -> Ranked:
        """The entry of feasible candidate ``i`` (an ordinal), without walking."""
        return self.entry(int(np.searchsorted(self.idx, i)))

    def walk(self, taken: int) -> Iterator[Ranked]:
        """The feasible candidates but ``taken``, best first (``_sort_key``): per tier,
        the best ``FIRST_READ`` found by a partition and sorted, then eight times as
        many of the rest, and so on: reading the best few costs a few passes over
        the arrays, reading all of them a sort."""
        tiers, scores = self.base.arrays()
        idx = self.idx
        if not idx.size:
            return
        if taken:
            rest = np.flatnonzero(~as_mask(taken, len(self.base.fleet))[idx])
            if not rest.size:
                return
        else:
            rest = None  # all of them, in order: positions need not be made
        per_tier: list[npt.NDArray[np.intp] | None] = [rest]
        if self.base.tiered:
            levels = tiers[idx if rest is None else idx[rest]]
            if levels.min() != levels.max():
                every = np.arange(len(idx)) if rest is None else rest
                per_tier = [every[levels == t] for t in np.unique(levels)[::-1]]
        score = scores[idx] + self.delta
        for sub in per_tier:  # None: every position, each its own index
            neg = -score if sub is None else -score[sub]
            k = FIRST_READ
            while neg.size:
                if neg.size > k:
                    cut = np.partition(neg, k - 1)[k - 1]
                    chosen = neg <= cut
                    batch = np.flatnonzero(chosen) if sub is None else sub[chosen]
                    keys = neg[chosen]
                else:
                    batch = np.arange(neg.size) if sub is None else sub
                    keys, chosen = neg, None
                for j in batch[np.argsort(keys, kind="stable")]:  # ties: ordinal order
                    yield self.entry(int(j))
                if chosen is None:
                    break
                # Only when more is read (most reads stop in the first batch).
                left = ~chosen
                sub, neg = np.flatnonzero(left) if sub is None else sub[left], neg[left]
                k *= 8


class FewAdditions:
    """:class:`Additions` for a few feasible candidates (below ``DENSE_FROM``), in
    lists: numpy's fixed cost per call outweighs its speed there, and a score of many
    values (Capacity's) would cut so few candidates into nearly as many bands. The
    same sums in the same order, so the same floats; values come as lists."""

    __slots__ = ("_band", "_parts", "bands", "base", "delta", "feasible", "idx")

    def __init__(self, base: BaseOrder, feasible: int, bands: list[Band]) -> None:
        self.base, self.feasible = base, feasible
        self.bands = bands = bands or [Band(base.fleet.all)]
        self.idx = idx = list(ordinals(feasible))
        self._band = band_of = [0] * len(idx)
        if len(bands) > 1:  # a candidate's band: its bit in the band's bytes (a walk of each
            size = (len(base.fleet) + 7) >> 3  # band's members cost twice as much)
            for b in range(1, len(bands)):
                raw = bands[b].bits.to_bytes(size, "little")
                for j, i in enumerate(idx):
                    if raw[i >> 3] >> (i & 7) & 1:
                        band_of[j] = b
        deltas = [band.delta for band in bands]
        self.delta = [deltas[b] for b in band_of]
        # plugin → (its weighted additions, where it added anything)
        self._parts: list[tuple[str, list[float], list[bool]]] = []

    def add_values(self, values: list[float], weight: float, plugin: str) -> None:
        """``plugin``'s value of each feasible candidate (aligned with ``idx``)."""
        delta = self.delta
        weighted = [0.0] * len(values)
        for j, v in enumerate(values):
            weighted[j] = w = weight * v
            delta[j] += w
        self._parts.append((plugin, weighted, [v != 0 for v in values]))

    def add_terms(self, terms: list[tuple[int, float]], weight: float, plugin: str) -> None:
        """As :meth:`Additions.add_terms`."""
        idx, delta = self.idx, self.delta
        weighted = [0.0] * len(idx)
        touched = [False] * len(idx)
        for bits, value in terms:
            if not value:
                continue
            for i in ordinals(bits & self.feasible):
                j = bisect_left(idx, i)
                delta[j] += weight * value
                weighted[j] += weight * value
                touched[j] = True
        if any(touched):
            self._parts.append((plugin, weighted, touched))

    def entry(self, j: int) -> Ranked:
        """The entry of the ``j``-th feasible candidate."""
        parts = _with_parts(self.bands[self._band[j]].parts, [
            (plugin, w[j]) for plugin, w, touched in self._parts if touched[j]])
        return self.base.entry(self.idx[j], self.delta[j], parts)

    def lookup(self, i: int) -> Ranked:
        """The entry of feasible candidate ``i`` (an ordinal), without walking."""
        return self.entry(bisect_left(self.idx, i))

    def walk(self, taken: int) -> Iterator[Ranked]:
        """The feasible candidates but ``taken``, best first (``_sort_key``), sorted at
        once: they are few. A stable sort of the positions keeps ties in ordinal order."""
        tiers, scores, delta, idx = self.base.tiers, self.base.scores, self.delta, self.idx
        neg = [-(scores[i] + delta[j]) for j, i in enumerate(idx)]
        order = [j for j, i in enumerate(idx) if not taken >> i & 1] if taken else list(
            range(len(idx)))
        order.sort(key=neg.__getitem__)
        if self.base.tiered:  # then by tier first (stable: the scores' order stays within)
            order.sort(key=lambda j: -tiers[idx[j]])
        for j in order:
            yield self.entry(j)


def _with_parts(parts: dict[str, float], mine: list[tuple[str, float]]) -> dict[str, float]:
    """A band's parts with one candidate's own additions (``mine``) added: a copy when
    there are any, the band's shared dict when there are none."""
    if not mine:
        return parts
    out = dict(parts)
    for plugin, value in mine:
        out[plugin] = out.get(plugin, 0.0) + value
    return out


def _among(overrides: dict[int, Ranked], bits: int) -> list[Ranked]:
    """The ``overrides`` of candidates in ``bits``, in ranking order."""
    return sorted((r for i, r in overrides.items() if bits >> i & 1), key=_sort_key)


def _with(walk: Iterator[Ranked], pending: list[Ranked]) -> Iterator[Ranked]:
    """``walk`` with the (few, sorted) ``pending`` entries merged in."""
    k = 0
    for r in walk:
        key = _sort_key(r)
        while k < len(pending) and _sort_key(pending[k]) <= key:
            yield pending[k]
            k += 1
        yield r
    yield from pending[k:]


def _band_walk(base: BaseOrder, bits: int, band: Band) -> Iterator[Ranked]:
    for i in base.walk(bits):
        yield base.entry(i, band.delta, band.parts)


def _eager(candidates: int, bands: int) -> bool:
    """Whether sorting every candidate costs less than merging the bands' walks: for
    a few candidates cut into many bands (with Capacity's score: 23 bands for 31
    candidates at the median). A merge reads only as far as the best few are read, so
    for many candidates, or few bands, it costs less; for few candidates in many
    bands, sorting them all does."""
    return candidates <= EAGER and 2 * bands >= candidates


def _sorted(base: BaseOrder, walks: list[tuple[int, Band]]) -> Iterator[Ranked]:
    """The bands' candidates in one order (``_sort_key``), sorted at once (see
    :func:`_eager`); the entries are made as they are read."""
    tiers, scores = base.tiers, base.scores
    keyed: list[tuple[int, float, int, Band]] = []
    for bits, band in walks:
        delta = band.delta
        keyed.extend((-tiers[i], -(scores[i] + delta), i, band) for i in ordinals(bits))
    keyed.sort()  # the ordinals differ: bands are never compared
    for _, _, i, band in keyed:
        yield base.entry(i, band.delta, band.parts)


def _merged(base: BaseOrder, walks: list[tuple[int, Band]]) -> Iterator[Ranked]:
    """The bands' walks merged into one order (``_sort_key``), each walk begun only when
    its best possible entry — the best base score among all the bands' candidates
    plus the band's delta — could come next: reading the best few of a ranking cut
    into a hundred bands (a score with many values, as Capacity's) begins the few
    bands near the top."""
    every = 0
    for bits, _ in walks:
        every |= bits
    top = next(base.walk(every))
    bound_tier, bound_score = -base.tiers[top], base.scores[top]
    pending = sorted(walks, key=lambda w: -w[1].delta)
    heap: list[tuple[tuple[int, float, int], Ranked, Iterator[Ranked]]] = []
    k = 0
    while True:
        while k < len(pending) and (not heap or (
                bound_tier, -(bound_score + pending[k][1].delta)) <= heap[0][0][:2]):
            walk = _band_walk(base, *pending[k])
            k += 1
            first = next(walk, None)
            if first is not None:
                heapq.heappush(heap, (_sort_key(first), first, walk))
        if not heap:
            return
        _, r, walk = heap[0]
        yield r
        after = next(walk, None)
        if after is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (_sort_key(after), after, walk))


def split(bands: list[Band], bits: int, value: float, plugin: str) -> list[Band]:
    """Refine ``bands`` so that the candidates of ``bits`` get ``value`` more."""
    out: list[Band] = []
    for band in bands:
        inside, outside = band.bits & bits, band.bits & ~bits
        if inside:
            parts = dict(band.parts)
            parts[plugin] = parts.get(plugin, 0.0) + value
            out.append(Band(inside, band.delta + value, parts))
        if outside:
            out.append(Band(outside, band.delta, band.parts))
    return out


def split_all(bands: list[Band], terms: list[tuple[int, float]], weight: float,
              plugin: str) -> list[Band]:
    """Refine ``bands`` by every term of one plugin: the candidates of a term's bits get
    ``weight`` times its value more. Terms that share no candidate (a score grouped
    by value, as Capacity's 101) split each band once, not every band made so far."""
    terms = [(bits, value) for bits, value in terms if value and bits]
    union = 0
    for bits, _ in terms:
        union |= bits
    if sum(bits.bit_count() for bits, _ in terms) != union.bit_count():  # they overlap
        for bits, value in terms:
            bands = split(bands, bits, weight * value, plugin)
        return bands
    out: list[Band] = []
    for band in bands:
        if not band.bits & union:
            out.append(band)
            continue
        for bits, value in terms:
            inside = band.bits & bits
            if inside:
                parts = dict(band.parts)
                parts[plugin] = parts.get(plugin, 0.0) + weight * value
                out.append(Band(inside, band.delta + weight * value, parts))
        rest = band.bits & ~union
        if rest:
            out.append(Band(rest, band.delta, band.parts))
    return out


__all__ = ["CHUNK", "DENSE_FROM", "Additions", "Band", "BaseOrder", "FewAdditions", "Lazy",
           "Ranked", "Ranking", "lookup", "split", "split_all"]
