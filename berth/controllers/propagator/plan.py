"""What the propagator does next for one application, decided as a value.

:func:`plan` is pure. It reads :class:`Facts` — the application, its Binding
and its recorded status, frozen when the reconcile starts — and
:class:`Progress` — what this reconcile has done so far — and returns the next
:data:`Step`. The reconcile executes the step, records its outcome in the
progress and asks again; every step changes the progress, so the plan moves
on until it says :class:`Finish`.

The rules (README, "The propagator"):

* generation G is applied only on a Binding decided for G; a manifest the
  cluster refused is left alone until the generation changes;
* a move is make-before-break: every target has the objects (confirmed with a
  GET), the status says so, and only then are they removed from the clusters
  the application left;
* an application marked deleted, or whose key vanished, has its objects
  removed from every cluster before its status (and its key) go.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from berth.store.documents import ApplicationState, ClusterApplied, ObjectRef

CONFIRM = "confirm"  # the errors' entry for a failed check before a move removes anything


@dataclass(frozen=True, slots=True)
class App:
    """The application as the reconcile found it."""

    generation: int
    deleting: bool = False  # marked deleted: remove it everywhere, then its key
    foreign_finalizers: tuple[str, ...] = ()  # waited for before the key is deleted
    bodies: tuple[dict[str, Any], ...] = ()  # the manifest's objects, marked, in order
    manifest_error: str = ""  # the manifest cannot be applied as written (names the field)


@dataclass(frozen=True, slots=True)
class Facts:
    """What a reconcile starts from, read once."""

    app: App | None  # None: the key vanished (or holds garbage: ``app_unreadable``)
    recorded: ApplicationState  # the status as last written (empty if none)
    binding_generation: int | None = None  # the generation the Binding was decided for
    targets: tuple[str, ...] = ()  # the Binding's clusters, "<namespace>/<name>"
    binding_reason: str = ""  # why the Binding has no target
    app_unreadable: bool = False  # the application's key holds something else
    stale: frozenset[str] = frozenset()  # applied there, but apply again (drift, resync)
    unseen: Mapping[str, str] = field(default_factory=dict)  # not seen ONLINE, and why
    shares: Mapping[str, int] = field(default_factory=dict)  # a divided application's replicas
    # The clusters this replica serves (None: every one). Steps on the others are their
    # owners'; what their owners recorded in the status stands for them here.
    owned: frozenset[str] | None = None

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

    @classmethod
    def start(cls, recorded: ApplicationState, owned: frozenset[str] | None = None
              ) -> Progress:
        """From the recorded status; the errors other replicas recorded for the clusters
        they serve stay (this reconcile cannot clear them)."""
        theirs = {} if owned is None else {c: e for c, e in recorded.errors.items()
                                           if c not in owned and c != CONFIRM}
        return cls(copy_applied(recorded.applied), recorded, theirs)


@dataclass(frozen=True, slots=True)
class Apply:
    """Apply every object on ``cluster`` (recorded first), then prune what was dropped;
    ``replicas``: with a divided application's divisible objects set to this share."""

    cluster: str
    generation: int
    replicas: int | None = None


@dataclass(frozen=True, slots=True)
class Confirm:
    """Check with a GET that every recorded object exists on each of ``clusters``."""

    clusters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Clear:
    """Remove everything berth put on ``cluster``."""

    cluster: str


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
        return Finish(state("FAILED", app.manifest_error, progress.applied, was.generation, {},
                            rejected=gen),
                      warning=f"{app.manifest_error}; not applied until the spec changes")
    if progress.refused is not None:
        cid, message = progress.refused
        return Finish(state("FAILED", f"refused by cluster {cid}: {message}", progress.applied,
                            was.generation, {cid: message}, rejected=gen),
                      warning=f"cluster {cid} refused the manifest: {message}")
    if facts.binding_generation != gen:
        reason = f"waiting for the scheduler to place generation {gen}"
        return Finish(state(was.state if progress.applied else "PENDING", reason,
                            progress.applied, was.generation, was.errors))
    if not facts.targets:
        reason = facts.binding_reason or "the scheduler found no cluster"
        return Finish(state(was.state if progress.applied else "PENDING", reason,
                            progress.applied, was.generation, {}))
    # Make before break for shares too: clusters whose share grows (or that are new)
    # first; one whose share shrinks only once they all have theirs.
    raising = [c for c in facts.targets if not _lowers(facts, c)]
    for cid in raising + [c for c in facts.targets if _lowers(facts, c)]:
        if cid not in progress.tried and _needs_apply(facts, cid, gen):
            if _lowers(facts, cid) and any(c in progress.errors or (_needs_apply(facts, c, gen)
                                           and c not in progress.tried) for c in raising):
                break
            if facts.mine(cid):
                return Apply(cid, gen, facts.shares.get(cid))
    errors = progress.errors
    placed = [c for c in facts.targets if c not in errors and c in progress.applied
              and progress.applied[c].generation == gen]
    leaving = [c for c in progress.applied if c not in facts.targets]
    now = summary(facts.targets, placed, progress.applied, errors, gen, facts.unseen)
    if leaving and len(placed) == len(facts.targets):
        if progress.confirmed is None:  # others' targets: their owners applied and recorded
            return Confirm(tuple(c for c in placed if facts.mine(c)))
        if progress.confirmed:
            if progress.status != now and not progress.cleared:
                return Write(now)  # recorded as running on both before anything is removed
            for cid in leaving:
                if cid not in progress.cleared and facts.mine(cid):
                    return Clear(cid)
    return Finish(now, retry=_retry(facts, errors))


