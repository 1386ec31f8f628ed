"""Log output for berth's commands: text or JSON lines on standard error.

A long-running process (scheduler, propagator, metrics-cache) logs a line per
decision. Written as it came, each line made the thread that decides wait for
the write, then for the interpreter lock after it (another thread runs
meanwhile): a sixth of the scheduler's throughput at INFO. Its handler,
:class:`BatchedHandler`, formats a record where it is logged (the line says
when it was logged, in order) and leaves it in a queue; one writer thread
writes it at once when nothing was written for ``interval``, else with what
gathers until then — at most one write per ``interval`` while lines keep
coming, or when ``capacity`` lines wait. Below WARNING, the thread that logs
never waits for a write nor for a lock a write holds; a WARNING or worse is
written by the thread that logs it, with the lines before it, at once. At
exit (``logging.shutdown``) the rest is written; only a process killed
outright (``kill -9``, a crash in C) loses what it logged below WARNING in its
last ``interval``. The processes also skip what their lines never show (the
caller's frame, process names), and the time is formatted once a second. A
path that says a line per item of a batch logs the batch's lines as one record
(:class:`~berth.controllers.runtime.observe.Lines`); the formatters here write
each of them as a line of its own, with its own prefix or as its own object.

The one-shot tools log through a plain handler: their few lines interleave
with what they print as they happen.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
import threading
import time
from collections import deque
from datetime import UTC, datetime
from typing import TextIO

from berth.controllers.runtime.observe import Lines

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class TextFormatter(logging.Formatter):
    """``TEXT``, with the date and time of a second formatted once."""

    def __init__(self) -> None:
        super().__init__(TEXT)
        self._stamp = (-1, "")  # (second, its date and time), replaced whole: threads share it

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        second = int(record.created)
        stamp = self._stamp
        if stamp[0] != second:
            stamp = self._stamp = (second, time.strftime("%Y-%m-%d %H:%M:%S",
                                                         self.converter(second)))
        return f"{stamp[1]},{int(record.msecs):03d}"

    def format(self, record: logging.LogRecord) -> str:
        lines = record.msg
        if type(lines) is not Lines or record.args or record.exc_info:
            return super().format(record)
        prefix = f"{self.formatTime(record)} {record.levelname} {record.name}: "
        return prefix + ("\n" + prefix).join(lines)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and
    the traceback if there is one — for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": datetime.fromtimestamp(record.created, UTC).isoformat()
               .replace("+00:00", "Z"),
               "level": record.levelname, "logger": record.name,
               "message": "", "thread": record.threadName}
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        lines = record.msg
        if type(lines) is not Lines or record.args:
            lines = (record.getMessage(),)
        objects = []
        for line in lines:
            out["message"] = line
            objects.append(json.dumps(out, ensure_ascii=False))
        return "\n".join(objects)


class BatchedHandler(logging.StreamHandler[TextIO]):
    """A stream handler whose lines are written by its own thread, in batches.

    Lines wait in a deque (appended under the handler's lock, which
    ``Handler.handle`` holds around :meth:`emit`); whoever writes holds
    ``_io`` while it takes lines from the deque and writes them, so lines go
    out in the order they were logged. The lock order is the handler's lock,
    then ``_io``: the writer thread takes ``_io`` alone, so a thread logging
    below WARNING never waits for it."""

    def __init__(self, stream: TextIO | None = None, *, interval: float = 0.1,
                 capacity: int = 1024) -> None:
        super().__init__(stream if stream is not None else sys.stderr)
        self.interval = interval
        self.capacity = capacity
        self._lines: deque[str] = deque()
        self._written = -math.inf  # when (monotonic) the writer last wrote: never
        # (not 0.0: a monotonic clock may start at boot, less than an interval ago)
        self._io = threading.Lock()
        self._soon = threading.Event()  # write now, not at the end of the interval
        self._done = threading.Event()
        self._writer = threading.Thread(target=self._write_every_interval, name="log-writer",
                                         daemon=True)
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._lines.append(self.format(record))
            if record.levelno >= logging.WARNING:
                self.flush()  # here and now, after the lines before it: never held back
            elif (len(self._lines) >= self.capacity
                  or time.monotonic() - self._written >= self.interval):
                self._soon.set()
        except Exception:  # what logging does with a record it cannot handle
            self.handleError(record)

    def flush(self) -> None:
        """Write every line logged so far (from any thread; at exit, logging's)."""
        with self._io:
            lines = self._lines
            batch = [lines.popleft() for _ in range(len(lines))]
            if batch:
                self.stream.write("\n".join(batch) + "\n")
                self._written = time.monotonic()
            self.stream.flush()

    def close(self) -> None:
        self._done.set()
        self._soon.set()
        try:
            self.flush()
        finally:
            super().close()

    def _write_every_interval(self) -> None:
        # Never ends early: when standard error cannot be written (closed, or its
        # reader gone) there is nowhere to say so; the next interval tries again.
        while not self._done.is_set():
            self._soon.wait(self.interval)
            self._soon.clear()
            with contextlib.suppress(OSError, ValueError):
                self.flush()


def configure(level: str, form: str, *, batched: bool) -> None:
    """Log at ``level`` in ``form`` (text or json) to standard error; in batches, and
    without what no line shows, when ``batched`` (the long-running processes)."""
    handler: logging.StreamHandler[TextIO]
    if batched:
        handler = BatchedHandler()
        logging.logProcesses = logging.logMultiprocessing = False
        logging._srcfile = None  # the logging HOWTO's way to skip looking up the caller
    else:
        handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if form == "json" else TextFormatter())
    logging.basicConfig(level=level, handlers=[handler])
