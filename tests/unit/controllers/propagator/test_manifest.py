"""The manifest as objects to apply: checks, marks and order."""

from __future__ import annotations

import pytest

from berth.controllers.propagator.kube import Kind
from berth.controllers.propagator.manifest import ManifestError, objects


def cm(name: str, **meta: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}


def test_objects_are_marked_and_go_in_apply_order() -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "a.b"}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    out = objects([deploy, cm("x", labels={"tier": "web"}), crd, ns], "default", "web", 1)
    assert [o["kind"] for o in out] == ["Namespace", "ConfigMap", "CustomResourceDefinition",
                                        "Deployment"]
    meta = out[1]["metadata"]
    assert meta["labels"] == {"tier": "web", "app.kubernetes.io/managed-by": "berth"}
    assert meta["annotations"] == {"berth.dev/application": "default/web",
                                   "berth.dev/generation": "1"}


def test_the_users_manifest_is_not_changed() -> None:
    original = cm("x", labels={"a": "b"})
    objects([original], "default", "web", 1)
    assert original == cm("x", labels={"a": "b"})


@pytest.mark.parametrize(("manifest", "message"), [
    (["text"], "spec.manifest[0]: not an object"),
    ([{"kind": "ConfigMap", "metadata": {"name": "x"}}], "spec.manifest[0].apiVersion: missing"),
    ([{"apiVersion": "v1", "metadata": {"name": "x"}}], "spec.manifest[0].kind: missing"),
    ([cm("x"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}],
     "spec.manifest[1].metadata.name: missing"),
    ([cm("x", labels=["a"])], "spec.manifest[0].metadata.labels: not a mapping"),
    ([cm("x"), cm("x")], "spec.manifest[1]: ConfigMap x appears twice"),
])
def test_malformed_manifests_name_the_field(manifest: list[object], message: str) -> None:
    with pytest.raises(ManifestError) as err:
        objects(manifest, "default", "web", 1)
    assert str(err.value) == message


def test_rest_paths() -> None:
    deployments = Kind("/apis/apps/v1", "deployments", namespaced=True)
    assert deployments.path("web", "team") == "/apis/apps/v1/namespaces/team/deployments/web"
    assert deployments.path() == "/apis/apps/v1/deployments"  # every namespace (watch)
    crds = Kind("/apis/apiextensions.k8s.io/v1", "customresourcedefinitions", namespaced=False)
    assert crds.path("a.b", None) == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b"


def test_a_wave_that_is_no_integer_is_refused_naming_the_object_and_annotation() -> None:
    with pytest.raises(ManifestError, match=r"spec.manifest\[1\].metadata.annotations"
                       r"\[argocd.argoproj.io/sync-wave\]: 'soon' is not an integer"):
        objects([cm("a"), cm("b", annotations={"argocd.argoproj.io/sync-wave": "soon"})],
                "default", "web", 1)
