"""What an Export writes, built from berth's documents: names, slices, the roles of a
move, a cluster's profile, and the Export document itself."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest

from berth.controllers.exporter.shapes import (
    DECISION_INDEX,
    DECISION_KEY,
    PER_SLICE,
    Decision,
    Placement,
    Role,
    argocd_config_map,
    base_name,
    cluster_name,
    kube_name,
    ocm_decisions,
    profile,
    sig_decisions,
)
from berth.controllers.exporter.target import Seen, _ours
from berth.controllers.exporter.views import (
    AppStatusView,
    BindingView,
    ClusterStatusView,
    ClusterView,
    ValueView,
    cluster_profile,
    exported_names,
    placement,
)
from berth.store import keys
from berth.store.credentials import APART, split
from berth.store.documents import Export
from berth.store.documents.validate import problems


@pytest.mark.parametrize(("text", "expected"), [
    ("default.web", "default.web"),
    ("Default.Web", "default.web-"),  # upper case: lowered, and a digest keeps it apart
    ("heat_zone_1", "heat-zone-1-"),
    ("a" * 70, "a" * 54 + "-"),
])
def test_kube_names(text: str, expected: str) -> None:
    name = kube_name(text)
    assert name.startswith(expected) and len(name) <= 63
    if expected.endswith("-"):
        assert len(name) == len(expected) + 8  # the digest
        assert kube_name(text) == name  # stable
    assert kube_name("Default.Web") != kube_name("default.web-")


def test_two_berth_names_never_share_a_kube_name() -> None:
    assert kube_name("a_b") != kube_name("a-b")
    assert base_name("x/web") != base_name("x.web/other")
    # a name that looks made is made too: it cannot meet the name made for another
    made = kube_name("Paris")
    assert made.startswith("paris-") and kube_name(made) != made


@pytest.mark.parametrize(("cid", "exported"), [
    ("default/paris", "paris"),
    ("eu/paris", "eu.paris"),
    ("default/eu.paris", "default.eu.paris"),  # a dot: the namespace says whose
    ("eu/eu.paris", "eu.eu.paris"),
    ("default/Paris", "paris-"),  # upper case: lowered, a digest keeps it apart
    ("eu/Heat_Zone", "eu.heat-zone-"),
])
def test_a_clusters_exported_name(cid: str, exported: str) -> None:
    name = cluster_name(cid)
    assert name == exported or (exported.endswith("-") and name.startswith(exported)
                                and len(name) == len(exported) + 8)


def test_clusters_of_two_namespaces_never_meet_in_one_exported_name() -> None:
    """#72 item 4: default/paris and eu/paris were both exported as ``paris``."""
    cids = [f"{ns}/{name}" for ns in ("default", "eu", "paris", "eu-west")
            for name in ("paris", "eu.paris", "Paris", "default.paris", "paris.eu",
                         "eu", "eu-west.paris", "paris-0123abcd")]
    names = [cluster_name(c) for c in cids]
    assert len(set(names)) == len(cids), sorted(names)


def test_a_cluster_without_an_exported_name_is_left_out_never_named_as_another() -> None:
    p = placement("default/web", _binding(["a", "b"]), _status({"a": True, "b": True}),
                  {"default/a": "a"})
    assert [d.cluster for d in p.decisions] == ["a"]
    assert p.unexported == ("default/b",)


def _placement(n: int) -> Placement:
    return Placement("default/web", tuple(
        Decision(f"c{i:03d}", Role.CURRENT, "score 1") for i in reversed(range(n))))


def test_slices_are_ordered_indexed_and_share_a_key() -> None:
    slices = sig_decisions("hub", "argocd", _placement(250))
    assert [len(s.body["decisions"]) for s in slices] == [100, 100, 50]
    assert [s.body["metadata"]["labels"][DECISION_INDEX] for s in slices] == ["0", "1", "2"]
    assert {s.body["metadata"]["labels"][DECISION_KEY] for s in slices} == {"default.web"}
    names = [d["clusterProfileRef"]["name"] for s in slices for d in s.body["decisions"]]
    assert names == sorted(names) and len(names) == 250
    assert [s.ref.name for s in slices] == ["default.web-0", "default.web-1", "default.web-2"]
    ocm = ocm_decisions("hub", _placement(250))
    assert [o.ref.name for o in ocm] == [f"default.web-decision-{i}" for i in (1, 2, 3)]
    assert all(o.status is not None and len(o.status["decisions"]) <= PER_SLICE for o in ocm)


