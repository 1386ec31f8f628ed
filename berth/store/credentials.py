"""A Cluster's credentials, kept apart from the Cluster.

A kubeconfig says where a cluster is (``clusters``: server, CA; ``contexts``)
and who berth is there (``users``: token, client key, exec plugin, password).
The first part is no secret and stays in the Cluster document, where the
scheduler, the CLI and operators read it; the ``users`` go to
``/berth/v1/secrets/clusters/<namespace>/<name>``, which only the propagator
(and the loader that writes it) may read under etcd's roles. The Cluster keeps
each user's name, so its contexts still make sense.

:func:`split` does this when a Cluster is written; :func:`merge` puts the two
back together where a cluster is reached. A Cluster written with its users
inline (by hand, or before this layout) still works: what the credentials key
holds wins, user by user.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec


class CredentialsMeta(msgspec.Struct, omit_defaults=True):
    name: str
    namespace: str | None = None


class ClusterCredentials(msgspec.Struct, tag_field="kind", tag="ClusterCredentials"):
    """``/berth/v1/secrets/clusters/<ns>/<name>``: the kubeconfig's ``users`` entries."""

    metadata: CredentialsMeta
    users: list[dict[str, Any]] = []
    api: str = "kubernetes"


def has_credentials(kubeconfig: dict[str, Any] | None) -> bool:
    """Whether a kubeconfig carries any user's credentials inline."""
    users = (kubeconfig or {}).get("users")
    return isinstance(users, list) and any(
        isinstance(u, dict) and u.get("user") for u in users)


def split(kubeconfig: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the kubeconfig without credentials, its users with them)."""
    public = {k: copy.deepcopy(v) for k, v in kubeconfig.items() if k != "users"}
    users = [u for u in kubeconfig.get("users") or [] if isinstance(u, dict)]
    public["users"] = [{"name": u["name"]} for u in users if "name" in u]
    return public, copy.deepcopy(users)


def merge(kubeconfig: dict[str, Any], users: list[dict[str, Any]]) -> dict[str, Any]:
    """The kubeconfig to connect with: its users completed from ``users`` by name."""
    if not users:
        return kubeconfig
    secret = {u.get("name"): u for u in users if isinstance(u, dict)}
    mine = [u for u in kubeconfig.get("users") or [] if isinstance(u, dict)]
    names = {u.get("name") for u in mine}
    merged = [secret.get(u.get("name"), u) for u in mine]
    merged += [u for name, u in secret.items() if name not in names]
    return {**kubeconfig, "users": merged}


def credentials_doc(name: str, namespace: str | None,
                    users: list[dict[str, Any]]) -> ClusterCredentials:
    return ClusterCredentials(CredentialsMeta(name, namespace), users)
