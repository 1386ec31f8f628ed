"""The robustness run's checks themselves (tests/robustness/checks.py), on histories
written out by hand: each one that should fire does, and a history that keeps the
promise passes. (The run, on real servers, is tests/robustness.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from berth.store import encode, keys, ledger
from berth.store.documents import (
    ApplicationState,
    ApplicationStatus,
    Binding,
    BindingMeta,
    BindingSpec,
    ClusterApplied,
    FailedTarget,
    KubeObjectRef,
    StatusMeta,
    Target,
)
from berth.store.documents.base import ObjectRef
from berth.store.documents.ledger import HELD, MOVED, PLACED, UNSCHEDULABLE, Record
from berth.store.documents.pace import PaceSpec, PaceWindow
from berth.store.documents.rollouts import RolloutState
from berth_testkit.memory import MemoryStore
from tests.robustness.checks import (
    CLAIMS,
    check_bindings,
    check_claims,
    check_copies_up,
    check_jobs,
    check_ledger,
    check_never_down,
    check_pace,
    check_rollout_steps,
    check_stages,
    check_team,
    cut_off_seconds,
    ledger_now,
)
from tests.robustness.faults import Happened
from tests.robustness.history import Event, Sample
from tests.robustness.traffic import TEAM, TEAM_QUOTA, App

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class History:
    """Events as etcd's watch would deliver them: one revision per write."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.revision = 100

    def put(self, key: str, doc: object, at: float, *, same: bool = False) -> None:
        if not same:
            self.revision += 1
        self.events.append(Event(self.revision, "PUT", key, encode(doc), self.revision, at))

    def binding(self, app: str, *on: str, at: float, decision: str = "", gen: int = 1
                ) -> None:
        self.put(keys.binding_key("Application", "default", app), Binding(
            metadata=BindingMeta(app, "default"),
            spec=BindingSpec(ObjectRef("Application", app, "default"), gen,
                             [Target("Cluster", c, "default") for c in on],
                             decision=decision)), at)

    def status(self, app: str, at: float, copies: dict[str, tuple[str, bool]],
               writer: str = "") -> None:
        """``copies``: cluster → (health, new)."""
        self.put(keys.status_key("Application", "default", app), ApplicationStatus(
            StatusMeta(app, "default", writer), ApplicationState(applied={
                f"default/{c}": ClusterApplied(1, health=h, new=n)
                for c, (h, n) in copies.items()})), at)

    def move(self, app: str, trigger: str, at: float, *to: str) -> None:
        """The scheduler's Moved record, in the transaction of the Binding before it."""
        rec = Record(T0 + timedelta(seconds=at), MOVED, 1, trigger=trigger,
                     targets=[Target("Cluster", c, "default") for c in to])
        key = (ledger.prefix("Application", "default", app)
               + f"{ledger.record_id(rec.time)}.scheduler.1")
        self.put(key, rec, at, same=True)

    def held(self, app: str, rule: str, at: float) -> None:
        rec = Record(T0 + timedelta(seconds=at), HELD, 1, rule=rule)
        self.put(ledger.prefix("Application", "default", app)
                 + f"{ledger.record_id(rec.time)}.scheduler.1", rec, at)


HEALTHY, NEW = ("Healthy", False), ("Progressing", True)


def running(h: History, app: str, cluster: str, at: float) -> None:
    h.binding(app, cluster, at=at)
    h.status(app, at, {cluster: HEALTHY})


