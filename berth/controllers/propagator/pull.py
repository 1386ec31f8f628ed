"""The propagator's side of pull clusters: a plan's steps as work, reports as progress.

A cluster in ``Pull`` mode is reached by nobody but its agent. For such a
cluster the plan's steps (``plan.py``) are not carried out here but written
down: an ``Apply`` becomes the application's :class:`~store.documents.work.Work`
under the cluster's work prefix — the manifest as that cluster runs it — and a
``Clear`` the same work saying ``Delete``. Each is written only when it
differs from what was sent (a digest in its metadata), guarded by its
revision and fenced by this replica's claim of the cluster (``shard.py``): a
replica that lost the cluster cannot land a work for it.

What the agent did comes back as its :class:`~store.documents.work.Report`,
which names the revision of the work it acted on. Only a report of the work
as it stands now is progress: the objects applied there, their health, an
error or a refusal. Until then the cluster is *waiting* for its agent
(``Progress.waiting``): not an error, nothing to retry — the report's arrival
reconciles the application again. A ``Delete`` is done once the report says
the work was cleared; then the work itself goes, and the agent drops its
report.

The agent's heartbeat, on its lease, is what the observer makes the
cluster's state of (``observer.py``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from berth.controllers.propagator.authority import HANDED_OVER, Gate, always
from berth.controllers.propagator.health import UNKNOWN, Copy, Health
from berth.controllers.propagator.plan import (
    CONFIRM,
    App,
    Apply,
    Clear,
    Confirm,
    Progress,
    intent,
)
from berth.controllers.runtime import Event, EventType, Informer, Retry
from berth.store import Conflict, Delete, Fence, Put, Store, StoreError, encode, keys
from berth.store.documents import ApplicationState, ClusterApplied, KubeObjectRef
from berth.store.documents.registration import JoinRequest, Registration
from berth.store.documents.resources import with_replicas
from berth.store.documents.work import (
    AgentDocument,
    AgentState,
    Heartbeat,
    Intent,
    Report,
    Work,
    WorkMeta,
    WorkSpec,
)

log = logging.getLogger(__name__)


class _SentMeta(msgspec.Struct):
    name: str  # required as a Work's are: a value without them is no work
    namespace: str
    cluster: str
    digest: str = ""


class _SentSpec(msgspec.Struct):
    intent: Intent = Intent.APPLY


class _Sent(msgspec.Struct):
    """Of a work as stored, what tells whether it is what would be written now. What a
    :class:`Work` requires, this requires too: with every field optional, a value that is
    no work (``{"kind": "Work"}``, written by hand) read as a work of digest "" that
    this replica had not written, never as garbage to write over — and the copy waited
    for its agent's report of it for good (the fault table's garbage row, 2026-12-02)."""

    metadata: _SentMeta
    spec: _SentSpec


@dataclass(frozen=True, slots=True)
class Sent:
    digest: str
    revision: int
    removing: bool = False  # it says Delete


def digest_of(spec: WorkSpec) -> str:
    return hashlib.blake2b(msgspec.json.encode(spec), digest_size=12).hexdigest()


def waiting_for(cid: str, what: str) -> str:
    return f"waiting for the agent of cluster {cid} to {what}"


def refs_of(bodies: tuple[dict[str, object], ...]) -> list[KubeObjectRef]:
    """The objects a work names, as written (the agent reports where they went)."""
    out = []
    for body in bodies:
        meta = body.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        ns = meta.get("namespace")
        out.append(KubeObjectRef(str(body.get("apiVersion", "")), str(body.get("kind", "")),
                                 str(meta.get("name", "")), ns if isinstance(ns, str) else None))
    return out


class PullClusters:
    """Works written and reports read, for the pull clusters this replica serves."""

    def __init__(self, store: Store, *, is_pull: Callable[[str], bool],
                 exists: Callable[[str], bool], gate: Gate = always,
                 fence: Callable[[str], Fence | None] = lambda _cid: None,
                 idle_timeout: float = 30.0) -> None:
        self.store = store
        self.is_pull = is_pull
        self.exists = exists  # whether the Cluster is there at all
        self.gate = gate
        self.fence = fence
        self.works: Informer[_Sent] = Informer(store, keys.WORK, _Sent,
                                               idle_timeout=idle_timeout,
                                               layout=keys.cluster_key_problem)
        self.agents: Informer[AgentDocument] = Informer(
            store, keys.AGENTS, AgentDocument, idle_timeout=idle_timeout,
            layout=keys.cluster_key_problem)
        # which agents were revoked: no work is written where their watch could see it
        self.registrations: Informer[Registration | JoinRequest] = Informer(
            store, keys.REGISTRATIONS, Registration | JoinRequest, idle_timeout=idle_timeout,
            layout=keys.cluster_key_problem)
        self._lock = threading.Lock()
        self._sent: dict[str, Sent] = {}  # work key → what this replica wrote there last
        # work key → the revision of a value there that is not a work (written by hand):
        # the next reconcile of its application writes the work over it
        self._garbage: dict[str, int] = {}
        self.works.add_invalid_handler(self._garbage_seen)
        self.works.add_cleared_handler(self._garbage_gone)
        self.on_garbage: list[Callable[[keys.Key], None]] = []  # (application key)
        # (application key, whether the copy's state may have turned): a report changed
        self.on_report: list[Callable[[keys.Key, str, Report, Report | None], None]] = []
        self.on_heartbeat: list[Callable[[str], None]] = []
        self.agents.add_handler(self._on_agent)

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return self.works, self.agents, self.registrations

    def revoked(self, cid: str) -> str:
        """Why no work may be written for ``cid`` ("": it may): its agent was revoked."""
        doc = self.registrations.get(keys.registration_key(cid))
        if isinstance(doc, Registration) and doc.status.revoked is not None:
            return (f"its agent was revoked at {doc.status.revoked:%Y-%m-%d %H:%M:%S} UTC "
                    "(berth cluster revoke): no work is written for it")
        return ""

    # -- reading ---------------------------------------------------------------------

    def _on_agent(self, event: Event[AgentDocument]) -> None:
        try:
            ref = keys.parse_cluster_key(event.key)
        except ValueError:
            return
        obj = event.obj
        if isinstance(obj, Heartbeat):
            for heartbeat in self.on_heartbeat:
                heartbeat(ref.cluster)
        elif isinstance(obj, Report):
            old = event.old if isinstance(event.old, Report) else None
            app = keys.resource_key("Application", ref.name, ref.namespace)
            for report in self.on_report:
                report(app, ref.cluster, obj, old if event.type is not EventType.ADDED
                       else None)

    def _garbage_seen(self, key: str, revision: int) -> None:
        with self._lock:
            self._garbage[key] = revision
        try:
            ref = keys.parse_cluster_key(key)
        except ValueError:
            return
        for requeue in self.on_garbage:
            requeue(keys.resource_key("Application", ref.name, ref.namespace))

    def _garbage_gone(self, key: str, revision: int) -> None:
        with self._lock:
            if self._garbage.get(key, 0) <= revision:
                self._garbage.pop(key, None)

    def resend(self, cid: str, namespace: str, name: str) -> bool:
        """Whether the copy of ``namespace/name`` on ``cid``, recorded as applied, is to be
        sent again: its work holds a value that is not a work (written by hand), says
        Delete (the application left the cluster and came back before the removal was
        done) or is gone. An agent otherwise keeps its cluster as its work says."""
        key = keys.work_key(cid, namespace, name)
        with self._lock:
            garbage = self._garbage.get(key, 0)
        sent = self.sent(key)
        return sent is None or sent.removing or (bool(garbage) and sent.revision == garbage)

    def heartbeat(self, cid: str) -> AgentState | None:
        """What the leading agent of ``cid`` says (None: no agent leads it now)."""
        doc = self.agents.get(keys.heartbeat_key(cid))
        return doc.status if isinstance(doc, Heartbeat) else None

    def report(self, cid: str, namespace: str, name: str) -> Report | None:
        doc = self.agents.get(keys.report_key(cid, namespace, name))
        return doc if isinstance(doc, Report) else None

    def sent(self, key: str) -> Sent | None:
        """The work at ``key`` as last written by anyone: the newer of what the watch
        delivered and what this replica wrote."""
        item = self.works.item(key)
        seen = Sent(item.obj.metadata.digest, item.mod_revision,
                    item.obj.spec.intent is Intent.DELETE) if item is not None else None
        with self._lock:
            garbage = self._garbage.get(key, 0)
            if garbage and garbage > (seen.revision if seen is not None else 0):
                seen = Sent("", garbage)  # not a work: what is written next replaces it
            mine = self._sent.get(key)
            if mine is None or (seen is not None and seen.revision >= mine.revision):
                return seen
            if seen is None and self.works.revision >= mine.revision:
                del self._sent[key]  # the watch is past our write, and the key is gone
                return None
            return mine

    def current(self, cid: str, namespace: str, name: str) -> tuple[Report | None, int]:
        """The agent's report, and the revision of the work as it stands (0: none)."""
        sent = self.sent(keys.work_key(cid, namespace, name))
        return self.report(cid, namespace, name), sent.revision if sent is not None else 0

    def copy(self, cid: str, namespace: str, name: str, have: ClusterApplied) -> Copy | None:
        """The copy on ``cid`` as its agent judged it: of the work as it stands now, at
        the generation recorded there (None: the agent has not reported that yet — a
        work rewritten for a new share, say, is not judged by the report of the old)."""
        report, revision = self.current(cid, namespace, name)
        got = report.status.applied if report is not None else None
        if (got is None or report is None or report.status.work != revision
                or got.generation != have.generation or not got.health):
            return None
        return _copy(got)

    # -- the plan's steps -------------------------------------------------------------

    def apply(self, step: Apply, app: App, progress: Progress,
              record: Callable[[ApplicationState], Retry | None]) -> Retry | None:
        """Write the cluster's work for this step; what its agent reported of that very
        work is the step's outcome, else the cluster waits for it."""
        cid = step.cluster
        progress.tried.add(cid)
        namespace, _, name = step.owner.partition("/")
        made = step.rendered
        bodies = made.bodies if made is not None else (
            step.bodies if step.bodies is not None else app.bodies)
        if step.replicas is not None:
            bodies = tuple(with_replicas(b, step.replicas) for b in bodies)
        spec = WorkSpec(Intent.APPLY, step.generation, list(bodies), step.replicas,
                        list(step.skip), app.adopt, app.propagation, list(app.rules),
                        list(made.by) if made is not None else [],
                        made.fingerprint if made is not None else "",
                        identity=step.identity, observe=list(app.observe))
        with self.gate(cid) as serving:
            if not serving:
                progress.errors[cid] = HANDED_OVER
                return None
            revoked = self.revoked(cid)
            if revoked:
                progress.errors[cid] = revoked
                return None
            if cid not in progress.applied:  # recorded before it is sent (nothing forgotten)
                progress.applied[cid] = ClusterApplied(
                    0, list(app.observe) or refs_of(bodies), step.replicas,
                    observed=bool(app.observe))
                written = intent(progress.status, progress.applied, cid, step.generation,
                                 progress.rollout)
                halt = record(written)
                if halt is not None:
                    return halt
                progress.status = written
            try:
                revision = self._send(cid, namespace, name, spec)
            except _NotSent as exc:
                progress.errors[cid] = str(exc)
                return None
        report = self.report(cid, namespace, name)
        if report is None or report.status.work != revision:
            progress.waiting[cid] = waiting_for(cid, f"apply generation {step.generation}")
            progress.health[cid] = Copy(Health(UNKNOWN, progress.waiting[cid]))
            return None
        st = report.status
        if st.refused:
            if made is not None and made.fingerprint:  # this cluster's copy alone
                progress.errors[cid] = (f"refused by cluster {cid}: {st.refused} (its copy as "
                                        f"{', '.join(made.by)} make it)")
                progress.refused_copies[cid] = made.fingerprint
            else:
                progress.refused = (cid, st.refused)
            return None
        got = st.applied
        if got is not None:
            progress.applied[cid] = ClusterApplied(
                got.generation, list(got.objects), step.replicas, since=step.since,
                new=step.new, done=list(got.done), overrides=list(spec.overrides),
                rendered=spec.rendered, identity=got.identity, waiting=got.waiting,
                observed=got.observed)
            if got.generation == step.generation and got.health:
                progress.health[cid] = _copy(got)
        if st.error:
            progress.errors[cid] = st.error
        elif got is None or got.generation != step.generation:
            progress.waiting[cid] = waiting_for(cid, f"apply generation {step.generation}")
            progress.health[cid] = Copy(Health(UNKNOWN, progress.waiting[cid]))
        else:
            progress.refused_copies.pop(cid, None)
        return None

    def confirm(self, step: Confirm, progress: Progress) -> None:
        """Before a move removes anything: each agent reports the objects there, at the
        generation recorded, for the work as it stands (it applied them and saw them)."""
        namespace, _, name = step.owner.partition("/")
        for cid in step.clusters:
            report, revision = self.current(cid, namespace, name)
            have = progress.applied.get(cid)
            got = report.status.applied if report is not None else None
            if report is None or report.status.work != revision or got is None or (
                    have is None or got.generation != have.generation or report.status.error):
                progress.confirmed = False
                progress.errors[CONFIRM] = waiting_for(cid, "report what it applied")
                return
        if progress.confirmed is None:
            progress.confirmed = True

    def clear(self, step: Clear, progress: Progress, propagation: str = "Background") -> None:
        """Ask the agent to remove the application (a work saying Delete); once it says
        it did, the work goes too."""
        cid = step.cluster
        progress.cleared.add(cid)
        namespace, _, name = step.owner.partition("/")
        key = keys.work_key(cid, namespace, name)
        with self.gate(cid) as serving:
            if not serving:
                progress.errors[cid] = HANDED_OVER
                return
            gone = "no longer exists" if not self.exists(cid) else self.revoked(cid)
            if gone:
                log.warning("cluster %s %s: its agent is not asked to remove %s (its objects "
                            "stay there)", cid, gone, step.owner)
                self._drop(cid, key)
                progress.applied.pop(cid, None)
                return
            have = progress.applied.get(cid)
            if have is not None and have.observed:  # its tool's to remove: nothing to ask
                self._drop(cid, key)
                progress.applied.pop(cid, None)
                return
            report, revision = self.current(cid, namespace, name)
            st = report.status if report is not None else None
            if revision == 0 and (st is None or st.cleared):
                progress.applied.pop(cid, None)  # never sent, or removed already
                return
            if st is not None and st.work == revision and st.intent is Intent.DELETE and (
                    st.cleared):
                self._drop(cid, key)
                progress.applied.pop(cid, None)
                return
            spec = WorkSpec(Intent.DELETE, have.generation if have is not None else 0,
                            propagation=propagation, identity=step.identity)
            try:
                self._send(cid, namespace, name, spec)
            except _NotSent as exc:
                progress.errors[cid] = str(exc)
                return
        if st is not None and st.error and st.intent is Intent.DELETE:
            progress.errors[cid] = st.error
        else:
            progress.waiting[cid] = waiting_for(cid, "remove it" + (
                f" ({st.held})" if st is not None and st.held else ""))

    # -- writing ------------------------------------------------------------------------

    def _send(self, cid: str, namespace: str, name: str, spec: WorkSpec) -> int:
        """Write the work unless it is what was sent; its revision now."""
        key = keys.work_key(cid, namespace, name)
        digest = digest_of(spec)
        sent = self.sent(key)
        if sent is not None and sent.digest == digest:
            return sent.revision
        body = encode(Work(WorkMeta(name, namespace, cid, digest), spec))
        for _ in range(2):
            fence = self.fence(cid)
            guard = sent.revision if sent is not None else 0
            try:
                revision = self.store.commit([Put(key, body, guard),
                                              *([fence] if fence is not None else [])])
            except Conflict:  # written meanwhile (by hand, or before a restart): read it
                sent = self._read(key)
                if sent is not None and sent.digest == digest:
                    return sent.revision
                continue
            except StoreError as exc:
                raise _NotSent(f"work for {cid} not written: {exc}") from exc
            with self._lock:
                self._sent[key] = Sent(digest, revision, spec.intent is Intent.DELETE)
                if self._garbage.pop(key, None):
                    log.error("%s held a value that is not a work: replaced", key)
            return revision
        raise _NotSent(f"work for {cid} not written: it changed meanwhile")

    def _read(self, key: keys.Key) -> Sent | None:
        try:
            kv = self.store.get(key)
        except StoreError as exc:
            raise _NotSent(f"{key}: {exc}") from exc
        if kv is None:
            return None
        try:
            got = msgspec.json.decode(kv.value, type=_Sent)
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.error("%s held a value that is not a work: replaced", key)
            return Sent("", kv.mod_revision)
        return Sent(got.metadata.digest, kv.mod_revision, got.spec.intent is Intent.DELETE)

    def _drop(self, cid: str, key: keys.Key) -> None:
        """Remove a work the agent has carried out (its report then goes too)."""
        sent = self.sent(key)
        if sent is None:
            return
        fence = self.fence(cid)
        try:
            self.store.commit([Delete(key, sent.revision), *([fence] if fence else [])])
        except Conflict:
            pass  # changed meanwhile: the next reconcile sees it
        except StoreError as exc:
            log.info("%s not removed: %s", key, exc)
            return
        with self._lock:
            self._sent.pop(key, None)


class _NotSent(Exception):
    """A work could not be written (etcd, or this replica lost the cluster)."""


def _copy(got: ClusterApplied) -> Copy:
    return Copy(Health(got.health or UNKNOWN, got.reason, got.available, got.desired),
                dict(got.unhealthy), tuple(got.done))
