"""The inventory process's rules over an in-memory etcd, the hub's answers given by the
test: profiles made Clusters (their users apart), a user's Cluster never overwritten, a
hub that cannot be read changing nothing, a deleted profile's Cluster tainted and kept
while an application is bound to it, taken back when the profile returns, deleted once
empty; an Inventory written past `berth apply`'s checks refused where it is read."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import pytest

from berth.controllers.inventory.config import InventoryConfig
from berth.controllers.inventory.inventory import HubDown, InventoryController
from berth.store import keys
from berth.store.documents.inventory import Inventory, InventoryRead
from berth_testkit.memory import MemoryStore
from berth_testkit.scheduler_env import put

HUB = {"apiVersion": "v1", "kind": "Config", "current-context": "hub",
       "clusters": [{"name": "hub", "cluster": {"server": "https://hub.invalid:6443"}}],
       "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "u"}}],
       "users": [{"name": "u", "user": {"token": "t"}}]}
INVENTORY = {"api": "core", "kind": "Inventory", "metadata": {"name": "hub"},
             "spec": {"kubeconfig": HUB, "namespace": "fleet", "providers": {"providers": [
                 {"name": "reader", "execConfig": {"command": "/bin/reader"}}]}}}


def profile(name: str, healthy: str = "True") -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"conditions": [{"type": "ControlPlaneHealthy", "status": healthy}],
                       "accessProviders": [{"name": "reader", "cluster": {
                           "server": f"https://{name}.invalid:6443"}}]}}


class Hub:
    """What the hub answers: these profiles, or it cannot be read."""

    def __init__(self) -> None:
        self.profiles: list[dict[str, Any]] = []
        self.down = False

    def __call__(self, *_: Any) -> list[dict[str, Any]]:
        if self.down:
            raise HubDown("NotConnected: connection refused")
        return list(self.profiles)


@pytest.fixture
def running() -> Iterator[tuple[MemoryStore, InventoryController, Hub]]:
    store, hub = MemoryStore(), Hub()
    ctl = InventoryController(store, InventoryConfig(interval=3600))  # passes by the test
    ctl._profiles = hub  # type: ignore[method-assign]
    ctl.start(sync_timeout=5)
    try:
        yield store, ctl, hub
    finally:
        ctl.stop()


def until(check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if (got := check()):
            return got
        time.sleep(0.01)
    raise AssertionError("not in 5 s")


def inventory(store: MemoryStore, doc: dict[str, Any]) -> Inventory:
    put(store, keys.resource_key("Inventory", "hub"), doc)
    return msgspec.convert(doc, Inventory)


def cluster(store: MemoryStore, name: str) -> dict[str, Any] | None:
    kv = store.get(keys.resource_key("Cluster", name, "inventory"))
    return msgspec.json.decode(kv.value) if kv is not None else None


def said(store: MemoryStore) -> InventoryRead:
    kv = store.get(keys.status_key("Inventory", "", "hub"))
    assert kv is not None
    return msgspec.json.decode(kv.value, type=InventoryRead)


def synced(ctl: InventoryController, key: str, present: bool = True) -> None:
    """The controller's informers have the write at ``key`` (or its deletion)."""
    until(lambda: (ctl.clusters.get(key) is not None) == present)


def east_made(store: MemoryStore, ctl: InventoryController, hub: Hub
              ) -> tuple[Inventory, str]:
    """The hub holding profile east, the inventory synced once, its Cluster seen: the
    Inventory and the Cluster's key."""
    inv = inventory(store, INVENTORY)
    hub.profiles = [profile("east")]
    ctl._sync(inv)
    key = keys.resource_key("Cluster", "east", "inventory")
    synced(ctl, key)
    return inv, key


