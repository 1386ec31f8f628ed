"""The fault table's system (one for the module); each row a test adds goes with its
report (tests/conftest.py prints the table after the run, wherever the test ran)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from berth_testkit.servers.etcd import ServerUnavailable
from tests.conftest import ROW
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


@pytest.fixture(autouse=True)
def table_rows(request: pytest.FixtureRequest) -> Iterator[None]:
    """The rows this test added, as its report's ``fault table row`` properties."""
    before = len(ROWS)
    yield
    for r in ROWS[before:]:
        request.node.user_properties.append((ROW, (r.fault, r.figure, r.held)))
