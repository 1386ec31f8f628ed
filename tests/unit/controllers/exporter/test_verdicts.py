"""Argo CD's Applications read into verdicts: those the ApplicationSet owns, matched by
their destination's name to the cluster berth exported under it; what they say, and
what is left out."""

from __future__ import annotations

from typing import Any

from berth.controllers.exporter.verdicts import deployed_by, verdict_of, verdicts
from berth.store.documents.export import ToolVerdict

CLUSTERS = {"a": "default/a", "b-x1y2z3w4": "team/b", "d": "default/d"}  # exported name → berth's


def application(name: str, dest: str, owner: str = "web", **status: Any) -> dict[str, Any]:
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": name, "namespace": "argocd", "ownerReferences": [
                {"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
                 "name": owner, "uid": "u"}]},
            "spec": {"destination": {"name": dest, "namespace": "shop"}},
            "status": status}


def test_each_cluster_has_the_word_of_the_application_its_application_set_made() -> None:
    apps = [
        application("web-a", "a", health={"status": "Healthy"},
                    sync={"status": "Synced", "revision": "abc"}),
        application("web-b", "b-x1y2z3w4", health={"status": "Progressing",
                                                   "message": "waiting for rollout"},
                    sync={"status": "OutOfSync", "revision": "abc"}),
        application("api-a", "a", owner="api", health={"status": "Degraded"}),  # another set's
        application("web-c", "c", health={"status": "Healthy"}),  # no cluster berth exported
        {**application("web-d", "", health={"status": "Healthy"}),  # by its label
         "metadata": {**application("web-d", "")["metadata"],
                      "labels": {"berth.io/cluster": "d"}}},
    ]
    assert verdicts(apps, "web", CLUSTERS) == {
        "default/a": ToolVerdict("web-a", "Healthy", "Synced", "abc"),
        "team/b": ToolVerdict("web-b", "Progressing", "OutOfSync", "abc",
                              "waiting for rollout"),
        "default/d": ToolVerdict("web-d", "Healthy")}


def test_nonsense_from_the_api_is_no_word_at_all() -> None:
    odd: list[Any] = [
        {"metadata": {"name": "x", "ownerReferences": "web"}},
        {"metadata": None, "spec": {"destination": {"name": "a"}}},
        application("web-a", "a", health="Healthy", sync=["Synced"]),
    ]
    said = verdicts(odd, "web", CLUSTERS)
    assert said == {"default/a": ToolVerdict("web-a")}  # neither Healthy nor Synced
    failed = application("web-a", "a", health={"status": "Degraded"},
                         operationState={"phase": "Failed", "message": "x" * 500})
    assert verdict_of(failed).message == "x" * 300


def test_a_misshapen_deployed_by_is_read_as_none() -> None:
    assert deployed_by({"tool": "argocd", "objects": [], "export": "e",
                        "applicationSet": "web"}) is not None
    assert deployed_by({"tool": 3}) is None
    assert deployed_by(None) is None
