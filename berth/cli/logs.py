"""Log output for berth's commands: text or JSON lines on standard error.

A long-running process (scheduler, propagator, metrics-cache) logs a line per
decision; writing each line as it comes made the thread that decides wait for
the write and then for the interpreter lock after it (another thread runs
meanwhile), which cost the scheduler a sixth of its throughput at INFO. So its
handler, :class:`BatchedHandler`, formats a record where it is logged (the
line says when it was logged, in order) and writes what has gathered in one
write from its own thread every ``interval``: a decision costs formatting, not
I/O. A WARNING or worse is written at once, after the lines before it, so an
error is never held back; so is a full batch. At exit (``logging.shutdown``)
the rest is written. Only a process killed outright (``kill -9``, a crash in C)
loses what it logged in its last ``interval``.

The one-shot tools log through a plain handler: their few lines interleave
with what they print as they happen.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from datetime import UTC, datetime
from typing import TextIO

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, and
    the traceback if there is one — for log collectors."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"time": datetime.fromtimestamp(record.created, UTC).isoformat()
               .replace("+00:00", "Z"),
               "level": record.levelname, "logger": record.name,
               "message": record.getMessage(), "thread": record.threadName}
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class BatchedHandler(logging.StreamHandler[TextIO]):
    """A stream handler that writes gathered lines every ``interval`` seconds from
    its own thread, at once for a WARNING or worse or ``capacity`` lines. One lock
    (the handler's own, which ``Handler.handle`` holds around :meth:`emit`) guards
    the gathered lines and the stream."""

    def __init__(self, stream: TextIO | None = None, *, interval: float = 0.1,
                 capacity: int = 1024) -> None:
        super().__init__(stream if stream is not None else sys.stderr)
        self.interval = interval
        self.capacity = capacity
        self._lines: list[str] = []
        self._done = threading.Event()
        self._writer = threading.Thread(target=self._write_every_interval, name="log-writer",
                                         daemon=True)
        self._writer.start()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._lines.append(self.format(record))
            if record.levelno >= logging.WARNING or len(self._lines) >= self.capacity:
                self._write()
        except Exception:  # what logging does with a record it cannot handle
            self.handleError(record)

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]  # created in Handler.__init__
            self._write()

    def close(self) -> None:
        self._done.set()
        try:
            self.flush()
        finally:
            super().close()

    def _write(self) -> None:
        """Write the gathered lines (the caller holds the lock)."""
        if self._lines:
            text = "\n".join(self._lines) + "\n"
            self._lines.clear()
            self.stream.write(text)
        self.stream.flush()

    def _write_every_interval(self) -> None:
        # Never ends early: when standard error cannot be written (closed, or its
        # reader gone) there is nowhere to say so; the next interval tries again.
        while not self._done.wait(self.interval):
            with contextlib.suppress(OSError, ValueError):
                self.flush()


def configure(level: str, form: str, *, batched: bool) -> None:
    """Log at ``level`` in ``form`` (text or json) to standard error, in batches when
    ``batched`` (the long-running processes)."""
    handler: logging.StreamHandler[TextIO] = (
        BatchedHandler() if batched else logging.StreamHandler())
    handler.setFormatter(JsonFormatter() if form == "json" else logging.Formatter(TEXT))
    logging.basicConfig(level=level, handlers=[handler])
