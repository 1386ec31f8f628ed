"""What the propagator does next for one application, decided as a value.

:func:`plan` is pure. It reads :class:`Facts` — the application, its Binding
and its recorded status, frozen when the reconcile starts — and
:class:`Progress` — what this reconcile has done so far — and returns the next
:data:`Step`. The reconcile executes the step, records its outcome in the
progress and asks again; every step changes the progress, so the plan moves
on until it says :class:`Finish`.

The rules (docs/propagator.md):

* generation G is applied only on a Binding decided for G; a manifest the
  cluster refused is left alone until the generation changes;
* RUNNING means available: the generation is applied on every target and each
  copy is Healthy (``health.py``); until then PROGRESSING, and DEGRADED once a
  target is still not available ``move_timeout`` after it was applied;
* a new generation reaches the targets as ``spec.rollout`` says (``rollout.py``):
  each target is applied the generation the rollout gives it now, the new one
  or the one it rolls from;
* a move never takes the application down: the objects are removed from the
  clusters the application left only once every target is available (checked
  with a GET too, and recorded as running on both first) — or from a cluster
  whose copy serves nothing (none of its replicas available, or the cluster
  not seen ONLINE). A target that does not become available in time keeps
  the old copy running, and the target is recorded as ``failed``: the
  scheduler avoids it for the application. A divided application's shrinking
  share is lowered only once the growing shares are available; a running Job
  is stopped where it leaves before it starts anew (``jobs.py``);
* an application marked deleted, or whose key vanished, has its objects
  removed from every cluster before its status (and its key) go.

Over 600 lines, on purpose: these are the rules of one reconcile, each beside the
others it must agree with (a move's removal, a rollout's wave, the state said);
what reads and executes them lives apart (``facts.py``, ``execute.py``, ``applier.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import msgspec

from berth.controllers.propagator.health import UNKNOWN, Copy, Health, gated, with_copy
from berth.controllers.propagator.jobs import done_at, finished, running_job, working
from berth.controllers.propagator.rollout import Inputs, Version, Wave, decide
from berth.store.documents import (
    ApplicationState,
    AppState,
    ClusterApplied,
    FailedTarget,
    HealthRule,
    KubeObjectRef,
    ObjectRef,
)
from berth.store.documents.reasons import listed
from berth.store.documents.render import Rendered
from berth.store.documents.rollouts import COMPLETE, HALTED, PAUSED, ROLLED_BACK, RolloutState
from berth.store.documents.tenancy import Identity

CONFIRM = "confirm"  # the errors' entry for a failed check before a move removes anything
FAILED_MEMORY = timedelta(hours=1)  # how long a target that failed stays in the status
RECHECK = 10.0  # seconds: a copy not yet available is judged again at least this often


@dataclass(frozen=True, slots=True)
class App:
    """The application as the reconcile found it."""

    generation: int
    deleting: bool = False  # marked deleted: remove it everywhere, then its key
    foreign_finalizers: tuple[str, ...] = ()  # waited for before the key is deleted
    bodies: tuple[dict[str, Any], ...] = ()  # the manifest's objects, marked, in order
    manifest_error: str = ""  # the manifest cannot be applied as written (names the field)
    rules: tuple[HealthRule, ...] = ()  # how its custom resources are judged
    adopt: bool = False  # may take over objects others manage (conflictResolution)
    propagation: str = "Background"  # how its objects are deleted
    # Placement only: another tool deploys its copies, these objects on each cluster,
    # which berth reads and judges and never writes or removes (``spec.deployedBy``).
    observe: tuple[KubeObjectRef, ...] = ()


@dataclass(frozen=True, slots=True)
class Facts:
    """What a reconcile starts from, read once."""

    app: App | None  # None: the key vanished (or holds garbage: ``app_unreadable``)
    recorded: ApplicationState  # the status as last written (empty if none)
    binding_generation: int | None = None  # the generation the Binding was decided for
    targets: tuple[str, ...] = ()  # the Binding's clusters, "<namespace>/<name>"
    binding_reason: str = ""  # why the Binding has no target
    # No target because its copies were stopped to make room for a more important
    # application (the Binding says whom it yielded to): they go, the last one too.
    stopped: bool = False
    # Clusters its namespace may not run on (docs/teams.md): never targets; with no
    # target left, its copies there go (never kept as the last copy).
    barred: frozenset[str] = frozenset()
    app_unreadable: bool = False  # the application's key holds something else
    stale: frozenset[str] = frozenset()  # applied there, but apply again (drift, resync)
    unseen: Mapping[str, str] = field(default_factory=dict)  # not seen ONLINE, and why
    # When each target last came back ONLINE: a copy's ``move_timeout`` counts from then
    # if that is later than when it was applied (it had no chance meanwhile).
    returned: Mapping[str, datetime] = field(default_factory=dict)
    shares: Mapping[str, int] = field(default_factory=dict)  # a divided application's replicas
    # The clusters this replica serves (None: every one). Steps on the others are their
    # owners'; what their owners recorded in the status stands for them here.
    owned: frozenset[str] | None = None
    # Each served cluster's copy as judged now (at the generation recorded there).
    health: Mapping[str, Copy] = field(default_factory=dict)
    now: datetime | None = None  # for deadlines; None: none has passed
    move_timeout: float = 600.0  # seconds a new copy has to become available
    owner: str = ""  # "<namespace>/<name>" of the application (its objects say so)
    # Whom its objects are applied and removed as on member clusters: its namespace's
    # policy's identity (docs/teams.md; None: berth's own credential there).
    identity: Identity | None = None
    # Each target's copy as the overrides that select it make it (absent: the manifest as
    # written), and the targets whose copy cannot be rendered (why: the rule named).
    rendered: Mapping[str, Rendered] = field(default_factory=dict)
    unrendered: Mapping[str, str] = field(default_factory=dict)
    # Of those, the targets whose copy holds an object the namespace's policy forbids:
    # a copy of the current generation there goes (docs/teams.md).
    forbidden: frozenset[str] = frozenset()
    rollout: Inputs = field(default_factory=Inputs)  # how a new generation reaches them
    # Per target, what its copy waits for before it is applied there: a dependency not
    # yet available there, or a loop of dependencies (docs/order.md "Dependencies").
    waits_for: Mapping[str, str] = field(default_factory=dict)
    # Per cluster, the dependents that still run there: the copy there stays (a move's
    # removal and the application's deletion wait for them to leave).
    needed: Mapping[str, str] = field(default_factory=dict)
    # Per target, why the tool that deploys the application does not call its copy
    # there available yet (Argo CD: its Application not Healthy and Synced); absent:
    # it does, or no tool's word is asked.
    unready: Mapping[str, str] = field(default_factory=dict)

    def mine(self, cid: str) -> bool:
        return self.owned is None or cid in self.owned


@dataclass(slots=True)
class Progress:
    """What this reconcile has done so far; the executor updates it after each step."""

    applied: dict[str, ClusterApplied]  # per cluster, what is there now
    status: ApplicationState  # the status as it stands in etcd now
    errors: dict[str, str] = field(default_factory=dict)  # per cluster, this reconcile's
    tried: set[str] = field(default_factory=set)  # clusters applied to (or tried)
    cleared: set[str] = field(default_factory=set)  # clusters cleared (or tried)
    confirmed: bool | None = None  # None: not checked; False: an object was missing
    refused: tuple[str, str] | None = None  # (cluster, the API server's message)
    drifted: set[str] = field(default_factory=set)  # changed by someone right after us
    health: dict[str, Copy] = field(default_factory=dict)  # judged after this reconcile's applies
    # per cluster, the fingerprint of a copy (as overrides made it) the cluster refused
    refused_copies: dict[str, str] = field(default_factory=dict)
    # the rollout as last decided: recorded, then as each Apply step carried it
    rollout: RolloutState | None = None
    # pull clusters whose agent has not yet reported this reconcile's work, and what
    # it is to do: not an error (its report reconciles the application again)
    waiting: dict[str, str] = field(default_factory=dict)

    @classmethod
    def start(cls, recorded: ApplicationState, owned: frozenset[str] | None = None
              ) -> Progress:
        """From the recorded status; the errors other replicas recorded for the clusters
        they serve stay (this reconcile cannot clear them)."""
        theirs = {} if owned is None else {c: e for c, e in recorded.errors.items()
                                           if c not in owned and c != CONFIRM}
        return cls(copy_applied(recorded.applied), recorded, theirs,
                   refused_copies=dict(recorded.refused), rollout=recorded.rollout)


@dataclass(frozen=True, slots=True)
class Apply:
    """Apply every object on ``cluster`` (recorded first), then prune what was dropped;
    ``replicas``: with a divided application's divisible objects set to this share.
    ``since``: when this generation (or share) was first applied there; ``new``: the
    application was never available there; ``skip``: Jobs complete at this generation,
    not created again."""

    cluster: str
    generation: int
    replicas: int | None = None
    since: datetime | None = None
    new: bool = False
    skip: tuple[KubeObjectRef, ...] = ()
    owner: str = ""  # "<namespace>/<name>" of the application
    rendered: Rendered | None = None  # this cluster's copy as overrides make it
    bodies: tuple[dict[str, Any], ...] | None = None  # another generation's (None: the app's)
    rollout: RolloutState | None = None  # the rollout as decided for this step
    identity: Identity | None = None  # whom to apply as (None: berth's own credential)


@dataclass(frozen=True, slots=True)
class Confirm:
    """Check with a GET that every recorded object exists on each of ``clusters`` (a
    pull cluster's agent reports it)."""

    clusters: tuple[str, ...]
    owner: str = ""  # "<namespace>/<name>" of the application


@dataclass(frozen=True, slots=True)
class Clear:
    """Remove everything berth put on ``cluster`` (what is still ``owner``'s)."""

    cluster: str
    owner: str = ""
    identity: Identity | None = None  # whom to remove them as (None: berth's credential)


@dataclass(frozen=True, slots=True)
class Write:
    """Write this status before going on (a move says it runs on both first)."""

    state: ApplicationState


@dataclass(frozen=True, slots=True)
class Finish:
    """The end of this reconcile."""

    state: ApplicationState | None = None  # the status to leave (written if it differs)
    retry: str = ""  # not done: reconcile again after a backoff, because of this
    remove: bool = False  # nothing is left anywhere: delete the status (and marked key)
    warning: str = ""  # said in the log
    recheck: float | None = None  # seconds: judge again then (a copy not yet available)


Step = Apply | Confirm | Clear | Write | Finish


def plan(facts: Facts, progress: Progress) -> Step:
    """The next step for the application, from what is known and what was done."""
    app = facts.app
    if app is None and facts.app_unreadable and progress.applied:
        return Finish(facts.recorded, warning="holds a value that is not an Application "
                      "document: its objects stay where they are until it is fixed or deleted")
    if app is None or app.deleting:
        return _removal(facts, progress, app)
    gen = app.generation
    was = facts.recorded
    if was.rejected_generation == gen:
        return Finish(was)  # the cluster refused this manifest: wait for a new one
    if app.manifest_error:
        return Finish(state(AppState.FAILED, app.manifest_error, progress.applied,
                            was.generation, {}, rejected=gen, failed=was.failed,
                            rollout=was.rollout),
                      warning=f"{app.manifest_error}; not applied until the spec changes")
    if progress.refused is not None:
        cid, message = progress.refused
        return Finish(state(AppState.FAILED, f"refused by cluster {cid}: {message}",
                            progress.applied, was.generation, {cid: message}, rejected=gen,
                            failed=was.failed, rollout=was.rollout),
                      warning=f"cluster {cid} refused the manifest: {message}")
    if facts.binding_generation != gen:
        reason = f"waiting for the scheduler to place generation {gen}"
        return Finish(state(was.state if progress.applied else AppState.PENDING, reason,
                            progress.applied, was.generation, was.errors, failed=was.failed,
                            rollout=was.rollout))
    if not facts.targets:  # nowhere to go: what runs keeps running (never the last copy)
        reason = facts.binding_reason or "the scheduler found no cluster"
        if facts.stopped or facts.barred:  # but for room for a more important one, or
            for cid in sorted(progress.applied):  # where it may not run: its copies go
                if (cid not in progress.cleared and facts.mine(cid)
                        and (facts.stopped or cid in facts.barred)):
                    return Clear(cid, facts.owner, facts.identity)
        if facts.stopped:
            return Finish(state(AppState.PENDING, reason, progress.applied, was.generation,
                                progress.errors, failed=was.failed, rollout=was.rollout),
                          retry=_retry(facts, progress.errors))
        left = facts.barred & progress.applied.keys()  # not cleared yet: tried again
        errors = {c: e for c, e in progress.errors.items() if c in left}
        return Finish(state(was.state if progress.applied else AppState.PENDING, reason,
                            progress.applied, was.generation, errors, failed=was.failed,
                            rollout=was.rollout), retry=_retry(facts, errors))
    for cid in sorted(facts.forbidden):  # its policy forbids what runs there now: it goes
        have = progress.applied.get(cid)  # (an older generation stays: what was allowed)
        if (have is not None and have.generation == gen and cid not in progress.cleared
                and facts.mine(cid)):
            return Clear(cid, facts.owner, facts.identity)
    wave = decide(facts.rollout, gen, facts.targets, progress.applied,
                  lambda c: _health(facts, progress, c), lambda c: _started(facts, progress, c),
                  progress.rollout, facts.now, facts.move_timeout)
    want = wave.want
    stopping = _stop_jobs_first(facts, progress, gen)
    if stopping is not None:
        return stopping
    # Make before break for shares too: clusters whose share grows (or that are new)
    # first; one whose share shrinks only once they all have theirs, available.
    raising = [c for c in facts.targets if not _lowers(facts, c)]
    for cid in raising + [c for c in facts.targets if _lowers(facts, c)]:
        if (cid not in progress.tried and _needs_apply(facts, cid, want[cid])
                and not _gated(facts, cid, want[cid])):
            if _lowers(facts, cid) and any(_not_yet(facts, progress, c, want[c])
                                           for c in raising):
                break
            if facts.mine(cid):
                return _apply(facts, progress, cid, want[cid], wave.state)
    errors = progress.errors
    placed = [c for c in facts.targets if c not in errors and c in progress.applied
              and progress.applied[c].generation == want[c]]
    leaving = [c for c in progress.applied if c not in facts.targets]
    now = summary(facts, progress, gen, wave)
    available = len(placed) == len(facts.targets) and all(
        _health(facts, progress, c).healthy for c in placed)
    removable = [c for c in leaving if (available or _serves_nothing(facts, progress, c))
                 and c not in facts.needed]  # never from under a dependent
    if removable and len(placed) == len(facts.targets):
        if progress.confirmed is None:  # others' targets: their owners applied and recorded
            return Confirm(tuple(c for c in placed if facts.mine(c)), facts.owner)
        if progress.confirmed:
            if progress.status != now and not progress.cleared:
                return Write(now)  # recorded as running on both before anything is removed
            for cid in removable:
                if cid not in progress.cleared and facts.mine(cid):
                    return Clear(cid, facts.owner, facts.identity)
    recheck = [w for w in (_recheck(facts, progress, placed), wave.recheck) if w is not None]
    return Finish(now, retry=_retry(facts, errors, held(facts, progress)),
                  recheck=max(0.05, min(recheck)) if recheck else None)


def _version(facts: Facts, gen: int) -> Version | None:
    """Generation ``gen`` ready to apply: the application's own, or the one a rollout
    rolls from when its manifest is kept (None: neither)."""
    prior = facts.rollout.prior
    if facts.app is not None and gen == facts.app.generation:
        return Version(gen, facts.app.bodies, facts.rendered, facts.unrendered)
    return prior if prior is not None and prior.generation == gen else None


def _apply(facts: Facts, progress: Progress, cid: str, gen: int,
           rollout: RolloutState | None = None) -> Apply:
    """Apply generation ``gen`` on ``cid``: when the generation or share there changes,
    its deadline starts now; Jobs complete at this generation are left alone."""
    have = facts.recorded.applied.get(cid)
    share = facts.shares.get(cid)
    same = have is not None and have.generation == gen and have.replicas == share
    since = have.since if same and have is not None and have.since else facts.now
    new = have is None or have.generation == 0 or have.new
    version = _version(facts, gen)
    current = facts.app is not None and gen == facts.app.generation
    done = done_at({c: _seen(facts, progress, c) for c in progress.applied}, gen)
    return Apply(cid, gen, share, since, new, done,
                 facts.owner, version.rendered.get(cid) if version is not None else None,
                 None if current or version is None else version.bodies, rollout,
                 facts.identity)


def _not_yet(facts: Facts, progress: Progress, cid: str, gen: int) -> bool:
    """Whether a growing share's cluster does not have its replicas available yet."""
    return (cid in progress.errors or (_needs_apply(facts, cid, gen) and cid not in progress.tried)
            or not _health(facts, progress, cid).healthy)


def _seen(facts: Facts, progress: Progress, cid: str) -> ClusterApplied:
    """The copy on ``cid`` as recorded, with the Jobs its cluster shows complete done."""
    have = progress.applied[cid]
    copy = progress.health.get(cid) or facts.health.get(cid)
    return with_copy(have, copy) if copy is not None and have.generation else have


def _health(facts: Facts, progress: Progress, cid: str) -> Health:
    """The copy on ``cid`` as judged now; for a cluster another replica serves, as it
    recorded it."""
    have = progress.applied.get(cid)
    judged = progress.health.get(cid) or facts.health.get(cid)
    if judged is not None:
        return gated(judged.health, (have.waiting if have is not None else "")
                     or facts.unready.get(cid, ""))
    if have is None or not have.health:
        return Health(UNKNOWN, "not observed yet")
    return Health(have.health, have.reason, have.available, have.desired)


def _stop_jobs_first(facts: Facts, progress: Progress, gen: int) -> Step | None:
    """A Job still running where the application leaves (a forced move) is stopped there
    before it starts on the target: break before make. A cluster that cannot be reached
    does not hold the move, as a dead node does not. None: nothing to stop first."""
    for cid in sorted(progress.applied):
        if (cid in facts.targets or not running_job(_seen(facts, progress, cid))
                or cid in progress.errors or cid in facts.unseen):
            continue  # (a Job its cluster shows complete is done: left there)
        if cid not in progress.cleared and facts.mine(cid):
            return Clear(cid, facts.owner, facts.identity)
        why = f"a running Job is stopped on {cid} before it starts on {listed(facts.targets)}"
        return Finish(msgspec.structs.replace(summary(facts, progress, gen),
                                              state=AppState.MIGRATING, reason=why), retry=why)
    return None


def _serves_nothing(facts: Facts, progress: Progress, cid: str) -> bool:
    """Whether removing the copy on ``cid`` takes nothing away: the cluster is not seen
    ONLINE, or none of the copy's replicas is available."""
    if cid in facts.unseen:
        return True
    h = _health(facts, progress, cid)
    return not h.healthy and h.state != UNKNOWN and h.available == 0


def _started(facts: Facts, progress: Progress, cid: str) -> datetime | None:
    """When the copy on ``cid`` began its time to become available: when it was
    applied, or when its cluster last came back ONLINE if that is later (it had no
    chance meanwhile). None while no time runs: not applied, or its cluster not seen
    ONLINE (nothing there can be seen, so nothing is judged)."""
    have = progress.applied.get(cid)
    if have is None or have.since is None or cid in facts.unseen:
        return None
    back = facts.returned.get(cid)
    return max(have.since, back) if back is not None else have.since


def _deadline(facts: Facts, progress: Progress, cid: str) -> datetime | None:
    """When the copy on ``cid`` must be available (None: no time runs)."""
    start = _started(facts, progress, cid)
    return start + timedelta(seconds=facts.move_timeout) if start is not None else None


def _late(facts: Facts, progress: Progress, cid: str) -> bool:
    """Whether the copy on ``cid`` is still not available past its deadline."""
    end = _deadline(facts, progress, cid)
    return (end is not None and facts.now is not None and facts.now >= end
            and not _health(facts, progress, cid).healthy)


def _recheck(facts: Facts, progress: Progress, placed: list[str]) -> float | None:
    """When to judge again a copy that is not yet available (its deadline, or sooner)."""
    waits = []
    for cid in placed:
        if _health(facts, progress, cid).healthy or not facts.mine(cid):
            continue
        end = _deadline(facts, progress, cid)
        left = RECHECK if end is None or facts.now is None else (end - facts.now).total_seconds()
        waits.append(min(RECHECK, left) if left > 0 else RECHECK)
    return max(0.05, min(waits)) if waits else None


def _needs_apply(facts: Facts, cid: str, gen: int) -> bool:
    """Whether ``cid``'s copy must be applied (again) at generation ``gen``. Never one
    that cannot be rendered, nor one its cluster refused as the overrides made it, until
    either changes; nor a generation whose manifest is not at hand (an earlier one a
    rollout leaves where it runs)."""
    version = _version(facts, gen)
    if version is None or cid in version.unrendered:
        return False
    copy = version.rendered.get(cid)
    made = copy.fingerprint if copy is not None else ""
    if made and facts.recorded.refused.get(cid) == made:
        return False
    have = facts.recorded.applied.get(cid)
    return (have is None or have.generation != gen or cid in facts.recorded.errors
            or cid in facts.stale or have.replicas != facts.shares.get(cid)
            or have.rendered != made or bool(have.waiting))


def _gated(facts: Facts, cid: str, gen: int) -> bool:
    """Whether the copy on ``cid`` waits for its dependencies before generation ``gen``
    is applied there: as Fleet does, a copy is installed or upgraded only once they are
    available there; one that runs at ``gen`` is applied again (drift) whatever they do."""
    if cid not in facts.waits_for:
        return False
    have = facts.recorded.applied.get(cid)
    return have is None or have.generation != gen


def _lowers(facts: Facts, cid: str) -> bool:
    """Whether the Binding gives ``cid`` fewer replicas than it runs with now."""
    have = facts.recorded.applied.get(cid)
    share = facts.shares.get(cid)
    return (have is not None and have.replicas is not None and share is not None
            and share < have.replicas)


def _removal(facts: Facts, progress: Progress, app: App | None) -> Step:
    """An application deleted (or whose key vanished): clear every cluster, then go; a
    cluster where its dependents still run, once they left it."""
    for cid in sorted(progress.applied):
        if cid not in progress.cleared and facts.mine(cid) and cid not in facts.needed:
            return Clear(cid, facts.owner, facts.identity)
    errors = progress.errors
    kept = _kept(facts, progress.applied)
    now = state(AppState.DELETING, first(errors) or kept or "removing its objects",
                progress.applied, facts.recorded.generation, errors)
    if progress.applied:  # what is left on others' clusters is theirs to remove
        failed = sorted(c for c in errors if facts.mine(c))
        return Finish(now, retry=("not yet removed from " + listed(failed)) if failed else "")
    if app is not None and app.foreign_finalizers:
        now.reason = "objects removed; waiting for finalizers " + listed(
            app.foreign_finalizers)
        return Finish(now)
    return Finish(remove=True)


def _kept(facts: Facts, clusters: Iterable[str]) -> str:
    """``kept on x while default/web runs there`` for the copies of ``clusters`` the
    application's dependents hold ("" when none)."""
    return listed((f"kept on {c} while {facts.needed[c]} runs there"
                   for c in sorted(clusters) if c in facts.needed), "; ")


def _retry(facts: Facts, errors: dict[str, str], held: Mapping[str, str] | None = None
           ) -> str:
    """Why to reconcile again: this replica's own errors (others retry theirs), but for
    the copies ``held`` until the application or an override changes."""
    return listed((f"{c}: {e}" for c, e in sorted(errors.items())
                   if (facts.mine(c) or c == CONFIRM) and c not in (held or {})), "; ")


def held(facts: Facts, progress: Progress) -> dict[str, str]:
    """Targets whose copy is not applied until the application or an override changes,
    and why: it cannot be rendered (the rule named), or its cluster refused it as the
    overrides made it. Retrying would only fail the same way."""
    out = {c: why for c, why in facts.unrendered.items() if c in facts.targets}
    for cid in facts.targets:
        copy = facts.rendered.get(cid)
        if copy is not None and copy.fingerprint and (
                progress.refused_copies.get(cid) == copy.fingerprint):
            out[cid] = (progress.errors.get(cid) or facts.recorded.errors.get(cid)
                        or "refused by the cluster")
    return out


# -- the status ------------------------------------------------------------------


def first(errors: Mapping[str, str]) -> str:
    """The first error, with its cluster, for a reason."""
    return next((f"{c}: {e}" for c, e in sorted(errors.items())), "")


def placed_on(applied: Mapping[str, ClusterApplied]) -> list[str]:
    """The clusters where a generation was applied. Objects recorded for a cluster
    before their first apply there (generation 0) are a record of intent only."""
    return sorted(c for c, a in applied.items() if a.generation > 0)


def oldest(applied: Mapping[str, ClusterApplied]) -> int:
    """The generation every cluster berth applied to has (0: none)."""
    return min((a.generation for a in applied.values() if a.generation > 0), default=0)


def copy_applied(applied: Mapping[str, ClusterApplied]) -> dict[str, ClusterApplied]:
    """A copy that can change without changing a status document."""
    return {c: msgspec.structs.replace(a, objects=list(a.objects), unhealthy=dict(a.unhealthy),
                                       done=list(a.done))
            for c, a in applied.items()}


def cluster_ref(cid: str) -> ObjectRef:
    namespace, _, name = cid.partition("/")
    return ObjectRef("Cluster", name, namespace or None)


def state(name: AppState | None, reason: str, applied: Mapping[str, ClusterApplied],
          generation: int,
          errors: Mapping[str, str], *, rejected: int = 0,
          failed: Mapping[str, FailedTarget] | None = None,
          refused: Mapping[str, str] | None = None,
          rollout: RolloutState | None = None) -> ApplicationState:
    """A status document's state from its parts (copied); it runs where a generation
    was applied, not where objects are only recorded."""
    return ApplicationState(name, reason, [cluster_ref(c) for c in placed_on(applied)],
                            generation, dict(errors), copy_applied(applied), rejected,
                            dict(failed or {}), finished(applied), dict(refused or {}),
                            rollout, working(applied))


def intent(recorded: ApplicationState, applied: Mapping[str, ClusterApplied], cid: str,
           gen: int, rollout: RolloutState | None = None) -> ApplicationState:
    """The status written before objects are applied on ``cid``: they are recorded
    first, so nothing berth creates is forgotten, whatever happens next."""
    if any(c != cid for c in applied):
        name = AppState.MIGRATING
    elif recorded.applied.get(cid) and recorded.state:
        name = recorded.state
    else:
        name = AppState.PENDING
    return state(name, f"applying generation {gen} on {cid}", applied, oldest(applied), {},
                 failed=recorded.failed, refused=recorded.refused,
                 rollout=rollout or recorded.rollout)


def judged(facts: Facts, progress: Progress) -> dict[str, ClusterApplied]:
    """What is on each cluster, with each served copy's health as judged now: a copy
    that became available is no longer ``new``."""
    out = copy_applied(progress.applied)
    for cid, have in out.items():
        copy = progress.health.get(cid) or facts.health.get(cid)
        if copy is None or have.generation == 0:
            continue
        out[cid] = with_copy(have, copy, facts.unready.get(cid, ""))
    return out


def _failed(facts: Facts, progress: Progress, gen: int, late: list[str]
            ) -> dict[str, FailedTarget]:
    """The targets that failed to become available for this generation: those recorded
    (dropped after ``FAILED_MEMORY``, or for another generation), and new ones that are
    late now — on a cluster this replica serves: a verdict on a copy is its cluster's
    owner's word (the status write requires that claim; another replica would give it
    from what it read, a moment old, after the owner may have seen the copy come up)."""
    now = facts.now
    out = {c: f for c, f in facts.recorded.failed.items()
           if f.generation == gen and (now is None or now - f.at < FAILED_MEMORY)}
    for cid in late:
        if not facts.mine(cid):
            continue
        have = progress.applied.get(cid)
        if have is not None and have.new and cid not in out and now is not None:
            out[cid] = FailedTarget(now, gen, _health(facts, progress, cid).reason)
    return out


def _copy(facts: Facts, progress: Progress, cid: str) -> str:
    """``cluster x: 1/2 replicas available; pod ...`` for a reason."""
    h = _health(facts, progress, cid)
    return f"cluster {cid}: {h.state}" + (f": {h.reason}" if h.reason else "")


def summary(facts: Facts, progress: Progress, gen: int, wave: Wave | None = None
            ) -> ApplicationState:
    """The state after applying generation ``gen`` to the targets (each the generation
    its rollout gives it now), from what is where and how available each copy is."""
    waits = held(facts, progress)
    targets, errors = facts.targets, {**waits, **progress.errors}
    applied = judged(facts, progress)
    want = wave.want if wave is not None else {}
    placed = [c for c in targets if c not in errors and c in applied
              and applied[c].generation == want.get(c, gen)]
    leaving = [c for c in applied if c not in targets]
    missing = [c for c in targets if c not in placed]
    seen_not = {c: why for c, why in facts.unseen.items() if c in placed}
    waiting = [c for c in placed if not _health(facts, progress, c).healthy]
    late = [c for c in waiting if _late(facts, progress, c)]
    failed = _failed(facts, progress, gen, late)
    still = f"; still running on {', '.join(leaving)}" if leaving else ""
    kept = _kept(facts, leaving)
    gated = {c: facts.waits_for[c] for c in missing if _gated(facts, c, want.get(c, gen))}
    if gated and all(c in gated or c in progress.waiting for c in missing):
        name = AppState.WAITING  # (its dependencies' events reconcile it again)
        reason = listed([*(f"{c}: {why}" for c, why in sorted(gated.items())),
                         *(progress.waiting[c] for c in missing if c not in gated)],
                        "; ") + still
    elif missing and all(c in progress.waiting for c in missing):  # their agents' to do
        older = placed or any(applied[c].generation > 0 for c in targets if c in applied)
        name = (AppState.MIGRATING if leaving else AppState.PROGRESSING if older
                else AppState.PENDING)
        reason = listed((progress.waiting[c] for c in missing), "; ") + still
    elif missing:
        if placed or any(applied[c].generation > 0 for c in targets if c in applied):
            # an older generation still runs
            name, reason = AppState.DEGRADED, f"generation {gen} not applied on {listed(missing)}"
        elif leaving:
            name, reason = AppState.MIGRATING, f"waiting to apply on {listed(missing)}"
        else:
            name = AppState.FAILED
            reason = f"not running: not applied on {listed(missing)}" + (
                "" if all(c in waits for c in missing) else "; retrying")  # held: not
    elif seen_not and not leaving:
        name, reason = AppState.DEGRADED, "not observed: " + listed(
            f"cluster {c} is {why}" for c, why in sorted(seen_not.items()))
    elif late:
        name = AppState.DEGRADED
        reason = listed((f"{_copy(facts, progress, c)} (not available {facts.move_timeout:g} "
                         "s after it was applied)" for c in late), "; ") + still
    elif waiting:
        name = AppState.MIGRATING if leaving else AppState.PROGRESSING
        reason = listed((_copy(facts, progress, c) for c in waiting), "; ") + still
    elif leaving:  # a pull cluster's agent removes its copy
        rest = [c for c in leaving if c not in progress.waiting and c not in facts.needed]
        name, reason = AppState.MIGRATING, "; ".join(
            [progress.waiting[c] for c in leaving if c in progress.waiting]
            + ([f"removing from {listed(rest)}"] if rest else []) + ([kept] if kept else []))
    else:
        name, reason = AppState.RUNNING, ""
    if errors:
        reason = f"{reason}: {first(errors)}"
    refused = {c: f for c, f in progress.refused_copies.items()
               if c in targets and c in waits}  # what no longer holds is forgotten
    rollout = wave.state if wave is not None else None
    if rollout is not None and rollout.phase != COMPLETE:
        name, reason = _rolling(rollout, name, reason, sum(
            1 for c in placed if applied[c].generation == gen), len(targets))
    out = state(name, reason, applied, oldest(applied), errors, failed=failed,
                refused=refused, rollout=rollout)
    out.waits_for = gated
    return out


def _rolling(r: RolloutState, name: AppState, reason: str, on_new: int, targets: int
             ) -> tuple[AppState, str]:
    """The state and reason while generation ``r.generation`` rolls out (or after it
    ended): DEGRADED once it halted or rolled back, else PROGRESSING until it is
    complete, with what it waits for."""
    gen = r.generation
    if r.phase == HALTED:
        head, name = f"rollout of generation {gen} halted", AppState.DEGRADED
    elif r.phase == ROLLED_BACK:
        head, name = f"generation {gen} rolled back to {r.stable}", AppState.DEGRADED
    else:
        head = f"rolling out generation {gen}" + (" (paused)" if r.phase == PAUSED else "")
        name = AppState.PROGRESSING if name == AppState.RUNNING else name
    head += f": {on_new} of {targets} clusters on it"
    said = [w for w in (r.reason, reason) if w]
    return name, head + (f"; {'; '.join(said)}" if said else "")
