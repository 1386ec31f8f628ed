"""The fault table's system (one for the module) and the table, printed after the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from berth_testkit.servers.etcd import ServerUnavailable
from tests.faults.system import ROWS, System


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    workdir: Path = tmp_path_factory.mktemp("faults")
    made = System(workdir)
    try:
        made.start()
    except ServerUnavailable as exc:
        made.stop()
        pytest.fail(str(exc), pytrace=False)
    yield made
    made.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not ROWS:
        return
    width = max(len(r.fault) for r in ROWS)
    terminalreporter.section("fault table (tests/faults)")
    terminalreporter.write_line(f"{'fault':<{width}}  held  figure")
    for r in ROWS:
        terminalreporter.write_line(f"{r.fault:<{width}}  {'yes ' if r.held else 'NO  '}  "
                                    f"{r.figure}")
