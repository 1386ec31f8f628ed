"""How the suite starts its servers: :func:`spawn`.

**Recorded, so that a dead run's are stopped.** A test stops what it started in its
fixtures' teardown; a run that is killed (a CI timeout, a worker killed, Ctrl-C twice)
runs no teardown, and its etcd, API servers and berth processes live on, loading the
machine under every later run — the fault table's rows bound by time then fail for
reasons of their own (seen 2026-12-02: the leftovers of one interrupted run slowed the
next fault table by 40 %, and an agent restarted too late for its grace). :func:`spawn`
records each server under :data:`RUN_DIR`, by the process that started it (its pid
and start time, so that a reused pid is not taken for it); :func:`reap`, called once
as a test session begins, kills the recorded servers of every starter that is gone.
Only those: a run beside this one is left alone, and only test processes record
(pytest is loaded): the demo (``scripts/run.sh``, also when the suite runs it) and
the benchmarks' scripts start the same servers and are never taken for a dead run's.

**Go's collector at** ``GOGC=400`` in tests (unless the environment says otherwise):
the Go servers (etcd, the Kubernetes control planes, Prometheus) spend less CPU
collecting, for twice the memory, which this machine has and its CPU has not. The
benchmarks and the demo keep Go's default: they measure and show what a user runs.
Measured 2026-12-03 on ``test_available.py``'s 200-application move (Push), alternating,
two runs each: 86 and 82 s of CPU in all against 91 and 89 (the API servers 33.8
and 31.1 s against 36.0 and 35.5 s); an API server's peak resident memory 690 MB
against 346 MB.
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
GOGC = "400"  # Go's collector in the servers a test starts (above)


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
    """``subprocess.Popen(args, **kwargs)``; in a test process with :data:`GOGC` unless
    the environment sets it, and recorded for :func:`reap`."""
    testing = "pytest" in sys.modules
    if testing:
        kwargs["env"] = {"GOGC": GOGC, **(kwargs.get("env") or os.environ)}
    proc: subprocess.Popen[bytes] = subprocess.Popen(args, **kwargs)
    started = _started(proc.pid)
    if started is not None and testing:
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