def test_an_optional_move_while_the_limit_is_in_transition_is_a_violation() -> None:
    h = History()
    running(h, "x", "a", 0.0)
    running(h, "y", "a", 0.0)
    h.binding("y", "b", at=1.0)  # y moves (forced): its copy on b is in transition
    h.move("y", "cluster", 1.0, "b")
    h.status("y", 1.5, {"a": HEALTHY, "b": NEW})
    h.binding("x", "b", at=10.0)  # an optional move, with one in transition for 8.5 s
    h.move("x", "metrics", 10.0, "b")
    found, seen = check_pace(h.events, [], PaceSpec(in_transition=1))
    assert [(v.invariant, v.subject) for v in found] == [("pace", "x")]
    assert "1 copies in transition (inTransition 1)" in found[0].what
    assert seen == {"optional moves": 1, "held by the pace": 0}
    # the same move once y's copy was available for longer than the scheduler may lag
    h = History()
    running(h, "x", "a", 0.0)
    running(h, "y", "a", 0.0)
    h.binding("y", "b", at=1.0)
    h.move("y", "cluster", 1.0, "b")
    h.status("y", 1.5, {"a": HEALTHY, "b": NEW})
    h.status("y", 5.0, {"b": HEALTHY})
    h.held("x", "in_transition", 4.0)
    h.binding("x", "b", at=10.0)
    h.move("x", "metrics", 10.0, "b")
    found, seen = check_pace(h.events, [], PaceSpec(in_transition=1))
    assert found == []
    assert seen == {"optional moves": 1, "held by the pace": 1}


def test_a_copy_available_a_moment_before_the_move_is_no_violation() -> None:
    """The scheduler decides on what it has seen, up to LAG behind etcd."""
    h = History()
    running(h, "x", "a", 0.0)
    h.binding("y", "a", at=0.0)
    h.status("y", 0.0, {"a": HEALTHY})
    h.binding("y", "b", at=1.0)
    h.move("y", "cluster", 1.0, "b")
    h.status("y", 9.5, {"b": HEALTHY})  # available 0.5 s before x's move
    h.binding("x", "b", at=10.0)
    h.move("x", "scores", 10.0, "b")
    assert check_pace(h.events, [], PaceSpec(in_transition=1))[0] == []


def test_moves_per_minute_and_windows() -> None:
    h = History()
    for i, app in enumerate("pqr"):
        running(h, app, "a", 0.0)
        h.binding(app, "b", at=10.0 + i)
        h.move(app, "cluster" if app != "r" else "metrics", 10.0 + i, "b")
    # r's optional move is the third in a minute: over perMinute 2
    found, _ = check_pace(h.events, [], PaceSpec(per_minute=2))
    assert [v.subject for v in found] == ["r"] and "2 moves started" in found[0].what
    assert check_pace(h.events, [], PaceSpec(per_minute=3))[0] == []
    # ... and it started at 12:00:12, in a window 12:00 to 12:01; the forced ones may
    found, _ = check_pace(h.events, [], PaceSpec(windows=[PaceWindow("12:00", "12:01")]))
    assert [v.subject for v in found] == ["r"] and "in a window" in found[0].what
    assert check_pace(h.events, [], PaceSpec(windows=[PaceWindow("12:01", "12:02")]))[0] == []


def test_moves_decided_after_one_do_not_count_before_it_though_they_landed_first() -> None:
    """Seed 53: an optional move retried after etcd did not answer landed after three
    decided later, in one transaction; those are not in the minute before it."""
    h = History()
    for i, app in enumerate("pq"):
        running(h, app, "a", 0.0)
        h.binding(app, "b", at=20.0)
        h.move(app, "cluster", 12.0 + i, "b")  # decided at 12 and 13 s
    running(h, "r", "a", 0.0)
    h.binding("r", "b", at=20.0)
    h.move("r", "metrics", 10.0, "b")  # decided first, landed last
    assert check_pace(h.events, [], PaceSpec(per_minute=2))[0] == []


