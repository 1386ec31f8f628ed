"""What a ClusterProfile makes: a Push cluster through the first provider berth shares
with it, a Pull cluster without one, a taint while its control plane is not healthy,
labels from its labels and properties (those that are labels), and a digest that
changes with any of it."""

from __future__ import annotations

from typing import Any

import pytest

from berth.controllers.inventory.profiles import DIGEST_LABEL, digest_of, wanted
from berth.kubeaccess import providers
from berth.store.documents.inventory import INVENTORY_LABEL, UNHEALTHY_TAINT, ProfileState

OFFERED = providers({"providers": [{"name": "reader", "execConfig": {
    "apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/reader"}}]})


def profile(name: str = "spoke-1", healthy: str = "True", **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"env": "prod"}},
            "status": {"conditions": [{"type": "ControlPlaneHealthy", "status": healthy,
                                       "message": "apiserver down"}],
                       "properties": [{"name": "clusterset.k8s.io/cluster-id", "value": "c1"},
                                      {"name": "region", "value": "eu west"}],
                       "accessProviders": [{"name": "reader", "cluster": {
                           "server": "https://spoke-1:6443"}}], **status}}


def test_a_healthy_profile_with_a_shared_provider_is_a_push_cluster() -> None:
    w = wanted("hub", "fleet", {"source": "hub"}, profile(), OFFERED)
    assert (w.name, w.state, w.reason) == ("spoke-1", ProfileState.PUSH, "")
    meta, spec = w.doc["metadata"], w.doc["spec"]
    assert meta["namespace"] == "fleet"
    assert {k: v for k, v in meta["labels"].items() if k != DIGEST_LABEL} == {
        "env": "prod", "clusterset.k8s.io/cluster-id": "c1", "source": "hub",
        INVENTORY_LABEL: "hub"}
    assert w.left_out == ("'eu west' is not a label value (at most 63 letters, digits, "
                          "'-', '_', '.')",)
    user = spec["kubeconfig"]["users"][0]["user"]["exec"]
    assert user["command"] == "/bin/reader" and user["interactiveMode"] == "Never"
    assert "taints" not in spec and "mode" not in spec


def test_without_a_shared_provider_it_is_a_pull_cluster_saying_why() -> None:
    w = wanted("hub", "fleet", {}, profile(accessProviders=[]), OFFERED)
    assert w.state is ProfileState.PULL and w.doc["spec"] == {"mode": "Pull"}
    assert "no matching cluster accessor" in w.reason
    assert wanted("hub", "fleet", {}, profile(), ()).doc["spec"] == {"mode": "Pull"}


def test_an_unhealthy_control_plane_is_tainted_and_the_digest_follows() -> None:
    well = wanted("hub", "fleet", {}, profile(), OFFERED)
    sick = wanted("hub", "fleet", {}, profile(healthy="False"), OFFERED)
    assert sick.state is ProfileState.UNHEALTHY and sick.reason == "apiserver down"
    assert sick.doc["spec"]["taints"] == [{"key": UNHEALTHY_TAINT, "effect": "NoSchedule"}]
    assert digest_of(well.doc) != digest_of(sick.doc)
    assert digest_of(well.doc) == digest_of(wanted("hub", "fleet", {}, profile(), OFFERED).doc)
    unknown = wanted("hub", "fleet", {}, profile(conditions=[]), OFFERED)
    assert unknown.reason == "no ControlPlaneHealthy condition yet"


def test_a_name_berth_cannot_take_is_refused() -> None:
    with pytest.raises(ValueError, match="cluster profile name"):
        wanted("hub", "fleet", {}, profile(name="-bad-"), OFFERED)
