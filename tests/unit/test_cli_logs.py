"""The processes' batched log handler: every line, in order, an error at once."""

from __future__ import annotations

import io
import logging
import threading
import time

from berth.cli.logs import BatchedHandler


def _logger(handler: logging.Handler) -> logging.Logger:
    log = logging.getLogger(f"test.batched.{id(handler)}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    return log


def test_lines_are_held_until_the_interval_then_written_in_order() -> None:
    out = io.StringIO()
    handler = BatchedHandler(out, interval=3600)  # the writer thread never gets to it
    log = _logger(handler)
    for i in range(5):
        log.info("line %d", i)
    assert out.getvalue() == ""
    handler.flush()
    assert out.getvalue().splitlines() == [f"INFO line {i}" for i in range(5)]
    handler.close()


def test_a_warning_is_written_at_once_after_the_lines_before_it() -> None:
    out = io.StringIO()
    handler = BatchedHandler(out, interval=3600)
    log = _logger(handler)
    log.info("before")
    log.warning("trouble")
    assert out.getvalue().splitlines() == ["INFO before", "WARNING trouble"]
    log.info("after")
    assert "after" not in out.getvalue()
    handler.close()  # what logging.shutdown does at exit: nothing is left behind
    assert out.getvalue().splitlines()[-1] == "INFO after"


def test_a_full_batch_is_written_at_once() -> None:
    out = io.StringIO()
    handler = BatchedHandler(out, interval=3600, capacity=3)
    log = _logger(handler)
    for i in range(7):
        log.info("%d", i)
    assert out.getvalue().splitlines() == [f"INFO {i}" for i in range(6)]
    handler.close()


def test_the_writer_thread_writes_within_the_interval() -> None:
    out = io.StringIO()
    handler = BatchedHandler(out, interval=0.01)
    log = _logger(handler)
    log.info("soon")
    deadline = time.monotonic() + 10
    while "soon" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert out.getvalue() == "INFO soon\n"
    handler.close()


def test_lines_from_many_threads_are_all_written_whole() -> None:
    out = io.StringIO()
    handler = BatchedHandler(out, interval=0.001, capacity=7)
    log = _logger(handler)

    def burst(t: int) -> None:
        for i in range(500):
            log.info("t%d-%d", t, i)

    threads = [threading.Thread(target=burst, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    handler.close()
    lines = out.getvalue().splitlines()
    assert sorted(lines) == sorted(f"INFO t{t}-{i}" for t in range(4) for i in range(500))
    for t in range(4):  # each thread's lines in the order it logged them
        mine = [line for line in lines if line.startswith(f"INFO t{t}-")]
        assert mine == [f"INFO t{t}-{i}" for i in range(500)]


def test_a_stream_that_fails_does_not_stop_the_writer() -> None:
    class Flaky(io.StringIO):
        fail = True

        def write(self, s: str) -> int:
            if self.fail:
                raise OSError("no space left")
            return super().write(s)

    out = Flaky()
    handler = BatchedHandler(out, interval=0.01)
    log = _logger(handler)
    log.info("lost")  # written while the stream fails: there is nowhere to say so
    time.sleep(0.1)
    out.fail = False
    log.info("kept")
    deadline = time.monotonic() + 10
    while "kept" not in out.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert out.getvalue() == "INFO kept\n"
    handler.close()