def test_a_status_changing_what_it_says_of_a_cluster_needs_its_claim() -> None:
    h = History()
    h.put(CLAIMS + "default/a", {"holder": "p1", "lease": 7}, 0.0)
    h.put(CLAIMS + "default/b", {"holder": "p2", "lease": 8}, 0.0)
    h.status("x", 1.0, {"a": NEW}, "p1")  # p1 of a: its own
    h.status("x", 2.0, {"a": NEW, "b": NEW}, "p2")  # p2 of b: its own; a is as it was
    h.status("x", 3.0, {"a": HEALTHY, "b": NEW}, "p2")  # p2 of a: not its claim
    h.put(keys.status_key("Cluster", "default", "b"), {
        "kind": "Cluster", "metadata": {"name": "b", "namespace": "default",
                                        "writer": "p1"}, "status": {"state": "ONLINE"}}, 4.0)
    h.events.append(Event(h.revision + 1, "DELETE", CLAIMS + "default/a", b"", 0, 5.0))
    h.revision += 1
    h.status("x", 6.0, {"b": NEW}, "p1")  # a's copy goes after p1's claim of a went
    found = check_claims(h.events, [], {})
    assert [(v.subject, v.what.split(" at ")[0]) for v in found] == [
        ("x", "p2 wrote of default/a"), ("cluster b", "p1 wrote of default/b"),
        ("x", "p1 wrote of default/a")]
    assert "while nobody held its claim" in found[-1].what
    # a verdict on a's copy given by p2 is a's owner's word; dropped, it is bookkeeping
    h = History()
    h.put(CLAIMS + "default/a", {"holder": "p1", "lease": 7}, 0.0)
    failed = ApplicationStatus(StatusMeta("x", "default", "p2"), ApplicationState(
        failed={"default/a": FailedTarget(T0, 1)}))
    h.put(keys.status_key("Application", "default", "x"), failed, 1.0)
    h.status("x", 2.0, {}, "p2")
    assert [(v.subject, v.at) for v in check_claims(h.events, [], {})] == [("x", 1.0)]
    # without a writer (one replica serves every cluster) there is nothing to check
    h = History()
    h.status("x", 1.0, {"a": NEW})
    assert check_claims(h.events, [], {}) == []


def test_a_binding_on_the_same_targets_keeps_its_decision() -> None:
    h = History()
    h.binding("x", "a", at=0.0, decision="d1")
    h.binding("x", "a", at=1.0, decision="d1", gen=2)  # a new generation: kept
    h.binding("x", "b", at=2.0, decision="d2", gen=2)  # a move: a new decision
    h.binding("x", "b", at=3.0, decision="", gen=3)  # lost
    found = check_bindings(h.events, [], 0)
    assert [(v.invariant, v.subject, v.at) for v in found] == [("decision-kept", "x", 3.0)]


def test_a_move_and_its_move_back_coalesced_into_one_write_is_a_new_decision() -> None:
    """Seed 53: etcd slow, the scheduler moved b → b, c and back (c relabelled away) before
    either Binding landed; the writer keeps the latest Binding per key, and the records
    of both moves, so one transaction took the Binding from b to b with the second
    move's id. Its record is there: the decision changed, though etcd saw no move. An id
    no record names is still a violation."""
    h = History()
    h.binding("x", "b", at=0.0, decision="d1")
    back = ledger.record_id(T0 + timedelta(seconds=5.1))
    h.binding("x", "b", at=5.2, decision=back)
    h.move("x", "metrics", 5.0, "b", "c")  # in the Binding's transaction
    h.move("x", "cluster", 5.1, "b")
    assert check_bindings(h.events, [], 0) == []
    h.binding("x", "b", at=6.0, decision="unrecorded")
    found = check_bindings(h.events, [], 0)
    assert [(v.invariant, v.at) for v in found] == [("decision-kept", 6.0)]


def test_a_decision_whose_record_retention_removed_had_one() -> None:
    """Retention keeps the newest records of each application: a decision carried long
    ago may have lost its record since, and that is no violation; one never recorded is."""
    h = History()
    rec = Record(T0, PLACED, 1, targets=[Target("Cluster", "a", "default")])
    rid = ledger.record_id(T0)
    key = ledger.prefix("Application", "default", "x") + f"{rid}.scheduler.1"
    h.binding("x", "a", at=0.0, decision=rid)
    h.put(key, rec, 0.0, same=True)
    h.events.append(Event(h.revision + 1, "DELETE", key, b"", 0, 9.0))  # retention
    h.binding("y", "a", at=1.0, decision=ledger.record_id(T0 + timedelta(seconds=1)))
    recorded, problems = ledger_now(MemoryStore(), ["x", "y"])  # retention left nothing
    assert (recorded, problems) == ([], [])
    found = check_ledger(h.events, ["x", "y"], set(recorded), problems)
    assert [(v.subject, v.what.split(" has")[0]) for v in found] == [
        ("y", f"decision {ledger.record_id(T0 + timedelta(seconds=1))}")]


