"""Which scheduler a benchmark measures: the compiled hot path (``berth/native.py``) or,
on purpose only, plain Python.

A build older than the sources is not loaded, by the benchmark or by the processes it
starts, and they then run plain Python about a third slower; a benchmark that went on
would print figures of the wrong code with one easily missed line to say so.
:func:`load` therefore refuses a build that is missing, stale or unreadable, saying how
to build it, and measures plain Python only when ``BERTH_NATIVE=0`` asks for it (the
test suite runs the benchmarks so).
"""

from __future__ import annotations

import sys

from berth import native

_SAID: list[str] = []  # the status, once printed (a benchmark imports another's helpers)


def load() -> bool:
    """Load the compiled modules, before a benchmark imports any of them; True if they
    are in use, False if ``BERTH_NATIVE=0`` turned them off. Exits otherwise."""
    status = native.install()
    if not status.startswith(("in use", "off")):
        sys.exit(f"berth.native: {status}. A benchmark measures the compiled scheduler: "
                 "build it with `python scripts/build-native.py`, or run with "
                 "BERTH_NATIVE=0 to measure plain Python on purpose")
    if not _SAID:
        _SAID.append(status)
        print(f"berth.native: {status}", flush=True)
    return status.startswith("in use")
