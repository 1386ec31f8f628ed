"""The facts a reconcile decides on: a read view in, frozen :class:`~plan.Facts` out.

:class:`FactsBuilder` reads one application through :class:`Reads` — what the
informers hold, and the few reads of etcd and of this replica's memory a
reconcile needs — and returns the :class:`~controllers.propagator.plan.Facts`
the plan decides on, or None when the application is none of this replica's
business. It does no I/O of its own: the applier gives it the informers'
view (``reads.py``), and the unit tests give it tables.

What it decides, and nothing else decides:

* which of the application's clusters this replica serves (all, when it is not
  sharded; one on no cluster at all is its home replica's);
* each target's copy as the overrides that select it make it, and the targets
  whose copy cannot be rendered;
* which copies recorded as applied are to be applied again (*stale*): a push
  cluster's after drift, after a resync, or when it is not in the book; a pull
  cluster's when its work no longer says to apply it;
* what a rollout is decided from: its policy, what operators said, the
  targets' labels (a target joining a staged rollout by its labels as etcd has
  them now), the generation it rolls from, and the pace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from berth.controllers.propagator.depends import keeping, waits
from berth.controllers.propagator.deployed import observed_refs, unready
from berth.controllers.propagator.health import Copy
from berth.controllers.propagator.manifest import ManifestError, objects, remark
from berth.controllers.propagator.plan import CONFIRM, App, Facts
from berth.controllers.propagator.rollout import Inputs, Version, rolls, stable_of
from berth.controllers.propagator.views import AppView, ClusterView, cluster_id
from berth.controllers.runtime.clock import Clock
from berth.store import keys
from berth.store.credentials import with_current_secrets
from berth.store.dependencies import named
from berth.store.documents import (
    ApplicationState,
    Binding,
    ClusterApplied,
    HealthRule,
    KubeObjectRef,
)
from berth.store.documents.export import ToolVerdict
from berth.store.documents.overrides import Override
from berth.store.documents.pace import PaceOverride, PaceSpec, effective
from berth.store.documents.render import (
    Rendered,
    RenderError,
    Where,
    render,
    selects_application,
)
from berth.store.documents.rollouts import RolloutControl, RolloutPolicy, RolloutStrategy
from berth.store.documents.tenancy import Identity, NamespacePolicySpec

FINALIZER = "berth.dev/propagator"  # the propagator's own: not waited for on deletion


@dataclass(frozen=True, slots=True)
class Since:
    """What this replica did with an application's copies, as the reconcile starts."""

    epoch: int = 0  # the resync epoch now: a copy not applied in it is applied again
    drifted: Mapping[str, int] = field(default_factory=dict)  # cluster → drift seen (a sequence)
    applied: Mapping[str, int] = field(default_factory=dict)  # cluster → the epoch applied in