def _samples(reads: list[dict[str, int]], name: str) -> list[Sample]:
    """One sampling pass per entry (1 s apart): each cluster's available replicas."""
    return [Sample(float(n), n, cluster, "Deployment", name, "x:1", available=available)
            for n, read in enumerate(reads) for cluster, available in read.items()]


def _deploys(strategy: str, *names: str) -> SimpleNamespace:
    return SimpleNamespace(apps={n: App(n, "deploy", 0, strategy=strategy) for n in names},
                           deleted={})


def test_a_copy_down_on_a_target_is_a_violation_unless_its_cluster_was_cut_off() -> None:
    """copy-up: a PickAll Deployment's copy, once available, stays so on its targets;
    no fault but one that cuts its own cluster off excuses it."""
    h = History()
    h.binding("r", "a", "b", at=0.0)
    reads = [{"a": 2, "b": 2}, {"a": 2, "b": 2}, {"a": 1, "b": 2}, {"a": 0, "b": 2}]
    traffic = _deploys("Rolling", "r")
    found = check_copies_up(_samples(reads, "r"), set(), h.events, traffic, [], {})
    assert [(v.invariant, v.subject, v.at) for v in found] == [("copy-up", "r", 3.0)]
    killed = [Happened("kill", "kill -9 propagator replica 0, restarted after 2 s", 1.5, 3.5)]
    assert len(check_copies_up(_samples(reads, "r"), set(), h.events, traffic, killed,
                               {})) == 1  # a process killed takes no copy down
    cut = [Happened("cluster", "cluster a's API stopped 3.9 s", 1.5, 3.5)]
    assert check_copies_up(_samples(reads, "r"), set(), h.events, traffic, cut, {}) == []
    agent = [Happened("pause", "SIGSTOP the agent leader for 5 s", 1.5, 3.5)]  # b's, not a's
    assert len(check_copies_up(_samples(reads, "r"), set(), h.events, traffic, agent, {})) == 1
    # a cluster the Binding left has nothing promised on it
    h.binding("r", "b", at=1.5)
    assert check_copies_up(_samples(reads, "r"), set(), h.events, traffic, [], {}) == []


def test_a_pickone_copy_short_is_excused_only_by_its_own_cluster_cut_off() -> None:
    h = History()
    h.binding("p", "a", at=0.0)
    reads = [{"a": 2}, {"a": 2}, {"a": 1}, {"a": 1}]
    traffic = _deploys("All", "p")
    elsewhere = [Happened("cluster", "cluster c's API stopped 3 s", 1.5, 3.5)]
    found = check_never_down(_samples(reads, "p"), set(), h.events, traffic, elsewhere, {})
    assert [(v.invariant, v.at) for v in found] == [("never-down", 3.0)]
    own = [Happened("cluster", "cluster a's API stopped 3 s, back empty", 1.5, 3.5)]
    assert check_never_down(_samples(reads, "p"), set(), h.events, traffic, own, {}) == []


def test_the_time_each_cluster_counted_as_cut_off() -> None:
    faults = [Happened("cluster", "cluster a's API stopped 10 s", 10.0, 20.0),
              Happened("kill", "kill -9 scheduler replica 0, restarted after 2 s", 30.0, 32.0),
              Happened("kill", "kill -9 agent replica 1, restarted after 2 s", 100.0, 102.0)]
    # from a second before each fault to GRACE after its end; a scheduler killed: none
    assert cut_off_seconds(faults, 200.0) == {"a": 42, "b": 34}


