"""A copy's objects in the order they need (docs/order.md): the order itself, what each
step waits for, and the executor applying and removing a copy step by step against an
in-memory cluster. The same on real clusters: tests/integration/test_order.py."""

from __future__ import annotations

from typing import Any

import pytest

from berth.controllers.propagator import order
from berth.controllers.propagator.drift import OwnWrites
from berth.controllers.propagator.execute import Executor
from berth.controllers.propagator.health import (
    HEALTHY,
    JOB_DONE,
    PROGRESSING,
    UNHEALTHY,
    UNKNOWN,
    Health,
)
from berth.controllers.propagator.kube import Kind
from berth.controllers.propagator.plan import App, Facts, Finish, Progress
from berth.controllers.propagator.reconcile import run
from berth.store.documents import ApplicationState
from berth_testkit.fakes.propagator import Fleet, Sink

pytestmark = pytest.mark.unit
OWNER = "default/app"


def obj(kind: str, name: str, api: str = "v1", **annotations: str) -> dict[str, Any]:
    return {"apiVersion": api, "kind": kind,
            "metadata": {"name": name, "annotations": {"berth.dev/application": OWNER,
                                                       **annotations}}}


def kinds(bodies: list[dict[str, Any]]) -> list[str]:
    return [b["metadata"]["name"] for b in bodies]


def test_kinds_go_in_argo_cds_order_in_three_stages_custom_resources_last() -> None:
    manifest = [obj("Widget", "w", "example.com/v1"), obj("Deployment", "web", "apps/v1"),
                obj("Ingress", "in", "networking.k8s.io/v1"), obj("Service", "svc"),
                obj("CustomResourceDefinition", "crd", "apiextensions.k8s.io/v1"),
                obj("Job", "migrate", "batch/v1"), obj("ConfigMap", "cfg"),
                obj("Secret", "s"), obj("ServiceAccount", "sa"), obj("Namespace", "ns"),
                obj("ClusterRole", "role", "rbac.authorization.k8s.io/v1"),
                obj("StatefulSet", "db", "apps/v1")]
    assert kinds(order.ordered(manifest)) == [
        "ns", "sa", "s", "cfg", "crd", "role", "svc",  # what others need
        "web", "db", "migrate",  # workloads (Deployment, StatefulSet, Job: Argo CD's order)
        "in", "w"]  # what uses them: an Ingress, then kinds Argo CD does not name
    assert [order.stage(k) for k in ("PersistentVolumeClaim", "CronJob", "APIService",
                                     "MutatingWebhookConfiguration")] == [
        order.NEEDED, order.WORKLOADS, order.USERS, order.USERS]


def test_a_wave_orders_within_its_stage_and_berths_own_annotation_wins() -> None:
    manifest = [obj("Deployment", "web", "apps/v1"),
                obj("StatefulSet", "db", "apps/v1", **{"argocd.argoproj.io/sync-wave": "-1"}),
                obj("ConfigMap", "late", **{"berth.dev/wave": "5",
                                            "argocd.argoproj.io/sync-wave": "-5"}),
                obj("ConfigMap", "cfg")]
    assert kinds(order.ordered(manifest)) == ["cfg", "late", "db", "web"]
    assert order.named((order.WORKLOADS, -1)) == "workloads, wave -1"
    assert order.named((order.NEEDED, 0)) == "what others need"
    with pytest.raises(order.WaveError, match=r"berth.dev/wave\]: 'x' is not an integer"):
        order.wave({"berth.dev/wave": "x"})


# Argo CD's own cases (gitops-engine pkg/sync/sync_tasks_test.go), as berth answers them.

def test_argo_cds_kind_order_namespace_first_apiservice_last_named_unknown_after() -> None:
    # Test_syncTasks_kindOrder
    assert order.rank("Namespace") == 0
    assert order.rank("APIService") == len(order.KINDS) - 1
    assert order.rank("MyCRD") == len(order.KINDS)


