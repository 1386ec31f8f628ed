"""The applier: put each placed application on the clusters its Binding names.

One reconcile per application key, level-based: it reads the application, its
Binding and its own status key and brings the clusters in line.

* **Apply** generation G only when the Binding was decided for G (DESIGN.md),
  with server-side apply (field manager ``berth``) of every manifest object on
  every target cluster; objects a new generation dropped are pruned.
* **Move** make-before-break: once every target has the objects (checked with
  a GET), they are deleted from the clusters the application left.
* **Delete**: an application marked deleted has its objects removed from every
  cluster, then its key (and its status) deleted — a finalizer. One whose key
  vanished is cleaned up from the clusters its status lists.
* **Drift**: a periodic resync re-applies everything (server-side apply of an
  unchanged object changes nothing), and watches re-apply an application as
  soon as someone else changes or deletes one of its objects.
* **Status** at ``/berth/v1/status/applications/<ns>/<name>``, written only
  when it changes: state, reason, ``running_on``, the generation applied, per
  cluster errors and what is on each cluster.

A cluster that fails is retried with backoff and recorded; a manifest the
cluster refuses as invalid is FAILED and left until its generation changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter

from controllers.propagator.config import PropagatorConfig
from controllers.propagator.kube import (
    OWNER,
    Connection,
    Connections,
    Kind,
    KubeObject,
    Rejected,
    Unavailable,
    safe,
)
from controllers.propagator.manifest import ManifestError, objects
from controllers.propagator.views import AppView, ClusterView
from controllers.runtime import Event, EventType, Informer, Item, TemporaryError, WorkQueue
from store import Conflict, Delete, Put, Store, StoreError, encode, keys
from store.documents import (
    ApplicationState,
    ApplicationStatus,
    Binding,
    ClusterApplied,
    ClusterStatus,
    KubeObjectRef,
    ObjectRef,
    StatusMeta,
)

log = logging.getLogger(__name__)

APPLIES = Counter("berth_propagator_applies_total", "Objects applied to clusters", ["result"])
DRIFTS = Counter("berth_propagator_drift_total", "Objects changed on a cluster by others")

FINALIZER = "berth.dev/propagator"


def cluster_id(namespace: str | None, name: str) -> str:
    return f"{namespace or ''}/{name}"


def cluster_key(cid: str) -> str:
    namespace, _, name = cid.partition("/")
    return keys.resource_key("Cluster", name, namespace or None)


def _cluster_ref(cid: str) -> ObjectRef:
    namespace, _, name = cid.partition("/")
    return ObjectRef("Cluster", name, namespace or None)


@dataclass(slots=True)
class _Doc:
    """An application's status key as last read or written by this reconcile."""

    key: str
    namespace: str
    name: str
    old: ApplicationStatus | None
    revision: int
    garbage: int = 0  # the revision of a value that is not a status, found there: replace it


