"""What the benchmarks measure of a running process: its CPU, its memory, a profile.

One place for them, so that every benchmark reads ``/proc`` and records py-spy the
same way and their figures compare.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: int | Iterable[int]) -> float:
    """The CPU time (user and system) the process(es) ``pids`` have used so far (a
    process that is gone counts nothing)."""
    total = 0.0
    for pid in [pids] if isinstance(pids, int) else pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def rss_mb(pid: int, field: str = "VmHWM") -> float:
    """A memory figure of process ``pid`` from ``/proc/<pid>/status`` in MiB (VmHWM: its
    peak resident set; VmRSS: the resident set now)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def py_spy() -> str:
    """The py-spy to run: the one installed beside this Python (a virtualenv's bin is
    often not on PATH), else the one on PATH; a clear error when there is none."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if not found:
        raise SystemExit("--profile needs py-spy: pip install py-spy (one of the "
                         "development dependencies in pyproject.toml)")
    return found


class Profile:
    """py-spy recording a process during one phase (raw collapsed stacks, GIL holders
    only) into ``PREFIX-<phase>.txt``, if a prefix is given (else it does nothing)."""

    def __init__(self, prefix: str | None, phase: str, pid: int) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.path = f"{prefix}-{phase}.txt" if prefix else ""
        if prefix:
            self.proc = subprocess.Popen(
                [py_spy(), "record", "--pid", str(pid), "--format", "raw", "--rate", "200",
                 "--gil", "--output", self.path],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(30)
            self.proc = None
