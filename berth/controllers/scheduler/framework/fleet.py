"""A Fleet: the candidates of one kind and namespace, frozen, with bitset indexes.

Candidates get ordinals (their position, sorted by key); a set of candidates
is a Python int whose bit *i* stands for ordinal *i*. AND, OR and NOT over
10,000 candidates then cost about a microsecond each, so a filter answers for
every candidate at once instead of once per candidate.

A Fleet is immutable once built and is what one scheduling attempt decides
on. Indexes are built lazily and kept in the Fleet: ``structural`` ones
(labels, custom resources, health, taints) live as long as the candidates do;
``metric`` ones (values, the subject-independent score order) only as long
as the metric values do — :meth:`with_metrics` shares the first kind with a
new Fleet when only metric values changed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

from berth.controllers.scheduler.framework.types import Candidate

T = TypeVar("T")
S = TypeVar("S")


def ordinals(bits: int) -> Iterator[int]:
    """The ordinals in ``bits``, lowest first.

    A sparse set is walked a set bit at a time: each step is a few operations on the
    whole integer, which cost in proportion to its length. Any other set is read a
    byte at a time from its bytes, which is faster the larger the fleet."""
    size = (bits.bit_length() + 7) >> 3
    if bits.bit_count() << 3 < size:
        while bits:
            low = bits & -bits
            yield low.bit_length() - 1
            bits ^= low
        return
    for k, byte in enumerate(bits.to_bytes(size, "little")):
        if byte:
            base = k << 3
            for i in _BYTE_ORDINALS[byte]:
                yield base + i


_BYTE_ORDINALS: Final = tuple(tuple(i for i in range(8) if b >> i & 1) for b in range(256))


def as_mask(bits: int, n: int) -> npt.NDArray[np.bool_]:
    """``bits`` over ``n`` candidates as one boolean per ordinal (a few microseconds for
    10,000 candidates, where :func:`ordinals` steps through the members in Python)."""
    raw = np.frombuffer(bits.to_bytes((n + 7) >> 3, "little"), np.uint8)
    return np.unpackbits(raw, count=n, bitorder="little").view(np.bool_)


def as_indices(bits: int, n: int) -> npt.NDArray[np.intp]:
    """The ordinals in ``bits`` (of ``n`` candidates), lowest first, as an array."""
    return np.flatnonzero(as_mask(bits, n))


def popcount(bits: int) -> int:
    return bits.bit_count()


def bits_of(ords: Iterator[int] | Sequence[int]) -> int:
    out = 0
    for o in ords:
        out |= 1 << o
    return out


def sieve(within: int, checks: Iterable[tuple[int, S]]) -> list[tuple[S, int]]:
    """Checks in order, each ``(passing, status)``: who fails first, grouped by status.

    The set form of a filter that tries its conditions one after another and
    rejects a candidate with the first that fails. ``checks`` may be lazy: it
    is not read further once nothing is left.
    """
    out: list[tuple[S, int]] = []
    for passing, status in checks:
        failed = within & ~passing
        if failed:
            out.append((status, failed))
            within &= passing
        if not within:
            break
    return out


_MISSING: Final = object()  # what a memo holds for a key it has not built


class Fleet:
    """Candidates of one (kind, namespace) at one state of the world."""

    __slots__ = (
        "_lock",
        "all",
        "by_key",
        "cand_epoch",
        "candidates",
        "keys",
        "metric",
        "metric_epoch",
        "structural",
    )

    def __init__(self, candidates: Sequence[Candidate], *, cand_epoch: int = 0,
                 metric_epoch: int = 0, structural: dict[Any, Any] | None = None) -> None:
        self.candidates: tuple[Candidate, ...] = tuple(candidates)
        self.keys: tuple[str, ...] = tuple(c.key for c in self.candidates)
        self.by_key: dict[str, int] = {k: i for i, k in enumerate(self.keys)}
        self.all = (1 << len(self.candidates)) - 1
        self.cand_epoch = cand_epoch
        self.metric_epoch = metric_epoch
        self.structural: dict[Any, Any] = {} if structural is None else structural
        self.metric: dict[Any, Any] = {}
        self._lock = threading.Lock()

    @property
    def epoch(self) -> tuple[int, int]:
        return (self.cand_epoch, self.metric_epoch)

    def __len__(self) -> int:
        return len(self.candidates)

    def with_metrics(self, metric_epoch: int) -> Fleet:
        """The same candidates and structural indexes; metric indexes start afresh."""
        fleet = Fleet((), cand_epoch=self.cand_epoch, metric_epoch=metric_epoch,
                      structural=self.structural)
        fleet.candidates, fleet.keys, fleet.by_key = self.candidates, self.keys, self.by_key
        fleet.all, fleet._lock = self.all, self._lock
        return fleet

    # -- lazily built indexes -------------------------------------------------------

    def cached(self, key: Any, build: Callable[[], T], *, metric: bool = False) -> T:
        """``build()`` once per Fleet (``metric``: once per metric values too)."""
        memo = self.metric if metric else self.structural
        found = memo.get(key, _MISSING)  # not a KeyError: raising one costs more
        if found is not _MISSING:
            return found  # type: ignore[no-any-return]
        value = build()
        with self._lock:
            return memo.setdefault(key, value)  # type: ignore[no-any-return]

    def built(self, key: Any, *, metric: bool = False) -> Any:
        """What :meth:`cached` built for ``key``, or None if nothing asked for it yet."""
        return (self.metric if metric else self.structural).get(key)

    def label(self, key: str) -> dict[str, int]:
        """Label value → the candidates carrying ``key`` with that value."""
        def build() -> dict[str, int]:
            out: dict[str, int] = {}
            for i, c in enumerate(self.candidates):
                v = c.labels.get(key)
                if v is not None:
                    out[v] = out.get(v, 0) | (1 << i)
            return out
        return self.cached(("label", key), build)

    def has_label(self, key: str) -> int:
        def build() -> int:
            out = 0
            for bits in self.label(key).values():
                out |= bits
            return out
        return self.cached(("has-label", key), build)

    def label_in(self, key: str, values: Sequence[str]) -> int:
        index = self.label(key)
        out = 0
        for v in values:
            out |= index.get(v, 0)
        return out

    def where(self, name: Any, predicate: Callable[[Candidate], bool], *,
              metric: bool = False) -> int:
        """The candidates for which ``predicate`` holds, memoized under ``name``."""
        return self.cached(name, lambda: bits_of(
            i for i, c in enumerate(self.candidates) if predicate(c)), metric=metric)

    def group(self, name: Any, key: Callable[[Candidate], T | None], *,
              metric: bool = False) -> dict[T, int]:
        """Candidates grouped by ``key`` (None: in no group), memoized under ``name``."""
        def build() -> dict[T, int]:
            out: dict[T, int] = {}
            for i, c in enumerate(self.candidates):
                k = key(c)
                if k is not None:
                    out[k] = out.get(k, 0) | (1 << i)
            return out
        return self.cached(name, build, metric=metric)

    def select(self, bits: int) -> list[Candidate]:
        return [self.candidates[i] for i in ordinals(bits)]

    def first_keys(self, bits: int, n: int) -> list[str]:
        out: list[str] = []
        for i in ordinals(bits):
            if len(out) >= n:
                break
            out.append(self.keys[i])
        return out


__all__ = ["Fleet", "as_indices", "as_mask", "bits_of", "ordinals", "popcount", "sieve"]
