"""What an inventory makes of one ClusterProfile: the berth Cluster it wants, pure.

A profile (``multicluster.x-k8s.io/v1alpha1``, KEP-4322) becomes a Cluster of the same
name in the inventory's berth namespace:

* its **labels**: the profile's own labels, then each of ``status.properties`` as a
  label (``clusterset.k8s.io/cluster-id``, a region, a zone, ...), then the
  Inventory's ``labels``, then the inventory's name under ``inventory.berth.io/name``
  (what marks the Cluster as the inventory's) and a digest of the rest
  (``inventory.berth.io/digest``: what tells it that nothing changed). A label or a
  property that is not a valid label is left out, and said;
* **how berth reaches it**: the first provider of the consumer's provider file that
  the profile lists (``berth/kubeaccess.py``): a Push cluster whose kubeconfig's user
  is that provider's exec plugin — the credential comes from the plugin when a call
  needs it, and is written nowhere. A profile that lists none of them (or whose
  access berth cannot use, said) is a Pull cluster: its agent joins as any agent;
* **its health**: a profile whose ``ControlPlaneHealthy`` condition is not True
  (the consumer's guide: skip it) is tainted ``inventory.berth.io/unhealthy``
  (NoSchedule: berth's scheduler moves what runs there, make-before-break where the
  cluster still answers, and places nothing new); berth's own probe judges the
  cluster besides, as any cluster's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import msgspec

from berth.kubeaccess import AccessError, Provider, kubeconfig
from berth.store import keys
from berth.store.documents.inventory import (
    INVENTORY_LABEL,
    UNHEALTHY_TAINT,
    ProfileState,
)
from berth.store.labels import label_problem

PROFILE_VERSION = "multicluster.x-k8s.io/v1alpha1"
MANAGER_LABEL = "x-k8s.io/cluster-manager"
HEALTHY_CONDITION = "ControlPlaneHealthy"
DIGEST_LABEL = "inventory.berth.io/digest"


@dataclass(frozen=True)
class Wanted:
    """The Cluster a profile makes (``doc``: its document, users and all), what it is
    (``state``), why ("" for a healthy Push cluster), and what was left out of it."""

    profile: str
    name: str
    doc: dict[str, Any]
    state: ProfileState
    reason: str = ""
    left_out: tuple[str, ...] = field(default=())


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _healthy(status: dict[str, Any]) -> tuple[bool, str]:
    for c in _list(status.get("conditions")):
        if isinstance(c, dict) and c.get("type") == HEALTHY_CONDITION:
            if c.get("status") == "True":
                return True, ""
            return False, str(c.get("message") or c.get("reason") or
                              f"{HEALTHY_CONDITION} is {c.get('status')}")[:300]
    return False, f"no {HEALTHY_CONDITION} condition yet"


def _labels(inventory: str, profile: dict[str, Any], extra: dict[str, str]
            ) -> tuple[dict[str, str], list[str]]:
    out: dict[str, str] = {}
    left: list[str] = []
    found: list[tuple[Any, Any]] = list(
        _dict(_dict(profile.get("metadata")).get("labels")).items())
    found += [(p.get("name"), p.get("value")) for p in
              _list(_dict(profile.get("status")).get("properties")) if isinstance(p, dict)]
    for key, value in [*found, *extra.items()]:
        if not isinstance(key, str) or not isinstance(value, str):
            left.append(f"property {key!r}: not a name and a text value")
            continue
        why = label_problem(key, value)
        if why:
            left.append(why)
        else:
            out[key] = value
    out[INVENTORY_LABEL] = inventory
    return out, left


def wanted(inventory: str, namespace: str, labels: dict[str, str], profile: dict[str, Any],
           offered: tuple[Provider, ...]) -> Wanted:
    """The Cluster in berth namespace ``namespace`` that ``profile`` makes; ValueError
    when it can make none (its name is not one berth takes)."""
    name = str(_dict(profile.get("metadata")).get("name") or "")
    keys.check_name(name, "cluster profile name")
    status = _dict(profile.get("status"))
    healthy, sick = _healthy(status)
    out_labels, left = _labels(inventory, profile, labels)
    spec: dict[str, Any] = {}
    state, reason = ProfileState.PUSH, ""
    try:
        spec["kubeconfig"] = kubeconfig(profile, offered) if offered else None
    except AccessError as exc:
        spec["kubeconfig"] = None
        reason = f"{exc}: a Pull cluster (its agent joins)"
    if spec["kubeconfig"] is None:
        del spec["kubeconfig"]
        spec["mode"] = "Pull"
        state = ProfileState.PULL
        reason = reason or "no provider of berth's listed: a Pull cluster (its agent joins)"
    if not healthy:
        spec["taints"] = [{"key": UNHEALTHY_TAINT, "effect": "NoSchedule"}]
        state, reason = ProfileState.UNHEALTHY, sick
    digest = hashlib.sha256(msgspec.json.encode([out_labels, spec])).hexdigest()[:16]
    doc = {"api": "kubernetes", "kind": "Cluster",
           "metadata": {"name": name, "namespace": namespace,
                        "labels": {**out_labels, DIGEST_LABEL: digest}},
           "spec": spec}
    return Wanted(name, name, doc, state, reason, tuple(left))


def digest_of(doc: dict[str, Any]) -> str:
    return str(_dict(_dict(doc.get("metadata")).get("labels")).get(DIGEST_LABEL, ""))