def test_argo_cds_sort_of_kinds_and_waves() -> None:
    # TestSortSyncTask, its kinds: ConfigMap, PersistentVolume, Service, then Pod. Its
    # waves: Argo CD orders by wave first; berth by stage first, so a wave orders only
    # within a stage (a Pod in wave -1 still comes after a ConfigMap in wave 0). Its
    # names: Argo CD orders equal kinds by name; berth keeps the manifest's order, as
    # Helm's kind sorter does.
    unsorted = [obj("Pod", "p"), obj("Service", "s"), obj("PersistentVolume", "pv"),
                obj("ConfigMap", "c"), obj("ConfigMap", "b"),
                obj("ConfigMap", "late", **{"argocd.argoproj.io/sync-wave": "1"}),
                obj("ConfigMap", "early", **{"argocd.argoproj.io/sync-wave": "-1"}),
                obj("Pod", "first", **{"argocd.argoproj.io/sync-wave": "-1"})]
    assert kinds(order.ordered(unsorted)) == ["early", "c", "b", "pv", "s", "late", "first",
                                              "p"]


def test_argo_cds_namespace_before_a_custom_resource() -> None:
    # TestSyncNamespaceAgainstCRD
    assert kinds(order.ordered([obj("Workflow", "wf", "argoproj.io/v1"),
                                obj("Namespace", "ns")])) == ["ns", "wf"]


def test_argo_cds_namespace_moves_before_what_lives_in_it_whatever_its_wave() -> None:
    # TestSyncTasksSort_NamespaceAndObjectInNamespace: a Namespace takes the earliest
    # step of what the manifest puts in it (there: PreSync hooks, which berth has not)
    def inside(kind: str, name: str, ns: str, wave: str) -> dict[str, Any]:
        body = obj(kind, name, **{"argocd.argoproj.io/sync-wave": wave})
        body["metadata"]["namespace"] = ns
        return body

    one = obj("Namespace", "one", **{"argocd.argoproj.io/sync-wave": "1"})
    two = obj("Namespace", "two", **{"argocd.argoproj.io/sync-wave": "2"})
    unsorted = [inside("Secret", "s1", "one", "-3"), inside("Secret", "s2", "two", "-2"),
                one, two]
    assert kinds(order.ordered(unsorted)) == ["one", "s1", "two", "s2"]


def test_argo_cds_crd_before_its_custom_resource() -> None:
    # TestSyncTasksSort_CRDAndCR (there the resource is a PreSync hook: berth's stages
    # put a custom resource after every CRD whatever its wave)
    cr = obj("Workflow", "wf", "argoproj.io/v1", **{"berth.dev/wave": "-9"})
    crd = obj("CustomResourceDefinition", "workflows.argoproj.io", "apiextensions.k8s.io/v1")
    assert kinds(order.ordered([cr, crd])) == ["workflows.argoproj.io", "wf"]


@pytest.mark.parametrize(("kind", "health", "ready"), [
    ("ConfigMap", Health(UNKNOWN), True),  # applied is enough
    ("PersistentVolumeClaim", Health(PROGRESSING, "Pending"), True),  # waits for a consumer
    ("Service", Health(PROGRESSING, "no ingress yet"), True),  # a load balancer's address
    ("CustomResourceDefinition", Health(PROGRESSING, "not Established"), False),
    ("CustomResourceDefinition", Health(HEALTHY), True),
    ("Namespace", Health(PROGRESSING, "Terminating"), False),
    ("Deployment", Health(PROGRESSING, "1/2 available"), False),
    ("Deployment", Health(UNHEALTHY, "CrashLoopBackOff"), False),
    ("Deployment", Health(HEALTHY), True),
    ("Job", Health(HEALTHY, "running"), False),  # a Job: complete, as Argo CD waits
    ("Job", JOB_DONE, True),
    ("Widget", Health(PROGRESSING), False),
    ("Widget", Health(HEALTHY), True),
])
def test_what_a_step_waits_for_in_the_one_before(kind: str, health: Health,
                                                  ready: bool) -> None:
    assert order.ready(kind, health) is ready


