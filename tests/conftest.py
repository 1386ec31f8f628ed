"""Fixtures shared by every test: a real etcd for the integration tests.

A test that needs etcd and cannot start one fails with a message saying how
to install it; nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from berth.store import EtcdConfig, Store
from berth_testkit.servers.etcd import EtcdServer, ServerUnavailable

FOLDERS = {"unit": ("unit",), "integration": ("integration",),
           "faults": ("integration", "faults"),
           "robustness": ("integration", "robustness")}  # a test's markers, by its folder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Markers by folder: ``-m unit`` runs what needs no server, ``-m integration``
    what starts real ones (the fault table and the robustness run among them), ``-m
    faults`` the table, ``-m robustness`` the short robustness runs."""
    for item in items:
        parts = item.path.parts
        folder = parts[parts.index("tests") + 1] if "tests" in parts else ""
        for marker in FOLDERS.get(folder, ()):
            item.add_marker(marker)


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