def test_an_application_chosen_nowhere_keeps_one_empty_slice() -> None:
    (only,) = sig_decisions("hub", "argocd", _placement(0))
    assert only.body["decisions"] == []
    (ocm,) = ocm_decisions("hub", _placement(0))
    assert ocm.status == {"decisions": []}


def _binding(targets: list[str]) -> BindingView:
    return msgspec.convert({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"targets": [{"kind": "Cluster", "name": t, "namespace": "default"}
                             for t in targets]},
        "status": {"state": "Scheduled", "reason": "best of 3", "explanation": [
            {"candidate": f"Cluster/default/{t}", "score": 0.75, "scores": {"metrics": 0.75}}
            for t in targets]}}, BindingView)


def _status(copies: dict[str, bool]) -> AppStatusView:
    return msgspec.convert({"metadata": {"name": "web", "namespace": "default"},
                            "status": {"applied": {f"default/{c}": {"generation": 1,
                                                                    "new": not ok}
                                                   for c, ok in copies.items()}}},
                           AppStatusView)


NAMES = {"default/a": "a", "default/b": "b"}  # the clusters' exported names


def test_a_move_lists_both_clusters_saying_which_is_which() -> None:
    p = placement("default/web", _binding(["b"]), _status({"a": True, "b": False}), NAMES)
    roles = {d.cluster: d.role for d in p.decisions}
    assert roles == {"a": Role.LEAVING, "b": Role.ARRIVING}
    arriving = next(d for d in p.decisions if d.cluster == "b")
    assert arriving.text == "arriving: score 0.7500 (metrics=0.75); best of 3"
    done = placement("default/web", _binding(["b"]), _status({"b": True}), NAMES)
    assert [(d.cluster, d.role) for d in done.decisions] == [("b", Role.CURRENT)]
    first = placement("default/web", _binding(["a"]), None, NAMES)  # not applied yet
    assert [(d.cluster, d.role) for d in first.decisions] == [("a", Role.ARRIVING)]
    gone = placement("default/web", None, _status({"a": True}), NAMES)  # being deleted
    assert [(d.cluster, d.role) for d in gone.decisions] == [("a", Role.LEAVING)]


def test_a_profile_says_health_labels_and_metric_values() -> None:
    cluster = msgspec.convert({"metadata": {"name": "paris", "namespace": "eu",
                                            "labels": {"zone": "fr", "empty": ""}},
                               "spec": {"metrics": [{"name": "energy", "weight": 1},
                                                    {"name": "local", "weight": 1,
                                                     "namespaced": True},
                                                    {"name": "missing", "weight": 1}]}},
                              ClusterView)
    status = msgspec.convert({"metadata": {"name": "paris", "namespace": "eu"},
                              "status": {"state": "UNHEALTHY", "reason": "not ready (HTTP 500)",
                                         "version": "v1.36.3"}}, ClusterStatusView)
    at = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    values = {keys.metric_value_key("energy"): msgspec.convert(
        {"status": {"value": 0.25, "observed": at.isoformat()}}, ValueView),
        keys.metric_value_key("local", "eu"): msgspec.convert(
            {"status": {"value": 3.0}}, ValueView)}
    p = cluster_profile("eu/paris", "paris", cluster, status, values)
    assert (p.healthy, p.reason, p.message, p.version) == (
        "False", "Unhealthy", "not ready (HTTP 500)", "v1.36.3")
    props = {q.name: (q.value, q.observed) for q in p.properties}
    assert props == {"label.berth.io/zone": ("fr", None),
                     "metric.berth.io/energy": ("0.25", at),
                     "metric.berth.io/eu.local": ("3", None)}
    unknown = cluster_profile("eu/paris", "paris", cluster, None, {})
    assert (unknown.healthy, unknown.reason) == ("Unknown", "NotProbed")


def test_a_profile_lists_the_access_provider_with_where_the_cluster_is_never_a_credential(
) -> None:
    """With an Export's accessProvider, a push cluster's profile lists it, with the server
    and CA its status says (KEP-4322's accessProviders; the consumer's provider file
    brings the credential); a pull cluster's status says no endpoint: none listed."""
    cluster = msgspec.convert({"metadata": {"name": "paris", "namespace": "eu"}}, ClusterView)
    push = msgspec.convert({"metadata": {"name": "paris", "namespace": "eu"}, "status": {
        "state": "ONLINE", "endpoint": {"server": "https://paris:6443",
                                        "certificate-authority-data": "Q0E="}}},
        ClusterStatusView)
    p = cluster_profile("eu/paris", "paris", cluster, push, {}, "token-reader")
    status = profile("hub", "berth", p, datetime(2026, 12, 4, tzinfo=UTC)).status
    assert status is not None and status["accessProviders"] == [
        {"name": "token-reader", "cluster": {"server": "https://paris:6443",
                                             "certificate-authority-data": "Q0E="}}]
    none = profile("hub", "berth", cluster_profile("eu/paris", "paris", cluster, push, {}),
                   datetime(2026, 12, 4, tzinfo=UTC)).status
    assert none is not None and "accessProviders" not in none  # no provider named
    pull = msgspec.convert({"metadata": {"name": "paris", "namespace": "eu"}, "status": {
        "state": "ONLINE", "version": "v1.36.3"}}, ClusterStatusView)
    assert cluster_profile("eu/paris", "paris", cluster, pull, {}, "token-reader").access == ()


