"""Servers a dead test run left behind, found and stopped by the next run.

A test stops what it started in its fixtures' teardown; a run that is killed (a CI
timeout, a worker killed, Ctrl-C twice) runs no teardown, and its etcd, API servers
and berth processes live on, loading the machine under every later run — the fault
table's rows bound by time then fail for reasons of their own (seen 2026-12-02: the
leftovers of one interrupted run slowed the next fault table by 40 %, and an agent
restarted too late for its grace).

:func:`spawn` starts a server and records it under :data:`RUN_DIR`, by the process
that started it (its pid and start time, so that a reused pid is not taken for it);
:func:`reap`, called once as a test session begins, kills the recorded servers of
every starter that is gone. Only those: a run beside this one is left alone, and
only test processes record (pytest is loaded): the demo (``scripts/run.sh``, also
when the suite runs it) and the benchmarks' scripts start the same servers and are
never taken for a dead run's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

RUN_DIR = Path(os.environ.get("BERTH_TEST_RUN_DIR", "/tmp/berth-test-servers"))


def _started(pid: int) -> str | None:
    """The process's start time since boot (clock ticks), or None if there is none."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if fields[0] != "Z" else None  # a zombie is gone


def _me() -> Path:
    return RUN_DIR / f"{os.getpid()}-{_started(os.getpid())}"


def spawn(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **kwargs)``, recorded for :func:`reap` in a test
    process."""
    proc: subprocess.Popen[bytes] = subprocess.Popen(args, **kwargs)
    started = _started(proc.pid)
    if started is not None and "pytest" in sys.modules:
        mine = _me()
        mine.mkdir(parents=True, exist_ok=True)
        (mine / f"{proc.pid}-{started}").write_text(" ".join(args)[:500])
    return proc


def reap() -> list[str]:
    """Kill the recorded servers of every starter that is no longer running; what was
    killed, one line each."""
    killed: list[str] = []
    if not RUN_DIR.is_dir():
        return killed
    for owner in RUN_DIR.iterdir():
        pid, _, started = owner.name.partition("-")
        if not pid.isdigit() or _started(int(pid)) == started:
            continue  # not ours to judge, or its starter still runs
        for child in owner.iterdir():
            cpid, _, cstarted = child.name.partition("-")
            if cpid.isdigit() and _started(int(cpid)) == cstarted:
                try:
                    os.kill(int(cpid), signal.SIGKILL)
                    killed.append(f"{cpid}: {child.read_text()[:120]}")
                except (ProcessLookupError, PermissionError):
                    pass
            child.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # recorded meanwhile: the next run looks again
            owner.rmdir()
    return killed
