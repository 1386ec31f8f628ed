"""Fixtures shared by every test: a real etcd for the integration tests; and how the
tests are laid out for two workers side by side (pytest-xdist, ``--dist loadscope``).

A test that needs etcd and cannot start one fails with a message saying how
to install it; nothing is skipped.

Side by side, a file's tests stay on one worker (its module's servers are started
once), but for the files whose tests share nothing (each benchmark run, each
robustness seed starts its own servers), whose tests go wherever a worker is free;
and the files that take longest start first, so that the run does not end waiting
on one of them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

from berth.store import EtcdConfig, Store
from berth_testkit.servers.etcd import EtcdServer, ServerUnavailable
from berth_testkit.servers.launch import reap

FOLDERS = {"unit": ("unit",), "integration": ("integration",),
           "faults": ("integration", "faults"),
           "robustness": ("integration", "robustness")}  # a test's markers, by its folder


# Files whose tests each start what they need: spread one test at a time.
APART = {"integration/test_benchmarks.py", "robustness/test_short.py"}
# Seconds each of the longest files took in a serial run (scripts/test.sh --durations=0,
# 2026-12-02): the order they start in side by side (the others after them, as collected).
# A file missing here costs only its place in the order.
SECONDS = {"faults/test_fault_table.py": 576, "integration/test_available.py": 533,
           "robustness/test_short.py": 509, "integration/test_benchmarks.py": 471,
           "integration/test_rollouts.py": 316, "integration/test_propagator_apply.py": 200,
           "integration/test_decoding_threads.py": 130, "integration/test_demo.py": 95}


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before anything starts (once: in the controller, not in each worker), the servers
    a test run that was killed left running are stopped (berth_testkit.servers.launch);
    the run says which."""
    if hasattr(session.config, "workerinput"):
        return
    killed = reap()
    if killed:
        print(f"stopped {len(killed)} servers a dead test run left running:", file=sys.stderr)
        for line in killed[:20]:
            print(f"  {line}", file=sys.stderr)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers by folder: ``-m unit`` runs what needs no server, ``-m integration``
    what starts real ones (the fault table and the robustness run among them), ``-m
    faults`` the table, ``-m robustness`` the short robustness runs. The longest work
    first (a worker takes the next file as it comes to it)."""
    per_file: dict[str, int] = {}
    for item in items:
        parts = item.path.parts
        folder = parts[parts.index("tests") + 1] if "tests" in parts else ""
        for marker in FOLDERS.get(folder, ()):
            item.add_marker(marker)
        where = _where(item)
        per_file[where] = per_file.get(where, 0) + 1

    def weight(item: pytest.Item) -> float:
        where = _where(item)
        whole = SECONDS.get(where, 0)
        return whole / per_file[where] if where in APART else whole

    items.sort(key=lambda item: -weight(item))  # stable: a file's order is kept


ROW = "fault table row"  # (fault, figure, held): a report property of tests/faults' tests
_rows: list[tuple[str, str, bool]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The fault table's rows, from the reports of the tests that made them (a worker's
    come to the controller with its reports)."""
    if report.when == "teardown":
        _rows.extend(tuple(value) for name, value in report.user_properties  # type: ignore[misc]
                     if name == ROW)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _rows:
        return
    width = max(len(fault) for fault, _, _ in _rows)
    terminalreporter.section("fault table (tests/faults)")
    terminalreporter.write_line(f"{'fault':<{width}}  held  figure")
    for fault, figure, held in _rows:
        terminalreporter.write_line(f"{fault:<{width}}  {'yes ' if held else 'NO  '}  {figure}")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with berth's scopes: a test's file (its tests share the
    module's servers), or the test itself in a file of :data:`APART`, in the order
    collected (``--no-loadscope-reorder``: the longest first), each worker taking the
    next when it comes to its last test. (A hook of the
    controller's: pytest-xdist's own groups, ``loadgroup``, rename the tests' ids, which
    pytest 9 no longer lets a plugin do.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            where = nodeid.split("::", 1)[0]
            return nodeid if where.removeprefix("tests/") in APART else where

        def _reschedule(self, node: Any) -> None:
            # the next scope only once the worker is on the last test of its own (it
            # holds that one until it knows what follows): a scope taken early would wait
            # there while the other worker has nothing to do
            if not node.shutting_down and self.workqueue and self._pending_of(
                    self.assigned_work[node]) > 1:
                return
            super()._reschedule(node)

    return ByFile(config, log)


def _where(item: pytest.Item) -> str:
    """The test's file, under tests/ ("integration/test_demo.py")."""
    parts = item.path.parts
    return "/".join(parts[parts.index("tests") + 1:]) if "tests" in parts else item.nodeid


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    try:
        server = EtcdServer().start()
    except ServerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.cleanup()


@pytest.fixture
def store(etcd_server: EtcdServer) -> Iterator[Store]:
    """A Store on the shared etcd, emptied of everything before the test."""
    s = Store(EtcdConfig(url=etcd_server.url))
    s.call("kv/deleterange", {"key": "AA==", "range_end": "AA=="}, "wipe")
    yield s
    s.close()
