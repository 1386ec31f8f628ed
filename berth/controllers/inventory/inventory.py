"""The inventory process: every Inventory's ClusterProfiles kept as berth's Clusters.

Its leader reads each Inventory's hub every ``interval`` seconds (the profiles of its
namespace, with the cluster-manager label when one is named) and keeps, in the
Inventory's berth namespace, one Cluster per profile (``profiles.py``), its users
(the provider's exec plugin) stored apart as every credential is. It writes only
Clusters it made — those labelled ``inventory.berth.io/name`` with its name — and
every write is guarded by the revision it read: a Cluster of someone else's with a
profile's name is left alone, the clash said in the Inventory's status
(``/berth/v1/status/inventories/<name>``). Its etcd role confines it to the
namespaces it may write (``scripts/etcd-secure.sh``): a refusal is said there too.

What it never does: change anything because the hub cannot be read (a hub down, a
credential refused, an answer it cannot read): every Cluster stays as it is, and the
status says why. A profile gone from the hub (or an Inventory deleted) does not
delete its Cluster: it is tainted ``inventory.berth.io/gone`` (NoSchedule), so the
scheduler moves its applications away — make-before-break where the cluster still
answers — and the Cluster is deleted once no application is bound to it or
recorded on it. One loop serves every Inventory, one after the other: a hub that
hangs delays the others by ``timeout`` at most.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import msgspec
from lightkube import KubeConfig

from berth.controllers.inventory.config import InventoryConfig
from berth.controllers.inventory.profiles import (
    DIGEST_LABEL,
    MANAGER_LABEL,
    PROFILE_VERSION,
    Wanted,
    digest_of,
    wanted,
)
from berth.controllers.runtime import Informer, Item
from berth.controllers.runtime.supervise import Loop
from berth.kubeaccess import AccessError, providers
from berth.kubeexec import plugin_of
from berth.kubehttp import KubeHttp
from berth.store import Conflict, Deposed, Store, StoreError, keys
from berth.store.codec import encode
from berth.store.credentials import STORED, Credentials, merge_users, missing_users, split
from berth.store.documents import Cluster
from berth.store.documents.inventory import (
    GONE_TAINT,
    INVENTORY_LABEL,
    Inventory,
    InventoryMeta,
    InventoryRead,
    InventoryState,
    InventoryStatus,
    ProfileState,
    ProfileStatus,
)
from berth.store.documents.validate import problems
from berth.store.ops import Delete, Put

log = logging.getLogger(__name__)

PAGE = 500


class _Meta(msgspec.Struct):
    name: str
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = {}
    created: datetime | None = None
    generation: int = 0


class ClusterHead(msgspec.Struct):
    """A Cluster as the inventory reads it: its metadata and its spec undecoded."""

    metadata: _Meta
    spec: dict[str, Any] = {}


class _Applied(msgspec.Struct):
    applied: dict[str, Any] = {}


class StatusHead(msgspec.Struct):
    """An application's status: the clusters it is recorded on."""

    status: _Applied = msgspec.field(default_factory=_Applied)


class _Target(msgspec.Struct):
    kind: str = "Cluster"
    name: str = ""
    namespace: str | None = None


class _Targets(msgspec.Struct):
    targets: list[_Target] = []


class BindingHead(msgspec.Struct):
    """A Binding: the clusters it names."""

    metadata: _Meta
    spec: _Targets = msgspec.field(default_factory=_Targets)


class HubDown(Exception):
    """The hub could not be read: nothing changes."""


@dataclass
class _Hub:
    identity: bytes  # the spec and users it was made from
    http: KubeHttp