def test_what_berth_sets_is_compared_without_the_term() -> None:
    (w,) = ocm_decisions("hub", _placement(1))
    listed = {"apiVersion": "x", "kind": "PlacementDecision", "metadata": {
        **w.body["metadata"], "resourceVersion": "7", "uid": "u",
        "annotations": {**w.body["metadata"]["annotations"], "berth.io/term": "12"}},
        "status": w.status}
    assert _ours(listed) == _ours(w.body)
    seen = Seen.of(listed)
    assert (seen.rv, seen.term, seen.source) == ("7", 12, "app:default/web")
    assert Seen.of(argocd_config_map("hub", "cm").body).source == "argocd"


def _export(**spec: object) -> Export:
    return msgspec.convert({"api": "core", "kind": "Export", "metadata": {"name": "hub"},
                            "spec": {"kubeconfig": {"clusters": [], "current-context": "x"},
                                     **spec}}, Export)


@pytest.mark.parametrize(("spec", "said"), [
    ({"namespace": "Argo"}, "spec.namespace"),
    ({"shapes": []}, "spec.shapes: no shape"),
    ({"shapes": ["ClusterProfile", "ClusterProfile"]}, "named twice"),
    ({"shapes": ["PlacementDecision"], "argocd": {}}, "spec.argocd: Argo CD reads"),
    ({"clusterManager": "a b"}, "spec.clusterManager"),
    ({"accessProvider": "token reader"}, "spec.accessProvider"),
    ({"kubeconfig": {}}, "spec.kubeconfig"),
])
def test_an_export_is_refused_with_the_field_named(spec: dict[str, object], said: str) -> None:
    found = [str(p) for p in problems(_export(**spec))]
    assert any(said in p for p in found), found


def test_an_export_defaults_and_unknown_fields() -> None:
    doc = _export()
    assert problems(doc) == []
    assert [s.value for s in doc.spec.shapes] == ["ClusterProfile", "PlacementDecision",
                                                  "OCMPlacementDecision"]
    assert doc.spec.install_crds and doc.spec.namespace == "default"
    with pytest.raises(msgspec.ValidationError, match="installCrds"):
        msgspec.convert({"api": "core", "kind": "Export", "metadata": {"name": "x"},
                         "spec": {"kubeconfig": {}, "installCrds": False}}, Export)


def test_an_exports_credentials_are_kept_apart() -> None:
    doc = {"kind": "Export", "metadata": {"name": "hub"}, "spec": {"kubeconfig": {
        "current-context": "c", "clusters": [{"name": "c", "cluster": {"server": "https://h"}}],
        "users": [{"name": "u", "user": {"token": "t0k3n"}}]}}}
    public, creds = split("Export", doc)
    assert "t0k3n" not in repr(public) and creds is not None
    assert creds.users == [{"name": "u", "user": {"token": "t0k3n"}}]
    assert public["spec"]["kubeconfig"]["users"] == [{"name": "u"}]
    assert APART not in repr(public)  # a kubeconfig's users go whole, by name


def test_two_clusters_whose_digests_meet_are_never_both_exported() -> None:
    """Found by search: both names are ``clashingclusternamexyz-97ed3fbc``. The first
    given keeps it; the other is left out, saying whose it is."""
    first, second = "ClAshiNgclUsternamexyz", "ClaSHingcLuStErnamexyz"
    assert cluster_name(f"default/{first}") == cluster_name(f"default/{second}")
    views = [msgspec.convert({"metadata": {"name": n, "namespace": "default"}}, ClusterView)
             for n in (first, second, "paris")]
    names, clashes = exported_names(views)
    assert names == {f"default/{first}": "clashingclusternamexyz-97ed3fbc",
                     "default/paris": "paris"}
    assert list(clashes) == [f"default/{second}"]
    assert f"is cluster default/{first}'s too" in clashes[f"default/{second}"]
