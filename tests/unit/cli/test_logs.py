"""The processes' batched log handler: every line, in order, an error at once."""

from __future__ import annotations

import io
import logging
import threading
import time

from berth.cli.logs import BatchedHandler


def _written(out: io.StringIO, lines: int) -> list[str]:
    """What ``out`` holds once it holds ``lines`` lines (10 s at most)."""
    deadline = time.monotonic() + 10
    while len(out.getvalue().splitlines()) < lines and time.monotonic() < deadline:
        time.sleep(0.005)
    return out.getvalue().splitlines()


def _logger(handler: logging.Handler) -> logging.Logger:
    log = logging.getLogger(f"test.batched.{id(handler)}")
    log.propagate = False
    log.setLevel(logging.DEBUG)
    log.addHandler(handler)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    return log


def test_a_line_after_a_quiet_interval_is_written_at_once_the_next_ones_wait() -> None:
    out = io.StringIO()
    handler = BatchedHandler(out, interval=3600)  # the writer wakes only when told
    log = _logger(handler)
    log.info("line 0")  # nothing written for an interval (ever): at once
    assert _written(out, 1) == ["INFO line 0"]
    for i in range(1, 5):
        log.info("line %d", i)  # written less than an interval ago: they wait
    time.sleep(0.05)
    assert out.getvalue().splitlines() == ["INFO line 0"]
    handler.flush()
    assert out.getvalue().splitlines() == [f"INFO line {i}" for i in range(5)]
    handler.close()


def test_a_warning_is_written_at_once_after_the_lines_before_it() -> None:
    out = io.StringIO()
    handler = BatchedHandler(out, interval=3600)  # only a warning wakes the writer
    log = _logger(handler)
    log.info("first")
    assert _written(out, 1) == ["INFO first"]
    log.info("before")
    log.warning("trouble")  # written by the thread that logs it, before it goes on
    assert out.getvalue().splitlines() == ["INFO first", "INFO before", "WARNING trouble"]
    log.info("after")
    time.sleep(0.05)
    assert "after" not in out.getvalue()
    handler.close()  # what logging.shutdown does at exit: nothing is left behind
    assert out.getvalue().splitlines()[-1] == "INFO after"


def test_a_full_batch_is_written_at_once() -> None:
    out = io.StringIO()
    handler = BatchedHandler(out, interval=3600, capacity=3)
    log = _logger(handler)
    log.info("first")
    assert _written(out, 1) == ["INFO first"]
    for i in range(3):
        log.info("%d", i)
    assert _written(out, 4) == ["INFO first"] + [f"INFO {i}" for i in range(3)]
    handler.close()


def test_the_writer_thread_writes_within_the_interval() -> None:
    out = io.StringIO()
    handler = BatchedHandler(out, interval=0.01)
    log = _logger(handler)
    log.info("soon")
    assert _written(out, 1) == ["INFO soon"]
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
    assert _written(out, 1) == ["INFO kept"]
    handler.close()


def test_the_text_format_has_the_time_of_each_line() -> None:
    from berth.cli.logs import TextFormatter

    f = TextFormatter()
    for created in (1_700_000_000.25, 1_700_000_000.75, 1_700_000_001.5, 1_700_000_000.125):
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
        record.created, record.msecs = created, (created % 1) * 1000
        assert f.format(record) == logging.Formatter(
            "%(asctime)s %(levelname)s %(name)s: %(message)s").format(record)


def test_lines_logged_as_one_record_are_written_each_as_a_line_of_its_own() -> None:
    import json

    from berth.cli.logs import JsonFormatter, TextFormatter
    from berth.controllers.runtime.observe import Lines

    record = logging.LogRecord("berth.x", logging.INFO, __file__, 1, Lines(("a → b", "c → d")),
                               None, None)
    one = logging.LogRecord("berth.x", logging.INFO, __file__, 1, "a → b", None, None)
    one.created, one.msecs = record.created, record.msecs
    text = TextFormatter()
    assert text.format(record).split("\n") == [
        text.format(one), text.format(one).replace("a → b", "c → d")]
    objects = [json.loads(line) for line in JsonFormatter().format(record).split("\n")]
    assert [o["message"] for o in objects] == ["a → b", "c → d"]
    assert objects[0] == json.loads(JsonFormatter().format(one))
    # Any other formatter writes them one below the other.
    assert logging.Formatter("%(message)s").format(record) == "a → b\nc → d"