def reconcile(fleet: Fleet, app: App, was: ApplicationState) -> Finish:
    facts = Facts(app, was, app.generation, ("default/a",), owner=OWNER)
    end = run(facts, Progress.start(was), Executor(fleet, OwnWrites()), Sink(fleet.journal))
    assert isinstance(end, Finish)
    return end


def operator_fleet() -> Fleet:
    fleet = Fleet().add("a")
    fleet["a"].kinds[("example.com/v1", "Widget")] = Kind("/apis/example.com/v1", "widgets",
                                                          True)
    return fleet


MANIFEST = (obj("Widget", "w", "example.com/v1"), obj("Deployment", "operator", "apps/v1"),
            obj("ConfigMap", "cfg"))


def test_a_step_is_applied_once_the_one_before_is_ready_and_the_copy_says_what_it_waits_for(
) -> None:
    fleet = operator_fleet()
    fleet["a"].judged["operator"] = Health(PROGRESSING, "0/1 replicas available")
    app = App(1, bodies=tuple(order.ordered(MANIFEST)))
    end = reconcile(fleet, app, ApplicationState())
    assert end.state is not None
    assert [j for j in fleet.journal if j[0] == "apply"] == [
        ("apply", "a", "cfg"), ("apply", "a", "operator")]  # the Widget waits
    have = end.state.applied["default/a"]
    assert have.waiting == (
        "what uses them waits for Deployment default/operator "
        "(Progressing: 0/1 replicas available)")
    assert [o.name for o in have.objects] == ["cfg", "operator"]
    assert end.state.state == "PROGRESSING"
    assert (have.health, have.reason) == ("Progressing", have.waiting)
    # still not ready: applied again (it waits on), nothing more
    fleet.journal.clear()
    end = reconcile(fleet, app, end.state)
    assert ("apply", "a", "w") not in fleet.journal and end.state is not None
    assert end.state.applied["default/a"].waiting
    # the operator available: the Widget goes, and the copy is RUNNING
    fleet["a"].judged["operator"] = Health(HEALTHY)
    end = reconcile(fleet, app, end.state)
    assert end.state is not None and end.state.state == "RUNNING"
    assert fleet.journal[-1] == ("apply", "a", "w")
    assert not end.state.applied["default/a"].waiting


def test_a_new_generation_leaves_what_waits_as_it_was_and_prunes_nothing_until_done() -> None:
    fleet = operator_fleet()
    first = (*MANIFEST, obj("ConfigMap", "old"))
    end = reconcile(fleet, App(1, bodies=tuple(order.ordered(first))), ApplicationState())
    assert end.state is not None and end.state.state == "RUNNING"
    fleet["a"].judged["operator"] = Health(PROGRESSING, "rolling")
    fleet.journal.clear()
    end = reconcile(fleet, App(2, bodies=tuple(order.ordered(MANIFEST))), end.state)
    assert end.state is not None and ("delete", "a", "old") not in fleet.journal
    assert [o.name for o in end.state.applied["default/a"].objects] == [
        "cfg", "operator", "w", "old"]  # the Widget of generation 1 and the dropped one stay
    fleet["a"].judged["operator"] = Health(HEALTHY)
    end = reconcile(fleet, App(2, bodies=tuple(order.ordered(MANIFEST))), end.state)
    assert end.state is not None and end.state.state == "RUNNING"
    assert fleet.journal[-2:] == [("apply", "a", "w"), ("delete", "a", "old")]


