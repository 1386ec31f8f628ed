"""The secrets the propagator uses, read from where they are kept apart.

A Cluster's kubeconfig says where the cluster is; its users (who berth is
there) are kept under ``/berth/v1/secrets/clusters/``. An Application's
Kubernetes Secrets keep their data under ``/berth/v1/secrets/applications/``.
The propagator is the one process whose etcd role may read those two
prefixes (:mod:`berth.store.credentials`).

The merged kubeconfig of a cluster is kept while neither part changes, so the
connection cache (keyed by the kubeconfig's identity) hits. A Cluster still
carrying its users inline works as before; the propagator says once that
``berth upgrade`` moves them apart. An Application's generation is applied
only with the credentials written with it: until they are seen, its
reconcile waits (and says so), so a new manifest never goes out with the
secrets of an older one.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from berth.controllers.propagator.kube import Unavailable
from berth.controllers.propagator.views import ClusterView
from berth.controllers.runtime import Informer
from berth.store import Store, keys
from berth.store.credentials import (
    STORED,
    Credentials,
    apart_in_manifest,
    has_credentials,
    merge,
    merge_users,
    missing_users,
)

log = logging.getLogger(__name__)


class Kubeconfigs:
    def __init__(self, store: Store, *, idle_timeout: float) -> None:
        self.informer: Informer[Credentials] = Informer(
            store, keys.CLUSTER_CREDENTIALS, STORED, idle_timeout=idle_timeout)
        self._lock = threading.Lock()
        # cluster key → (its kubeconfig, its credentials, the two merged)
        self._merged: dict[str, tuple[object, object, dict[str, Any]]] = {}
        self._inline_said: set[str] = set()

    def of(self, key: str, view: ClusterView) -> dict[str, Any] | None:
        """The kubeconfig to reach the cluster at ``key`` with (None: it has none).
        ValueError while the credentials it keeps apart are not read (written with it in
        one transaction, they arrive by another watch: a moment later, unless lost)."""
        public = view.spec.kubeconfig
        if not public:
            return None
        meta = view.metadata
        secret = self.informer.get(keys.secrets_key("Cluster", meta.name, meta.namespace or ""))
        with self._lock:
            hit = self._merged.get(key)
            if hit is not None and hit[0] is public and hit[1] is secret:
                return hit[2]
        users = secret.users if secret is not None else []
        missing = missing_users(public, users)
        if missing:  # the document without the credentials written with it: never half
            where = keys.secrets_key("Cluster", meta.name, meta.namespace or "")
            raise ValueError(f"its credentials (user {', '.join(missing)}) are not read: "
                             f"expected at {where}")
        merged = merge_users(public, users)
        with self._lock:
            self._merged[key] = (public, secret, merged)
        if secret is None and has_credentials(public) and key not in self._inline_said:
            self._inline_said.add(key)
            log.info("cluster %s/%s keeps its credentials in its Cluster document; "
                     "`berth upgrade` moves them under %s", meta.namespace, meta.name,
                     keys.CLUSTER_CREDENTIALS)
        return merged

    def forget(self, key: str) -> None:
        with self._lock:
            self._merged.pop(key, None)


class AppSecrets:
    """Applications' Secrets' data, kept apart from their manifests."""

    PREFIX = keys.secrets_prefix("Application")

    def __init__(self, store: Store, *, idle_timeout: float) -> None:
        self.informer: Informer[Credentials] = Informer(store, self.PREFIX, STORED,
                                                   idle_timeout=idle_timeout)

    def manifest(self, namespace: str, name: str, generation: int, manifest: list[Any]
                 ) -> list[Any]:
        """``manifest`` with its Secrets' data put back; Unavailable (retried) until the
        credentials written with ``generation`` are seen."""
        if not apart_in_manifest(manifest):
            return manifest
        key = keys.secrets_key("Application", name, namespace)
        creds = self.informer.get(key)
        if creds is None or creds.generation != generation:
            seen = "none" if creds is None else f"those of generation {creds.generation}"
            raise Unavailable(f"waiting for its Secrets' data of generation {generation} at "
                              f"{key} ({seen} seen so far)")
        merged: list[Any] = merge({"spec": {"manifest": manifest}}, creds)["spec"]["manifest"]
        return merged
