"""Which Exports the exporter runs, in memory (#72 item 6): an Export read before the
credentials written with it in one transaction waits for them — no runner, no
Failing — and one whose credentials are truly missing is Failing once, naming the
user, and its Recovered comes from the runner that takes it next. The real-server
twin, an Export applied and synced with its credentials apart:
tests/integration/test_argocd_docs.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from berth.bootstrap import plan, write
from berth.bootstrap.load import to_document
from berth.controllers.exporter.config import ExporterConfig
from berth.controllers.exporter.exporter import Exporter
from berth.store import keys
from berth.store.documents import Exported
from berth.store.documents.export import ExportState
from berth.store.ops import Delete
from berth_testkit.memory import MemoryStore

KUBECONFIG: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Config", "current-context": "hub",
    "clusters": [{"name": "hub", "cluster": {"server": "https://127.0.0.1:9"}}],
    "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "berth-exporter"}}],
    "users": [{"name": "berth-exporter", "user": {"token": "secret-token"}}]}


@pytest.fixture
def exporter() -> Iterator[tuple[MemoryStore, Exporter]]:
    store = MemoryStore()
    e = Exporter(store, ExporterConfig(events=False))
    yield store, e
    for runner in list(e.runners.values()):
        runner.stop()


def apply(store: MemoryStore, *, force: bool = False) -> None:
    """As `berth apply` writes it: the Export and its credentials in one transaction."""
    loaded = to_document("export.yaml", {"api": "core", "kind": "Export",
                                         "metadata": {"name": "argocd"},
                                         "spec": {"kubeconfig": KUBECONFIG}})
    write(store, plan(store, [loaded], force=force))


def status(store: MemoryStore) -> Exported | None:
    kv = store.get(keys.exported_key("argocd"))
    return None if kv is None else msgspec.json.decode(kv.value, type=Exported)


def test_an_export_seen_before_its_credentials_waits_for_them(
        exporter: tuple[MemoryStore, Exporter]) -> None:
    store, e = exporter
    apply(store)
    secret = store.get(keys.secrets_key("Export", "argocd"))
    assert secret is not None and b"secret-token" in secret.value
    e.exports.sync()  # the Export is delivered; its credentials' informer is behind
    e._changed.set()
    e._plan_step()
    assert not e.runners and e._waiting and status(store) is None  # no false alarm
    e.secrets.sync()  # ... and now they are there
    e._plan_step()
    assert list(e.runners) == ["argocd"]
    runner = e.runners["argocd"]
    assert runner.kubeconfig["users"][0]["user"] == {"token": "secret-token"}
    assert runner.state is ExportState.PENDING


def test_credentials_truly_missing_are_failing_once_and_recovered_by_the_next_runner(
        exporter: tuple[MemoryStore, Exporter]) -> None:
    store, e = exporter
    apply(store)
    store.commit([Delete(keys.secrets_key("Export", "argocd"))])  # lost, by hand
    e.exports.sync()
    e.secrets.sync()  # seen past the Export's revision: not coming
    e._changed.set()
    e._plan_step()
    said = status(store)
    assert said is not None and said.status.state is ExportState.FAILING
    assert "its credentials are missing (user berth-exporter, stored apart at " \
           "/berth/v1/secrets/exports/argocd)" in said.status.reason
    assert not e.runners
    apply(store, force=True)  # applied again: its runner starts Failing, says the Recovered
    e.exports.sync()
    e.secrets.sync()
    e._changed.set()
    e._plan_step()
    assert e.runners["argocd"].state is ExportState.FAILING
    assert e._failing == {}