class Applier:
    def __init__(self, store: Store, config: PropagatorConfig, *,
                 clusters: Informer[ClusterView], cluster_statuses: Informer[ClusterStatus],
                 connections: Connections) -> None:
        self.store = store
        self.config = config
        self.clusters = clusters
        self.cluster_statuses = cluster_statuses  # the observer's: ONLINE or not
        self.connections = connections
        idle = config.watch_idle_timeout
        self.apps: Informer[AppView] = Informer(
            store, keys.resource_prefix("Application"), AppView, idle_timeout=idle)
        self.bindings: Informer[Binding] = Informer(
            store, keys.binding_prefix("Application"), Binding, idle_timeout=idle)
        self.statuses: Informer[ApplicationStatus] = Informer(
            store, keys.status_prefix("Application"), ApplicationStatus, idle_timeout=idle)
        self.queue: WorkQueue[str] = WorkQueue(base_delay=config.retry_base_delay,
                                               max_delay=config.retry_max_delay)
        self._lock = threading.Lock()
        self._written: dict[str, tuple[ApplicationStatus | None, int]] = {}
        self._garbage: dict[str, int] = {}  # status key → revision of garbage written there
        self._rv: dict[tuple[str, KubeObjectRef], str] = {}  # what our last apply stored
        self._in_flight: set[tuple[str, KubeObjectRef]] = set()
        self._drifted: set[tuple[str, str]] = set()  # (application key, cluster id)
        self._epoch = 0  # bumped by every resync: everything is applied again once
        self._applied_epoch: dict[tuple[str, str], int] = {}
        # Called after each object applied (cluster id, cluster key, connection, kind,
        # the resourceVersion stored): the drift watches start there.
        self.on_applied: list[Callable[[str, str, Connection, Kind, str], None]] = []
        self.apps.add_handler(self._on_app)
        self.bindings.add_handler(self._on_binding)
        self.statuses.add_handler(self._on_status)
        self.statuses.add_invalid_handler(self._on_garbage_status)
        self.clusters.add_handler(self._on_cluster)
        cluster_statuses.add_handler(self._on_cluster_status)

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return self.apps, self.bindings, self.statuses

    # -- events ----------------------------------------------------------------

    def _on_app(self, event: Event[AppView]) -> None:
        self.queue.add(event.key)

    def _on_binding(self, event: Event[Binding]) -> None:
        self.queue.add(keys.resource_key_of(event.key))

    def _on_status(self, event: Event[ApplicationStatus]) -> None:
        if event.type is EventType.ADDED:  # at start: also applications whose key vanished
            self.queue.add(keys.resource_key_of(event.key))

    def _on_garbage_status(self, key: str, revision: int) -> None:
        """Someone wrote a value that is not a status into our key: our status goes back."""
        with self._lock:
            self._garbage[key] = revision
        self.queue.add(keys.resource_key_of(key))

    def _on_cluster(self, event: Event[ClusterView]) -> None:
        if event.type is EventType.DELETED:
            self.connections.drop(event.key)
        if event.type is not EventType.ADDED:  # e.g. a new kubeconfig: apply through it
            meta = event.obj.metadata
            self.requeue_cluster(cluster_id(meta.namespace, meta.name), drifted=True)

    def _on_cluster_status(self, event: Event[ClusterStatus]) -> None:
        was = event.old.status.state if event.old else ""
        now = event.obj.status.state if event.type is not EventType.DELETED else ""
        if now == was:
            return
        meta = event.obj.metadata
        # Back ONLINE: retry what failed there. Gone OFFLINE: the applications on it say so.
        self.requeue_cluster(cluster_id(meta.namespace, meta.name), only_failed=now == "ONLINE")

    def requeue_cluster(self, cid: str, *, only_failed: bool = False, drifted: bool = False
                        ) -> None:
        """Reconcile now every application that is on, or failed on, cluster ``cid``."""
        for item in self.statuses.items():
            st = item.obj.status
            if cid in st.errors or (not only_failed and cid in st.applied):
                app_key = keys.resource_key_of(item.key)
                if drifted:
                    with self._lock:
                        self._drifted.add((app_key, cid))
                self.queue.add(app_key)

    def on_drift(self, cid: str, event_type: str, obj: KubeObject) -> None:
        """A watch saw an object berth manages change: re-apply it if it was not us."""
        meta = obj.metadata
        owner = meta.annotations.get(OWNER, "")
        if "/" not in owner:
            return
        ref = KubeObjectRef(obj.apiVersion, obj.kind, meta.name, meta.namespace)
        namespace, _, name = owner.partition("/")
        app_key = keys.resource_key("Application", name, namespace)
        with self._lock:
            if (cid, ref) in self._in_flight:
                return  # our own apply, seen before it returned
            known = self._rv.get((cid, ref))
            if known is None or (event_type != "DELETED" and known == meta.resourceVersion):
                return
            self._rv.pop((cid, ref), None)
            self._drifted.add((app_key, cid))
        DRIFTS.inc()
        log.info("%s on cluster %s was %s by someone else: re-applying %s", ref, cid,
                 "deleted" if event_type == "DELETED" else "changed", owner)
        self.queue.add(app_key)

    def resync(self) -> None:
        """Re-apply every application once (and clean up after vanished ones)."""
        with self._lock:
            self._epoch += 1
        apps, statuses = self.apps.list_keys(), self.statuses.list_keys()  # copies
        for key in {*apps, *map(keys.resource_key_of, statuses)}:
            self.queue.add(key)

    # -- reconcile -------------------------------------------------------------

    def reconcile(self, key: str) -> None:
        ref = keys.parse_key(key)
        namespace, name = ref.namespace or "", ref.name
        doc = self._status(keys.status_key("Application", namespace, name), namespace, name)
        was = doc.old.status if doc.old else ApplicationState()
        applied = _copy(was.applied)
        errors: dict[str, str] = {}
        item = self.apps.item(key)
        app = item.obj if item else None
        if app is None and applied and self._unreadable(key):
            log.error("%s holds a value that is not an Application document: its objects stay "
                      "where they are until it is fixed or deleted", key)
            return
        if app is None or app.metadata.deleted is not None:
            for cid in list(applied):
                self._clear(cid, applied, errors)
            new = _state("DELETING", _first(errors) or "removing its objects", applied,
                         was.generation, errors)
            if applied:
                self._write(doc, new)
                raise TemporaryError(f"not yet removed from {', '.join(sorted(errors))}")
            self._finish(key, doc, item, new)
            return
        gen = app.metadata.generation
        if was.rejected_generation == gen:
            return  # the cluster refused this manifest: wait for a new one
        try:
            bodies = objects(app.spec.manifest, namespace, name)
        except ManifestError as exc:
            self._write(doc, _state("FAILED", str(exc), applied, was.generation, {},
                                    rejected=gen))
            log.warning("%s: %s; not applied until the spec changes", key, exc)
            return
        binding = self.bindings.get(keys.binding_key("Application", namespace, name))
        if binding is None or binding.spec.generation != gen:
            reason = f"waiting for the scheduler to place generation {gen}"
            self._write(doc, _state(was.state if applied else "PENDING", reason, applied,
                                    was.generation, was.errors))
            return
        targets = [cluster_id(t.namespace or namespace, t.name)
                   for t in binding.spec.targets if t.kind == "Cluster"]
        if not targets:
            reason = binding.status.reason or "the scheduler found no cluster"
            self._write(doc, _state(was.state if applied else "PENDING", reason, applied,
                                    was.generation, {}))
            return
        for cid in targets:
            if not self._needs_apply(key, cid, gen, applied, was.errors):
                continue
            try:
                self._apply(key, doc, cid, bodies, applied, gen)
            except Rejected as exc:
                log.warning("%s: cluster %s refused the manifest: %s", key, cid, exc)
                self._write(doc, _state("FAILED", f"refused by cluster {cid}: {exc}", applied,
                                        was.generation, {cid: str(exc)}, rejected=gen))
                return
            except Unavailable as exc:
                errors[cid] = str(exc)
        placed = [c for c in targets if c not in errors and c in applied
                  and applied[c].generation == gen]
        leaving = [c for c in applied if c not in targets]
        if leaving and len(placed) == len(targets):
            try:
                self._confirm(placed, applied)
            except Unavailable as exc:
                errors["confirm"] = str(exc)
            else:  # recorded as running on both before anything is deleted
                self._write(doc, _summary(targets, placed, applied, errors, gen,
                                          self._unseen(placed)))
                for cid in leaving:
                    self._clear(cid, applied, errors)
        self._write(doc, _summary(targets, placed, applied, errors, gen, self._unseen(placed)))
        if errors:
            raise TemporaryError("; ".join(f"{c}: {e}" for c, e in sorted(errors.items())))

    def _unseen(self, placed: list[str]) -> dict[str, str]:
        """Of the clusters ``placed`` on, those the observer does not see ONLINE, and why."""
        out: dict[str, str] = {}
        for cid in placed:
            ns, _, name = cid.partition("/")
            st = self.cluster_statuses.get(keys.status_key("Cluster", ns, name))
            if st is not None and st.status.state not in ("ONLINE", ""):
                reason = f" ({st.status.reason})" if st.status.reason else ""
                out[cid] = f"{st.status.state}{reason}"
        return out

    def _needs_apply(self, key: str, cid: str, gen: int, applied: dict[str, ClusterApplied],
                     failed: dict[str, str]) -> bool:
        have = applied.get(cid)
        with self._lock:
            return (have is None or have.generation != gen or cid in failed
                    or (key, cid) in self._drifted
                    or self._applied_epoch.get((key, cid)) != self._epoch)

    def _connection(self, cid: str) -> Connection | None:
        """The cluster's connection; None if the Cluster is gone; Unavailable if unusable."""
        ckey = cluster_key(cid)
        view = self.clusters.get(ckey)
        if view is None:
            return None
        if not view.spec.kubeconfig:
            raise Unavailable(f"cluster {cid} has no kubeconfig")
        try:
            return self.connections.get(ckey, view.spec.kubeconfig)
        except Exception as exc:
            raise Unavailable(f"cluster {cid}: unusable kubeconfig: {safe(exc)}") from exc

    def _apply(self, key: str, doc: _Doc, cid: str, bodies: list[dict[str, Any]],
               applied: dict[str, ClusterApplied], gen: int) -> None:
        """Apply every object on one cluster, then prune what the generation dropped.

        Objects not yet recorded for the cluster are recorded (in the status
        key) before they are applied: whatever happens next, nothing berth
        created is forgotten.
        """
        with self._lock:
            epoch = self._epoch
            self._drifted.discard((key, cid))
        conn = self._connection(cid)
        if conn is None:
            raise Unavailable(f"cluster {cid} does not exist")
        before = applied.get(cid) or ClusterApplied(0)
        located: list[tuple[Kind | None, KubeObjectRef | None, dict[str, Any]]] = []
        for body in bodies:
            try:
                located.append((*conn.locate(body), body))
            except Unavailable:  # e.g. a custom resource whose CRD comes first
                located.append((None, None, body))
        self._record(doc, cid, applied, [ref for _, ref, _ in located if ref], gen)
        done: list[KubeObjectRef] = []
        for kind, ref, body in located:
            if kind is None or ref is None:
                kind, ref = conn.locate(body)
                self._record(doc, cid, applied, [ref], gen)
            with self._lock:
                self._in_flight.add((cid, ref))
            try:
                rv = conn.apply(kind, ref, body)
            except Exception:
                APPLIES.labels("failed").inc()
                raise
            finally:
                with self._lock:
                    self._in_flight.discard((cid, ref))
            APPLIES.labels("applied").inc()
            with self._lock:
                self._rv[(cid, ref)] = rv
            done.append(ref)
            for callback in self.on_applied:
                callback(cid, cluster_key(cid), conn, kind, rv)
        left = self._remove(cid, conn, [o for o in before.objects if o not in done])
        applied[cid] = ClusterApplied(gen, done + left)
        if left:
            raise Unavailable(f"could not prune {', '.join(map(str, left))}")
        with self._lock:
            self._applied_epoch[(key, cid)] = epoch

    def _record(self, doc: _Doc, cid: str, applied: dict[str, ClusterApplied],
                refs: list[KubeObjectRef], gen: int) -> None:
        """Write down objects about to be applied on ``cid`` that are not yet recorded."""
        have = applied.get(cid) or ClusterApplied(0)
        new = [ref for ref in refs if ref not in have.objects]
        if not new:
            return
        applied[cid] = ClusterApplied(have.generation, have.objects + new)
        if any(c != cid for c in applied):
            state = "MIGRATING"
        elif have.objects and doc.old is not None:
            state = doc.old.status.state
        else:
            state = "PENDING"
        self._write(doc, _state(state, f"applying generation {gen} on {cid}", applied,
                                _oldest(applied), {}))

    def _remove(self, cid: str, conn: Connection, objs: list[KubeObjectRef]
                ) -> list[KubeObjectRef]:
        """Delete objects (last applied first); those that could not be deleted."""
        left: list[KubeObjectRef] = []
        for obj in reversed(objs):
            with self._lock:
                self._rv.pop((cid, obj), None)
            try:
                conn.delete(obj)
            except Unavailable as exc:
                log.info("cluster %s: %s", cid, exc)
                left.insert(0, obj)
        return left

    def _clear(self, cid: str, applied: dict[str, ClusterApplied], errors: dict[str, str]
               ) -> None:
        """Remove everything berth put on cluster ``cid``."""
        try:
            conn = self._connection(cid)
        except Unavailable as exc:
            errors[cid] = str(exc)
            return
        if conn is None:
            if self._unreadable(cluster_key(cid)):
                errors[cid] = f"the Cluster document of {cid} does not decode"
                return
            log.warning("cluster %s no longer exists: its objects %s cannot be removed", cid,
                        ", ".join(map(str, applied[cid].objects)))
            del applied[cid]
            return
        left = self._remove(cid, conn, applied[cid].objects)
        if left:
            applied[cid] = ClusterApplied(applied[cid].generation, left)
            errors[cid] = f"could not remove {', '.join(map(str, left))}"
        else:
            del applied[cid]

    def _confirm(self, placed: list[str], applied: dict[str, ClusterApplied]) -> None:
        """Before a move deletes anything: every object is there on every target."""
        for cid in placed:
            conn = self._connection(cid)
            if conn is None:
                raise Unavailable(f"cluster {cid} does not exist")
            missing = [o for o in applied[cid].objects if not conn.exists(o)]
            if missing:
                raise Unavailable(f"{', '.join(map(str, missing))} missing on {cid} after apply")

    def _finish(self, key: str, doc: _Doc, item: Item[AppView] | None,
                new: ApplicationState) -> None:
        """Everything is removed: delete the status, and the application if marked."""
        ops: list[Put | Delete] = []
        if item is not None:
            foreign = [f for f in item.obj.metadata.finalizers if f != FINALIZER]
            if foreign:
                new.reason = f"objects removed; waiting for finalizers {', '.join(foreign)}"
                self._write(doc, new)
                return
            ops.append(Delete(key, item.mod_revision))
        if doc.old is not None:
            ops.append(Delete(doc.key, doc.revision))
        if not ops:
            return
        try:
            rev = self.store.commit(ops)
        except Conflict as exc:
            raise TemporaryError(f"changed meanwhile: {exc}", delay=0.1) from exc
        with self._lock:
            self._written[doc.key] = (None, rev)
            for k in [k for k in self._applied_epoch if k[0] == key]:
                del self._applied_epoch[k]
        log.info("application %s/%s removed from every cluster%s", doc.namespace, doc.name,
                 " and deleted" if item is not None else "")

    # -- status ----------------------------------------------------------------

    def _status(self, skey: str, namespace: str, name: str) -> _Doc:
        """Our status document and its revision: the newer of the watch's and our write."""
        item = self.statuses.item(skey)
        with self._lock:
            mine = self._written.get(skey)
            garbage = self._garbage.get(skey, 0)
        if mine is not None and (item is None or mine[1] >= item.mod_revision):
            doc = _Doc(skey, namespace, name, *mine)
        else:
            doc = _Doc(skey, namespace, name, item.obj if item else None,
                       item.mod_revision if item else 0)
        if garbage > doc.revision:  # the last good value still guides the plan
            doc.garbage = garbage
        return doc

    def _unreadable(self, key: str) -> bool:
        """Whether ``key`` holds a value the informer skipped (it did not decode)."""
        try:
            return self.store.get(key) is not None
        except StoreError as exc:
            raise TemporaryError(f"{key}: {exc}") from exc

    def _write(self, doc: _Doc, new: ApplicationState) -> None:
        """Write the status if it changed (guarded by the revision read), or over garbage."""
        if not doc.garbage and doc.old is not None and doc.old.status == new:
            return
        written = ApplicationStatus(StatusMeta(doc.name, doc.namespace), new)
        if doc.garbage:
            log.error("%s held a value that is not a status document; replacing it", doc.key)
        try:
            rev = self.store.commit([Put(doc.key, encode(written), doc.garbage or (
                doc.revision if doc.old else 0))])
        except Conflict as exc:
            if doc.garbage:  # changed again since: the watch tells what it holds now
                with self._lock:
                    if self._garbage.get(doc.key) == doc.garbage:
                        del self._garbage[doc.key]
            raise TemporaryError(f"{doc.key} changed meanwhile", delay=0.1) from exc
        except StoreError as exc:
            raise TemporaryError(f"{doc.key} not written: {exc}") from exc
        with self._lock:
            self._written[doc.key] = (written, rev)
            if self._garbage.get(doc.key, rev) < rev:
                del self._garbage[doc.key]
        if doc.old is None or doc.old.status.state != new.state:
            log.info("application %s/%s is %s%s", doc.namespace, doc.name, new.state,
                     f" ({new.reason})" if new.reason else "")
        doc.old, doc.revision, doc.garbage = written, rev, 0

    def forget_written(self, upto: int) -> None:
        """Drop our record of writes the status watch has since delivered."""
        with self._lock:
            for skey in [k for k, (_, rev) in self._written.items() if rev <= upto]:
                del self._written[skey]


