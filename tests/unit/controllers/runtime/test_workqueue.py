"""The work queue: one in flight per key, latest wins, backoff; a fake clock."""

from __future__ import annotations

import threading

from berth.controllers.runtime import PermanentError, TemporaryError, WorkQueue, run_worker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_key_added_many_times_is_processed_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert [q.get(0), q.get(0), q.get(0)] == ["a", "b", None]


def test_a_key_is_never_handed_out_twice_at_once() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a")  # changed while being processed
    assert q.get(0) is None, "handed to a second worker"
    q.done("a")
    assert q.get(0) == "a"  # processed again, with the latest state
    q.done("a")
    assert q.get(0) is None


def test_urgent_keys_go_before_every_ordinary_one() -> None:
    q: WorkQueue[str] = WorkQueue()
    for k in ("a", "b", "c"):
        q.add(k)
    q.add("judge", urgent=True)
    q.add("b", urgent=True)  # waiting in the ordinary line: it moves ahead
    q.add("b", urgent=True)  # once
    assert len(q) == 4
    assert [q.get(0) for _ in range(5)] == ["judge", "b", "a", "c", None]
    assert len(q) == 0


def test_a_key_taken_from_the_urgent_line_and_added_again_is_processed_once_more() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("x")
    q.add("a", urgent=True)
    assert q.get(0) == "a"  # its place in the ordinary line is now stale
    q.done("a")
    q.add("a")  # a new change, queued behind x... or at its old place: once either way
    got = [q.get(0), q.get(0), q.get(0)]
    assert sorted(k for k in got if k) == ["a", "x"] and got[2] is None


def test_an_urgent_add_while_processing_requeues_urgent() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get(0) == "a"
    q.add("a", urgent=True)  # the cluster reported while "a" was being applied
    q.add("b")
    q.done("a")
    assert [q.get(0), q.get(0)] == ["a", "b"]


def test_a_worker_for_urgent_keys_takes_no_other_and_wakes_for_one() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("apply")
    assert q.get(0, urgent_only=True) is None  # an ordinary key is not its work
    got: list[str | None] = []
    waiting = threading.Thread(target=lambda: got.append(q.get(5, urgent_only=True)))
    waiting.start()
    q.add("other")  # wakes no one waiting for urgent keys only (or it waits on)
    q.add("judge", urgent=True)
    waiting.join(5)
    assert got == ["judge"]
    assert [q.get(0), q.get(0), q.get(0)] == ["apply", "other", None]
    q.shutdown()
    assert q.get(urgent_only=True) is None


def test_delayed_keys_come_back_ordinary() -> None:
    clock = Clock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add_after("retry", 1)
    clock.now += 1
    q.add("seen", urgent=True)
    assert [q.get(0), q.get(0)] == ["seen", "retry"]


def test_failures_back_off_exponentially_and_forget_resets() -> None:
    clock = Clock()
    q: WorkQueue[str] = WorkQueue(base_delay=1, max_delay=5, clock=clock)
    delays = [q.add_rate_limited("a") for _ in range(5)]
    assert delays == [1, 2, 4, 5, 5]
    q.forget("a")
    assert q.backoff("a") == 1


def test_delayed_keys_wait_for_the_clock() -> None:
    clock = Clock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add_after("later", 10)
    q.add_after("sooner", 5)
    assert q.get(0) is None
    clock.now += 5
    assert q.get(0) == "sooner"
    clock.now += 5
    assert q.get(0) == "later"


def test_workers_retry_temporary_errors_and_drop_permanent_ones() -> None:
    q: WorkQueue[str] = WorkQueue(base_delay=0.001)
    calls: list[str] = []
    finished = threading.Event()

    def process(key: str) -> None:
        calls.append(key)
        if key == "flaky" and calls.count("flaky") < 3:
            raise TemporaryError("not yet")
        if key == "broken":
            raise PermanentError("never")
        if key == "crash" and calls.count("crash") < 2:
            raise RuntimeError("bug")
        if {"flaky", "crash"} <= set(calls) and calls.count("flaky") == 3 and (
                calls.count("crash") == 2):
            finished.set()

    for key in ("flaky", "broken", "crash"):
        q.add(key)
    worker = threading.Thread(target=run_worker, args=(q, process))
    worker.start()
    assert finished.wait(5)
    q.shutdown()
    worker.join(5)
    assert calls.count("broken") == 1
    assert q.failures("flaky") == 0 and q.failures("crash") == 0


def test_shutdown_wakes_waiting_workers() -> None:
    q: WorkQueue[str] = WorkQueue()
    got: list[str | None] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    q.shutdown()
    t.join(5)
    assert got == [None]


def test_after_shutdown_no_waiting_key_is_handed_out() -> None:
    """A controller that stops (deposed) finishes what it holds and begins nothing more:
    keys still waiting, ordinary, urgent or delayed and due, are not handed out."""
    clock = Clock()
    q: WorkQueue[str] = WorkQueue(clock=clock)
    q.add("waiting")
    q.add("hurried", urgent=True)
    q.add_after("delayed", 1.0)
    held = q.get(0)
    assert held == "hurried"
    clock.now += 2.0
    q.shutdown()
    assert q.get(0) is None
    assert q.get(0, urgent_only=True) is None
    q.add("late")  # refused once shut down
    assert q.get(0) is None
    q.done(held)
