"""The plan executed against in-memory clusters: what is done on each cluster, and in
which order with the status writes (one journal)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from berth.controllers.propagator.drift import OwnWrites, newer
from berth.controllers.propagator.execute import Executor
from berth.controllers.propagator.health import HEALTHY, Health
from berth.controllers.propagator.plan import App, Apply, Facts, Finish, Progress, state
from berth.controllers.propagator.reconcile import run
from berth.controllers.runtime import Retry
from berth.store.documents import ApplicationState, ClusterApplied, KubeObjectRef
from berth.store.documents.tenancy import Identity
from berth_testkit.fakes.propagator import Fleet, Sink

OWNER = "default/app"


def cm(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "annotations": {"berth.dev/application": OWNER}}}


def ref(name: str) -> KubeObjectRef:
    return KubeObjectRef("v1", "ConfigMap", name, "default")


def reconcile(fleet: Fleet, app: App | None, was: ApplicationState, targets: tuple[str, ...],
              sink: Sink | None = None) -> tuple[Finish | Retry, Progress, Sink]:
    sink = sink or Sink(fleet.journal)
    facts = Facts(app, was, app.generation if app else None,
                  tuple(f"default/{t}" for t in targets), owner=OWNER)
    progress = Progress.start(was)
    return run(facts, progress, Executor(fleet, OwnWrites()), sink), progress, sink


def test_a_move_is_make_before_break() -> None:
    fleet = Fleet().add("a", "b")
    app = App(1, bodies=(cm("x"),))
    end, _, _ = reconcile(fleet, app, ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    fleet.journal.clear()
    end, _, sink = reconcile(fleet, app, end.state, ("b",))
    assert isinstance(end, Finish) and end.state is not None
    assert end.state.state == "RUNNING" and list(end.state.applied) == ["default/b"]
    assert fleet.journal == [
        ("status", "MIGRATING", "default/a:x,default/b:x"),  # recorded before applied
        ("apply", "b", "x"),
        ("status", "MIGRATING", "default/a:x,default/b:x"),  # checked: running on both
        ("delete", "a", "x"),
    ]  # the reconcile then writes the plan's final state
    assert sink.written[-1].reason == "removing from default/a"
    assert not fleet["a"].objects and ref("x") in fleet["b"].objects


def test_the_old_cluster_keeps_it_when_the_new_one_fails() -> None:
    fleet = Fleet().add("a", "b")
    app = App(1, bodies=(cm("x"),))
    end, _, _ = reconcile(fleet, app, ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    fleet["b"].down = True
    end, _, _ = reconcile(fleet, app, end.state, ("b",))
    assert isinstance(end, Finish) and end.retry and end.state is not None
    assert end.state.state == "MIGRATING" and "connection refused" in end.state.reason
    assert ref("x") in fleet["a"].objects
    assert not [j for j in fleet.journal if j[0] == "delete"]


def test_objects_a_new_generation_dropped_are_pruned() -> None:
    fleet = Fleet().add("a")
    end, _, _ = reconcile(fleet, App(1, bodies=(cm("x"), cm("y"))), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    end, _, _ = reconcile(fleet, App(2, bodies=(cm("y"),)), end.state, ("a",))
    assert isinstance(end, Finish) and end.state is not None
    have = end.state.applied["default/a"]
    assert (have.generation, have.objects, have.health) == (2, [ref("y")], "Healthy")
    assert list(end.state.applied) == ["default/a"]
    assert list(fleet["a"].objects) == [ref("y")]


def test_a_custom_resource_is_recorded_once_its_crd_is_applied_and_before_it_is() -> None:
    fleet = Fleet().add("a")
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}}}
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    end, _, _ = reconcile(fleet, App(1, bodies=(crd, widget)), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    assert fleet.journal == [
        ("status", "PENDING", "default/a:widgets.example.com"),
        ("apply", "a", "widgets.example.com"),
        ("status", "PENDING", "default/a:widgets.example.com+w"),
        ("apply", "a", "w"),
    ]


def test_a_refused_manifest_is_failed_and_not_retried() -> None:
    fleet = Fleet().add("a")
    fleet["a"].refuse.add("x")
    end, _, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    assert (end.state.state, end.state.rejected_generation, end.retry) == ("FAILED", 1, "")
    assert "Invalid value" in end.state.reason


def test_deleting_clears_every_cluster_then_removes() -> None:
    fleet = Fleet().add("a", "b")
    end, _, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), ApplicationState(), ("a", "b"))
    assert isinstance(end, Finish) and end.state is not None
    fleet["b"].down = True
    gone = App(1, deleting=True)
    end, _, _ = reconcile(fleet, gone, end.state, ("a", "b"))
    assert isinstance(end, Finish) and end.retry and end.state is not None
    assert end.state.state == "DELETING" and list(end.state.applied) == ["default/b"]
    fleet["b"].down = False
    end, _, _ = reconcile(fleet, gone, end.state, ("a", "b"))
    assert isinstance(end, Finish) and end.remove and not end.retry
    assert not fleet["a"].objects and not fleet["b"].objects


def test_a_status_write_that_fails_stops_before_anything_is_applied() -> None:
    fleet = Fleet().add("a")
    sink = Sink(fleet.journal, fail=True)
    end, _, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), ApplicationState(), ("a",), sink)
    assert end == Retry("changed meanwhile", after=0.1)
    assert not fleet["a"].objects  # never applied without being recorded first


def test_the_ledger_tells_berths_writes_from_someone_elses() -> None:
    own_writes, x = OwnWrites(), ref("x")
    own_writes.begin("a", x)
    assert not own_writes.someone_else("a", x, "10")  # in flight: decided when it returns
    assert not own_writes.end("a", x, "11")  # what was seen is older than ours
    assert not own_writes.someone_else("a", x, "11")  # ours
    assert not own_writes.someone_else("a", x, "9")  # late news from before ours
    assert own_writes.someone_else("a", x, "12")  # after ours: someone else
    own_writes.begin("a", x)
    assert not own_writes.someone_else("a", x, "15")  # a change right after our apply ...
    assert own_writes.end("a", x, "14")  # ... is found when the apply returns
    own_writes.forget("a", x)
    assert not own_writes.someone_else("a", x, "20")  # berth deleted it
    assert newer("b", "a") and not newer("7", "10")


def test_a_change_seen_while_applying_marks_the_cluster_drifted() -> None:
    fleet = Fleet().add("a")
    own_writes = OwnWrites()

    class Racing(OwnWrites):
        def end(self, cid: str, obj: KubeObjectRef, stored: str | None, generation: int = 0
                ) -> bool:
            own_writes.someone_else(cid, obj, str(int(stored or 0) + 1))  # someone, right after
            return own_writes.end(cid, obj, stored, generation)

        def begin(self, cid: str, obj: KubeObjectRef) -> None:
            own_writes.begin(cid, obj)

    progress = Progress.start(ApplicationState())
    facts = Facts(App(1, bodies=(cm("x"),)), ApplicationState(), 1, ("default/a",))
    run(facts, progress, Executor(fleet, Racing()), Sink(fleet.journal))
    assert progress.drifted == {"default/a"}


def test_the_state_helper_copies() -> None:
    applied = {"default/a": ClusterApplied(1, [ref("x")])}
    st = state("RUNNING", "", applied, 1, {})
    applied["default/a"].objects.append(ref("y"))
    assert st.applied["default/a"].objects == [ref("x")]


def deployment(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": []}}}}


def divided(fleet: Fleet, was: ApplicationState, shares: dict[str, int]
            ) -> tuple[Finish | Retry, Progress]:
    app = App(1, bodies=(deployment(9),))
    facts = Facts(app, was, 1, tuple(f"default/{t}" for t in shares),
                  shares={f"default/{t}": n for t, n in shares.items()})
    progress = Progress.start(was)
    return run(facts, progress, Executor(fleet, OwnWrites()), Sink(fleet.journal)), progress


def replicas_on(fleet: Fleet, cluster: str) -> int:
    ref = KubeObjectRef("apps/v1", "Deployment", "web", "default")
    return int(fleet[cluster].objects[ref]["spec"]["replicas"])


def test_each_cluster_gets_its_share_and_a_new_share_is_raised_before_one_is_lowered() -> None:
    fleet = Fleet().add("a", "b")
    end, _ = divided(fleet, ApplicationState(), {"a": 6, "b": 3})
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    assert (replicas_on(fleet, "a"), replicas_on(fleet, "b")) == (6, 3)
    assert end.state.applied["default/a"].replicas == 6
    fleet.journal.clear()
    end, _ = divided(fleet, end.state, {"a": 2, "b": 7})  # a listed first, but lowers
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    applies = [j for j in fleet.journal if j[0] == "apply"]
    assert applies == [("apply", "b", "web"), ("apply", "a", "web")]
    assert (replicas_on(fleet, "a"), replicas_on(fleet, "b")) == (2, 7)


def test_a_share_is_not_lowered_while_the_raise_failed() -> None:
    fleet = Fleet().add("a", "b")
    end, _ = divided(fleet, ApplicationState(), {"a": 6, "b": 3})
    assert isinstance(end, Finish) and end.state is not None
    fleet["b"].down = True
    end, _ = divided(fleet, end.state, {"a": 2, "b": 7})
    assert isinstance(end, Finish) and end.retry and end.state is not None
    assert (replicas_on(fleet, "a"), replicas_on(fleet, "b")) == (6, 3)  # a keeps its 6
    fleet["b"].down = False
    end, _ = divided(fleet, end.state, {"a": 2, "b": 7})
    assert (replicas_on(fleet, "a"), replicas_on(fleet, "b")) == (2, 7)


def test_a_status_only_change_of_a_kind_with_generations_is_not_drift() -> None:
    own_writes, web = OwnWrites(), KubeObjectRef("apps/v1", "Deployment", "web", "default")
    own_writes.begin("c", web)
    assert not own_writes.someone_else("c", web, "11", 1)  # the controller's status, mid-apply
    assert not own_writes.end("c", web, "10", 1)
    assert not own_writes.someone_else("c", web, "12", 1)  # status and annotations: same spec
    assert own_writes.someone_else("c", web, "13", 2)  # someone scaled it: a new generation
    own_writes.end("c", web, "14", 3)
    assert own_writes.someone_else("c", web, "15", 3, deleted=True)  # deleted: always drift
    cm = ref("x")  # no generations: any newer version is someone else's
    own_writes.end("c", cm, "20")
    assert own_writes.someone_else("c", cm, "21")


def test_an_object_another_application_manages_is_not_taken_over() -> None:
    fleet = Fleet().add("a")
    fleet["a"].place(ref("x"), "default/other")
    end, progress, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.retry
    assert end.state.state == "FAILED"
    assert "managed by application default/other" in progress.errors["default/a"]
    assert fleet["a"].objects[ref("x")]["metadata"]["annotations"] == {
        "berth.dev/application": "default/other"}  # untouched
    # nor one made outside berth; unless the application says it may take it over
    fleet["a"].place(ref("x"), "")
    end, progress, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), ApplicationState(), ("a",))
    assert "someone outside berth" in progress.errors["default/a"]
    end, progress, _ = reconcile(fleet, App(1, bodies=(cm("x"),), adopt=True),
                                 ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"


def test_an_object_read_as_absent_is_created_and_its_own_applied() -> None:
    """Berth creates what it read as absent (the cluster refuses a creation if the object
    exists); what exists and is the application's is applied, with force (berth's
    fields win over others' edits)."""
    fleet = Fleet().add("a")
    end, _, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    end, _, _ = reconcile(fleet, App(2, bodies=(cm("x"),)), end.state, ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    assert fleet["a"].calls == [("create", "x"), ("apply", "x")]


def test_a_namesake_made_between_the_read_and_the_creation_is_not_taken_over() -> None:
    """The read comes from the API server's watch cache, a moment behind, and anyone may
    make the object after any read: the creation is refused, the object read again
    past the cache, and taken over only as the application says. (A server-side
    apply there would have merged berth's fields into theirs wherever they did not
    clash: the robustness run, seed 29, "untouched".)"""
    for theirs, said in (("default/other", "managed by application default/other"),
                         ("", "someone outside berth")):
        fleet = Fleet().add("a")
        fleet["a"].place(ref("x"), theirs, cached=False)
        end, progress, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), ApplicationState(),
                                     ("a",))
        assert isinstance(end, Finish) and end.retry and end.state is not None
        assert end.state.state == "FAILED" and said in progress.errors["default/a"]
        annotations = fleet["a"].objects[ref("x")]["metadata"]["annotations"]
        assert annotations == ({"berth.dev/application": theirs} if theirs else {})
        assert fleet["a"].calls == []  # refused: untouched
        fleet["a"].uncached.add(ref("x"))
        end, progress, _ = reconcile(fleet, App(1, bodies=(cm("x"),), adopt=True),
                                     ApplicationState(), ("a",))
        assert isinstance(end, Finish) and end.state is not None
        assert end.state.state == "RUNNING"  # conflictResolution: Overwrite
        assert fleet["a"].calls == [("apply", "x")]
        assert fleet["a"].objects[ref("x")]["metadata"]["annotations"] == {
            "berth.dev/application": OWNER}


