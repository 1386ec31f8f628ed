"""The capacity tracker's Pod sums, kept as Pods change, against the sums computed anew;
and the watches' lines read as bytes."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

from berth.controllers.propagator.capacity import Tracker
from berth.controllers.propagator.watches import _lines
from berth.store.documents.resources import NOTHING, Resources


def _tracker() -> tuple[Tracker, list[str]]:
    told: list[str] = []
    tracker = Tracker("https://api.example", None, lambda: None,  # type: ignore[arg-type]
                      told.append)
    return tracker, told


def _pod(rng: random.Random) -> tuple[Resources, str, str, str]:
    asks = Resources(rng.choice([0, 1, 250]), rng.choice([0, 2**20]), 1,
                     (("nvidia.com/gpu", 1),) if rng.random() < 0.2 else ())
    return (asks, rng.choice(["", "default/a", "default/b", "team/c"]),
            rng.choice(["", "", "containers with unready status: [c]"]),
            rng.choice(["", "n1", "n2", "gone"]))


def test_the_sums_kept_as_pods_change_equal_the_sums_computed_anew() -> None:
    rng = random.Random(7)
    tracker, _ = _tracker()
    tracker.nodes.listed({("", "n1"): (Resources(4000, 2**34, 110),),
                          ("", "n2"): (Resources(4000, 2**34, 110),)})
    tracker.pods.listed({(f"ns{i % 3}", f"p{i}"): _pod(rng) for i in range(50)})
    for step in range(2000):
        key = (f"ns{rng.randrange(3)}", f"p{rng.randrange(80)}")
        tracker.pods.keep(key, None if rng.random() < 0.3 else _pod(rng))
        if step % 100 == 0:
            tracker.pods.listed(dict(tracker.pods.entries))  # a relist in between
        entries: dict[Any, Any] = tracker.pods.entries
        capacity = tracker.capacity()
        assert capacity is not None
        assert capacity.requested == sum((e[0] for e in entries.values()), NOTHING).listed()
        assert capacity.placed == dict(sorted(Counter(e[1] for e in entries.values()
                                                      if e[1]).items()))
        for owner in ("default/a", "default/b", "team/c", "nobody/x"):
            mine = {k: e for k, e in entries.items() if e[1] == owner}
            assert tracker.lost(owner) == sum(1 for e in mine.values() if e[3] == "gone")
            unready = sorted((k, e) for k, e in mine.items() if e[2])
            said = tracker.trouble(owner)
            if not unready:
                assert said == ""
            else:
                assert said.startswith(f"pod {unready[0][0][1]}: ")
                assert ("more pods" in said) == (len(unready) > 1)


def test_a_pod_becoming_ready_tells_its_application() -> None:
    tracker, told = _tracker()
    tracker.pods.listed({})
    tracker.pods.keep(("ns", "p"), (Resources(pods=1), "ns/app", "not ready", "n1"))
    tracker.pods.keep(("ns", "p"), (Resources(pods=1), "ns/app", "not ready", "n1"))  # same
    tracker.pods.keep(("ns", "p"), (Resources(pods=1), "ns/app", "", "n1"))
    assert told == ["ns/app", "ns/app"]  # not Ready for a reason, then Ready
    assert tracker.trouble("ns/app") == ""


def test_a_pod_that_comes_is_scheduled_and_goes_without_trouble_tells_nobody() -> None:
    tracker, told = _tracker()
    tracker.nodes.listed({("", "n1"): (Resources(4000, 2**34, 110),)})
    tracker.pods.listed({})
    tracker.pods.keep(("ns", "p"), (Resources(pods=1), "ns/app", "", ""))  # created
    tracker.pods.keep(("ns", "p"), (Resources(pods=1), "ns/app", "", "n1"))  # scheduled
    tracker.pods.keep(("ns", "p"), None)  # gone
    assert told == []
    tracker.pods.keep(("ns", "q"), (Resources(pods=1), "ns/app", "", "n9"))  # Node gone
    assert told == ["ns/app"] and tracker.lost("ns/app") == 1


def test_a_node_changed_in_place_changes_the_capacity_and_tells_nobody() -> None:
    """A Node going NotReady and back (or cordoned, or its allocatable changed) keeps
    its entry: only the capacity changes. The robustness run found the tracker reading
    such a change as a pod's (an IndexError that ended its watch); a Node that comes or
    goes tells the applications with pods bound to it."""
    tracker, told = _tracker()
    changes: list[int] = []
    tracker.on_change = lambda: changes.append(1)
    tracker.nodes.listed({("", "n1"): (Resources(4000, 2**34, 110),)})
    tracker.pods.listed({("ns", "p"): (Resources(pods=1), "ns/app", "", "n1")})
    tracker.nodes.keep(("", "n1"), (None,))  # NotReady
    tracker.nodes.keep(("", "n1"), (Resources(2000, 2**34, 110),))  # back, smaller
    assert told == [] and len(changes) == 2
    tracker.nodes.keep(("", "n1"), None)  # gone: its pod's application is told
    assert told == ["ns/app"] and tracker.lost("ns/app") == 1
    tracker.nodes.keep(("", "n1"), (Resources(4000, 2**34, 110),))  # back
    assert told == ["ns/app", "ns/app"] and tracker.lost("ns/app") == 0


async def _chunks(parts: list[bytes]) -> AsyncIterator[bytes]:
    for p in parts:
        yield p


def _split(parts: list[bytes]) -> list[bytes]:
    async def collect() -> list[bytes]:
        return [line async for line in _lines(_chunks(parts))]
    return asyncio.run(collect())


def test_watch_lines_split_over_chunks_and_chunks_holding_many() -> None:
    events = [b'{"type":"ADDED","object":{"n":%d}}' % i for i in range(5)]
    stream = b"\n".join(events) + b"\n\n"
    for size in (1, 3, 7, len(stream)):
        parts = [stream[i:i + size] for i in range(0, len(stream), size)]
        assert _split(parts) == events, size
    assert _split([b'{"a":1}\n{"b"', b':2}']) == [b'{"a":1}', b'{"b":2}']  # no last newline
    assert _split([]) == [] and _split([b"\n", b"  \n"]) == []


def test_the_first_summary_waits_for_both_lists_and_no_longer_than_told() -> None:
    tracker, _ = _tracker()
    assert tracker.first(0.05) is None  # nothing listed: None once the wait is over
    tracker.nodes.listed({("", "n1"): (Resources(4000, 2**34, 110),)})
    assert tracker.first(0.05) is None  # the Pods not yet
    lister = threading.Timer(0.2, tracker.pods.listed, [{("ns", "p"): _pod(random.Random(1))}])
    lister.start()
    began = time.monotonic()
    first = tracker.first(30.0)
    assert first is not None and first.nodes == 1 and 0.1 < time.monotonic() - began < 10
    lister.join()