def _rolled(h: History, app: str, at: float, copies: dict[str, tuple[int, str]],
            phase: str = "Progressing") -> None:
    """A status of a rollout of generation 2 from 1: cluster → (generation, health)."""
    h.put(keys.status_key("Application", "default", app), ApplicationStatus(
        StatusMeta(app, "default"), ApplicationState(
            applied={f"default/{c}": ClusterApplied(g, health=health,
                                                    since=T0 + timedelta(seconds=at))
                     for c, (g, health) in copies.items()},
            rollout=RolloutState(2, 1, phase))), at)


def test_a_rolling_step_starts_only_once_the_one_before_is_healthy() -> None:
    """(A cluster left behind — no longer a target, its copy on its way out — is no
    step: the seed 47 history had a forced move of a Rolling application between
    clusters, whose new copy started while the old one was still listed.)"""
    h = History()
    h.binding("r", "a", "b", "c", at=0.0)
    _rolled(h, "r", 0.0, {"a": (1, "Healthy"), "b": (1, "Healthy"), "c": (1, "Healthy")})
    _rolled(h, "r", 5.0, {"a": (2, "Progressing"), "b": (1, "Healthy"), "c": (1, "Healthy")})
    _rolled(h, "r", 10.0, {"a": (2, "Healthy"), "b": (2, "Progressing"), "c": (1, "Healthy")})
    _rolled(h, "r", 11.0, {"a": (2, "Healthy"), "b": (2, "Progressing"),
                           "c": (2, "Progressing")})  # b not healthy: one step too many
    traffic = _deploys("Rolling", "r")
    found = check_rollout_steps(h.events, traffic, PaceSpec(), [])
    assert [(v.invariant, v.at, v.what) for v in found] == [
        ("rolling", 11.0, "generation 2 started on default/c while default/b was not yet "
         "healthy on it (maxUnavailable 1)")]
    moved = History()  # b left behind (no longer a target): its copy is no step
    moved.binding("r", "a", "b", "c", at=0.0)
    moved.events += h.events[1:3]
    moved.binding("r", "a", "c", at=5.5, gen=2)
    moved.events.append(h.events[-1])  # the status of 11 s: c starts, b not healthy
    assert check_rollout_steps(moved.events, traffic, PaceSpec(), []) == []
    # Staged: no maxUnavailable; but no step starts in a pace window
    window = PaceSpec(windows=[PaceWindow(start="12:00", end="12:01")])  # T0 is 12:00
    staged = check_rollout_steps(h.events, _deploys("Staged", "r"), window, [])
    assert [(v.invariant, v.at) for v in staged] == [("pace", 5.0), ("pace", 10.0),
                                                     ("pace", 11.0)]


def test_a_moves_first_copy_in_a_window_is_no_rollout_step() -> None:
    """A forced move never waits: the copy made on its new cluster (nothing there
    before: a place held at generation 0) is no step, in a window or not (seed 14)."""
    h = History()
    h.binding("r", "a", at=0.0)
    _rolled(h, "r", 1.0, {"b": (1, "Healthy"), "a": (0, "")})
    _rolled(h, "r", 2.0, {"b": (1, "Healthy"), "a": (2, "Progressing")})
    window = PaceSpec(windows=[PaceWindow(start="12:00", end="12:01")])
    assert check_rollout_steps(h.events, _deploys("Rolling", "r"), window, []) == []


def test_a_stage_that_left_the_targets_is_no_first_stage_though_read_a_moment_late() -> None:
    """stage-order: a new generation on b before a (the first stage) had it available is
    a violation — unless a left the targets then: the history is read a moment behind
    the clusters (seed 53)."""
    h = History()
    for app in ("s", "v"):
        h.binding(app, "a", "b", "c", at=0.0, gen=3)
    h.binding("s", "b", "c", at=10.5, gen=3)  # a left: the rollout goes on to b and c
    samples = [Sample(10.0, 5, "b", "Deployment", "s", "x:3", available=0),
               Sample(10.0, 5, "b", "Deployment", "v", "x:3", available=0)]
    found = check_stages(samples, h.events, _deploys("Staged", "s", "v"), [])
    assert [(v.invariant, v.subject) for v in found] == [("stage-order", "v")]