def test_removal_goes_in_reverse_and_a_step_waits_until_the_one_after_it_is_gone() -> None:
    fleet = operator_fleet()
    app = App(1, bodies=tuple(order.ordered(MANIFEST)))
    end = reconcile(fleet, app, ApplicationState())
    fleet["a"].held.add("w")  # its finalizer needs the operator to run
    fleet.journal.clear()
    gone = App(1, deleting=True)
    assert end.state is not None
    end = reconcile(fleet, gone, end.state)
    assert fleet.journal == [("delete", "a", "w")] and end.retry
    assert end.state is not None and end.state.errors["default/a"] == (
        "removing in order: workloads waits for Widget default/w to go")
    assert {o.name for o in end.state.applied["default/a"].objects} == {"w", "operator", "cfg"}
    fleet["a"].held.clear()
    fleet["a"].objects = {r: b for r, b in fleet["a"].objects.items() if r.name != "w"}
    end = reconcile(fleet, gone, end.state)
    assert fleet.journal[-2:] == [("delete", "a", "operator"), ("delete", "a", "cfg")]
    assert end.remove and not fleet["a"].objects


def test_a_job_a_waiting_step_had_not_reached_runs_again_when_its_step_comes() -> None:
    fleet = Fleet().add("a")
    db = obj("Deployment", "db", "apps/v1", **{"berth.dev/wave": "-1"})
    migrate = obj("Job", "migrate", "batch/v1")
    bodies = tuple(order.ordered([migrate, db]))
    end = reconcile(fleet, App(1, bodies=bodies), ApplicationState())
    assert end.state is not None and end.state.state == "RUNNING"
    fleet["a"].judged["db"] = Health(PROGRESSING, "rolling")
    fleet.journal.clear()
    end = reconcile(fleet, App(2, bodies=bodies), end.state)
    assert end.state is not None and ("apply", "a", "migrate") not in fleet.journal
    assert [r.name for r in end.state.applied["default/a"].rerun] == ["migrate"]
    end = reconcile(fleet, App(2, bodies=bodies), end.state)  # still waits: kept as it is
    assert end.state is not None and ("delete", "a", "migrate") not in fleet.journal
    fleet["a"].judged["db"] = Health(HEALTHY)
    end = reconcile(fleet, App(2, bodies=bodies), end.state)
    assert fleet.journal[-2:] == [("delete", "a", "migrate"), ("apply", "a", "migrate")]
    assert end.state is not None and not end.state.applied["default/a"].rerun


def test_a_later_step_the_cluster_would_not_delete_keeps_every_earlier_one() -> None:
    fleet = operator_fleet()
    end = reconcile(fleet, App(1, bodies=tuple(order.ordered(MANIFEST))), ApplicationState())
    assert end.state is not None
    fleet["a"].stuck.add("w")
    fleet.journal.clear()
    end = reconcile(fleet, App(1, deleting=True), end.state)
    assert fleet.journal == [] and end.retry and end.state is not None
    assert "could not remove" in end.state.errors["default/a"]
    assert {o.name for o in end.state.applied["default/a"].objects} == {"w", "operator", "cfg"}


def test_a_kind_its_own_crd_defines_not_yet_served_is_waited_for_not_an_error() -> None:
    fleet = Fleet().add("a")
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com",
                        "annotations": {"berth.dev/application": OWNER}},
           "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}}}
    widget = obj("Widget", "w", "example.com/v1")
    fleet["a"].unlisted.add("Widget")  # Established, not yet in the API's discovery
    app = App(1, bodies=tuple(order.ordered([widget, crd])))
    end = reconcile(fleet, app, ApplicationState())
    assert end.state is not None and not end.state.errors
    assert end.state.applied["default/a"].waiting.startswith(
        "what uses them waits for the cluster to serve its kind")
    fleet["a"].unlisted.clear()
    end = reconcile(fleet, app, end.state)
    assert end.state is not None and end.state.state == "RUNNING"
    # a kind nothing in the copy defines is an error, as before
    fleet["a"].unlisted.add("Gadget")
    fleet["a"].kinds[("example.com/v1", "Gadget")] = fleet["a"].kinds[("example.com/v1",
                                                                        "Widget")]
    lone = App(1, bodies=(obj("Gadget", "g", "example.com/v1"),))
    end = reconcile(fleet, lone, ApplicationState())
    assert end.state is not None and "serves no kind Gadget" in end.state.reason