class Reads(Protocol):
    """What the facts are read from (``reads.py``: the applier's informers)."""

    def binding(self, namespace: str, name: str) -> Binding | None:
        ...

    def cluster(self, cid: str) -> ClusterView | None:
        """The Cluster as the informer has it."""
        ...

    def cluster_now(self, cid: str) -> ClusterView | None:
        """The Cluster as etcd has it now (None: absent, unreadable or not answering)."""
        ...

    def unseen(self, cid: str) -> str:
        """Why the observer does not see the cluster ONLINE ("": it does, or said nothing)."""
        ...

    def returned(self, cid: str) -> datetime | None:
        """When the cluster last came back ONLINE (None: it did not, or is not ONLINE)."""
        ...

    def overrides(self) -> list[Override]:
        """Every override, global and namespaced."""
        ...

    def control(self, namespace: str, name: str) -> RolloutControl | None:
        ...

    def pace(self) -> PaceSpec | None:
        """The fleet's pace."""
        ...

    def in_transit(self) -> int:
        """How many copies are in transition across the fleet."""
        ...

    def manifest(self, namespace: str, name: str, generation: int, manifest: list[Any]
                 ) -> list[Any]:
        """The manifest with its Secrets' data (held apart from the application)."""
        ...

    def kept(self, namespace: str, name: str, generation: int) -> list[Any] | None:
        """Generation ``generation``'s manifest from the history (None: not kept)."""
        ...

    def app_unreadable(self, key: keys.Key) -> bool:
        """Whether the application's key holds a value that does not decode;
        Unavailable when etcd does not answer."""
        ...

    def copy(self, cid: str, owner: str, have: ClusterApplied, rules: tuple[HealthRule, ...],
             now: datetime) -> Copy:
        """A served cluster's copy judged now: as its watch showed it, or its agent said."""
        ...

    def is_pull(self, cid: str) -> bool:
        ...

    def admits(self, namespace: str, cid: str) -> bool:
        """Whether applications of ``namespace`` may run on cluster ``cid``: its own, or
        of a set its policy binds (docs/teams.md); one that no longer exists is, as far
        as this goes."""
        ...

    def limits(self, namespace: str) -> NamespacePolicySpec | None:
        """The policy of ``namespace`` where it limits the objects its applications may
        make (kinds, Kubernetes namespaces); None where it limits none."""
        ...

    def identity(self, namespace: str) -> Identity | None:
        """Whom the objects of ``namespace`` are applied as on member clusters (its
        policy's identity; None: berth's own credential)."""
        ...

    def resend(self, cid: str, namespace: str, name: str) -> bool:
        """Whether a pull cluster's copy is to be sent again (its work no longer says so)."""
        ...

    def unobserved(self, cid: str, have: ClusterApplied | None) -> bool:
        """Whether an object recorded on ``cid`` is not in the book (a cluster handed over
        and back): applying it again observes it."""
        ...

    def owned(self, key: str, cids: set[str]) -> frozenset[str] | None:
        """Of the application's clusters, those this replica serves (None: every one)."""
        ...

    def home(self, key: str) -> bool:
        """Whether the application is this replica's own share (its home)."""
        ...

    def application(self, namespace: str, name: str) -> AppView | None:
        """Another application as the informer has it (a dependency)."""
        ...

    def recorded(self, namespace: str, name: str) -> ApplicationState | None:
        """Another application's status as the informer has it."""
        ...

    def dependents(self, key: keys.Key) -> set[keys.Key]:
        """The applications that depend on ``key``."""
        ...

    def cycle(self, key: keys.Key) -> list[str] | None:
        """A loop of dependencies through ``key`` (None: none)."""
        ...

    def may_depend(self, namespace: str, on: str) -> bool:
        """Whether applications of ``namespace`` may depend on those of ``on``."""
        ...

    def verdicts(self, namespace: str, name: str, export: str
                 ) -> Mapping[str, ToolVerdict] | None:
        """What the tool that deploys the application says of its copies, by cluster, as
        read through the Export ``export`` (None: nothing read through it: one read
        through another Export, since deleted or no longer named, is no word at all)."""
        ...