def test_a_first_stage_cut_off_before_it_was_seen_available_is_no_violation() -> None:
    """Seed 29 (r-deploy-0012): a's copy of x:6 became available and berth went on to b,
    but a's API stopped before the sampler read a again: unseen, not unavailable. Still
    a violation: a read in that pass (nothing hides it), a cut off whose last read had
    no copy of x:6 (nothing on its way there), and no cut-off at all."""
    h = History()
    h.binding("s", "a", "b", "c", at=0.0, gen=6)
    a_rolling = Sample(113.6, 4, "a", "Deployment", "s", "x:6", available=1)
    b_has_it = Sample(114.4, 5, "b", "Deployment", "s", "x:6", available=0)
    stopped = [Happened("cluster", "cluster a's API stopped 12.1 s", 113.9, 149.7)]
    traffic = _deploys("Staged", "s")
    assert check_stages([a_rolling, b_has_it], h.events, traffic, stopped) == []
    a_read = Sample(114.3, 5, "a", "ConfigMap", "foreign", "")
    found = check_stages([a_rolling, a_read, b_has_it], h.events, traffic, stopped)
    assert [v.invariant for v in found] == ["stage-order"]
    a_older = Sample(113.6, 4, "a", "Deployment", "s", "x:5", available=2)
    found = check_stages([a_older, b_has_it], h.events, traffic, stopped)
    assert [v.invariant for v in found] == ["stage-order"]
    found = check_stages([a_rolling, b_has_it], h.events, traffic, [])
    assert [v.invariant for v in found] == ["stage-order"]


def test_steps_one_write_shows_together_went_one_after_another() -> None:
    """Seed 53 (r-deploy-0536): one reconcile applied a, found it Healthy at once (its
    Deployment unchanged), then applied c; the status between never landed (an etcd
    member lost), so one write shows both. A copy Healthy in that write went first; two
    not Healthy cannot both have waited for the other."""
    h = History()
    h.binding("r", "a", "b", "c", at=0.0)
    _rolled(h, "r", 0.0, {"a": (1, "Healthy"), "b": (1, "Healthy"), "c": (1, "Healthy")})
    _rolled(h, "r", 5.0, {"a": (2, "Healthy"), "b": (1, "Healthy"), "c": (2, "Progressing")})
    traffic = _deploys("Rolling", "r")
    assert check_rollout_steps(h.events, traffic, PaceSpec(), []) == []
    both = History()
    both.binding("r", "a", "b", "c", at=0.0)
    both.events += h.events[1:2]
    _rolled(both, "r", 5.0, {"a": (2, "Progressing"), "b": (1, "Healthy"),
                             "c": (2, "Progressing")})
    found = check_rollout_steps(both.events, traffic, PaceSpec(), [])
    assert [(v.invariant, v.at) for v in found] == [("rolling", 5.0), ("rolling", 5.0)]
    # a copy already busy before the write is what a Healthy newcomer started beside
    busy = History()
    busy.binding("r", "a", "b", "c", at=0.0)
    busy.events += h.events[1:2]
    _rolled(busy, "r", 4.0, {"a": (1, "Healthy"), "b": (2, "Progressing"),
                             "c": (1, "Healthy")})
    _rolled(busy, "r", 5.0, {"a": (2, "Healthy"), "b": (2, "Progressing"),
                             "c": (1, "Healthy")})
    found = check_rollout_steps(busy.events, traffic, PaceSpec(), [])
    assert [(v.invariant, v.at, v.what) for v in found] == [
        ("rolling", 5.0, "generation 2 started on default/a while default/b was not yet "
         "healthy on it (maxUnavailable 1)")]