def test_the_applications_own_object_unseen_by_the_cache_is_applied() -> None:
    """An apply of berth's that landed unseen (its answer lost, the cache behind): its
    creation refused, read again past the cache, it is the application's own, and
    nothing is refused."""
    fleet = Fleet().add("a")
    fleet["a"].place(ref("x"), OWNER, cached=False)
    end, _, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    assert fleet["a"].calls == [("apply", "x")]


def test_two_applications_making_one_object_at_once_never_both_own_it() -> None:
    """Two workers, two applications naming one object, both read it as absent: both
    create it, the cluster makes it for one, and the other, reading it again, finds
    it another's and is refused (the robustness run, seed 14: "one-owner")."""
    import threading

    fleet = Fleet().add("a")
    executor = Executor(fleet, OwnWrites())
    gate = threading.Barrier(2)
    real_get = fleet["a"].get

    def get(r: KubeObjectRef, *, cached: bool = False) -> Any:
        got = real_get(r, cached=cached)
        if cached:
            gate.wait(timeout=5)  # both have read it as absent before either makes it
        return got

    fleet["a"].get = get  # type: ignore[method-assign]
    outcomes: dict[str, Progress] = {}

    def make(owner: str) -> None:
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "x", "annotations": {"berth.dev/application": owner}}}
        progress = Progress({}, ApplicationState())
        executor.apply(Apply("default/a", 1, owner=owner), App(1, bodies=(body,)), progress,
                       lambda _: None)
        outcomes[owner] = progress

    threads = [threading.Thread(target=make, args=(o,)) for o in ("default/p", "default/q")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    made = [o for o, p in outcomes.items() if "default/a" in p.applied and not p.errors]
    refused = [o for o, p in outcomes.items() if "managed by application" in str(p.errors)]
    assert len(made) == 1 and len(refused) == 1, outcomes
    assert fleet["a"].objects[ref("x")]["metadata"]["annotations"] == {
        "berth.dev/application": made[0]}
    assert fleet["a"].calls == [("create", "x")]


def test_only_objects_still_the_applications_are_deleted() -> None:
    fleet = Fleet().add("a")
    app = App(1, bodies=(cm("x"), cm("y")))
    end, _, _ = reconcile(fleet, app, ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    fleet["a"].place(ref("y"), "default/other")  # taken over meanwhile
    end, _, _ = reconcile(fleet, App(1, deleting=True), end.state, ("a",))
    assert isinstance(end, Finish) and end.remove
    assert list(fleet["a"].objects) == [ref("y")]  # the other's stays


def test_a_job_runs_again_only_for_a_new_generation() -> None:
    fleet = Fleet().add("a")
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "once", "annotations": {"berth.dev/application": OWNER}}}
    end, _, _ = reconcile(fleet, App(1, bodies=(job,)), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    assert [r.name for r in end.state.applied["default/a"].done] == ["once"]  # complete
    fleet.journal.clear()
    end, _, _ = reconcile(fleet, App(2, bodies=(job,)), end.state, ("a",))
    assert ("delete", "a", "once") in fleet.journal  # a new generation: deleted, made anew
    assert fleet.journal.index(("delete", "a", "once")) < fleet.journal.index(
        ("apply", "a", "once"))


def test_a_refused_copy_stays_refused_whatever_was_recorded() -> None:
    """The owner is read from the cluster before every apply: a record of the object in
    the status (written before an apply, kept across a refusal and a restart) is no
    licence to take it over."""
    fleet = Fleet().add("a")
    fleet["a"].place(ref("x"), "default/first")
    end, progress, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.retry
    assert "managed by application default/first" in progress.errors["default/a"]
    assert "default/a" not in end.state.applied  # refused before anything was recorded
    # A status written by an earlier version, or before a crash: the object recorded
    # for the cluster (generation 0: intent only), the process restarted since.
    recorded = state("PENDING", "", {"default/a": ClusterApplied(0, [ref("x")])}, 0, {})
    for was in (end.state, recorded):
        fleet.journal.clear()
        again, progress, _ = reconcile(fleet, App(1, bodies=(cm("x"),)), was, ("a",))
        assert isinstance(again, Finish) and again.retry
        assert "managed by application default/first" in progress.errors["default/a"]
        assert not [j for j in fleet.journal if j[0] in ("apply", "delete")]
        assert fleet["a"].objects[ref("x")]["metadata"]["annotations"] == {
            "berth.dev/application": "default/first"}  # untouched


def test_a_done_job_is_not_created_again_by_a_move() -> None:
    """Done work stays done: a move brings the application's other objects to the new
    cluster, not its complete Jobs; the status says the generation's work is finished."""
    fleet = Fleet().add("a", "b")
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "once", "annotations": {"berth.dev/application": OWNER}}}
    end, _, _ = reconcile(fleet, App(1, bodies=(job, cm("x"))), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    assert [r.name for r in end.state.applied["default/a"].done] == ["once"]
    assert end.state.finished == 0  # a ConfigMap is no work that ends
    fleet.journal.clear()
    moved, _, _ = reconcile(fleet, App(1, bodies=(job, cm("x"))), end.state, ("b",))
    assert isinstance(moved, Finish) and moved.state is not None
    assert moved.state.state == "RUNNING" and list(moved.state.applied) == ["default/b"]
    assert ("apply", "b", "once") not in fleet.journal  # never run a second time
    assert ("apply", "b", "x") in fleet.journal
    assert [r.name for r in moved.state.applied["default/b"].done] == ["once"]  # still done
    # an application that is only Jobs, all complete: finished at its generation
    alone = Fleet().add("a")
    only, _, _ = reconcile(alone, App(1, bodies=(job,)), ApplicationState(), ("a",))
    assert isinstance(only, Finish) and only.state is not None and only.state.finished == 1


JOB = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"name": "once", "annotations": {"berth.dev/application": OWNER}}}
JOB_REF = KubeObjectRef("batch/v1", "Job", "once", "default")