class InventoryController:
    def __init__(self, store: Store, config: InventoryConfig) -> None:
        self.store = store
        self.config = config

        def informer(prefix: keys.Prefix, type_: Any) -> Informer[Any]:
            return Informer(store, prefix, type_, idle_timeout=config.watch_idle_timeout)

        self.inventories: Informer[Inventory] = informer(keys.resource_prefix("Inventory"),
                                                         Inventory)
        self.secrets: Informer[Credentials] = informer(keys.secrets_prefix("Inventory"),
                                                       STORED)
        self.clusters: Informer[ClusterHead] = informer(keys.resource_prefix("Cluster"),
                                                        ClusterHead)
        self.statuses: Informer[StatusHead] = informer(keys.status_prefix("Application"),
                                                       StatusHead)
        self.bindings: Informer[BindingHead] = informer(keys.binding_prefix("Application"),
                                                        BindingHead)
        self.informers: list[Informer[Any]] = [self.inventories, self.secrets, self.clusters,
                                               self.statuses, self.bindings]
        self._hubs: dict[str, _Hub] = {}  # the loop's own
        self._published: dict[str, bytes] = {}  # the loop's own: each status as written
        self._stop = threading.Event()
        self._loop = Loop("inventory", self._step, deadline=config.timeout * 20 + 120)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, sync_timeout: float = 60.0) -> None:
        for inf in self.informers:
            inf.start()
        if not all(inf.wait_synced(sync_timeout) for inf in self.informers):
            raise TimeoutError("the inventory process did not sync with etcd")
        self._loop.start()

    def stop(self) -> None:
        self._stop.set()
        self._loop.stop(timeout=self.config.timeout + 5)
        for inf in self.informers:
            inf.stop(wait=False)
        for inf in self.informers:
            inf.join()
        for hub in self._hubs.values():
            hub.http.close()

    def ready(self) -> bool:
        return all(inf.synced for inf in self.informers)

    def alive(self) -> bool:
        return self._loop.alive() and all(inf.alive() for inf in self.informers)

    # -- one pass -----------------------------------------------------------------------

    def _step(self) -> None:
        if self._stop.wait(self.config.interval):
            return
        names = set()
        for item in self.inventories.items():
            inv = item.obj
            names.add(inv.metadata.name)
            try:
                self._sync(inv)
            except Deposed:
                return
            except Exception:  # a bug: said with its trace; the other inventories go on
                log.exception("inventory %s: its pass failed", inv.metadata.name)
        for name in set(self._hubs) - names:
            self._hubs.pop(name).http.close()
        self._orphans(names)

    def _sync(self, inv: Inventory) -> None:
        name, spec = inv.metadata.name, inv.spec
        wrong = [f"spec{path}: {why}" for path, why in spec.problems()]
        if wrong:  # written past `berth apply`'s checks: refused here too, said
            self._publish(name, self._kept(name, InventoryState.FAILING,
                                           "not used: " + "; ".join(wrong[:3])))
            return
        skey = keys.secrets_key("Inventory", name)
        secret = self.secrets.get(skey)
        users = secret.users if secret is not None else []
        missing = missing_users(spec.kubeconfig, users)
        if missing:
            self._publish(name, InventoryStatus(
                InventoryState.FAILING, f"its credentials are missing (user "
                f"{', '.join(missing)}, stored apart at {skey}): apply the Inventory again"))
            return
        try:
            offered = providers(spec.providers) if spec.providers else ()
            listed = self._profiles(name, spec.namespace, spec.cluster_manager,
                                    merge_users(spec.kubeconfig, users))
        except (AccessError, HubDown, ValueError) as exc:
            self._publish(name, self._kept(name, InventoryState.FAILING,
                                           f"the hub cannot be read: {exc}; its clusters are "
                                           "left as they are"))
            return
        seen: dict[str, ProfileStatus] = {}
        mine = self._mine(name)
        for profile in listed:
            pname = str((profile.get("metadata") or {}).get("name") or "")
            try:
                want = wanted(name, spec.cluster_namespace, spec.labels, profile, offered)
            except ValueError as exc:
                seen[pname] = ProfileStatus("", ProfileState.REFUSED, str(exc))
                continue
            seen[pname] = self._keep(name, want)
            mine.pop(keys.resource_key("Cluster", want.name, spec.cluster_namespace), None)
        for key, item in mine.items():  # their profiles are gone
            gone = self._leave(keys.Key(key), item, "its cluster profile is gone from the hub")
            if gone is not None:
                seen[item.obj.metadata.name] = gone
        self._publish(name, InventoryStatus(InventoryState.SYNCED, "", seen,
                                            datetime.now(UTC).replace(microsecond=0)))

    def _profiles(self, name: str, namespace: str, manager: str,
                  kubeconfig: dict[str, Any]) -> list[dict[str, Any]]:
        """Every ClusterProfile of the hub's ``namespace`` (with ``manager``'s label)."""
        identity = msgspec.json.encode([namespace, kubeconfig])
        hub = self._hubs.get(name)
        if hub is None or hub.identity != identity:
            if hub is not None:
                hub.http.close()
            single = KubeConfig.from_dict(kubeconfig).get()
            if single is None:
                raise ValueError("the hub's kubeconfig names no current context")
            hub = _Hub(identity, KubeHttp(single, self.config.timeout,
                                          plugin_of(kubeconfig, single.context_name)))
            self._hubs[name] = hub
        path = f"/apis/{PROFILE_VERSION}/namespaces/{quote(namespace)}/clusterprofiles"
        params = {"limit": str(PAGE)}
        if manager:
            params["labelSelector"] = f"{MANAGER_LABEL}={manager}"
        out: list[dict[str, Any]] = []
        while True:
            try:
                answer = hub.http.request("GET", path, params=params)
            except OSError as exc:
                raise HubDown(f"{type(exc).__name__}: {exc}") from exc
            if answer.status != 200:
                raise HubDown(f"HTTP {answer.status}: {answer.body[:200]!r}")
            try:
                page = json.loads(answer.body)
                items = page["items"]
                more = (page.get("metadata") or {}).get("continue")
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise HubDown(f"an answer berth cannot read ({exc})") from exc
            out += [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []
            if not more:
                return out
            params = {**params, "continue": str(more)}

    def _mine(self, name: str) -> dict[str, Item[ClusterHead]]:
        """The Clusters inventory ``name`` made, by key."""
        return {item.key: item for item in self.clusters.items()
                if item.obj.metadata.labels.get(INVENTORY_LABEL) == name}

    # -- writing ------------------------------------------------------------------------

    def _keep(self, name: str, want: Wanted) -> ProfileStatus:
        """The profile's Cluster as wanted: made, rewritten if it changed, or refused."""
        ns = want.doc["metadata"]["namespace"]
        cid = f"{ns}/{want.name}"
        key = keys.resource_key("Cluster", want.name, ns)
        item = self.clusters.item(key)
        said = "; ".join([want.reason, *want.left_out][: 1 + 3] if want.reason else
                         want.left_out[:3])
        if item is not None and item.obj.metadata.labels.get(INVENTORY_LABEL) != name:
            return ProfileStatus(cid, ProfileState.REFUSED, "a Cluster of that name is not "
                                 f"this inventory's (it is {_whose(item.obj)}): left alone")
        if item is not None and digest_of(msgspec.to_builtins(item.obj)) == digest_of(
                want.doc):
            return ProfileStatus(cid, want.state, said)
        now = datetime.now(UTC).replace(microsecond=0)
        meta = item.obj.metadata if item is not None else None
        doc = want.doc
        doc["metadata"].update(uid=meta.uid if meta and meta.uid else str(uuid.uuid4()),
                               created=(meta.created if meta and meta.created else now),
                               modified=now,
                               generation=(meta.generation if meta else 0) + 1)
        why = self._write(key, doc, item.mod_revision if item is not None else 0)
        if why:
            return ProfileStatus(cid, ProfileState.REFUSED, why)
        log.info("inventory %s: cluster %s %s (%s)", name, cid,
                 "updated" if item is not None else "made", want.state)
        return ProfileStatus(cid, want.state, said)

    def _write(self, key: keys.Key, doc: dict[str, Any], revision: int) -> str:
        """Write a Cluster (its users apart) if it is still at ``revision`` (0: absent);
        why not ("": written)."""
        public, creds = split("Cluster", msgspec.json.decode(msgspec.json.encode(doc)))
        try:
            checked = msgspec.convert(public, Cluster, from_attributes=False)
        except msgspec.ValidationError as exc:
            return f"not a valid Cluster: {exc}"
        bad = problems(checked)
        if bad:
            return "not a valid Cluster: " + "; ".join(map(str, bad[:3]))
        meta = doc["metadata"]
        skey = keys.secrets_key("Cluster", meta["name"], meta["namespace"])
        ops: list[Put | Delete] = [Put(key, encode(public), revision)]
        if creds is not None:
            creds = msgspec.structs.replace(creds, generation=meta["generation"])
            ops.append(Put(skey, encode(creds), None))
        else:
            ops.append(Delete(skey))
        return self._commit(ops, key)

    def _commit(self, ops: list[Put | Delete], key: str) -> str:
        try:
            self.store.commit(ops)
        except Deposed:
            raise
        except Conflict:
            return "changed meanwhile: read again next time"
        except StoreError as exc:
            return f"etcd refused the write of {key}: {exc}"
        return ""

    def _leave(self, key: keys.Key, item: Item[ClusterHead], why: str
               ) -> ProfileStatus | None:
        """A Cluster whose profile (or inventory) is gone: tainted so that its applications
        leave, then deleted once none is bound to it or recorded on it."""
        meta = item.obj.metadata
        cid = f"{meta.namespace}/{meta.name}"
        taints = list(item.obj.spec.get("taints") or [])
        if not any(isinstance(t, dict) and t.get("key") == GONE_TAINT for t in taints):
            doc = msgspec.to_builtins(item.obj)
            doc = {"api": "kubernetes", "kind": "Cluster", **doc}
            doc["spec"] = {**doc["spec"], "taints": [*taints, {"key": GONE_TAINT,
                                                              "effect": "NoSchedule"}]}
            doc["metadata"]["generation"] = meta.generation + 1
            # no profile's digest: a profile of its name that comes back rewrites it whole
            doc["metadata"]["labels"] = {**doc["metadata"]["labels"], DIGEST_LABEL: "gone"}
            doc["metadata"]["modified"] = datetime.now(UTC).replace(microsecond=0)
            failed = self._commit([Put(key, encode(doc), item.mod_revision)], key)
            log.info("inventory: cluster %s tainted %s (%s)", cid, GONE_TAINT, why)
            return ProfileStatus(cid, ProfileState.GONE, failed or f"{why}: its applications "
                                 "leave, then it is deleted")
        used = self._used(cid)
        if used:
            return ProfileStatus(cid, ProfileState.GONE, f"{why}: waiting for {used} to leave")
        skey = keys.secrets_key("Cluster", meta.name, meta.namespace or "")
        failed = self._commit([Delete(key, item.mod_revision), Delete(skey)], key)
        if failed:
            return ProfileStatus(cid, ProfileState.GONE, failed)
        log.info("inventory: cluster %s deleted (%s; nothing runs there)", cid, why)
        return None

    def _used(self, cid: str) -> str:
        """An application bound to ``cid`` or recorded on it ("": none)."""
        ns, _, name = cid.partition("/")
        for item in self.bindings.items():
            for t in item.obj.spec.targets:
                if t.kind == "Cluster" and t.name == name and (
                        t.namespace or item.obj.metadata.namespace) == ns:
                    return f"application {item.obj.metadata.namespace}/{item.obj.metadata.name}"
        for st in self.statuses.items():
            if cid in st.obj.status.applied:
                ref = keys.parse_key(st.key)
                return f"application {ref.namespace}/{ref.name}"
        return ""

    def _orphans(self, names: set[str]) -> None:
        """The Clusters of Inventories deleted leave as their profiles' would; their
        statuses go."""
        for item in self.clusters.items():
            owner = item.obj.metadata.labels.get(INVENTORY_LABEL)
            if owner is not None and owner not in names:
                self._leave(keys.Key(item.key), item, f"its inventory {owner} is deleted")
        for name in set(self._published) - names:
            if self._commit([Delete(keys.status_key("Inventory", "", name))], name) == "":
                self._published.pop(name, None)

    def _kept(self, name: str, state: InventoryState, reason: str) -> InventoryStatus:
        """A status that keeps what the last one said of each profile."""
        was = self._published.get(name)
        profiles = (msgspec.json.decode(was, type=InventoryRead).status.profiles
                    if was is not None else {})
        return InventoryStatus(state, reason[:1000], profiles)

    def _publish(self, name: str, status: InventoryStatus) -> None:
        fence = self.store.fence
        status.term = fence.term if fence is not None else 0
        was = self._published.get(name)
        if was is not None:
            old = msgspec.json.decode(was, type=InventoryRead).status
            if msgspec.structs.replace(old, synced=None) == msgspec.structs.replace(
                    status, synced=None):
                return  # only the time it read the hub: not written again
        body = encode(InventoryRead(InventoryMeta(name), status))
        if status.state is InventoryState.FAILING and (was is None or b'"Failing"' not in was):
            log.warning("inventory %s: %s", name, status.reason)
        if self._commit([Put(keys.status_key("Inventory", "", name), body, None)], name) == "":
            self._published[name] = body


def _whose(cluster: ClusterHead) -> str:
    owner = cluster.metadata.labels.get(INVENTORY_LABEL)
    return f"inventory {owner}'s" if owner else "written by a user"


__all__ = ["InventoryController"]
