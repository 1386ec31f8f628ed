"""Applications another tool deploys (``spec.deployedBy``): berth reads their copies and
judges them, never writes or removes them, and a move drops the old cluster's record —
which is what makes the exporter drop it from the decisions — only once the new copy is
available by berth's rules and the tool's word."""

from __future__ import annotations

from berth.controllers.propagator.deployed import observed_refs, unready
from berth.controllers.propagator.drift import OwnWrites
from berth.controllers.propagator.execute import Executor
from berth.controllers.propagator.health import PROGRESSING, Health
from berth.controllers.propagator.plan import App, Facts, Finish, Progress
from berth.controllers.propagator.reconcile import run
from berth.controllers.runtime import Retry
from berth.store.documents import ApplicationState, DeployedBy, DeployedObject, KubeObjectRef
from berth.store.documents.export import ToolVerdict
from berth_testkit.fakes.propagator import Fleet, Sink

OWNER = "shop/web"
WEB = KubeObjectRef("apps/v1", "Deployment", "web", "shop")
BY = DeployedBy("argocd", [DeployedObject("apps/v1", "Deployment", "web", "shop")],
                export="argocd", application_set="web")


def reconcile(fleet: Fleet, app: App, was: ApplicationState, targets: tuple[str, ...],
              unready: dict[str, str] | None = None) -> tuple[Finish | Retry, Sink]:
    sink = Sink(fleet.journal)
    ids = tuple(f"default/{t}" for t in targets)
    facts = Facts(app, was, app.generation, ids, owner=OWNER,
                  stale=frozenset(c for c, a in was.applied.items() if a.observed),
                  unready=unready or {})
    return run(facts, Progress.start(was), Executor(fleet, OwnWrites()), sink), sink


def deployed(fleet: Fleet, cluster: str) -> None:
    """The tool deploys the copy on ``cluster``."""
    fleet[cluster].place(WEB, "")


def test_the_objects_named_are_the_copy_and_a_tool_is_named_whole() -> None:
    assert observed_refs(BY) == (WEB,)
    assert observed_refs(None) == ()
    problems = dict(DeployedBy("argocd", []).problems(manifest=True))
    assert set(problems) == {"", ".objects", ".export", ".applicationSet"}
    twice = DeployedBy("flux", [DeployedObject("v1", "Service", "s")] * 2, revision="x")
    assert dict(twice.problems(manifest=False)) == {
        ".objects[1]": "Service /s is named twice",
        "": "export, applicationSet and revision are Argo CD's: not for tool 'flux'"}


def test_argo_cds_word_is_healthy_synced_and_at_the_revision_asked() -> None:
    said = {"default/a": ToolVerdict("web-a", "Healthy", "Synced", "abc")}
    assert unready(BY, said, "default/a") == ""
    assert "has no Application for cluster default/b yet" in unready(BY, said, "default/b")
    assert "has no Application" in unready(BY, None, "default/a")
    assert unready(BY, {"default/a": ToolVerdict("web-a", "Degraded", "Synced", "abc",
                                                 "Deployment web: 0/2")}, "default/a") == (
        "Argo CD's Application web-a is Degraded: Deployment web: 0/2")
    assert unready(BY, {"default/a": ToolVerdict("web-a", "Healthy", "OutOfSync")},
                   "default/a") == "Argo CD's Application web-a is OutOfSync"
    pinned = DeployedBy("argocd", BY.objects, export="argocd", application_set="web",
                        revision="def")
    assert unready(pinned, said, "default/a") == (
        "Argo CD's Application web-a is synced at abc, not def")


def test_a_copy_is_read_never_written_and_not_there_yet_is_on_its_way() -> None:
    fleet = Fleet().add("a")
    app = App(1, observe=(WEB,))
    end, _ = reconcile(fleet, app, ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    have = end.state.applied["default/a"]
    assert have.observed and have.objects == [WEB] and have.health == PROGRESSING
    assert end.state.state == "PROGRESSING" and "Deployment shop/web not there yet" in (
        end.state.reason)
    assert end.recheck is not None  # judged again: no watch tells of another tool's objects
    deployed(fleet, "a")
    end, _ = reconcile(fleet, app, end.state, ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    assert not [j for j in fleet.journal if j[0] in ("apply", "delete")]


def test_a_move_drops_the_old_record_only_once_the_new_copy_and_the_tool_say_available(
        ) -> None:
    fleet = Fleet().add("a", "b")
    app = App(1, observe=(WEB,))
    deployed(fleet, "a")
    end, _ = reconcile(fleet, app, ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    # moved to b: not there yet, so a stays recorded (the exporter keeps it, leaving)
    end, _ = reconcile(fleet, app, end.state, ("b",))
    assert isinstance(end, Finish) and end.state is not None
    assert sorted(end.state.applied) == ["default/a", "default/b"]
    assert end.state.state == "MIGRATING" and end.state.applied["default/b"].new
    # there, by berth's rules, but Argo CD does not call it Healthy yet: a still stays
    deployed(fleet, "b")
    waiting = {"default/b": "Argo CD's Application web-b is Progressing"}
    end, _ = reconcile(fleet, app, end.state, ("b",), waiting)
    assert isinstance(end, Finish) and end.state is not None
    assert sorted(end.state.applied) == ["default/a", "default/b"]
    assert "web-b is Progressing" in end.state.reason and end.state.applied["default/b"].new
    # both say available: a's record goes, and nothing of a's was deleted by berth
    end, _ = reconcile(fleet, app, end.state, ("b",))
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    assert list(end.state.applied) == ["default/b"]
    assert WEB in fleet["a"].objects and not [j for j in fleet.journal if j[0] == "delete"]


def test_a_copy_judged_unavailable_by_berth_holds_the_move_whatever_the_tool_says() -> None:
    fleet = Fleet().add("a", "b")
    app = App(1, observe=(WEB,))
    deployed(fleet, "a")
    deployed(fleet, "b")
    fleet["b"].judged["web"] = Health(PROGRESSING, "1/2 replicas available")
    end, _ = reconcile(fleet, app, ApplicationState(), ("a",))
    assert isinstance(end, Finish) and end.state is not None
    end, _ = reconcile(fleet, app, end.state, ("b",))
    assert isinstance(end, Finish) and end.state is not None
    assert sorted(end.state.applied) == ["default/a", "default/b"]
    assert "1/2 replicas available" in end.state.reason


def test_deleting_forgets_the_copies_and_removes_nothing() -> None:
    fleet = Fleet().add("a", "b")
    app = App(1, observe=(WEB,))
    deployed(fleet, "a")
    deployed(fleet, "b")
    end, _ = reconcile(fleet, app, ApplicationState(), ("a", "b"))
    assert isinstance(end, Finish) and end.state is not None and end.state.state == "RUNNING"
    end, _ = reconcile(fleet, App(1, deleting=True, observe=(WEB,)), end.state, ("a", "b"))
    assert isinstance(end, Finish) and end.remove
    assert WEB in fleet["a"].objects and WEB in fleet["b"].objects
    assert not [j for j in fleet.journal if j[0] == "delete"]