def test_a_copy_whose_cluster_left_the_targets_in_between_was_promised_nothing() -> None:
    """Seed 29 on a loaded machine (r-deploy-0017): c left the targets (relabelled) and
    came back a second later; its copy went and a new one was made. A pass that began
    before c left read c after, short, and the next pass read the new copy, not yet up:
    no copy-up — the copy seen up left with its cluster. A pass's reads are judged at
    their own times, and the promise holds while the cluster stays a target."""
    h = History()
    h.binding("r", "c", "b", at=0.0)
    up = Sample(1.0, 1, "c", "Deployment", "r", "x:1", available=2)
    gone = Sample(2.5, 2, "c", "Deployment", "r", "x:1", available=0)  # pass 2 began at 1.5
    pass_2 = Sample(1.5, 2, "b", "Deployment", "r", "x:1", available=2)
    new = Sample(3.6, 3, "c", "Deployment", "r", "x:1", available=0)
    samples = [up, pass_2, gone, new]
    traffic = _deploys("Rolling", "r")
    assert [v.at for v in check_copies_up(samples, set(), h.events, traffic, [], {})] == [3.6]
    h.binding("r", "b", at=2.0)  # c left ...
    h.binding("r", "c", "b", at=3.0)  # ... and came back
    assert check_copies_up(samples, set(), h.events, traffic, [], {}) == []


def test_a_first_stage_never_read_while_its_generation_rolled_out_is_unseen() -> None:
    """Seed 29 on a loaded machine (r-deploy-0012): the sampler last read a before x:5
    was decided, did not come back to it for seven seconds — in which a's copy of x:5
    became available and the rollout went on to b — and a was cut off before it did."""
    h = History()
    h.binding("s", "a", at=0.0, gen=4)
    a_before = Sample(77.1, 45, "a", "Deployment", "s", "x:4", available=2)
    h.binding("s", "a", "b", at=77.5, gen=5)
    b_has_it = Sample(83.9, 46, "b", "Deployment", "s", "x:5", available=2)
    stopped = [Happened("cluster", "cluster a's API stopped 11.7 s", 83.5, 123.3)]
    traffic = _deploys("Staged", "s")
    assert check_stages([a_before, b_has_it], h.events, traffic, stopped) == []
    # read after x:5 was decided, without it: not unseen (it had not come)
    a_after = Sample(78.0, 45, "a", "Deployment", "s", "x:4", available=2)
    found = check_stages([a_after, b_has_it], h.events, traffic, stopped)
    assert [v.invariant for v in found] == ["stage-order"]


def test_a_decision_that_found_nothing_fitting_has_its_record_too() -> None:
    """A decision that changed the targets because none fits any more (its record
    Unschedulable: a failed target left) is carried by the Binding like a move's: its
    record counts (a seed-14 run in the suite was failed for it, wrongly)."""
    h = History()
    rid = ledger.record_id(T0)
    rec = Record(T0, UNSCHEDULABLE, 2, trigger="failed-target")
    h.binding("x", "a", at=0.0, decision=rid)
    h.put(ledger.prefix("Application", "default", "x") + f"{rid}.scheduler.1", rec, 0.0,
          same=True)
    assert check_ledger(h.events, ["x"], set(), []) == []


def test_a_job_made_again_is_excused_only_when_its_cluster_was_cut_off_before_berth_saw(
        ) -> None:
    """Seed 29 in CI: the Job completed at 15:06:36 (a stamp in whole seconds: between
    :36 and :37), its cluster was cut off 5.45 s after :36 and a copy was made on b
    meanwhile. Within SEEN of the completion, as it may have been: excused. Cut off
    later, or the copy made after the cluster was back: a violation."""
    t0 = datetime(2026, 12, 2, 15, 4, 47, 654000, tzinfo=UTC).timestamp()

    def run_time(stamp: str) -> float:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - t0

    done = Sample(129.3, 20, "a", "Job", "j", "x:2", uid="1", created="2026-12-02T15:06:33Z",
                  completed="2026-12-02T15:06:36Z")
    again = Sample(210.6, 40, "b", "Job", "j", "x:2", uid="2", created="2026-12-02T15:06:44Z")
    assert abs(run_time(done.completed) - 108.346) < 0.01

    def found(began: float, ended: float) -> list[str]:
        cut = [Happened("cluster", "cluster a's API stopped 12.1 s", began, ended)]
        return [v.invariant for v in check_jobs([done, again], cut, run_time)]

    assert found(113.8, 132.3) == []  # 5.45 s after the stamp, 4.45 s after :37
    assert found(114.6, 132.3) == ["job-again"]  # over SEEN after any time in that second
    assert found(113.8, 115.0) == ["job-again"]  # the copy made after it was back


