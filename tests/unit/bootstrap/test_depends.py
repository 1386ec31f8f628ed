"""Dependencies at apply: a loop refused with the loop named (through stored
applications too), a missing dependency said, a reference nothing provides said."""

from __future__ import annotations

from typing import Any

import pytest

from berth.bootstrap import depends
from berth.bootstrap.load import Loaded, LoadErrors, to_document
from berth.bootstrap.write import plan, write
from berth_testkit.memory import MemoryStore


def application(name: str, *, on: tuple[str, ...] = (), manifest: list[dict[str, Any]] | None
                = None, namespace: str = "default") -> Loaded:
    """``on``: names, or ``namespace/name`` of another namespace's."""
    deps = [{"name": n.rpartition("/")[2], **({"namespace": n.partition("/")[0]}
                                               if "/" in n else {})} for n in on]
    spec: dict[str, Any] = {"manifest": manifest or [], "dependsOn": deps}
    return to_document(f"apps.yaml#{name}", {"api": "kubernetes", "kind": "Application",
                                             "metadata": {"name": name,
                                                          "namespace": namespace},
                                             "spec": spec})


def web(**pod: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"template": {"spec": {"containers": [{"name": "w", "image": "x"}],
                                           **pod}}}}


def config(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def test_a_loop_in_the_input_is_refused_and_named() -> None:
    errors, _ = depends.problems(MemoryStore(), [
        application("web", on=("api",)), application("api", on=("db",)),
        application("db", on=("web",))])
    assert errors == [f"apps.yaml#{n}: spec.dependsOn: a loop of dependencies: {loop}"
                      for n, loop in (("api", "api → db → web → api"),
                                      ("db", "db → web → api → db"),
                                      ("web", "web → api → db → web"))]


def test_a_loop_through_a_stored_application_is_refused_before_anything_is_written() -> None:
    store = MemoryStore()
    write(store, plan(store, [application("db", on=("web",))], force=False))
    with pytest.raises(LoadErrors, match=r"a loop of dependencies: web → db → web"):
        plan(store, [application("web", on=("db",))], force=False)


def test_a_chain_is_no_loop_and_a_missing_dependency_is_said_not_refused() -> None:
    errors, warnings = depends.problems(MemoryStore(), [
        application("web", on=("api", "cache")), application("api", on=("db",)),
        application("db")])
    assert errors == []
    assert warnings == ["apps.yaml#web: spec.dependsOn[1]: application default/cache does "
                        "not exist (its copies wait until it does)"]


def test_a_reference_another_application_provides_is_said_with_whom_to_depend_on() -> None:
    mounts = web(volumes=[{"name": "c", "configMap": {"name": "settings"}},
                          {"name": "o", "configMap": {"name": "extra", "optional": True}}],
                 serviceAccountName="default")
    _, warnings = depends.problems(MemoryStore(), [
        application("cfg", manifest=[config("settings")]),
        application("web", manifest=[mounts])])
    assert warnings == ["apps.yaml#web: spec.manifest[0] (Deployment web) uses ConfigMap "
                        "settings, which application default/cfg provides: name it in "
                        "spec.dependsOn to have it there first"]
    _, warnings = depends.problems(MemoryStore(), [
        application("cfg", manifest=[config("settings")]),
        application("web", on=("cfg",), manifest=[mounts])])
    assert warnings == []  # provided by a dependency


def test_a_reference_nothing_provides_is_said() -> None:
    reads = web(containers=[{"name": "w", "image": "x", "envFrom": [
        {"secretRef": {"name": "token"}}], "env": [{"name": "K", "valueFrom": {
            "configMapKeyRef": {"name": "flags", "key": "k"}}}]}])
    _, warnings = depends.problems(MemoryStore(), [
        application("web", manifest=[reads, config("flags")])])
    assert warnings == ["apps.yaml#web: spec.manifest[0] (Deployment web) uses Secret token, "
                        "which no application provides: it must exist on each cluster"]


def test_a_loop_through_another_namespace_is_refused_and_named() -> None:
    errors, _ = depends.problems(MemoryStore(), [
        application("web", on=("platform/db",)),
        application("db", on=("default/web",), namespace="platform")])
    assert "apps.yaml#web: spec.dependsOn: a loop of dependencies: web → platform/db → web" in (
        errors)


def test_a_reference_an_override_adds_counts_and_names_the_cluster() -> None:
    cluster = to_document("c.yaml#1", {"api": "kubernetes", "kind": "Cluster",
                                       "metadata": {"name": "eu", "namespace": "default"},
                                       "spec": {}})
    adds = to_document("o.yaml#1", {"api": "core", "kind": "Override",
                                    "metadata": {"name": "tokens", "namespace": "default"},
                                    "spec": {"applications": {"names": ["web"]}, "rules": [
                                        {"patch": {"object": {"kind": "Deployment",
                                                              "name": "web"}, "operations": [
                                            {"op": "add", "path":
                                             "/spec/template/spec/containers/0/envFrom",
                                             "value": [{"secretRef": {"name": "token"}}]}]}}]}})
    _, warnings = depends.problems(MemoryStore(), [cluster, adds,
                                                   application("web", manifest=[web()])])
    assert warnings == ["apps.yaml#web: spec.manifest[0] (Deployment web, as overrides make "
                        "it for cluster default/eu) uses Secret token, which no application "
                        "provides: it must exist on each cluster"]
