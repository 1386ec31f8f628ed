"""The event recorder over etcd in memory and a clock the test moves: correlation into
counts, similar messages combined, writes paced per event, each on a lease.

(Expiry by a real etcd's lease, and the processes' events, are in
tests/integration/test_events.py.)"""

from __future__ import annotations

from datetime import timedelta

import pytest

from berth.controllers.runtime.events import COMBINED, SIMILAR, Recorder
from berth.store import Fence
from berth.store.events import NORMAL, WARNING, Event, InvolvedObject, listed, prefix
from berth_testkit.memory import FakeClock, MemoryStore

WEB = InvolvedObject("Application", "web", "default")


def events(store: MemoryStore) -> list[Event]:
    found, problems = listed(store)
    assert problems == []
    return sorted((e for _, e in found), key=lambda e: (e.reason, e.message))


def test_the_same_event_again_is_one_event_with_a_count_and_its_first_and_last_time() -> None:
    store, clock = MemoryStore(), FakeClock()
    r = Recorder(store, "propagator", clock=clock)
    first = clock.now()
    r.emit(WEB, WARNING, "Unhealthy", "default/de: 0/2 available")
    assert r.flush() == 1
    clock.advance(3.0)
    r.emit(WEB, WARNING, "Unhealthy", "default/de: 0/2 available")
    r.emit(WEB, WARNING, "Unhealthy", "default/de: 0/2 available")
    assert r.flush() == 0  # written 3 s ago: its count rises in memory meanwhile
    clock.advance(8.0)
    assert r.flush() == 1
    [e] = events(store)
    assert (e.count, e.firstTimestamp, e.lastTimestamp) == (3, first,
                                                            first + timedelta(seconds=3))
    assert e.type == WARNING and e.source == "propagator" and e.involvedObject == WEB
    kv = store.get(next(iter(store.memory.keys)))
    assert kv is not None and kv.lease != 0  # it expires with its lease


def test_more_than_ten_different_messages_of_one_reason_are_combined() -> None:
    store, clock = MemoryStore(), FakeClock()
    r = Recorder(store, "scheduler", clock=clock)
    for i in range(SIMILAR + 5):
        r.emit(WEB, WARNING, "FailedScheduling", f"{i}/1000 clusters are available")
    r.emit(WEB, NORMAL, "Scheduled", "placed on de")
    r.flush()
    found = events(store)
    assert len(found) == SIMILAR + 2  # ten as they were, one combined, the other reason
    [combined] = [e for e in found if e.message.startswith(COMBINED)]
    assert combined.count == 5 and combined.message == f"{COMBINED}: 14/1000 clusters are available"


def test_a_failed_write_is_tried_again_said_once_and_never_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    store, clock = MemoryStore(), FakeClock()
    r = Recorder(store, "scheduler", clock=clock)
    r.store = store.fenced(Fence("/berth/v1/leases/scheduler", 7))  # no such term: refused
    for _ in range(3):
        r.emit(WEB, NORMAL, "Scheduled", "placed on de")
        clock.advance(11.0)
        assert r.flush() == 0
    assert sum("events of scheduler not written" in m for m in caplog.messages) == 1
    assert store.count_prefix(prefix("Application", "default", "web")) == 0
    r.store = store
    r.emit(WEB, NORMAL, "Scheduled", "placed on de")
    assert r.flush() == 1  # at once: the failed tries did not count as writes
    [e] = events(store)
    assert e.count == 4  # nothing lost while etcd refused it


def test_a_burst_is_written_at_the_rate_longest_waiting_first_and_drops_are_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    from berth.controllers.runtime import events as module

    store, clock = MemoryStore(), FakeClock()
    r = Recorder(store, "scheduler", rate=100, clock=clock)
    for i in range(250):
        r.emit(InvolvedObject("Application", f"app-{i:03d}", "default"), NORMAL, "Scheduled",
               "placed")
    assert r.flush() == 100  # a second's worth
    assert sorted(e.involvedObject.name for e in events(store)) == [
        f"app-{i:03d}" for i in range(100)]  # the longest waiting first
    clock.advance(1.0)
    assert r.flush() == 100
    assert r.flush(force=True) == 50  # stopping writes what is left
    assert len(events(store)) == 250
    # more waiting than the recorder keeps: the oldest go, counted and said
    for i in range(module.KNOWN + 10):
        r.emit(InvolvedObject("Application", f"b-{i:05d}", "default"), NORMAL, "Scheduled",
               "placed")
    with caplog.at_level("WARNING"):
        r.flush()
    # the 250 written went first (nothing lost), then the 10 oldest waiting
    assert "scheduler: 10 events dropped unwritten" in caplog.text


def test_emitting_into_a_full_queue_drops_and_counts(caplog: pytest.LogCaptureFixture,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from berth.controllers.runtime import events as module

    monkeypatch.setattr(module, "INCOMING", 5)
    store, clock = MemoryStore(), FakeClock()
    r = Recorder(store, "scheduler", clock=clock)
    for i in range(8):
        r.emit(InvolvedObject("Application", f"app-{i}", "default"), NORMAL, "Scheduled", "x")
    with caplog.at_level("WARNING"):
        assert r.flush() == 5
    assert "scheduler: 3 events dropped unwritten" in caplog.text
    clock.advance(61.0)
    r.emit(WEB, NORMAL, "Scheduled", "x")
    caplog.clear()
    with caplog.at_level("WARNING"):
        assert r.flush() == 1
    assert "dropped" not in caplog.text  # counted once