def test_a_running_job_is_stopped_before_it_starts_elsewhere() -> None:
    """A forced move of a Job not complete yet is break before make: two copies would
    both run the work (the robustness run, seed 1, found both complete)."""
    fleet = Fleet().add("a", "b")
    for c in ("a", "b"):
        fleet[c].jobs = Health(HEALTHY, "running")  # its pods run: available, not done
    end, _, _ = reconcile(fleet, App(1, bodies=(JOB,)), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    assert end.state.working == 1 and end.state.finished == 0  # the scheduler reads it
    fleet.journal.clear()
    moved, _, _ = reconcile(fleet, App(1, bodies=(JOB,)), end.state, ("b",))
    assert isinstance(moved, Finish) and moved.state is not None
    steps = [j for j in fleet.journal if j[0] in ("apply", "delete")]
    assert steps == [("delete", "a", "once"), ("apply", "b", "once")]
    assert list(moved.state.applied) == ["default/b"] and moved.state.working == 1
    # a cluster that cannot be reached does not hold the move (a dead node's pod)
    fleet["b"].down = True
    fleet.journal.clear()
    again, progress, _ = reconcile(fleet, App(1, bodies=(JOB,)), moved.state, ("a",))
    assert isinstance(again, Finish) and ("apply", "a", "once") in fleet.journal
    assert progress.errors["default/b"] == "could not remove Job default/once"


def test_a_job_its_cluster_shows_complete_is_done_though_not_recorded_yet() -> None:
    """A forced move a moment after the Job completed, before its status said so (the
    robustness run, seed 43: the replica serving the cluster had been killed): the
    cluster's own view counts — the Job is left where it completed, not stopped, and
    not made on the target."""
    from berth.controllers.propagator.health import JOB_DONE, Copy
    from berth.controllers.propagator.plan import Clear, plan

    fleet = Fleet().add("a", "b")
    fleet["a"].jobs = Health(HEALTHY, "running")
    end, _, _ = reconcile(fleet, App(1, bodies=(JOB,)), ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.state.working == 1
    seen = {"default/a": Copy(JOB_DONE, complete=(JOB_REF,))}  # as the drift watch shows
    facts = Facts(App(1, bodies=(JOB,)), end.state, 1, ("default/b",), owner=OWNER,
                  health=seen)
    step = plan(facts, Progress.start(end.state))
    assert isinstance(step, Apply) and step.cluster == "default/b", step
    assert step.skip == (JOB_REF,)  # done: never made on b
    blind = Facts(App(1, bodies=(JOB,)), end.state, 1, ("default/b",), owner=OWNER)
    assert isinstance(plan(blind, Progress.start(end.state)), Clear)  # running, as known


def test_a_job_its_cluster_recorded_done_is_not_made_again() -> None:
    """The agent carries out a work whose ``skip`` was written before its Job completed:
    its own record (the report) says done at this generation, and that is enough — a
    cluster back empty does not run it again (the robustness run, seed 2)."""
    fleet = Fleet().add("a")
    had = ClusterApplied(1, [JOB_REF, ref("x")], done=[JOB_REF])
    progress = Progress({"default/a": had}, ApplicationState(applied={"default/a": had}))
    step = Apply("default/a", 1, owner=OWNER)  # no skip in the step
    halt = Executor(fleet, OwnWrites()).apply(step, App(1, bodies=(JOB, cm("x"))), progress,
                                              lambda _: None)
    assert halt is None and not progress.errors
    assert ("apply", "a", "once") not in fleet.journal and ("apply", "a", "x") in fleet.journal
    assert progress.applied["default/a"].done == [JOB_REF]  # still done
    # a new generation runs it again
    step = Apply("default/a", 2, owner=OWNER)
    Executor(fleet, OwnWrites()).apply(step, App(2, bodies=(JOB,)), progress, lambda _: None)
    assert ("apply", "a", "once") in fleet.journal


def rendered_facts(app: App, was: ApplicationState, targets: tuple[str, ...],
                   overrides: list[Any], labels: dict[str, dict[str, str]]) -> Facts:
    """Facts with each target's copy as ``overrides`` make it (as the applier does)."""
    from berth.store.documents.render import RenderError, Where, render

    rendered, unrendered = {}, {}
    for t in targets:
        try:
            rendered[f"default/{t}"] = render(app.bodies, overrides,
                                              Where(t, "default", labels.get(t, {})))
        except RenderError as exc:
            unrendered[f"default/{t}"] = str(exc)
    return Facts(app, was, app.generation, tuple(f"default/{t}" for t in targets), owner=OWNER,
                 rendered=rendered, unrendered=unrendered)


def test_overrides_render_each_clusters_copy_and_a_change_reapplies_only_what_changed(
) -> None:
    import msgspec

    from berth.store.documents.overrides import Override

    def zone_override(generation: int, value: str) -> Override:
        return msgspec.convert({"kind": "Override", "metadata": {
            "name": "zones", "namespace": "default", "generation": generation}, "spec": {
            "clusters": {"names": ["b"]},
            "rules": [{"labels": {"set": {"zone": value}}}]}}, Override)

    fleet = Fleet().add("a", "b")
    app = App(1, bodies=(cm("x"),))
    sink = Sink(fleet.journal)
    facts = rendered_facts(app, ApplicationState(), ("a", "b"), [zone_override(1, "z1")], {})
    end = run(facts, Progress.start(ApplicationState()), Executor(fleet, OwnWrites()), sink)
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    assert "zone" not in fleet["a"].objects[ref("x")]["metadata"].get("labels", {})
    assert fleet["b"].objects[ref("x")]["metadata"]["labels"]["zone"] == "z1"
    assert end.state.applied["default/b"].overrides == ["Override default/zones@1"]
    assert end.state.applied["default/a"].overrides == []
    fleet.journal.clear()
    facts = rendered_facts(app, end.state, ("a", "b"), [zone_override(2, "z2")], {})
    again = run(facts, Progress.start(end.state), Executor(fleet, OwnWrites()), sink)
    assert isinstance(again, Finish)
    assert [j for j in fleet.journal if j[0] == "apply"] == [("apply", "b", "x")]  # b alone
    assert fleet["b"].objects[ref("x")]["metadata"]["labels"]["zone"] == "z2"


def test_a_copy_that_cannot_be_rendered_or_is_refused_fails_that_cluster_alone() -> None:
    import msgspec

    from berth.store.documents.overrides import Override

    registry = msgspec.convert({"kind": "Override", "metadata": {
        "name": "reg", "namespace": "default", "generation": 1}, "spec": {
        "rules": [{"labels": {"set": {"registry": "${cluster.labels.registry}"}}}]}}, Override)
    fleet = Fleet().add("a", "b")
    app = App(1, bodies=(cm("x"),))
    facts = rendered_facts(app, ApplicationState(), ("a", "b"), [registry],
                           {"a": {"registry": "r.example"}})  # b has no such label
    end = run(facts, Progress.start(ApplicationState()), Executor(fleet, OwnWrites()),
              Sink(fleet.journal))
    assert isinstance(end, Finish) and end.state is not None
    assert not end.retry  # not retried until the application or an override changes
    assert ref("x") in fleet["a"].objects and not fleet["b"].objects
    assert "has no label 'registry'" in end.state.errors["default/b"]
    assert end.state.state == "DEGRADED" and "not applied on default/b" in end.state.reason
    # a cluster that refuses its copy as the overrides make it: that cluster alone
    fleet = Fleet().add("a", "b")
    fleet["b"].refuse.add("x")
    labels = {"a": {"registry": "r.example"}, "b": {"registry": "r.example"}}
    facts = rendered_facts(app, ApplicationState(), ("a", "b"), [registry], labels)
    end = run(facts, Progress.start(ApplicationState()), Executor(fleet, OwnWrites()),
              Sink(fleet.journal))
    assert isinstance(end, Finish) and end.state is not None and not end.retry
    assert "refused by cluster default/b" in end.state.errors["default/b"]
    assert "Override default/reg@1" in end.state.errors["default/b"]
    assert set(end.state.refused) == {"default/b"} and ref("x") in fleet["a"].objects
    fleet.journal.clear()
    facts = rendered_facts(app, end.state, ("a", "b"), [registry], labels)
    again = run(facts, Progress.start(end.state), Executor(fleet, OwnWrites()),
                Sink(fleet.journal))
    assert isinstance(again, Finish) and again.state is not None
    assert not [j for j in fleet.journal if j[0] == "apply"]  # not tried again
    assert set(again.state.refused) == {"default/b"}


class Lapsing:
    """An authority whose lease lapses after ``writes`` writes: as a replica paused past
    its lease finds on resuming, by its own clock."""

    def __init__(self, writes: int) -> None:
        self.writes = writes

    def serving(self, cid: str) -> AbstractContextManager[bool]:
        return nullcontext(True)

    def holds(self, cid: str) -> bool:
        self.writes -= 1
        return self.writes >= 0


def test_a_replica_whose_lease_lapsed_sends_the_cluster_nothing_more() -> None:
    """etcd fences what a replica writes to etcd, not what it sends a cluster: every write
    to a cluster asks the authority first (the robustness run, seed 53: a deposed agent,
    resumed, applied again an object the new leader had just removed). Reads still go."""
    fleet = Fleet().add("a")
    app = App(1, bodies=(cm("x"), cm("y")))
    progress = Progress.start(ApplicationState())
    facts = Facts(app, ApplicationState(), 1, ("default/a",), owner=OWNER)
    end = run(facts, progress, Executor(fleet, OwnWrites(), authority=Lapsing(1)),
              Sink(fleet.journal))
    assert isinstance(end, Finish) and end.retry
    assert [j for j in fleet.journal if j[0] == "apply"] == [("apply", "a", "x")]
    assert list(fleet["a"].objects) == [ref("x")]
    assert "lease may have ended" in progress.errors["default/a"]
    # nor does it delete: the application gone, its objects stay for the next leader
    was = end.state if end.state is not None else ApplicationState()
    fleet.journal.clear()
    progress = Progress.start(was)
    end = run(Facts(App(1, deleting=True), was, 1, ("default/a",), owner=OWNER), progress,
              Executor(fleet, OwnWrites(), authority=Lapsing(0)), Sink(fleet.journal))
    assert isinstance(end, Finish) and end.retry
    assert not [j for j in fleet.journal if j[0] == "delete"]
    assert list(fleet["a"].objects) == [ref("x")]


def test_a_copy_goes_as_its_namespaces_identity_and_what_the_clusters_rbac_forbids_waits(
        ) -> None:
    """docs/teams.md "Applied as the namespace's identity": every call for the copy is
    made as the identity; an object the member's RBAC forbids is left out and tried
    again, the others applied; absent, it keeps a move from removing the old copy."""
    team = Identity(service_account="team-a/deployer")
    fleet = Fleet().add("a", "b")
    app = App(1, bodies=(cm("x"), cm("y"), cm("z")))

    def reconcile_as(was: ApplicationState, target: str, *, resync: bool = False
                     ) -> Finish | Retry:
        facts = Facts(app, was, 1, (f"default/{target}",), owner=OWNER, identity=team,
                      stale=frozenset({f"default/{target}"} if resync else ()))
        return run(facts, Progress.start(was), Executor(fleet, OwnWrites()),
                   Sink(fleet.journal))

    end = reconcile_as(ApplicationState(), "a")
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    assert {(user, name) for user, _, name in fleet["a"].acted} == {
        (team.username, "x"), (team.username, "y"), (team.username, "z")}

    fleet["b"].forbid[team.username] = {"y"}  # b's RBAC does not let the team make y
    end = reconcile_as(end.state, "b")
    assert isinstance(end, Finish) and end.state is not None
    assert set(fleet["b"].objects) == {ref("x"), ref("z")}
    error = end.state.errors["default/b"]
    assert "forbidden to ServiceAccount team-a/deployer by cluster default/b's RBAC" in error
    assert "ConfigMap default/y: HTTP 403" in error and "default/x" not in error
    assert ref("y") not in end.state.applied["default/b"].objects  # not there
    assert end.retry  # tried again later
    assert set(fleet["a"].objects) == {ref("x"), ref("y"), ref("z")}  # the old copy stays
    assert not any(verb == "delete" for _, verb, _ in fleet["a"].acted)

    fleet["b"].forbid.clear()  # granted: the copy completes and the move ends
    end = reconcile_as(end.state, "b")
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    assert set(fleet["b"].objects) == {ref("x"), ref("y"), ref("z")} and not fleet["a"].objects
    assert {(user, verb) for user, verb, _ in fleet["a"].acted if verb == "delete"} == {
        (team.username, "delete")}  # removed as the team too

    fleet["b"].forbid[team.username] = {"y"}  # revoked: y stays (still in the manifest)
    end = reconcile_as(end.state, "b", resync=True)
    assert isinstance(end, Finish) and end.state is not None and "default/b" in end.state.errors
    assert ref("y") in fleet["b"].objects and ref("y") in end.state.applied["default/b"].objects

    # recorded, never made (a stop between the record and the creation), unreadable to
    # the team: looked up with berth's own credential, not waited for on removal
    fleet["b"].objects.pop(ref("y"))
    gone = App(1, deleting=True, bodies=app.bodies)
    facts = Facts(gone, end.state, 1, ("default/b",), owner=OWNER, identity=team)
    end = run(facts, Progress.start(end.state), Executor(fleet, OwnWrites()), Sink(fleet.journal))
    assert isinstance(end, Finish) and end.state is None and not fleet["b"].objects, end