def _first(errors: dict[str, str]) -> str:
    return next((f"{c}: {e}" for c, e in sorted(errors.items())), "")


def _oldest(applied: dict[str, ClusterApplied]) -> int:
    return min((a.generation for a in applied.values()), default=0)


def _copy(applied: dict[str, ClusterApplied]) -> dict[str, ClusterApplied]:
    """A snapshot for a status document (the reconcile goes on changing its own)."""
    return {c: ClusterApplied(a.generation, list(a.objects)) for c, a in applied.items()}


def _refs(applied: dict[str, ClusterApplied]) -> list[ObjectRef]:
    return [_cluster_ref(cid) for cid in sorted(applied)]


def _state(state: str, reason: str, applied: dict[str, ClusterApplied], generation: int,
           errors: dict[str, str], *, rejected: int = 0) -> ApplicationState:
    return ApplicationState(state, reason, _refs(applied), generation, dict(errors),
                            _copy(applied), rejected)


def _summary(targets: list[str], placed: list[str], applied: dict[str, ClusterApplied],
             errors: dict[str, str], gen: int, unseen: dict[str, str] | None = None
             ) -> ApplicationState:
    """The state after applying generation ``gen`` to ``targets``; ``unseen``: clusters
    placed on that the observer does not see ONLINE (not RUNNING there: unknown)."""
    leaving = [c for c in applied if c not in targets]
    missing = [c for c in targets if c not in placed]
    oldest = _oldest(applied)
    if unseen and not missing and not leaving:
        state, reason = "DEGRADED", "not observed: " + ", ".join(
            f"cluster {c} is {why}" for c, why in sorted(unseen.items()))
    elif not missing and not leaving:
        state, reason = "RUNNING", ""
    elif not missing:
        state, reason = "MIGRATING", f"removing from {', '.join(leaving)}"
    elif placed or any(c in applied for c in targets):  # an older generation still runs
        state, reason = "DEGRADED", f"generation {gen} not applied on {', '.join(missing)}"
    elif leaving:
        state, reason = "MIGRATING", f"waiting to apply on {', '.join(missing)}"
    else:
        state, reason = "FAILED", f"not running: not applied on {', '.join(missing)}; retrying"
    if errors:
        reason = f"{reason}: {_first(errors)}"
    return ApplicationState(state, reason, _refs(applied), oldest, dict(errors), _copy(applied))