def test_the_team_over_its_quota_or_outside_its_set_is_a_violation() -> None:
    """``quota``: more of the team's applications placed at once than its quota, at any
    revision; ``confined``: a Binding or a status of the team's naming a cluster outside
    its set, or a status recording an object its policy forbids."""
    h = History()

    def bind(app: str, *on: str, at: float) -> None:
        h.put(keys.binding_key("Application", TEAM, app), Binding(
            metadata=BindingMeta(app, TEAM),
            spec=BindingSpec(ObjectRef("Application", app, TEAM), 1,
                             [Target("Cluster", c, "default") for c in on])), at)

    for n in range(TEAM_QUOTA):
        bind(f"t{n}", "a", at=float(n))
    bind("t0", at=5.0)  # one freed ...
    bind("t9", "c", at=6.0)  # ... and taken: never over
    bind("t8", "c", at=6.5)  # taken in the very write that frees another: never over
    h.put(keys.binding_key("Application", TEAM, "t9"), {"deleted": True}, 6.5, same=True)
    assert check_team(h.events, []) == []
    bind("t10", "c", at=7.0)  # one more than the quota
    bind("t11", "b", at=8.0)  # and outside its set
    h.put(keys.status_key("Application", TEAM, "t1"), ApplicationStatus(
        StatusMeta("t1", TEAM), ApplicationState(applied={
            "default/a": ClusterApplied(0, [KubeObjectRef("v1", "ServiceAccount", "t1",
                                                          "default")]),
            "default/b": ClusterApplied(0, [])})), 9.0)
    found = sorted((v.invariant, v.subject, v.what.split(" (revision")[0])
                   for v in check_team(h.events, []))
    assert found == [
        ("confined", f"{TEAM}/t1", "its status records ServiceAccount default/t1 on default/a"),
        ("confined", f"{TEAM}/t1", "its status records a copy on default/b"),
        ("confined", f"{TEAM}/t11", "its Binding names default/b"),
        ("quota", TEAM, f"{TEAM_QUOTA + 1} applications placed, over its quota of "
                        f"{TEAM_QUOTA}, at revision {h.events[-3].revision}: t1, t10, t2, "
                        "t3, t8"),
    ], found


def test_a_web_tier_first_seen_where_its_dependency_was_not_available_is_a_violation() -> None:
    from tests.robustness.checks import check_depends_first

    h = History()
    h.status("base", 2.0, {"a": HEALTHY, "c": NEW})  # available on a, not (yet) on c
    h.status("base", 9.0, {"a": HEALTHY, "c": HEALTHY})
    traffic = SimpleNamespace(apps={"web": App("web", "web", 0, depends_on="base")},
                              deleted={})
    samples = [Sample(3.0, 3, "a", "Deployment", "web", "x:1", available=2),  # after a: fine
               Sample(4.5, 4, "c", "Deployment", "web", "x:1"),  # before c was: wrong
               Sample(8.5, 8, "a", "Deployment", "web", "x:1")]  # seen before: not again
    found = check_depends_first(samples, h.events, traffic)
    assert [(v.invariant, v.subject, v.at) for v in found] == [("depends-first", "web", 4.5)]
    assert "on c before base was seen available there (4.5 s later)" in found[0].what
    # the recorder reading the status a moment after the sampler saw its effect: no
    # violation within the skew
    late = [Sample(8.6, 8, "c", "Deployment", "web", "x:1")]
    assert check_depends_first(late, h.events, traffic) == []
