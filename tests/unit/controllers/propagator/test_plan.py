"""The propagator's plan, table-driven: every state transition in docs/propagator.md, as
(what is known, what was done so far) → the next step."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import pytest

from berth.controllers.propagator.health import HEALTHY, PROGRESSING, Copy, Health
from berth.controllers.propagator.plan import (
    App,
    Apply,
    Clear,
    Confirm,
    Facts,
    Finish,
    Progress,
    Step,
    Write,
    plan,
    state,
)
from berth.store.documents import ApplicationState, ClusterApplied, KubeObjectRef

CM = KubeObjectRef("v1", "ConfigMap", "x", "default")
APP = App(1, bodies=({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},))


def on(gen: int = 1, *clusters: str) -> dict[str, ClusterApplied]:
    return {f"default/{c}": ClusterApplied(gen, [CM]) for c in clusters}


def recorded(name: str = "", applied: dict[str, ClusterApplied] | None = None, *,
             errors: dict[str, str] | None = None, rejected: int = 0) -> ApplicationState:
    applied = applied or {}
    gen = min((a.generation for a in applied.values()), default=0)
    return state(name, "", applied, gen, errors or {}, rejected=rejected)


NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
TIMEOUT = 600.0
FINE = Copy(Health(HEALTHY, "", 2, 2))


def waiting(available: int = 0, reason: str = "") -> Copy:
    return Copy(Health(PROGRESSING, reason or f"{available}/2 replicas available", available, 2))


def facts(app: App | None = APP, was: ApplicationState | None = None, *,
          binding: int | None = 1, targets: tuple[str, ...] = ("a",),
          health: dict[str, Copy] | None = None, **kw: object) -> Facts:
    """``health``: per cluster name, how its copy is judged now (default: available)."""
    judged = {f"default/{c}": FINE for c in "abcd"}
    judged |= {f"default/{c}": h for c, h in (health or {}).items()}
    return Facts(app, was or recorded(), binding, tuple(f"default/{t}" for t in targets),
                 health=judged, now=NOW, move_timeout=TIMEOUT,
                 **kw)  # type: ignore[arg-type]


def since(seconds_ago: float, applied: dict[str, ClusterApplied], *, new: bool = False
          ) -> dict[str, ClusterApplied]:
    """The copies applied ``seconds_ago`` (``new``: never available there before)."""
    return {c: replace_applied(a, since=NOW - timedelta(seconds=seconds_ago), new=new)
            for c, a in applied.items()}


def replace_applied(a: ClusterApplied, **kw: object) -> ClusterApplied:
    import msgspec
    return msgspec.structs.replace(a, **kw)


@dataclass
class Done:
    """What this reconcile did before the step asked for."""

    applied: dict[str, ClusterApplied] | None = None  # None: as recorded
    errors: dict[str, str] = field(default_factory=dict)
    tried: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()
    confirmed: bool | None = None
    refused: tuple[str, str] | None = None
    status: ApplicationState | None = None  # None: as recorded
    waiting: tuple[str, ...] = ()  # pull clusters whose agent has not reported the work

    def progress(self, f: Facts) -> Progress:
        p = Progress.start(f.recorded, f.owned)
        if self.applied is not None:
            p.applied = self.applied
        p.errors |= {(k if k == "confirm" else f"default/{k}"): v for k, v in self.errors.items()}
        p.tried = {f"default/{c}" for c in self.tried}
        p.cleared = {f"default/{c}" for c in self.cleared}
        p.confirmed, p.refused = self.confirmed, self.refused
        p.waiting = {f"default/{c}": f"waiting for the agent of cluster default/{c} to apply "
                     "generation 1" for c in self.waiting}
        if self.status is not None:
            p.status = self.status
        return p


def describe(step: Step) -> str:
    """A step in a few words: kind, cluster(s), the state and where it says it runs."""
    def short(cid: str) -> str:
        return cid.removeprefix("default/")
    if isinstance(step, Apply):
        return f"Apply {short(step.cluster)} gen {step.generation}"
    if isinstance(step, Confirm):
        return "Confirm " + ",".join(map(short, step.clusters))
    if isinstance(step, Clear):
        return f"Clear {short(step.cluster)}"
    st = step.state
    said = "" if st is None else f" {st.state} on " + (
        ",".join(r.name for r in st.running_on) or "-")
    if isinstance(step, Write):
        return "Write" + said
    assert isinstance(step, Finish)
    return ("Finish" + said + (" retry" if step.retry else "") + (" remove" if step.remove else "")
            + (" warn" if step.warning else ""))


MOVED = recorded("RUNNING", on(1, "a"))
DB_WAITS = "waits for default/db to be available on default/a (Progressing: 0/1 available)"
BOTH = on(1, "a", "b")
# as the status says it once written: both copies judged available
ON_BOTH = state("MIGRATING", "removing from default/a",
                {c: replace_applied(a, health=HEALTHY, available=2, desired=2)
                 for c, a in BOTH.items()}, 1, {})
A, B = frozenset({"default/a"}), frozenset({"default/b"})

ROWS: list[tuple[str, Facts, Done, str, str]] = [
    # placing
    ("no Binding yet", facts(binding=None), Done(), "Finish PENDING on -",
     "waiting for the scheduler to place generation 1"),
    ("a Binding for an older generation: what runs stays",
     facts(App(2, bodies=APP.bodies), MOVED), Done(), "Finish RUNNING on a",
     "waiting for the scheduler to place generation 2"),
    ("Unschedulable: no target", facts(targets=(), binding_reason="no cluster has label x"),
     Done(), "Finish PENDING on -", "no cluster has label x"),
    ("Unschedulable, no target: what runs stays (never the last copy)",
     facts(was=MOVED, targets=(), binding_reason="no cluster has label x"), Done(),
     "Finish RUNNING on a", "no cluster has label x"),
    ("stopped to make room: the last copy goes too",
     facts(was=MOVED, targets=(), binding_reason="stopped on default/a to make room",
           stopped=True), Done(), "Clear a", ""),
    ("stopped to make room, its copy cleared: PENDING",
     facts(was=MOVED, targets=(), binding_reason="stopped on default/a to make room",
           stopped=True), Done(applied={}, cleared=("a",)), "Finish PENDING on -",
     "stopped on default/a to make room"),
    # where its namespace may not run (docs/teams.md): the last copy goes too, the rest stay
    ("barred, no target: its copy there goes though it is the last",
     facts(was=recorded("RUNNING", on(1, "a", "b")), targets=(), binding_reason="none",
           barred=A), Done(), "Clear a", ""),
    ("barred, its copy cleared: what is admitted keeps running",
     facts(was=recorded("RUNNING", on(1, "a", "b")), targets=(), binding_reason="none",
           barred=A), Done(applied=on(1, "b"), cleared=("a",)), "Finish RUNNING on b", "none"),
    ("barred, its cluster not answering: retried",
     facts(was=MOVED, targets=(), binding_reason="none", barred=A),
     Done(cleared=("a",), errors={"a": "down"}), "Finish RUNNING on a retry", "none"),
    ("placed: apply", facts(), Done(), "Apply a gen 1", ""),
    ("applied: RUNNING", facts(), Done(applied=on(1, "a"), tried=("a",)),
     "Finish RUNNING on a", ""),
    ("up to date: nothing to apply", facts(was=MOVED), Done(), "Finish RUNNING on a", ""),
    ("drifted or resynced: apply again", facts(was=MOVED, stale=frozenset({"default/a"})),
     Done(), "Apply a gen 1", ""),
    ("failed there last time: apply again",
     facts(was=recorded("FAILED", errors={"default/a": "down"})), Done(), "Apply a gen 1", ""),
    ("failed everywhere: FAILED, retried", facts(), Done(tried=("a",), errors={"a": "down"}),
     "Finish FAILED on - retry", "not running: not applied on default/a; retrying"),
    ("a new generation: apply it", facts(App(2, bodies=APP.bodies), MOVED, binding=2), Done(),
     "Apply a gen 2", ""),
    ("a new generation failed: the old one runs, DEGRADED",
     facts(App(2, bodies=APP.bodies), MOVED, binding=2),
     Done(tried=("a",), errors={"a": "HTTP 503"}), "Finish DEGRADED on a retry",
     "generation 2 not applied on default/a: default/a: HTTP 503"),
    ("one of two targets failed: DEGRADED", facts(targets=("a", "b")),
     Done(applied=on(1, "a"), tried=("a", "b"), errors={"b": "down"}),
     "Finish DEGRADED on a retry", "generation 1 not applied on default/b"),
    ("placed on a cluster not seen ONLINE: DEGRADED",
     facts(was=MOVED, unseen={"default/a": "OFFLINE (unreachable)"}), Done(),
     "Finish DEGRADED on a", "not observed: cluster default/a is OFFLINE (unreachable)"),
    # pull clusters: a work written, its agent not yet reporting it
    ("pull: the agent has not reported its work: PENDING, nothing retried", facts(),
     Done(tried=("a",), waiting=("a",)), "Finish PENDING on -",
     "waiting for the agent of cluster default/a to apply generation 1"),
    ("pull: a new generation waits for the agent: the old one runs, PROGRESSING",
     facts(App(2, bodies=APP.bodies), MOVED, binding=2), Done(tried=("a",), waiting=("a",)),
     "Finish PROGRESSING on a", "waiting for the agent of cluster default/a"),
    ("pull move: the new cluster's agent has not applied it: nothing removed",
     facts(was=MOVED, targets=("b",)), Done(tried=("b",), waiting=("b",)),
     "Finish MIGRATING on a", "waiting for the agent of cluster default/b to apply "
     "generation 1; still running on default/a"),
    # moving, make before break
    ("move: apply on the new cluster first", facts(was=MOVED, targets=("b",)), Done(),
     "Apply b gen 1", ""),
    ("move: the new cluster failed: nothing removed",
     facts(was=MOVED, targets=("b",)), Done(tried=("b",), errors={"b": "down"}),
     "Finish MIGRATING on a retry", "waiting to apply on default/b"),
    ("move: applied, then checked with a GET", facts(was=MOVED, targets=("b",)),
     Done(applied=BOTH, tried=("b",)), "Confirm b", ""),
    ("move: the check failed: nothing removed", facts(was=MOVED, targets=("b",)),
     Done(applied=BOTH, tried=("b",), confirmed=False, errors={"confirm": "x missing"}),
     "Finish MIGRATING on a,b retry", "removing from default/a: confirm: x missing"),
    ("move: checked, recorded as running on both", facts(was=MOVED, targets=("b",)),
     Done(applied=BOTH, tried=("b",), confirmed=True), "Write MIGRATING on a,b",
     "removing from default/a"),
    ("move: recorded, then removed from the old cluster", facts(was=MOVED, targets=("b",)),
     Done(applied=BOTH, tried=("b",), confirmed=True,
          status=ON_BOTH),
     "Clear a", ""),
    ("move: done", facts(was=MOVED, targets=("b",)),
     Done(applied=on(1, "b"), tried=("b",), confirmed=True, cleared=("a",)),
     "Finish RUNNING on b", ""),
    ("move: the old cluster did not answer: retried",
     facts(was=MOVED, targets=("b",)),
     Done(applied=BOTH, tried=("b",), confirmed=True, cleared=("a",),
          errors={"a": "could not remove ConfigMap default/x"}),
     "Finish MIGRATING on a,b retry", "removing from default/a"),
    # available, not just applied
    ("applied, not yet available: PROGRESSING", facts(health={"a": waiting(1)}),
     Done(applied=since(0, on(1, "a")), tried=("a",)), "Finish PROGRESSING on a",
     "cluster default/a: Progressing: 1/2 replicas available"),
    ("a copy not available past move_timeout: DEGRADED",
     facts(was=recorded("PROGRESSING", since(700, on(1, "a"))),
           health={"a": waiting(0, "pod x: CrashLoopBackOff")}), Done(),
     "Finish DEGRADED on a", "CrashLoopBackOff (not available 600 s after it was applied)"),
    ("move: the new copy is not available yet: nothing removed",
     facts(was=MOVED, targets=("b",), health={"b": waiting(1)}),
     Done(applied=since(5, BOTH), tried=("b",)), "Finish MIGRATING on a,b",
     "cluster default/b: Progressing: 1/2 replicas available; still running on default/a"),
    ("move: the new copy is available: checked, then the old one removed",
     facts(was=MOVED, targets=("b",)), Done(applied=since(5, BOTH), tried=("b",)),
     "Confirm b", ""),
    ("move: the old copy serves nothing (0 available): removed without waiting",
     facts(was=MOVED, targets=("b",), health={"a": waiting(0), "b": waiting(1)}),
     Done(applied=BOTH, tried=("b",)), "Confirm b", ""),
    ("move: the old cluster is not seen ONLINE: removed without waiting",
     facts(was=MOVED, targets=("b",), health={"b": waiting(1)},
           unseen={"default/a": "OFFLINE (unreachable)"}),
     Done(applied=BOTH, tried=("b",)), "Confirm b", ""),
    ("move: the new copy not available in time: the old one stays, DEGRADED",
     facts(was=recorded("MIGRATING", on(1, "a") | since(700, on(1, "b"), new=True)),
           targets=("b",), health={"b": waiting(0, "pod x: CrashLoopBackOff")}), Done(),
     "Finish DEGRADED on a,b", "not available 600 s after it was applied); still running on "
     "default/a"),
    ("nowhere to go: the last copy stays", facts(was=MOVED, targets=(),
                                               binding_reason="no cluster fits"),
     Done(), "Finish RUNNING on a", "no cluster fits"),
    ("divided: a shrinking share waits until the growing one is available",
     facts(was=recorded("RUNNING", {"default/a": ClusterApplied(1, [CM], 4),
                                    "default/b": ClusterApplied(1, [CM], 2)}),
           targets=("a", "b"), shares={"default/a": 2, "default/b": 4},
           health={"b": waiting(2)}),
     Done(applied={"default/a": ClusterApplied(1, [CM], 4),
                   "default/b": ClusterApplied(1, [CM], 4)}, tried=("b",)),
     "Finish PROGRESSING on a,b", "cluster default/b: Progressing"),
    ("divided: ... and is lowered once it is",
     facts(was=recorded("RUNNING", {"default/a": ClusterApplied(1, [CM], 4),
                                    "default/b": ClusterApplied(1, [CM], 2)}),
           targets=("a", "b"), shares={"default/a": 2, "default/b": 4}),
     Done(applied={"default/a": ClusterApplied(1, [CM], 4),
                   "default/b": ClusterApplied(1, [CM], 4)}, tried=("b",)),
     "Apply a gen 1", ""),
    # refused
    ("a refused generation waits for a new one",
     facts(was=recorded("FAILED", rejected=1)), Done(), "Finish FAILED on -", ""),
    ("a malformed manifest is FAILED, not applied",
     facts(App(1, manifest_error="spec.manifest[0].metadata.name: missing")), Done(),
     "Finish FAILED on - warn", "spec.manifest[0].metadata.name: missing"),
    ("a manifest the cluster refused is FAILED", facts(),
     Done(tried=("a",), refused=("default/a", "spec.replicas: Invalid value")),
     "Finish FAILED on - warn", "refused by cluster default/a: spec.replicas: Invalid value"),
    ("refused on its first apply: recorded there, but running nowhere", facts(),
     Done(applied=on(0, "a"), tried=("a",), refused=("default/a", "replicas: Invalid value")),
     "Finish FAILED on - warn", "refused by cluster default/a"),
    ("failed during its first apply: recorded there, but running nowhere", facts(),
     Done(applied=on(0, "a"), tried=("a",), errors={"a": "HTTP 503"}),
     "Finish FAILED on - retry", "not running"),
    # deleting
    ("deleted: every cluster cleared", facts(App(1, deleting=True), recorded("RUNNING", BOTH)),
     Done(), "Clear a", ""),
    ("deleted: the next cluster", facts(App(1, deleting=True), recorded("RUNNING", BOTH)),
     Done(applied=on(1, "b"), cleared=("a",)), "Clear b", ""),
    ("deleted: a cluster did not answer: DELETING, retried",
     facts(App(1, deleting=True), recorded("RUNNING", BOTH)),
     Done(applied=on(1, "b"), cleared=("a", "b"), errors={"b": "down"}),
     "Finish DELETING on b retry", "default/b: down"),
    ("deleted: cleared, other finalizers waited for",
     facts(App(1, deleting=True, foreign_finalizers=("backup.example/x",)),
           recorded("RUNNING", on(1, "a"))),
     Done(applied={}, cleared=("a",)), "Finish DELETING on -",
     "objects removed; waiting for finalizers backup.example/x"),
    ("deleted: cleared: key and status go", facts(App(1, deleting=True), MOVED),
     Done(applied={}, cleared=("a",)), "Finish remove", ""),
    ("key vanished: cleaned up from where the status says", facts(None, MOVED, binding=None),
     Done(), "Clear a", ""),
    ("key holds garbage: objects stay", facts(None, MOVED, binding=None, app_unreadable=True),
     Done(), "Finish RUNNING on a warn", ""),
    # replicas sharing the clusters: this one serves ``owned`` only
    ("shards: only the cluster served here is applied",
     facts(targets=("a", "b"), owned=B), Done(), "Apply b gen 1", ""),
    ("shards: the other replica's target not applied yet: DEGRADED, not retried here",
     facts(targets=("a", "b"), owned=B), Done(applied=on(1, "b"), tried=("b",)),
     "Finish DEGRADED on b", "generation 1 not applied on default/a"),
    ("shards: errors the other replica recorded stay",
     facts(was=recorded("DEGRADED", on(1, "b"), errors={"default/a": "down"}),
           targets=("a", "b"), owned=B), Done(), "Finish DEGRADED on b", "default/a: down"),
    ("shards: a move onto this replica's cluster: applied, checked here",
     facts(was=MOVED, targets=("b",), owned=B), Done(applied=BOTH, tried=("b",)),
     "Confirm b", ""),
    ("shards: ... recorded as running on both, the old cluster left to its owner",
     facts(was=MOVED, targets=("b",), owned=B),
     Done(applied=BOTH, tried=("b",), confirmed=True,
          status=ON_BOTH),
     "Finish MIGRATING on a,b", "removing from default/a"),
    ("shards: the old cluster's owner removes it once the new one is recorded",
     facts(was=ON_BOTH, targets=("b",),
           owned=A), Done(confirmed=True), "Clear a", ""),
    ("shards: ... but not before it is recorded there",
     facts(was=MOVED, targets=("b",), owned=A), Done(), "Finish MIGRATING on a", ""),
    ("shards: deleted: only this replica's clusters cleared here",
     facts(App(1, deleting=True), recorded("RUNNING", BOTH), owned=A),
     Done(applied=on(1, "b"), cleared=("a",)), "Finish DELETING on b", ""),
    # dependencies (docs/order.md "Dependencies"): a copy waits for theirs on its cluster
    ("depends: its dependency not available there: WAITING, nothing applied, not retried",
     facts(waits_for={"default/a": DB_WAITS}), Done(), "Finish WAITING on -",
     "default/a: " + DB_WAITS),
    ("depends: available there now: applied", facts(), Done(), "Apply a gen 1", ""),
    ("depends: one target waits, the other is applied",
     facts(targets=("a", "b"), waits_for={"default/a": DB_WAITS}), Done(), "Apply b gen 1", ""),
    ("depends: ... and once applied there, the other still WAITING",
     facts(targets=("a", "b"), waits_for={"default/a": DB_WAITS}),
     Done(applied=on(1, "b"), tried=("b",)), "Finish WAITING on b", "default/a: " + DB_WAITS),
    ("depends: a copy that runs at this generation is applied again (drift) regardless",
     facts(was=MOVED, stale=A, waits_for={"default/a": DB_WAITS}), Done(), "Apply a gen 1", ""),
    ("depends: a new generation waits too (as Fleet gates an upgrade): the old one runs",
     facts(App(2, bodies=APP.bodies), MOVED, binding=2, waits_for={"default/a": DB_WAITS}),
     Done(), "Finish WAITING on a", DB_WAITS),
    ("depends: a move to a cluster where its dependency is not yet: the old copy stays",
     facts(was=MOVED, targets=("b",), waits_for={"default/b": DB_WAITS}), Done(),
     "Finish WAITING on a", "still running on default/a"),
    ("depends: a loop of dependencies: never applied, said",
     facts(waits_for={"default/a": "on a loop of dependencies: web → db → web"}), Done(),
     "Finish WAITING on -", "loop of dependencies: web → db → web"),
    # ... and a dependency's copy stays where a dependent still runs
    ("needed: a moved dependency's old copy stays while a dependent runs there",
     facts(was=MOVED, targets=("b",), needed={"default/a": "default/web"}),
     Done(applied=BOTH, tried=("b",)), "Finish MIGRATING on a,b",
     "kept on default/a while default/web runs there"),
    ("needed: once the dependent left it, the move goes on",
     facts(was=MOVED, targets=("b",)), Done(applied=BOTH, tried=("b",)), "Confirm b", ""),
    ("needed: a deleted dependency keeps its copy where a dependent runs, not retried",
     facts(App(1, deleting=True), recorded("RUNNING", BOTH), needed={"default/a": "default/web"}),
     Done(applied=on(1, "a"), cleared=("b",)), "Finish DELETING on a",
     "kept on default/a while default/web runs there"),
    ("needed: ... the other clusters cleared meanwhile",
     facts(App(1, deleting=True), recorded("RUNNING", BOTH), needed={"default/a": "default/web"}),
     Done(), "Clear b", ""),
]


@pytest.mark.parametrize(("given", "done", "expected", "reason"),
                         [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_plan(given: Facts, done: Done, expected: str, reason: str) -> None:
    step = plan(given, done.progress(given))
    assert describe(step) == expected
    if reason:
        assert isinstance(step, Write | Finish) and step.state is not None
        assert reason in step.state.reason


def test_every_finish_that_retries_says_why() -> None:
    for _, given, done, _, _ in ROWS:
        step = plan(given, done.progress(given))
        if isinstance(step, Finish) and step.retry:
            assert step.state is not None and step.state.reason


def test_plan_is_a_function_of_its_inputs() -> None:
    given, done = facts(was=MOVED, targets=("b",)), Done(applied=BOTH, tried=("b",))
    progress = done.progress(given)
    assert plan(given, progress) == plan(replace(given), done.progress(given))
    assert progress.applied == BOTH  # planning changed nothing


def test_a_copy_not_yet_available_is_judged_again_by_its_deadline() -> None:
    given = facts(health={"a": waiting(1)})
    step = plan(given, Done(applied=since(595, on(1, "a")), tried=("a",)).progress(given))
    assert isinstance(step, Finish) and step.recheck == pytest.approx(5.0)
    step = plan(given, Done(applied=since(0, on(1, "a")), tried=("a",)).progress(given))
    assert isinstance(step, Finish) and step.recheck == 10.0  # at least this often
    step = plan(facts(), Done(applied=since(0, on(1, "a")), tried=("a",)).progress(facts()))
    assert isinstance(step, Finish) and step.recheck is None  # available: nothing to wait for


def test_a_new_target_not_available_in_time_is_recorded_failed_for_the_scheduler() -> None:
    was = recorded("MIGRATING", on(1, "a") | since(700, on(1, "b"), new=True))
    given = facts(was=was, targets=("b",), health={"b": waiting(0, "pod x: CrashLoopBackOff")})
    step = plan(given, Done().progress(given))
    assert isinstance(step, Finish) and step.state is not None
    failed = step.state.failed["default/b"]
    assert (failed.at, failed.generation) == (NOW, 1) and "CrashLoopBackOff" in failed.reason
    # given by the replica serving b alone: the owner's word (seed 53, outside-claim)
    other = facts(was=was, targets=("b",), health={"b": waiting(0, "pod x: CrashLoopBackOff")},
                  owned=frozenset({"default/a"}))
    step = plan(other, Done().progress(other))
    assert isinstance(step, Finish) and step.state is not None and not step.state.failed
    # a copy that ran there before (a rollout, not a move) is the generation's fault
    given = facts(was=recorded("PROGRESSING", since(700, on(1, "a"))), health={"a": waiting()})
    step = plan(given, Done().progress(given))
    assert isinstance(step, Finish) and step.state is not None and not step.state.failed


def test_a_copy_is_judged_only_on_time_its_cluster_was_seen() -> None:
    """Robustness seed 29: a's API stopped a moment after a Job's first copy was applied
    there, and the copy was recorded failed while a was OFFLINE; the only cluster it
    could run on was avoided for 900 s."""
    was = recorded("PROGRESSING", since(700, on(1, "a"), new=True))
    slow = {"a": waiting(0, "starting")}
    # not seen ONLINE: no verdict, and the status says why it is not observed
    given = facts(was=was, health=slow, unseen={"default/a": "OFFLINE (unreachable)"})
    step = plan(given, Done().progress(given))
    assert isinstance(step, Finish) and step.state is not None and not step.state.failed
    assert "not observed: cluster default/a is OFFLINE" in step.state.reason
    # back ONLINE 100 s ago: its time counts from then
    back = NOW - timedelta(seconds=100)
    given = facts(was=was, health=slow, returned={"default/a": back})
    step = plan(given, Done().progress(given))
    assert isinstance(step, Finish) and step.state is not None and not step.state.failed
    assert step.recheck == 10.0 and step.state.state == "PROGRESSING"
    # and once that time has passed too, it is late
    given = facts(was=was, health=slow,
                  returned={"default/a": NOW - timedelta(seconds=TIMEOUT + 1)})
    step = plan(given, Done().progress(given))
    assert isinstance(step, Finish) and step.state is not None
    assert step.state.failed["default/a"].reason == "starting"


def test_a_job_complete_at_this_generation_is_not_created_again() -> None:
    job = KubeObjectRef("batch/v1", "Job", "once", "default")
    was = recorded("RUNNING", {"default/a": ClusterApplied(1, [job], done=[job])})
    given = facts(was=was, stale=frozenset({"default/a"}))
    step = plan(given, Done().progress(given))
    assert isinstance(step, Apply) and step.skip == (job,)
    given = facts(App(2, bodies=APP.bodies), was, binding=2)  # a new generation runs it again
    step = plan(given, Done().progress(given))
    assert isinstance(step, Apply) and step.skip == ()


def test_a_reason_names_five_clusters_and_counts_the_rest() -> None:
    names = tuple(f"c{i:02d}" for i in range(30))
    given = facts(was=recorded("PROGRESSING", since(0, on(1, *names))), targets=names,
                  health={c: waiting(1) for c in names})
    step = plan(given, Done(applied=since(0, on(1, *names)), tried=names).progress(given))
    assert isinstance(step, Finish) and step.state is not None
    reason = step.state.reason
    assert reason.count("default/c") == 5 and reason.endswith(" and 25 more"), reason
