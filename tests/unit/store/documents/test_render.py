"""Overrides rendered per cluster: each kind of rule, variables, the order, which rule won
a field and which lost, and a failure that names its rule."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
import pytest

from berth.store.documents import RESOURCE_TYPES
from berth.store.documents.overrides import GlobalOverride, Override
from berth.store.documents.render import (
    RenderError,
    Where,
    ordered,
    render,
    selects_application,
    selects_cluster,
    split_image,
)
from berth.store.documents.validate import problems

WEB: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 2, "template": {"spec": {
        "initContainers": [{"name": "init", "image": "busybox:1.36"}],
        "containers": [
            {"name": "app", "image": "registry.example:5000/team/web:1.0",
             "command": ["serve"], "args": ["--port", "80"],
             "env": [{"name": "MODE", "value": "prod"}, {"name": "OLD", "value": "x"}]},
            {"name": "sidecar", "image": "envoy@sha256:abc"}]}}}}
CM: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                      "data": {"region": "eu"}}
EU = Where("eu-1", "default", {"zone": "eu", "registry": "eu.registry.example"})


def override(rules: list[dict[str, Any]], *, name: str = "o", namespace: str | None = "default",
             kind: str = "Override", apps: dict[str, Any] | None = None,
             clusters: dict[str, Any] | None = None, generation: int = 1) -> Override:
    meta: dict[str, Any] = {"name": name, "generation": generation}
    if namespace:
        meta["namespace"] = namespace
    doc = {"kind": kind, "metadata": meta,
           "spec": {"applications": apps or {}, "clusters": clusters or {}, "rules": rules}}
    made = msgspec.convert(doc, GlobalOverride if kind == "GlobalOverride" else Override)
    assert not problems(made), problems(made)
    return made


def one(rules: list[dict[str, Any]], where: Where = EU) -> dict[str, Any]:
    out = render([copy.deepcopy(WEB)], [override(rules)], where)
    return out.bodies[0]


def containers(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = body["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*spec["initContainers"], *spec["containers"]]}


@pytest.mark.parametrize(("ref", "parts"), [
    ("busybox", ("", "busybox", "", "")),
    ("busybox:1.36", ("", "busybox", "1.36", "")),
    ("library/busybox", ("", "library/busybox", "", "")),
    ("registry.example:5000/team/web:1.0", ("registry.example:5000", "team/web", "1.0", "")),
    ("localhost/x@sha256:ab", ("localhost", "x", "", "sha256:ab")),
    ("ghcr.io/a/b:v1@sha256:cd", ("ghcr.io", "a/b", "v1", "sha256:cd")),
])
def test_image_references_split_into_their_parts(ref: str, parts: tuple[str, ...]) -> None:
    assert split_image(ref) == parts


def test_an_image_rule_changes_each_part_alone_in_every_container_and_init_container() -> None:
    c = containers(one([{"image": {"registry": "${cluster.labels.registry}"}}]))
    assert c["init"]["image"] == "eu.registry.example/busybox:1.36"  # initContainers too
    assert c["app"]["image"] == "eu.registry.example/team/web:1.0"
    assert c["sidecar"]["image"] == "eu.registry.example/envoy@sha256:abc"
    c = containers(one([{"image": {"tag": "2.0", "container": "app"}}]))
    assert c["app"]["image"] == "registry.example:5000/team/web:2.0"
    assert c["init"]["image"] == "busybox:1.36"  # another container: untouched
    c = containers(one([{"image": {"digest": "sha256:ff"}}]))
    assert c["app"]["image"] == "registry.example:5000/team/web:1.0@sha256:ff"


def test_command_args_and_env_per_container() -> None:
    c = containers(one([{"command": {"container": "app", "replace": ["run", "${cluster.name}"]}},
                        {"args": {"container": "app", "append": ["--zone=${cluster.labels.zone}"]}},
                        {"env": {"container": "app", "set": {"MODE": "eu", "NEW": "1"},
                                 "remove": ["OLD"]}}]))
    assert c["app"]["command"] == ["run", "eu-1"]
    assert c["app"]["args"] == ["--port", "80", "--zone=eu"]
    assert c["app"]["env"] == [{"name": "MODE", "value": "eu"}, {"name": "NEW", "value": "1"}]
    assert "env" not in c["sidecar"]


def test_labels_annotations_and_a_json_patch() -> None:
    out = render([copy.deepcopy(WEB), copy.deepcopy(CM)], [override([
        {"labels": {"set": {"zone": "${cluster.labels.zone}"}, "remove": ["app"]}},
        {"annotations": {"set": {"note": "$${not a variable}"}}},
        {"patch": {"object": {"kind": "Deployment", "name": "web"}, "operations": [
            {"op": "replace", "path": "/spec/replicas", "value": 5},
            {"op": "add", "path": "/spec/template/spec/containers/0/ports", "value": [
                {"containerPort": 80}]}]}},
        {"patch": {"object": {"kind": "ConfigMap", "name": "cfg"}, "operations": [
            {"op": "test", "path": "/data/region", "value": "eu"},
            {"op": "copy", "from": "/data/region", "path": "/data/copied"},
            {"op": "move", "from": "/data/copied", "path": "/data/moved"},
            {"op": "remove", "path": "/data/region"}]}}])], EU)
    web, cm = out.bodies
    assert web["metadata"]["labels"] == {"zone": "eu"}
    assert cm["metadata"]["annotations"] == {"note": "${not a variable}"}
    assert web["spec"]["replicas"] == 5
    assert web["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 80}]
    assert cm["data"] == {"moved": "eu"}
    assert out.fingerprint and out.by == ("Override default/o@1",)


def test_the_later_wins_and_the_loser_is_named() -> None:
    """Cluster-wide before namespaced, the less specific first, then by name."""
    everyone = override([{"image": {"tag": "global"}}], name="z", namespace=None,
                        kind="GlobalOverride")
    by_labels = override([{"image": {"tag": "labels"}}], name="b",
                         apps={"matchLabels": {"tier": "web"}})
    by_name = override([{"image": {"tag": "named"}}], name="a", apps={"names": ["web"]})
    assert [o.metadata.name for o in ordered([by_name, by_labels, everyone])] == ["z", "b", "a"]
    out = render([copy.deepcopy(WEB)], [by_name, everyone, by_labels], EU)
    assert containers(out.bodies[0])["app"]["image"].endswith(":named")
    change = next(c for c in out.changes if c.path.endswith("/containers/0/image"))
    assert change.rule == "Override default/a rule 1"
    assert change.replaced == ("GlobalOverride z rule 1", "Override default/b rule 1")


def test_selection_of_applications_and_clusters() -> None:
    o = override([{"labels": {"set": {"x": "1"}}}], apps={"matchLabels": {"tier": "web"}},
                 clusters={"matchExpressions": [{"key": "zone", "operator": "In",
                                                 "values": ["eu"]}]})
    assert selects_application(o, "default", "web", {"tier": "web"})
    assert not selects_application(o, "default", "web", {})
    assert not selects_application(o, "other", "web", {"tier": "web"})  # its namespace only
    assert selects_cluster(o, EU) and not selects_cluster(o, Where("us-1", "default", {}))
    named = override([{"labels": {"set": {"x": "1"}}}], clusters={"names": ["default/us-1"]})
    assert selects_cluster(named, Where("us-1", "default")) and not selects_cluster(named, EU)
    assert render([WEB], [o], Where("us-1", "default", {})).fingerprint == ""  # as written


def test_a_missing_label_or_path_fails_naming_the_rule() -> None:
    with pytest.raises(RenderError, match=r"Override default/o rule 1 \(eu-registry\): cluster "
                       r"default/us-1 has no label 'registry'"):
        render([WEB], [override([{"name": "eu-registry",
                                  "image": {"registry": "${cluster.labels.registry}"}}])],
               Where("us-1", "default", {}))
    with pytest.raises(RenderError, match="rule 1: Deployment web: path /spec/nope does not"):
        render([WEB], [override([{"patch": {"object": {"kind": "Deployment", "name": "web"},
                                            "operations": [{"op": "remove",
                                                            "path": "/spec/nope"}]}}])], EU)
    with pytest.raises(RenderError, match="the manifest has no Deployment api"):
        render([WEB], [override([{"patch": {"object": {"kind": "Deployment", "name": "api"},
                                            "operations": [{"op": "remove",
                                                            "path": "/spec"}]}}])], EU)


def test_rules_that_make_no_sense_are_refused_at_load() -> None:
    def said(rules: list[dict[str, Any]]) -> list[str]:
        doc = msgspec.convert({"kind": "Override", "metadata": {"name": "o", "namespace": "d"},
                               "spec": {"rules": rules}}, RESOURCE_TYPES["Override"])
        return [str(p) for p in problems(doc)]

    assert said([]) == ["spec.rules: no rules: an override must change something"]
    assert said([{"image": {"tag": "1"}, "env": {"set": {"A": "1"}}}]) == [
        "spec.rules[0]: give exactly one of image, command, args, env, labels, annotations, "
        "patch (this gives image, env)"]
    assert said([{"image": {}}]) == [
        "spec.rules[0].image: sets nothing: give registry, repository, tag or digest"]
    assert "unknown variable ${cluster.zone}" in said([{"labels": {"set": {
        "z": "${cluster.zone}"}}}])[0]
    assert said([{"patch": {"object": {"kind": "X", "name": "x"}, "operations": [
        {"op": "add", "path": "spec", "value": 1}]}}]) == [
        "spec.rules[0].patch.operations[0].path: 'spec' is not a JSON pointer (it starts "
        "with '/')"]


def test_a_secrets_data_is_not_in_the_fingerprint() -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
              "data": {"password": "c2VjcmV0"}}
    o = override([{"labels": {"set": {"x": "1"}}}])
    one = render([copy.deepcopy(WEB), copy.deepcopy(secret)], [o], EU)
    other = render([copy.deepcopy(WEB), {**secret, "data": {"password": "b3RoZXI="}}], [o], EU)
    assert one.fingerprint == other.fingerprint  # no hash of a secret in a status
    assert one.bodies[1]["data"] == {"password": "c2VjcmV0"}  # but applied as it is