class FactsBuilder:
    """Facts from :class:`Reads`, dated by ``clock``."""

    def __init__(self, reads: Reads, clock: Clock, *, move_timeout: float) -> None:
        self.reads = reads
        self.clock = clock
        self.move_timeout = move_timeout

    def facts(self, key: keys.Key, namespace: str, name: str, recorded: ApplicationState,
              view: AppView | None, since: Since) -> Facts | None:
        """The frozen snapshot a reconcile of ``key`` decides on; None when it is not
        this replica's to reconcile."""
        reads = self.reads
        binding = reads.binding(namespace, name)
        placed = [t for t in binding.spec.targets if t.kind == "Cluster"] if binding else []
        # Where its namespace may not run (its policy changed since the Binding, or the
        # Binding is not the scheduler's): no target, and the copies there go.
        barred = frozenset(c for c in {*(cluster_id(t.namespace or namespace, t.name)
                                         for t in placed), *recorded.applied}
                           if not reads.admits(namespace, c))
        placed = [t for t in placed if cluster_id(t.namespace or namespace, t.name) not in barred]
        targets = tuple(cluster_id(t.namespace or namespace, t.name) for t in placed)
        owned = self._involved(key, recorded, targets)
        if owned is False:
            return None
        assert owned is not True
        owner, identity = f"{namespace}/{name}", reads.identity(namespace)
        needed = self._needed(key, recorded)
        if view is None:
            unreadable = bool(recorded.applied) and reads.app_unreadable(key)
            return Facts(None, recorded, app_unreadable=unreadable, owned=owned, owner=owner,
                         identity=identity, needed=needed)
        meta, spec = view.metadata, view.spec
        manifest = (spec.manifest if meta.deleted is not None  # removal needs no data
                    else reads.manifest(namespace, name, meta.generation, spec.manifest))
        try:
            bodies, error = tuple(objects(manifest, namespace, name, meta.generation,
                                          binding.spec.decision if binding else "")), ""
        except ManifestError as exc:
            bodies, error = (), str(exc)
        by = spec.deployedBy
        if by is not None and bodies:
            bodies, error = (), ("spec.deployedBy: an application another tool deploys has "
                                 "no manifest: give one or the other")
        elif by is not None and not error:  # what it may read is what it may apply
            error = _unreadable(reads.limits(namespace), namespace, observed_refs(by))
        rules = tuple(spec.health)
        # a dependent's copy is gone, for its dependencies, once its Pods are too
        propagation = "Foreground" if spec.dependsOn else spec.deletionPropagation
        app = App(meta.generation, meta.deleted is not None,
                  tuple(f for f in meta.finalizers if f != FINALIZER), bodies, error,
                  rules, spec.conflictResolution == "Overwrite", propagation,
                  observed_refs(by))
        now = self.clock.now()
        # (a push cluster's copy another tool deployed is read again by the reconcile)
        health = {cid: reads.copy(cid, owner, have, rules, now)
                  for cid, have in recorded.applied.items()
                  if have.generation > 0 and (owned is None or cid in owned)
                  and not (have.observed and not reads.is_pull(cid))}
        if binding is None:
            return Facts(app, recorded, owned=owned, health=health, now=now,
                         move_timeout=self.move_timeout, owner=owner, identity=identity,
                         needed=needed)
        served = tuple(c for c in targets if owned is None or c in owned)
        selecting = self._selecting(namespace, name, meta.labels) if not error else []
        rendered, unrendered, forbidden = self._rendered(
            served, bodies, selecting, namespace, name, meta.generation, binding.spec.decision)
        rollout = self._rollout(spec.rollout, spec.pace, recorded, meta.generation, targets,
                                served, selecting, manifest, namespace,
                                name) if not error else Inputs()
        shares = {cluster_id(t.namespace or namespace, t.name): t.replicas for t in placed
                  if t.replicas is not None}
        stale = frozenset(c for c in served if self._stale(c, namespace, name, recorded, since,
                                                           identity))
        unseen = {cid: why for cid in targets if (why := reads.unseen(cid))}
        returned = {cid: at for cid in targets if (at := reads.returned(cid)) is not None}
        said = reads.verdicts(namespace, name, by.export) if by is not None and by.argocd \
            else None
        waits_on_tool = {cid: why for cid in served
                         if by is not None and by.argocd and (why := unready(by, said, cid))}
        return Facts(app, recorded, binding.spec.generation, targets,
                     binding.status.reason,
                     stopped=not targets and bool(binding.status.yielded_to), barred=barred,
                     stale=stale, unseen=unseen, returned=returned, shares=shares,
                     owned=owned, health=health, now=now,
                     move_timeout=self.move_timeout, owner=owner, identity=identity,
                     rendered=rendered,
                     unrendered=unrendered, forbidden=forbidden, rollout=rollout,
                     waits_for=self._waits_for(key, view, targets), needed=needed,
                     unready=waits_on_tool)

    def _waits_for(self, key: keys.Key, view: AppView, targets: tuple[str, ...]
                   ) -> dict[str, str]:
        """Per target, what its copy waits for of the application's dependencies (the
        first not ready there), or the loop of dependencies it is on."""
        if not view.spec.dependsOn or not targets:
            return {}
        loop = self.reads.cycle(key)
        if loop is not None:
            return dict.fromkeys(targets, f"on a loop of dependencies: {named(loop)}")
        ns = view.metadata.namespace or ""
        for d in view.spec.dependsOn:  # another namespace's, without its consent: never
            on = d.namespace or ns
            if not self.reads.may_depend(ns, on):
                return dict.fromkeys(targets, f"may not depend on {on}/{d.name}: the policy "
                                     f"of namespace {on} does not name {ns} among its "
                                     "dependents")
        deps = [(f"{d.namespace or ns}/{d.name}", d.when,
                 self.reads.application(d.namespace or ns, d.name),
                 self.reads.recorded(d.namespace or ns, d.name)) for d in view.spec.dependsOn]
        out = {}
        for cid in targets:
            why = next((w for dep in deps if (w := waits(*dep, cid))), "")
            if why:
                out[cid] = why
        return out

    def _needed(self, key: keys.Key, recorded: ApplicationState) -> dict[str, str]:
        """Per cluster the application is recorded on, the dependents recorded there."""
        dependents = self.reads.dependents(key)
        if not dependents or not recorded.applied:
            return {}
        own = keys.parse_key(key).namespace or ""
        states = []
        for d in sorted(dependents):
            ref = keys.parse_key(d)
            if self.reads.may_depend(ref.namespace or "", own):  # else it holds nothing
                states.append((f"{ref.namespace}/{ref.name}",
                               self.reads.recorded(ref.namespace or "", ref.name)))
        return {cid: who for cid in recorded.applied if (who := keeping(states, cid))}

    def _involved(self, key: str, recorded: ApplicationState, targets: tuple[str, ...]
                  ) -> frozenset[str] | bool | None:
        """This replica's clusters of the application (None: all); False when it has
        nothing to do with it. One on no cluster at all is its home replica's."""
        cids = {*recorded.applied, *(c for c in recorded.errors if c != CONFIRM), *targets}
        owned = self.reads.owned(key, cids)
        if owned is None or owned:
            return owned
        return frozenset() if not cids and self.reads.home(key) else False

    def _stale(self, cid: str, namespace: str, name: str, recorded: ApplicationState,
               since: Since, identity: Identity | None) -> bool:
        """Whether the copy on ``cid`` is to be applied again (an agent keeps its own
        cluster as its work says: a pull cluster's copy is sent again only when its work
        no longer says to apply it); in either mode, a copy applied as another identity
        than its namespace's policy names now."""
        have = recorded.applied.get(cid)
        if have is not None and have.generation > 0 and have.identity != (
                identity.username if identity is not None else ""):
            return True
        if self.reads.is_pull(cid):
            return self.reads.resend(cid, namespace, name)
        return (cid in since.drifted or since.applied.get(cid) != since.epoch
                or (have is not None and have.observed)  # another tool's: read each time
                or self.reads.unobserved(cid, recorded.applied.get(cid)))

    def _selecting(self, namespace: str, name: str, labels: dict[str, str]) -> list[Override]:
        """The overrides that select the application (in no order: render orders them)."""
        return [o for o in self.reads.overrides()
                if selects_application(o, namespace, name, labels)]

    def _rendered(self, targets: tuple[str, ...], bodies: tuple[dict[str, Any], ...],
                  selecting: list[Override], namespace: str, name: str, generation: int,
                  decision: str = "") -> tuple[dict[str, Rendered], dict[str, str], frozenset[str]]:
        """Each target's copy as the overrides make it, the targets whose copy cannot be
        rendered (why, naming the rule) or holds an object the namespace's policy
        forbids (docs/teams.md) — neither is applied until the application, an
        override or the policy changes — and those of them the policy forbids."""
        rendered: dict[str, Rendered] = {}
        unrendered: dict[str, str] = {}
        forbidden: set[str] = set()
        limits = self.reads.limits(namespace)
        if not bodies or (not selecting and limits is None):
            return rendered, unrendered, frozenset()
        as_written = _forbidden(limits, namespace, bodies)
        for cid in targets:
            if not selecting:
                if as_written:
                    unrendered[cid] = as_written
                    forbidden.add(cid)
                continue
            view = self.reads.cluster(cid)
            if view is None:
                continue
            meta = view.metadata
            try:
                made = render(bodies, selecting, Where(meta.name, meta.namespace, meta.labels))
            except RenderError as exc:
                unrendered[cid] = f"not rendered: {exc}"
                continue
            if made.fingerprint:
                try:
                    made = dataclasses.replace(made, bodies=remark(
                        made.bodies, namespace, name, generation, decision))
                except ManifestError as exc:  # a rule made a wave that is none
                    unrendered[cid] = f"not rendered: {exc}"
                    continue
            why = _forbidden(limits, namespace, made.bodies) if made.fingerprint else as_written
            if why:
                unrendered[cid] = why
                forbidden.add(cid)
                continue
            rendered[cid] = made
        return rendered, unrendered, frozenset(forbidden)

    def _rollout(self, policy: RolloutPolicy | None, own: PaceOverride | None,
                 recorded: ApplicationState, gen: int, targets: tuple[str, ...],
                 served: tuple[str, ...], selecting: list[Override], manifest: list[Any],
                 namespace: str, name: str) -> Inputs:
        """What the application's rollout is decided from: its policy, what operators
        said, its targets' labels, the generation it rolls from ready to apply, and the
        pace it keeps (the fleet's with its ``own`` over it)."""
        if not rolls(policy):
            return Inputs()
        # A target joining a staged rollout takes its stage by its labels as they are
        # now, read from etcd: the informer may not yet have the change that made the
        # scheduler choose it, and a stale stage could apply a generation too soon.
        stable = stable_of(recorded.rollout, recorded.applied, gen)
        joining = (policy is not None and policy.strategy == RolloutStrategy.STAGED
                   and 0 < stable < gen)
        labels = {}
        for cid in targets:
            view = (self.reads.cluster_now(cid) if joining and cid not in recorded.applied
                    else None) or self.reads.cluster(cid)
            labels[cid] = view.metadata.labels if view is not None else {}
        prior = self._prior(stable, served, selecting, manifest, namespace, name) \
            if 0 < stable < gen else None
        return Inputs(policy, self.reads.control(namespace, name), labels, prior,
                      effective(self.reads.pace(), own), self.reads.in_transit())

    def _prior(self, gen: int, served: tuple[str, ...], selecting: list[Override],
               current: list[Any], namespace: str, name: str) -> Version | None:
        """Generation ``gen`` of the application from its history, its Secrets with their
        current data (None: not kept, or a Secret of it is no longer in the manifest)."""
        kept = self.reads.kept(namespace, name, gen)
        manifest = with_current_secrets(kept, current) if kept is not None else None
        if manifest is None:
            return None
        try:
            bodies = tuple(objects(manifest, namespace, name, gen))
        except ManifestError:
            return None
        rendered, unrendered, _ = self._rendered(served, bodies, selecting, namespace, name,
                                                 gen)
        return Version(gen, bodies, rendered, unrendered)


def _unreadable(limits: NamespacePolicySpec | None, namespace: str,
                refs: tuple[KubeObjectRef, ...]) -> str:
    """Why the policy of ``namespace`` forbids a copy another tool deploys to be these
    objects ("": it allows them): the kinds and Kubernetes namespaces its applications
    may apply are those their copies may be read as, so that a team learns nothing of
    another's objects through berth's reading of them."""
    stubs = tuple({"apiVersion": r.api_version, "kind": r.kind,
                   "metadata": {"name": r.name, "namespace": r.namespace}} for r in refs)
    why = _forbidden(limits, namespace, stubs)
    return f"spec.deployedBy.objects: {why}" if why else ""


def _forbidden(limits: NamespacePolicySpec | None, namespace: str,
               bodies: tuple[dict[str, Any], ...]) -> str:
    """Why the policy of ``namespace`` forbids applying ``bodies`` (the first object it
    forbids); empty when it allows them all."""
    if limits is None:
        return ""
    why = next((w for body in bodies if (w := limits.forbids(body))), "")
    return f"not allowed by the policy of namespace {namespace}: {why}" if why else ""