def _needs_apply(facts: Facts, cid: str, gen: int) -> bool:
    have = facts.recorded.applied.get(cid)
    return (have is None or have.generation != gen or cid in facts.recorded.errors
            or cid in facts.stale or have.replicas != facts.shares.get(cid))


def _lowers(facts: Facts, cid: str) -> bool:
    """Whether the Binding gives ``cid`` fewer replicas than it runs with now."""
    have = facts.recorded.applied.get(cid)
    share = facts.shares.get(cid)
    return (have is not None and have.replicas is not None and share is not None
            and share < have.replicas)


def _removal(facts: Facts, progress: Progress, app: App | None) -> Step:
    """An application deleted (or whose key vanished): clear every cluster, then go."""
    for cid in sorted(progress.applied):
        if cid not in progress.cleared and facts.mine(cid):
            return Clear(cid)
    errors = progress.errors
    now = state("DELETING", first(errors) or "removing its objects", progress.applied,
                facts.recorded.generation, errors)
    if progress.applied:  # what is left on others' clusters is theirs to remove
        failed = sorted(c for c in errors if facts.mine(c))
        return Finish(now, retry=("not yet removed from " + ", ".join(failed)) if failed else "")
    if app is not None and app.foreign_finalizers:
        now.reason = ("objects removed; waiting for finalizers "
                      + ", ".join(app.foreign_finalizers))
        return Finish(now)
    return Finish(remove=True)


def _retry(facts: Facts, errors: dict[str, str]) -> str:
    """Why to reconcile again: this replica's own errors (others retry theirs)."""
    return "; ".join(f"{c}: {e}" for c, e in sorted(errors.items())
                     if facts.mine(c) or c == CONFIRM)


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
    return {c: ClusterApplied(a.generation, list(a.objects), a.replicas)
            for c, a in applied.items()}


def cluster_ref(cid: str) -> ObjectRef:
    namespace, _, name = cid.partition("/")
    return ObjectRef("Cluster", name, namespace or None)


def state(name: str, reason: str, applied: Mapping[str, ClusterApplied], generation: int,
          errors: Mapping[str, str], *, rejected: int = 0) -> ApplicationState:
    """A status document's state from its parts (copied); it runs where a generation
    was applied, not where objects are only recorded."""
    return ApplicationState(name, reason, [cluster_ref(c) for c in placed_on(applied)],
                            generation, dict(errors), copy_applied(applied), rejected)


def intent(recorded: ApplicationState, applied: Mapping[str, ClusterApplied], cid: str,
           gen: int) -> ApplicationState:
    """The status written before objects are applied on ``cid``: they are recorded
    first, so nothing berth creates is forgotten, whatever happens next."""
    if any(c != cid for c in applied):
        name = "MIGRATING"
    elif recorded.applied.get(cid) and recorded.state:
        name = recorded.state
    else:
        name = "PENDING"
    return state(name, f"applying generation {gen} on {cid}", applied, oldest(applied), {})


def summary(targets: tuple[str, ...] | list[str], placed: list[str],
            applied: Mapping[str, ClusterApplied], errors: Mapping[str, str], gen: int,
            unseen: Mapping[str, str] | None = None) -> ApplicationState:
    """The state after applying generation ``gen`` to ``targets``; ``unseen``: clusters
    placed on that the observer does not see ONLINE (not RUNNING there: unknown)."""
    leaving = [c for c in applied if c not in targets]
    missing = [c for c in targets if c not in placed]
    seen_not = {c: why for c, why in (unseen or {}).items() if c in placed}
    if seen_not and not missing and not leaving:
        name, reason = "DEGRADED", "not observed: " + ", ".join(
            f"cluster {c} is {why}" for c, why in sorted(seen_not.items()))
    elif not missing and not leaving:
        name, reason = "RUNNING", ""
    elif not missing:
        name, reason = "MIGRATING", f"removing from {', '.join(leaving)}"
    elif placed or any(applied[c].generation > 0 for c in targets if c in applied):
        # an older generation still runs
        name, reason = "DEGRADED", f"generation {gen} not applied on {', '.join(missing)}"
    elif leaving:
        name, reason = "MIGRATING", f"waiting to apply on {', '.join(missing)}"
    else:
        name, reason = "FAILED", f"not running: not applied on {', '.join(missing)}; retrying"
    if errors:
        reason = f"{reason}: {first(errors)}"
    return state(name, reason, applied, oldest(applied), errors)
