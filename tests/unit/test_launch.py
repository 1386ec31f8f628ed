"""The servers a killed test run left behind are stopped by the next run, and nothing
else is: not those of a run that still goes on, not a process that only reuses a
recorded pid (berth_testkit/servers/launch.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from berth_testkit.servers import launch


@pytest.fixture(autouse=True)
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(launch, "RUN_DIR", tmp_path / "servers")
    return tmp_path / "servers"


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"])


def test_a_dead_runs_servers_are_killed_and_its_record_removed(run_dir: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # a starter that has exited (its pid no longer runs, or runs another)
    server = sleeper()
    try:
        record = run_dir / f"{gone.pid}-1" / f"{server.pid}-{launch._started(server.pid)}"
        record.parent.mkdir(parents=True)
        record.write_text("sleep 60")
        killed = launch.reap()
        assert server.wait(5) == -9 and killed == [f"{server.pid}: sleep 60"]
        assert not record.parent.exists()
    finally:
        server.kill()
        server.wait()


def test_a_live_runs_servers_and_a_reused_pid_are_left_alone(run_dir: Path) -> None:
    mine = launch.spawn(["sleep", "60"])  # recorded: this test process runs on
    other = sleeper()
    try:
        gone = subprocess.Popen(["true"])
        gone.wait()
        stale = run_dir / f"{gone.pid}-1" / f"{other.pid}-0"  # the pid, another start
        stale.parent.mkdir(parents=True)
        stale.write_text("sleep 60")
        assert launch.reap() == []
        assert mine.poll() is None and other.poll() is None
        assert not stale.exists()  # the stale record went, the live run's stayed
        assert len(list(run_dir.glob("*/*"))) == 1
    finally:
        for proc in (mine, other):
            proc.kill()
            proc.wait()
