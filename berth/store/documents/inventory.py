"""Inventories: a hub's ClusterProfiles as berth's clusters (docs/inventory.md).

An ``Inventory`` names a Kubernetes API that publishes ClusterProfiles (KEP-4322:
OCM's hub, GKE Fleet, any cluster manager), the namespace they are in there (and
optionally the ``x-k8s.io/cluster-manager`` label they must carry), the consumer's
provider file that says how berth reaches a profile's cluster (its exec plugins:
``berth/kubeaccess.py``), and where the clusters land in berth: a namespace and
labels. The inventory process keeps one berth Cluster per profile there; what it
last made of each is the Inventory's status at
``/berth/v1/status/inventories/<name>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from enum import StrEnum
from typing import Any

import msgspec

from berth.kubeaccess import AccessError, providers
from berth.store import keys
from berth.store.documents.base import CamelStrict, Metadata, Strict
from berth.store.labels import label_problem

# Every Cluster an inventory keeps carries this label, naming it: what tells its own
# from a user's (never overwritten).
INVENTORY_LABEL = "inventory.berth.io/name"
UNHEALTHY_TAINT = "inventory.berth.io/unhealthy"  # its profile's ControlPlaneHealthy not True
GONE_TAINT = "inventory.berth.io/gone"  # its profile was deleted: its applications leave


class InventorySpec(CamelStrict):
    kubeconfig: dict[str, Any]  # the hub's API; its users are kept apart
    namespace: str  # where its ClusterProfiles are
    cluster_manager: str = ""  # only profiles labelled x-k8s.io/cluster-manager: <this>
    # the consumer's provider file, its contents: {"providers": [{"name", "execConfig"}]}
    providers: dict[str, Any] = msgspec.field(default_factory=dict)
    # the berth namespace its clusters land in (the one etcd-secure.sh lets it write)
    cluster_namespace: str = "inventory"
    labels: dict[str, str] = {}  # added to each of its clusters

    def problems(self) -> Iterator[tuple[str, str]]:
        """What is wrong with it: (the field below ``spec``, why)."""
        for field, value in (("namespace", self.namespace),
                             ("clusterNamespace", self.cluster_namespace)):
            if not keys.NAMESPACE_RE.fullmatch(value):
                yield f".{field}", (f"{value!r} is not a namespace name (lower case letters, "
                                    "digits and '-', at most 63)")
        if not isinstance(self.kubeconfig.get("clusters"), list) or not self.kubeconfig.get(
                "current-context"):
            yield ".kubeconfig", ("a kubeconfig with clusters and a current-context (the hub "
                                  "whose ClusterProfiles are read)")
        if self.providers:
            try:
                providers(self.providers)
            except AccessError as exc:
                yield ".providers", str(exc)
        for key, value in self.labels.items():
            why = label_problem(key, value)
            if why:
                yield f".labels.{key}", why


class Inventory(Strict, tag_field="kind", tag="Inventory"):
    metadata: Metadata
    spec: InventorySpec
    api: str = "core"


class ProfileState(StrEnum):
    """What became of one ClusterProfile."""

    PUSH = "Push"  # a Cluster berth reaches through the provider's exec plugin
    PULL = "Pull"  # no provider berth was given: a Pull cluster (its agent joins)
    UNHEALTHY = "Unhealthy"  # its ControlPlaneHealthy is not True: tainted, left
    GONE = "Gone"  # deleted from the hub: tainted, its Cluster removed once it is empty
    REFUSED = "Refused"  # not made: a clash with a Cluster of someone else's, a bad name


class ProfileStatus(msgspec.Struct, omit_defaults=True):
    cluster: str = ""  # berth's "<namespace>/<name>"
    state: ProfileState = ProfileState.PUSH
    reason: str = ""


class InventoryState(StrEnum):
    SYNCED = "Synced"  # every profile read and kept
    FAILING = "Failing"  # the hub cannot be read: nothing changed meanwhile (see reason)


class InventoryStatus(msgspec.Struct, omit_defaults=True):
    state: InventoryState = InventoryState.SYNCED
    reason: str = ""
    profiles: dict[str, ProfileStatus] = {}  # by profile name
    # when it read the hub whole and found this (written again only when what it says
    # changes: not each pass)
    synced: datetime | None = None
    term: int = 0  # the inventory process's term that wrote this


class InventoryMeta(msgspec.Struct, omit_defaults=True):
    name: str


class InventoryRead(msgspec.Struct, tag_field="kind", tag="Inventory", omit_defaults=True):
    """``/berth/v1/status/inventories/<name>``: what the inventory process last made of
    an Inventory."""

    metadata: InventoryMeta
    status: InventoryStatus = msgspec.field(default_factory=InventoryStatus)
    api: str = "core"


__all__ = ["GONE_TAINT", "INVENTORY_LABEL", "UNHEALTHY_TAINT", "Inventory", "InventoryMeta",
           "InventoryRead", "InventorySpec", "InventoryState", "InventoryStatus",
           "ProfileState", "ProfileStatus"]
