"""Each cluster's kubeconfig as the propagator connects with it: the Cluster's own
(where the cluster is) completed by its credentials key (who berth is there).

The propagator is the one process whose etcd role may read
``/berth/v1/secrets/``. The merged kubeconfig of a cluster is kept while neither
part changes, so the connection cache (keyed by the kubeconfig's identity) hits.
A Cluster still carrying its users inline works as before; the propagator says
once that `berth apply --force` moves them apart.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from berth.controllers.propagator.views import ClusterView
from berth.controllers.runtime import Informer
from berth.store import Store, keys
from berth.store.credentials import ClusterCredentials, has_credentials, merge

log = logging.getLogger(__name__)


class Kubeconfigs:
    def __init__(self, store: Store, *, idle_timeout: float) -> None:
        self.informer: Informer[ClusterCredentials] = Informer(
            store, keys.CLUSTER_CREDENTIALS, ClusterCredentials, idle_timeout=idle_timeout)
        self._lock = threading.Lock()
        # cluster key → (its kubeconfig, its credentials, the two merged)
        self._merged: dict[str, tuple[object, object, dict[str, Any]]] = {}
        self._inline_said: set[str] = set()

    def of(self, key: str, view: ClusterView) -> dict[str, Any] | None:
        """The kubeconfig to reach the cluster at ``key`` with (None: it has none)."""
        public = view.spec.kubeconfig
        if not public:
            return None
        meta = view.metadata
        secret = self.informer.get(keys.credentials_key(meta.namespace or "", meta.name))
        with self._lock:
            hit = self._merged.get(key)
            if hit is not None and hit[0] is public and hit[1] is secret:
                return hit[2]
        merged = merge(public, secret.users if secret is not None else [])
        with self._lock:
            self._merged[key] = (public, secret, merged)
        if secret is None and has_credentials(public) and key not in self._inline_said:
            self._inline_said.add(key)
            log.info("cluster %s/%s keeps its credentials in its Cluster document; "
                     "`berth apply --force` moves them under %s", meta.namespace, meta.name,
                     keys.CLUSTER_CREDENTIALS)
        return merged

    def forget(self, key: str) -> None:
        with self._lock:
            self._merged.pop(key, None)
