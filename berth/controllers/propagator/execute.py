"""Carrying out a plan's steps against clusters (the loop around them: ``reconcile.py``).

The :class:`Executor` runs :class:`~controllers.propagator.plan.Apply`,
``Confirm`` and ``Clear`` steps through a :class:`ClusterClient` — the real
:class:`~controllers.propagator.kube.Connection`, or an in-memory cluster in
unit tests — and records each outcome in the
:class:`~controllers.propagator.plan.Progress`: a cluster that fails goes into
``errors``, a manifest it refuses into ``refused``, each copy applied is
judged from what the cluster answered (``health``). Errors are values here;
only the cluster client raises, and only the executor catches.

A copy is applied and removed as its namespace's identity where its policy names
one (the step's ``identity``: Kubernetes impersonation, docs/teams.md), so the
member cluster's RBAC has the last word: an object it forbids (HTTP 403) is
left out, said in the copy's error and tried again later, while the copy's
other objects are applied; while it is, the copy is not complete, and a move
does not remove the old one. An object to remove that the identity may not read
is looked up with berth's own credential: one that is not there (its creation
was refused) is not waited for.

An object has one owner (the annotation ``berth.dev/application``): one that
exists on a cluster before berth applies it there, managed by another
application or by nobody berth knows, is not taken over unless the
application says ``conflictResolution: Overwrite`` — nor one made between
berth's read of the cluster and its apply (an object read as absent is created,
which the cluster refuses if it exists);
berth deletes only objects that still say they are the application's, with
the uid it read (a namesake made meanwhile is left alone), and with the
application's ``deletionPropagation`` (Background: what the object's
controllers made goes too). A Job complete at the current generation, on any
cluster, is not created again — not by a resync, a restart or a move; a new
generation deletes and creates it, so it runs again.

Every request that changes a cluster goes out only while this replica's
:class:`~controllers.propagator.authority.Authority` holds (:class:`Guarded`).

A copy is applied step by step, and removed in reverse (``order.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import msgspec
from prometheus_client import Counter

from berth.controllers.propagator import order
from berth.controllers.propagator.authority import HANDED_OVER, LAPSED, Authority, Leased
from berth.controllers.propagator.drift import OwnWrites
from berth.controllers.propagator.health import JOB_DONE, PROGRESSING, Health, copy_of, gated
from berth.controllers.propagator.kube import (
    OWNER,
    Exists,
    Forbidden,
    Kind,
    KubeObject,
    NotServed,
    Rejected,
    Unavailable,
)
from berth.controllers.propagator.plan import (
    CONFIRM,
    App,
    Apply,
    Clear,
    Confirm,
    Progress,
    intent,
)
from berth.controllers.runtime import Retry
from berth.store.documents import ApplicationState, ClusterApplied, HealthRule, KubeObjectRef
from berth.store.documents.resources import with_replicas
from berth.store.documents.tenancy import Identity

log = logging.getLogger(__name__)

APPLIES = Counter("berth_propagator_applies_total", "Objects applied to clusters", ["result"])



class ClusterClient(Protocol):
    """What the propagator asks of a cluster's API."""

    def locate(self, body: dict[str, Any]) -> tuple[Kind, KubeObjectRef]:
        """The kind of a manifest object and where it lives; NotServed/Unavailable."""
        ...

    def apply(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> KubeObject:
        """Server-side apply, forced; the object as stored. Rejected or Unavailable."""
        ...

    def create(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> KubeObject:
        """Make an object read as absent, its fields berth's as an apply's; the object
        as stored. Exists if a namesake is there now (nothing written), Rejected or
        Unavailable."""
        ...

    def get(self, ref: KubeObjectRef, *, cached: bool = False) -> KubeObject | None:
        """The object, None if absent; ``cached``: from the API server's watch cache."""
        ...

    def exists(self, ref: KubeObjectRef) -> bool:
        ...

    def delete(self, ref: KubeObjectRef, *, propagation: str = "Background",
               uid: str = "") -> None:
        """Delete (only the object with ``uid``, if given); one already gone is fine."""
        ...


class Clients(Protocol):
    """How the executor reaches a cluster by id ("<namespace>/<name>")."""

    def client(self, cid: str, identity: Identity | None = None) -> ClusterClient | None:
        """Its client, making its calls as ``identity`` (None: berth's own credential);
        None if there is no such Cluster; Unavailable if it cannot be reached."""
        ...

    def unreadable(self, cid: str) -> bool:
        """Whether the Cluster's key holds a value that does not decode."""
        ...

    def judge(self, cid: str, ref: KubeObjectRef, obj: KubeObject,
              rules: tuple[HealthRule, ...]) -> Health:
        """The health of an object the cluster just returned."""
        ...

    def seen_owner(self, cid: str, ref: KubeObjectRef) -> str | None:
        """The application a watch last showed owning ``ref`` on ``cid`` (None: unknown)."""
        ...


class Conflicted(Exception):
    """The object is another's on the cluster: not applied, not taken over."""


# (cluster id, kind, object, what the cluster stored): called after each object applied.
OnApplied = Callable[[str, Kind, KubeObjectRef, KubeObject], None]


class Guarded:
    """A cluster's client whose writes go out only while the authority holds: Unavailable
    (:data:`LAPSED`) otherwise, with nothing sent. Reads go out regardless."""

    def __init__(self, client: ClusterClient, cid: str, authority: Authority) -> None:
        self.client = client
        self.cid = cid
        self.authority = authority

    def _check(self, ref: KubeObjectRef, verb: str) -> None:
        if not self.authority.holds(self.cid):
            log.info("%s on cluster %s not %s: %s", ref, self.cid, verb, LAPSED)
            raise Unavailable(f"cluster {self.cid}: {LAPSED}")

    def locate(self, body: dict[str, Any]) -> tuple[Kind, KubeObjectRef]:
        return self.client.locate(body)

    def apply(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> KubeObject:
        self._check(ref, "applied")
        return self.client.apply(kind, ref, body)

    def create(self, kind: Kind, ref: KubeObjectRef, body: dict[str, Any]) -> KubeObject:
        self._check(ref, "created")
        return self.client.create(kind, ref, body)

    def get(self, ref: KubeObjectRef, *, cached: bool = False) -> KubeObject | None:
        return self.client.get(ref, cached=cached)

    def exists(self, ref: KubeObjectRef) -> bool:
        return self.client.exists(ref)

    def delete(self, ref: KubeObjectRef, *, propagation: str = "Background",
               uid: str = "") -> None:
        self._check(ref, "deleted")
        self.client.delete(ref, propagation=propagation, uid=uid)


def _unserved(client: ClusterClient, unit: list[order.Located],
              bodies: tuple[dict[str, Any], ...], at: order.Step) -> str:
    """Why the step ``at`` waits for its cluster to serve a kind its copy's own CRD
    defines (Established a moment before the API's discovery lists it); "" when every
    kind of the step is served. A kind nothing in the copy defines raises NotServed, an
    error as before."""
    for kind, _, body in unit:
        if kind is not None:
            continue
        try:
            client.locate(body)
        except NotServed as exc:
            if not order.defines(bodies, body):
                raise
            return f"{order.named(at)} waits for the cluster to serve its kind ({exc})"
    return ""


class Executor:
    def __init__(self, clients: Clients, own_writes: OwnWrites,
                 on_applied: list[OnApplied] | None = None,
                 authority: Authority | None = None) -> None:
        self.clients = clients
        self.own_writes = own_writes
        self.on_applied = on_applied if on_applied is not None else []
        self.authority: Authority = authority if authority is not None else Leased()

    def apply(self, step: Apply, app: App, progress: Progress,
              record: Callable[[ApplicationState], Retry | None]) -> Retry | None:
        """Apply every object on one cluster, then prune what the generation dropped.

        Objects not yet recorded for the cluster are recorded (``record``
        writes the status) before they are applied. Returns a Retry if the
        reconcile must stop (a status write failed); the cluster's outcome goes
        into ``progress``. A cluster where a watch saw an object changed by
        someone else right after berth applied it goes into ``drifted``.
        """
        cid = step.cluster
        progress.tried.add(cid)
        made = step.rendered
        bodies = made.bodies if made is not None else (
            step.bodies if step.bodies is not None else app.bodies)
        if step.replicas is not None:
            bodies = tuple(with_replicas(b, step.replicas) for b in bodies)
        with self.authority.serving(cid) as serving:
            if not serving:
                progress.errors[cid] = HANDED_OVER
                return None
            try:
                if app.observe:
                    self._observe(step, app, progress)
                    return None
                return self._apply(step, app, bodies, progress, record)
            except Rejected as exc:
                if made is not None and made.fingerprint:  # this cluster's copy alone
                    progress.errors[cid] = (f"refused by cluster {cid}: {exc} (its copy as "
                                            f"{', '.join(made.by)} make it)")
                    progress.refused_copies[cid] = made.fingerprint
                else:
                    progress.refused = (cid, str(exc))
            except (Unavailable, Conflicted) as exc:
                progress.errors[cid] = str(exc)
        return None

    def _apply(self, step: Apply, app: App, bodies: tuple[dict[str, Any], ...],
               progress: Progress, record: Callable[[ApplicationState], Retry | None]
               ) -> Retry | None:
        cid, gen = step.cluster, step.generation
        client = self._client(cid, step.identity)
        before = progress.applied.get(cid) or ClusterApplied(0)
        # A new generation: its Jobs run again (those a waiting step had not reached yet
        # too, when it reaches them).
        renew = {r for r in before.objects if r.job} if before.generation not in (0, gen) \
            else set(before.rerun)
        skip = set(step.skip)  # and those the cluster's own record says are done
        if before.generation == gen:
            skip.update(before.done)
        located: list[tuple[Kind | None, KubeObjectRef | None, dict[str, Any]]] = []
        for body in bodies:
            try:
                located.append((*client.locate(body), body))
            except Unavailable:  # e.g. a custom resource whose CRD comes first
                located.append((None, None, body))
        there: dict[KubeObjectRef, bool] = {}  # whether each exists: applied with force
        forbidden: dict[KubeObjectRef, str] = {}  # what the cluster's RBAC refused, and how
        for _, ref, _ in located:  # refused before anything is recorded or applied
            if ref is not None and ref not in skip:
                self._owned(client, cid, ref, step.owner, app.adopt, there, forbidden)
        halt = self._record(cid, gen, [ref for _, ref, _ in located if ref], progress, record)
        if halt is not None:
            return halt
        done: list[KubeObjectRef] = []  # recorded there: applied, or there from before
        judged: list[tuple[KubeObjectRef, Health]] = []
        waiting = ""  # why the steps from here on are not applied yet ("": none waits)
        pending: list[KubeObjectRef] = []  # their objects (those located)
        units = order.cut(located)
        for n, (at, step_bodies) in enumerate(units):
            if not waiting:
                waiting = _unserved(client, step_bodies, bodies, at)
            if waiting:  # not applied now: what is there from before stays, unpruned
                later = [ref for _, ref, _ in step_bodies if ref is not None]
                pending += later
                done.extend(ref for ref in later if ref in before.objects)
                continue
            ready: list[tuple[KubeObjectRef, Health | None]] = []  # None: not applied
            for kind, ref, body in step_bodies:
                if kind is None or ref is None:
                    kind, ref = client.locate(body)
                    if ref not in skip:
                        self._owned(client, cid, ref, step.owner, app.adopt, there, forbidden)
                    halt = self._record(cid, gen, [ref], progress, record)
                    if halt is not None:
                        return halt
                if ref in skip:  # complete at this generation: never created again
                    done.append(ref)
                    judged.append((ref, JOB_DONE))
                    ready.append((ref, JOB_DONE))
                    continue
                if ref not in forbidden:
                    try:
                        if ref in renew:
                            self.own_writes.forget(cid, ref)  # a Job's template cannot change
                            client.delete(ref, propagation=app.propagation)
                        stored = self._apply_one(client, cid, kind, ref, body, progress,
                                                 None if there.get(ref, True) else (step.owner,
                                                                                    app.adopt))
                    except Forbidden as exc:
                        forbidden[ref] = str(exc)
                    else:
                        done.append(ref)
                        health = self.clients.judge(cid, ref, stored, app.rules)
                        judged.append((ref, health))
                        ready.append((ref, health))
                        continue
                if ref in before.objects:  # forbidden now, there from before: not pruned
                    done.append(ref)
                ready.append((ref, None))  # not applied: what follows waits
            if n + 1 < len(units):
                waiting = order.behind(ready, units[n + 1][0])
        pruning = ""  # why what the generation dropped is not all gone yet
        if waiting:  # the rest waits: nothing is pruned until every step is applied
            done += [o for o in before.objects if o not in done]
            left: list[KubeObjectRef] = []
        else:
            left, pruning = self._remove(cid, client,
                                         [o for o in before.objects if o not in done],
                                         app.propagation, step.owner)
        made = step.rendered
        progress.applied[cid] = ClusterApplied(
            gen, done + left, step.replicas, since=step.since, new=step.new,
            done=[r for r in done if r in skip],
            overrides=list(made.by) if made is not None else [],
            rendered=made.fingerprint if made is not None else "",
            identity=step.identity.username if step.identity is not None else "",
            waiting=waiting, rerun=[r for r in pending if r in renew])
        progress.refused_copies.pop(cid, None)
        copy = copy_of(judged)
        progress.health[cid] = msgspec.structs.replace(copy, health=gated(copy.health, waiting))
        said = [pruning or f"could not prune {', '.join(map(str, left))}"] if left else []
        if forbidden:
            who = f" to {step.identity}" if step.identity is not None else ""
            said.append(f"forbidden{who} by cluster {cid}'s RBAC (tried again later): "
                        + "; ".join(forbidden.values()))
        if said:
            progress.errors[cid] = "; ".join(said)
        return None

    def _observe(self, step: Apply, app: App, progress: Progress) -> None:
        """Read the copy another tool deployed on one cluster and judge it, writing
        nothing there: an object not there yet is on its way (its tool deploys it)."""
        cid = step.cluster
        client = self._client(cid, step.identity)
        judged: list[tuple[KubeObjectRef, Health]] = []
        for ref in app.observe:
            try:
                seen = client.get(ref)
            except Forbidden as exc:
                raise Unavailable(f"{ref} on cluster {cid} cannot be read: {exc}") from exc
            judged.append((ref, Health(PROGRESSING, f"{ref} not there yet") if seen is None
                           else self.clients.judge(cid, ref, seen, app.rules)))
        progress.applied[cid] = ClusterApplied(
            step.generation, list(app.observe), step.replicas, since=step.since,
            new=step.new, identity=step.identity.username if step.identity else "",
            observed=True)
        progress.health[cid] = copy_of(judged)

    def _owned(self, client: ClusterClient, cid: str, ref: KubeObjectRef, owner: str,
               adopt: bool, there: dict[KubeObjectRef, bool],
               forbidden: dict[KubeObjectRef, str]) -> None:
        """Whether ``ref`` exists, into ``there`` (:meth:`_check_owner`); into
        ``forbidden`` if the cluster's RBAC does not let the copy read it."""
        try:
            there[ref] = self._check_owner(client, cid, ref, owner, adopt)
        except Forbidden as exc:
            forbidden[ref] = str(exc)

    def _apply_one(self, client: ClusterClient, cid: str, kind: Kind, ref: KubeObjectRef,
                   body: dict[str, Any], progress: Progress,
                   absent: tuple[str, bool] | None) -> KubeObject:
        """Apply one object. ``absent``: it was read as absent (the owner and whether
        the application may take another's over): created, which the cluster refuses
        if anyone made it since — then read again past the cache, and applied only if
        it is the application's or may be taken over. A creation is atomic on the
        cluster: of two of berth's applications naming one object, in one process or
        two, one makes it and the other finds it made."""
        self.own_writes.begin(cid, ref)
        try:
            if absent is None:
                stored = client.apply(kind, ref, body)
            else:
                try:
                    stored = client.create(kind, ref, body)
                except Exists:
                    owner, adopt = absent  # made meanwhile: whose? read past the cache
                    self._check_owner(client, cid, ref, owner, adopt, cached=False)
                    stored = client.apply(kind, ref, body)
        except BaseException:
            APPLIES.labels("failed").inc()
            self.own_writes.end(cid, ref, None)
            raise
        APPLIES.labels("applied").inc()
        meta = stored.metadata
        if self.own_writes.end(cid, ref, meta.resourceVersion, meta.generation):
            progress.drifted.add(cid)
            log.info("%s on cluster %s was changed by someone else right after berth "
                     "applied it", ref, cid)
        for callback in self.on_applied:
            callback(cid, kind, ref, stored)
        return stored

    def _check_owner(self, client: ClusterClient, cid: str, ref: KubeObjectRef, owner: str,
                     adopt: bool, *, cached: bool = True) -> bool:
        """An object that exists already is applied only if it is the application's own,
        or the application may take it over; Conflicted otherwise. Returns whether it
        exists (then applied with force: berth's fields win over others' edits).

        The owner is read from the cluster before every apply, whatever berth recorded
        (a record is written before the apply it announces, and survives a refusal and
        a restart): from the cluster's watch when it shows the object as the
        application's, else by reading the object — from the API server's watch cache
        (``cached``), which spares its etcd a read. Whatever the read, someone may make
        the object between it and the apply: an object read as absent is created, and
        one made meanwhile is read again (:meth:`_apply_one`), never overwritten
        unseen."""
        if self.clients.seen_owner(cid, ref) == owner:
            return True
        existing = client.get(ref, cached=cached)
        if existing is None:
            return False
        theirs = existing.metadata.annotations.get(OWNER, "")
        if theirs == owner:
            return True
        who = f"application {theirs}" if theirs else "someone outside berth"
        if adopt:
            log.warning("%s on cluster %s was managed by %s: taken over by application %s "
                        "(conflictResolution: Overwrite)", ref, cid, who, owner)
            return True
        raise Conflicted(f"{ref} on cluster {cid} is managed by {who}: not taken over "
                         "(conflictResolution: Abort)")

    @staticmethod
    def _record(cid: str, gen: int, refs: list[KubeObjectRef], progress: Progress,
                record: Callable[[ApplicationState], Retry | None]) -> Retry | None:
        """Write down objects about to be applied on ``cid`` that are not yet recorded."""
        have = progress.applied.get(cid) or ClusterApplied(0)
        new = [ref for ref in refs if ref not in have.objects]
        if not new:
            return None
        progress.applied[cid] = ClusterApplied(have.generation, have.objects + new, have.replicas,
                                               identity=have.identity)
        written = intent(progress.status, progress.applied, cid, gen, progress.rollout)
        halt = record(written)
        if halt is None:
            progress.status = written
        return halt

    def confirm(self, step: Confirm, progress: Progress) -> None:
        """Before a move deletes anything: every object is there on every target."""
        try:
            for cid in step.clusters:
                with self.authority.serving(cid) as serving:
                    if not serving:
                        raise Unavailable(f"{cid}: {HANDED_OVER}")
                    client = self._client(cid)
                    have = progress.applied[cid]
                    # a Job done is not created again: its absence is expected
                    missing = [o for o in have.objects
                               if o not in have.done and not client.exists(o)]
                if missing:
                    raise Unavailable(f"{', '.join(map(str, missing))} missing on {cid} "
                                      "after apply")
        except Unavailable as exc:
            progress.confirmed = False
            progress.errors[CONFIRM] = str(exc)
        else:
            progress.confirmed = True

    def clear(self, step: Clear, progress: Progress, propagation: str = "Background") -> None:
        """Remove everything berth put on one cluster."""
        cid = step.cluster
        progress.cleared.add(cid)
        with self.authority.serving(cid) as serving:
            if not serving:
                progress.errors[cid] = HANDED_OVER
            else:
                self._clear(cid, step.owner, step.identity, progress, propagation)

    def _clear(self, cid: str, owner: str, identity: Identity | None, progress: Progress,
               propagation: str) -> None:
        try:
            client = self._reach(cid, identity)
        except Unavailable as exc:
            progress.errors[cid] = str(exc)
            return
        objects = progress.applied[cid].objects
        if progress.applied[cid].observed:  # its tool's to remove: berth forgets it
            del progress.applied[cid]
            return
        if client is None:
            if self.clients.unreadable(cid):
                progress.errors[cid] = f"the Cluster document of {cid} does not decode"
                return
            log.warning("cluster %s no longer exists: its objects %s cannot be removed", cid,
                        ", ".join(map(str, objects)))
            del progress.applied[cid]
            return
        left, why = self._remove(cid, client, objects, propagation, owner)
        if left:
            was = progress.applied[cid]
            progress.applied[cid] = ClusterApplied(was.generation, left, was.replicas)
            progress.errors[cid] = why or f"could not remove {', '.join(map(str, left))}"
        else:
            del progress.applied[cid]

    def _reach(self, cid: str, identity: Identity | None = None) -> ClusterClient | None:
        """The cluster's client as ``identity`` (None: berth's own credential), its writes
        guarded by this replica's authority; None if there is no such Cluster."""
        client = self.clients.client(cid, identity)
        return Guarded(client, cid, self.authority) if client is not None else None

    def _client(self, cid: str, identity: Identity | None = None) -> ClusterClient:
        client = self._reach(cid, identity)
        if client is None:
            raise Unavailable(f"cluster {cid} does not exist")
        return client

    def _remove(self, cid: str, client: ClusterClient, objs: list[KubeObjectRef],
                propagation: str, owner: str) -> tuple[list[KubeObjectRef], str]:
        """Delete objects that are still the application's, in reverse apply order: a
        step's only once every object of the step after it is gone (``order.py``).
        Returns those not deleted (in their recorded order), and why when it is not an
        error but an object still going that the rest waits for. Where the cluster does
        not answer, nothing of an earlier step goes. Deleted in the foreground, the last
        step's objects are also waited for: the copy is gone once they are, with what
        their controllers made (a dependency's copy there waits for that)."""
        present: list[tuple[order.Step, KubeObjectRef, KubeObject]] = []
        for obj in reversed(objs):  # last applied first, where their steps are equal
            self.own_writes.forget(cid, obj)
            try:
                current = self._get(cid, client, obj)
            except Unavailable as exc:  # its step unknown: nothing goes before it is read
                log.info("cluster %s: %s", cid, exc)
                return list(objs), ""
            if current is None:
                continue
            theirs = current.metadata.annotations.get(OWNER, "")
            if theirs != owner:
                log.warning("%s on cluster %s is managed by %s now: left there", obj, cid,
                            f"application {theirs}" if theirs else "someone outside berth")
                continue
            present.append((order.on_cluster(obj.kind, current.metadata.annotations), obj,
                            current))
        present.sort(key=lambda p: p[0], reverse=True)  # stable: the order above holds
        going: list[KubeObjectRef] = []  # deleted, of the step being removed
        failed: list[KubeObjectRef] = []  # not deleted: the cluster refused or did not answer
        for i, (at, obj, current) in enumerate(present):
            if i and at != present[i - 1][0]:
                still = [o for o in going if not self._gone(cid, client, o)]
                if still or failed:
                    rest = {o for _, o, _ in present[i:]} | set(still) | set(failed)
                    why = (f"removing in order: {order.named(at)} waits for {still[0]} to "
                           "go") if still and not failed else ""
                    return [o for o in objs if o in rest], why
                going = []
            try:
                client.delete(obj, propagation=propagation, uid=current.metadata.uid)
            except Unavailable as exc:
                log.info("cluster %s: %s", cid, exc)
                failed.append(obj)
            else:
                going.append(obj)
        if propagation == "Foreground" and not failed:
            still = [o for o in going if not self._gone(cid, client, o)]
            if still:
                return [o for o in objs if o in still], f"removing: waits for {still[0]} to go"
        return [o for o in objs if o in failed], ""

    def _gone(self, cid: str, client: ClusterClient, ref: KubeObjectRef) -> bool:
        """Whether ``ref`` no longer exists (not if the cluster did not say)."""
        try:
            return self._get(cid, client, ref) is None
        except Unavailable:
            return False

    def _get(self, cid: str, client: ClusterClient, ref: KubeObjectRef) -> KubeObject | None:
        """The object as ``client`` reads it, or as berth's own credential does where
        the identity ``client`` acts as may not (Forbidden only if neither may)."""
        try:
            return client.get(ref)
        except Forbidden:
            own = self.clients.client(cid)
            if own is None:
                raise
            return own.get(ref)
