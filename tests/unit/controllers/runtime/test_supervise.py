"""Supervised loops: a failing step is logged and the loop goes on; a dead loop is not alive."""

from __future__ import annotations

import threading
import time

import pytest

from berth.controllers.runtime.supervise import Loop


def test_a_step_that_raises_does_not_end_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []
    done = threading.Event()

    def step() -> None:
        calls.append(1)
        if len(calls) <= 2:
            raise RuntimeError("a bug")
        if len(calls) >= 4:
            done.set()
        time.sleep(0.01)

    loop = Loop("flaky", step, initial_backoff=0.01).start()
    try:
        assert done.wait(5)
        assert loop.alive()
    finally:
        loop.stop()
    assert not loop.alive()  # stopped: no longer alive
    failures = [r for r in caplog.records if "loop flaky: a step failed" in r.getMessage()]
    assert len(failures) == 2 and failures[0].exc_info is not None


def test_a_stuck_loop_is_not_alive() -> None:
    release = threading.Event()
    loop = Loop("stuck", lambda: release.wait(5), deadline=0.05).start()
    try:
        time.sleep(0.2)
        assert not loop.alive()  # beating stopped for longer than the deadline
    finally:
        release.set()
        loop.stop()