def test_profiles_become_clusters_and_a_users_cluster_is_left_alone(
        running: tuple[MemoryStore, InventoryController, Hub]) -> None:
    store, ctl, hub = running
    inv = inventory(store, INVENTORY)
    put(store, keys.resource_key("Cluster", "mine", "inventory"), {
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": "mine", "namespace": "inventory"}, "spec": {"mode": "Pull"}})
    hub.profiles = [profile("east"), profile("mine")]
    synced(ctl, keys.resource_key("Cluster", "mine", "inventory"))
    ctl._sync(inv)
    east = cluster(store, "east")
    assert east is not None and east["metadata"]["labels"]["inventory.berth.io/name"] == "hub"
    assert east["spec"]["kubeconfig"]["users"] == [{"name": "reader"}]  # its user apart
    creds = store.get(keys.secrets_key("Cluster", "east", "inventory"))
    assert creds is not None and b"/bin/reader" in creds.value
    assert cluster(store, "mine") == {"api": "kubernetes", "kind": "Cluster", "metadata": {
        "name": "mine", "namespace": "inventory"}, "spec": {"mode": "Pull"}}
    status = said(store).status
    assert (status.profiles["east"].state, status.profiles["mine"].state) == ("Push", "Refused")
    assert "written by a user" in status.profiles["mine"].reason
    # nothing changed on the hub: nothing written again
    synced(ctl, keys.resource_key("Cluster", "east", "inventory"))
    revision = store.revision()
    ctl._sync(inv)
    assert store.revision() == revision


def test_a_hub_that_cannot_be_read_changes_nothing(
        running: tuple[MemoryStore, InventoryController, Hub]) -> None:
    store, ctl, hub = running
    inv, key = east_made(store, ctl, hub)
    hub.down = True
    before = store.get(key)
    ctl._sync(inv)
    assert store.get(key) == before
    status = said(store).status
    assert status.state == "Failing" and "the hub cannot be read" in status.reason
    assert status.profiles["east"].state == "Push"  # what it last said of each, kept


def test_a_deleted_profile_leaves_once_nothing_runs_there_and_may_come_back(
        running: tuple[MemoryStore, InventoryController, Hub]) -> None:
    store, ctl, hub = running
    inv, key = east_made(store, ctl, hub)
    put(store, keys.binding_key("Application", "inventory", "web"), {
        "api": "kubernetes", "kind": "Binding",
        "metadata": {"name": "web", "namespace": "inventory"},
        "spec": {"targets": [{"kind": "Cluster", "name": "east", "namespace": "inventory"}]}})
    until(lambda: ctl.bindings.items())
    hub.profiles = []
    ctl._sync(inv)  # tainted: its applications leave
    assert [t["key"] for t in cluster(store, "east")["spec"]["taints"]] == [  # type: ignore[index]
        "inventory.berth.io/gone"]
    until(lambda: "gone" in ctl.clusters.get(key).metadata.labels.values())  # type: ignore[union-attr]
    ctl._sync(inv)  # kept while bound
    assert cluster(store, "east") is not None
    assert "waiting for application inventory/web to leave" in said(
        store).status.profiles["east"].reason
    hub.profiles = [profile("east")]  # back: the taint goes
    ctl._sync(inv)
    assert "taints" not in cluster(store, "east")["spec"]  # type: ignore[index]
    until(lambda: "gone" not in ctl.clusters.get(key).metadata.labels.values())  # type: ignore[union-attr]
    hub.profiles = []
    ctl._sync(inv)
    until(lambda: "gone" in ctl.clusters.get(key).metadata.labels.values())  # type: ignore[union-attr]
    store.delete(keys.binding_key("Application", "inventory", "web"))
    until(lambda: not ctl.bindings.items())
    ctl._sync(inv)  # nothing bound, nothing recorded: deleted, its credentials too
    assert cluster(store, "east") is None
    assert store.get(keys.secrets_key("Cluster", "east", "inventory")) is None


def test_an_inventory_written_past_the_clis_checks_is_refused_where_it_is_read(
        running: tuple[MemoryStore, InventoryController, Hub]) -> None:
    store, ctl, hub = running
    bad = {**INVENTORY, "spec": {**INVENTORY["spec"], "clusterNamespace": "Not_A_Namespace"}}
    inv = inventory(store, bad)
    hub.profiles = [profile("east")]
    ctl._sync(inv)
    status = said(store).status
    assert status.state == "Failing" and "spec.clusterNamespace" in status.reason
    assert store.count_prefix(keys.resource_prefix("Cluster")) == 0
