"""Free capacity over a fleet, by resource, for set-at-a-time fit and score (an index).

"Fits cpu ≥ 2000m and memory ≥ 4Gi" over 10,000 clusters is, per resource,
the clusters sorted by what is free of it: one bisect and a prefix bitset give
those short of it, and the few combinations of shortages are bit operations.
Unlike a metric's column, free capacity changes with every placement (berth
assumes what it placed until the cluster reports it), so a column is not
rebuilt but updated in place: :meth:`Rooms.set` moves one cluster within each
column, and only the prefixes between its old and new position change.

Per resource there are also per-ordinal arrays of allocatable and free (numpy:
int64, or Python ints for quantities int64 would not hold exactly in the
score's arithmetic), what the score reads for a whole fleet at once, and the
same as lists, what it reads for a few candidates (indexing a list costs
less than numpy's setting up for a few). A
cluster without a Room (it reports no capacity) is in no column and not
:attr:`Rooms.judged`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from berth.controllers.scheduler.framework.fleet import as_indices, bits_of, ordinals
from berth.controllers.scheduler.framework.types import Room
from berth.store.documents.resources import Resources

STEP: Final = 32  # positions per kept prefix (against 64: a shortage read much faster over
#            large fleets, a move as fast, for twice the prefixes)
SHIFT: Final = 24  # a sort key is free << SHIFT | ordinal: fleets of up to 16 million
_LOW: Final = (1 << SHIFT) - 1


class _Column:
    """The judged candidates sorted by what is free of one resource (ties by ordinal)."""

    __slots__ = ("keys", "prefix")

    def __init__(self, values: Sequence[tuple[int, int]]) -> None:
        self.keys = sorted(free << SHIFT | i for i, free in values)
        self.prefix = [0]  # prefix[b]: the candidates at the first b * STEP positions
        acc = 0
        for k, key in enumerate(self.keys, 1):
            acc |= 1 << (key & _LOW)
            if k % STEP == 0:
                self.prefix.append(acc)

    def below(self, amount: int) -> int:
        """The candidates with less than ``amount`` free: the kept prefix nearest the
        position, and the few keys between (each costs an operation on the whole set)."""
        keys, prefix = self.keys, self.prefix
        k = bisect_left(keys, amount << SHIFT)
        b, rest = divmod(k, STEP)
        if rest <= STEP // 2 or b + 1 >= len(prefix):
            bits = prefix[b]
            for key in keys[k - rest : k]:
                bits |= 1 << (key & _LOW)
            return bits
        bits = prefix[b + 1]  # the next one holds STEP - rest keys too many
        for key in keys[k : (b + 1) * STEP]:
            bits ^= 1 << (key & _LOW)
        return bits

    def move(self, i: int, old: int, new: int) -> None:
        """Candidate ``i`` now has ``new`` free instead of ``old``."""
        keys, prefix = self.keys, self.prefix
        p = bisect_left(keys, old << SHIFT | i)
        del keys[p]
        key = new << SHIFT | i
        q = bisect_left(keys, key)
        keys.insert(q, key)
        # Each prefix between gains one candidate and loses another, the one a member
        # and the other not: both bits flip (an exclusive or, one operation on the
        # whole set fewer than adding one and taking the other away).
        bit = 1 << i
        if q < p:  # earlier: it joins the prefixes ending in (q, p]; each loses its last
            for b in range(q // STEP + 1, p // STEP + 1):
                prefix[b] ^= bit | 1 << (keys[b * STEP] & _LOW)
        elif q > p:  # later: it leaves those ending in (p, q]; each gains the next
            for b in range(p // STEP + 1, q // STEP + 1):
                prefix[b] ^= bit | 1 << (keys[b * STEP - 1] & _LOW)


class Rooms:
    """Each candidate's Room, by ordinal, with per-resource columns built when asked."""

    __slots__ = ("_alloc", "_columns", "_divisor", "_everywhere", "_free", "_listed", "judged",
                 "rooms")

    def __init__(self, rooms: Sequence[Room | None]) -> None:
        self.rooms: list[Room | None] = list(rooms)
        self.judged = bits_of(i for i, r in enumerate(self.rooms) if r is not None)
        self._columns: dict[str, _Column] = {}
        self._free: dict[str, npt.NDArray[np.int64]] = {}
        self._alloc: dict[str, npt.NDArray[np.int64]] = {}
        self._divisor: dict[str, npt.NDArray[np.int64]] = {}
        self._everywhere: dict[str, bool] = {}
        self._listed: dict[str, tuple[list[int], list[int]]] = {}

    def short(self, name: str, amount: int) -> int:
        """The judged candidates with less than ``amount`` of ``name`` free."""
        column = self._columns.get(name)
        if column is None:
            column = self._columns[name] = _Column(
                [(i, r.free.get(name)) for i, r in enumerate(self.rooms) if r is not None])
        return column.below(amount)

    def free(self, name: str) -> npt.NDArray[np.int64]:
        """What is free of ``name`` on each candidate, by ordinal (0 if not judged)."""
        found = self._free.get(name)
        if found is None:
            found = self._free[name] = _array([r.free.get(name) if r is not None else 0
                                               for r in self.rooms])
        return found

    def allocatable(self, name: str) -> npt.NDArray[np.int64]:
        found = self._alloc.get(name)
        if found is None:
            found = self._alloc[name] = _array([r.allocatable.get(name) if r is not None
                                                else 0 for r in self.rooms])
        return found

    def divisor(self, name: str) -> npt.NDArray[np.int64]:
        """What the score divides by: allocatable of ``name``, at least 1."""
        found = self._divisor.get(name)
        if found is None:
            found = self._divisor[name] = np.maximum(self.allocatable(name), 1)
        return found

    def everywhere(self, name: str) -> bool:
        """Whether every judged candidate has some of ``name`` allocatable."""
        found = self._everywhere.get(name)
        if found is None:
            found = self._everywhere[name] = all(
                r.allocatable.get(name) > 0 for r in self.rooms if r is not None)
        return found

    def listed(self, name: str) -> tuple[list[int], list[int]]:
        """(allocatable, free) of ``name`` on each candidate, by ordinal, as lists (0 if
        not judged): exact Python ints."""
        found = self._listed.get(name)
        if found is None:
            rooms = self.rooms
            found = self._listed[name] = (
                [r.allocatable.get(name) if r is not None else 0 for r in rooms],
                [r.free.get(name) if r is not None else 0 for r in rooms])
        return found

    def set(self, i: int, room: Room | None) -> None:
        """Candidate ``i``'s Room is now ``room``."""
        old = self.rooms[i]
        if old is room or old == room:
            return
        self.rooms[i] = room
        if old is None or room is None:  # judged or no longer: columns start afresh
            self.judged ^= 1 << i
            self._columns.clear()
            self._free.clear()
            self._alloc.clear()
            self._divisor.clear()
            self._everywhere.clear()
            self._listed.clear()
            return
        for name, column in self._columns.items():
            was, now = old.free.get(name), room.free.get(name)
            if was != now:
                column.move(i, was, now)
        for name in list(self._free):
            if not _set(self._free[name], i, room.free.get(name)):
                del self._free[name]  # too large for int64 now: built again when asked
        for name, (alloc, free) in self._listed.items():
            alloc[i], free[i] = room.allocatable.get(name), room.free.get(name)
        if old.allocatable != room.allocatable:
            for name in list(self._alloc):
                if not _set(self._alloc[name], i, room.allocatable.get(name)):
                    del self._alloc[name]
            self._divisor.clear()  # rare (a cluster's Nodes changed): made again when asked
            self._everywhere.clear()

    def least_short(self, need: Resources, bits: int, limit: int) -> list[tuple[int, int]]:
        """The ``limit`` judged candidates of ``bits`` least short of ``need``
        (:func:`shortfall`), as (shortfall, ordinal), least first, ties by ordinal: one
        pass over the free and allocatable arrays (a preemption plan orders the hundreds
        of candidates refused for room so)."""
        asked = [(name, want) for name, want in need.items() if want > 0]
        at = as_indices(bits & self.judged, len(self.rooms))
        short = np.zeros(len(at), dtype=np.int64)
        exact = len(asked) <= 32 and all(want < _EXACT for _, want in asked)
        for name, want in asked if exact else ():
            free, divisor = self.free(name), self.divisor(name)
            if free.dtype != np.int64 or divisor.dtype != np.int64:
                exact = False
                break
            missing = np.maximum(want - free[at], 0)  # |free| < LIMIT: no overflow
            if len(at) and int(missing.max()) >= _EXACT:
                exact = False
                break
            short += missing * 1000 // divisor[at]
        if not exact:  # beyond what int64 sums exactly: Python ints, one by one
            rooms = self.rooms
            found = sorted((shortfall(need, r.allocatable, r.free), i)
                           for i in at.tolist() if (r := rooms[i]) is not None)
            return found[:limit]
        first = np.lexsort((at, short))[:limit]
        return list(zip(short[first].tolist(), at[first].tolist(), strict=True))

    def members(self, bits: int) -> list[tuple[int, Room]]:
        """The judged candidates of ``bits`` with their Rooms."""
        rooms = self.rooms
        return [(i, r) for i in ordinals(bits & self.judged) if (r := rooms[i]) is not None]


LIMIT: Final = 1 << 54  # quantities the score's int64 arithmetic holds exactly (3 x 100 x LIMIT)
_EXACT: Final = 1 << 48  # what may be missing of a resource for int64 to sum 32 shortfalls


def shortfall(need: Resources, alloc: Resources, free: Resources) -> int:
    """How short of ``need`` a cluster with ``alloc`` and ``free`` is: per resource asked,
    what is missing in thousandths of what it has allocatable (at least 1), summed."""
    return sum(max(0, want - free.get(name)) * 1000 // max(alloc.get(name), 1)
               for name, want in need.items() if want > 0)


def _array(values: list[int]) -> npt.NDArray[np.int64]:
    """``values`` as int64; with one at :data:`LIMIT` or beyond, as Python ints."""
    if values and max(map(abs, values)) >= LIMIT:
        return np.array(values, dtype=object)
    return np.array(values, dtype=np.int64)


def _set(values: npt.NDArray[np.int64], i: int, value: int) -> bool:
    """``values[i] = value``, unless int64 would not hold it exactly (False)."""
    if values.dtype == np.int64 and abs(value) >= LIMIT:
        return False
    values[i] = value
    return True


__all__ = ["LIMIT", "Rooms", "shortfall"]
