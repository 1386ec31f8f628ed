"""ClusterSet and NamespacePolicy as `berth apply` reads them (docs/teams.md): what a set
holds, and each mistake named by its field."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from berth.store.documents import ClusterSet, NamespacePolicy
from berth.store.documents.resources import Resources
from berth.store.documents.validate import problems


def cluster_set(**spec: Any) -> ClusterSet:
    return msgspec.json.decode(msgspec.json.encode({
        "api": "core", "kind": "ClusterSet", "metadata": {"name": "shared"}, "spec": spec}),
        type=ClusterSet)


def policy(name: str = "team-a", **spec: Any) -> NamespacePolicy:
    return msgspec.json.decode(msgspec.json.encode({
        "api": "core", "kind": "NamespacePolicy", "metadata": {"name": name}, "spec": spec}),
        type=NamespacePolicy)


def test_a_set_holds_the_clusters_of_its_namespaces_that_it_chooses() -> None:
    every = cluster_set(namespaces=["platform", "gpu"]).spec
    assert every.holds("platform/a", {}) and every.holds("gpu/b", {"x": "y"})
    assert not every.holds("team-a/a", {})
    eu = cluster_set(namespaces=["platform"], clusters={
        "matchLabels": {"region": "eu"}, "matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["test"]}]}).spec
    assert eu.holds("platform/a", {"region": "eu"})
    assert not eu.holds("platform/a", {"region": "eu", "tier": "test"})
    assert not eu.holds("platform/a", {"region": "us"})
    named = cluster_set(namespaces=["platform"], clusters={"names": ["a", "platform/b"]}).spec
    assert [c for c in ("platform/a", "platform/b", "platform/c") if named.holds(c, {})] == [
        "platform/a", "platform/b"]


@pytest.mark.parametrize(("doc", "said"), [
    (cluster_set(namespaces=[]), "spec.namespaces: no namespace"),
    (cluster_set(namespaces=["Team_A"]), "spec.namespaces[0]: 'Team_A' is not a namespace"),
    (cluster_set(namespaces=["p"], clusters={"matchExpressions": [
        {"key": "k", "operator": "In"}]}),
     "spec.clusters.matchExpressions[0].values: In needs at least one value"),
    (policy("Team.A"), "metadata.name: 'Team.A' is not a namespace name"),
    (policy(clusterSets=["a b"]), "spec.clusterSets[0]: invalid name 'a b'"),
    (policy(priorityClasses=["-x"]), "spec.priorityClasses[0]: invalid name '-x'"),
    (policy(maxPriority=2_000_000_000), "spec.maxPriority: 2000000000 is beyond"),
    (policy(kinds=["apps/"]), "spec.kinds[0]: 'apps/' is not a kind"),
    (policy(kinds=["a/b/C"]), "spec.kinds[0]: 'a/b/C' is not a kind"),
    (policy(targetNamespaces=["Kube_System"]),
     "spec.targetNamespaces[0]: 'Kube_System' is not a Kubernetes namespace name"),
])
def test_each_mistake_is_named_by_its_field(doc: ClusterSet | NamespacePolicy,
                                             said: str) -> None:
    found = [str(p) for p in problems(doc)]
    assert any(f.startswith(said) for f in found), found


@pytest.mark.parametrize(("quota", "said"), [
    ({"cpu": "x"}, "quota.cpu: 'x' is not a quantity"),
    ({"memory": "-1Gi"}, "quota.memory: '-1Gi' is below 0"),
    ({"pods": True}, "Expected `int | str`, got `bool` - at `$.spec.quota[...]`"),
])
def test_a_quota_that_is_not_one_is_refused_naming_its_resource(
        quota: dict[str, Any], said: str) -> None:
    """Refused where any process decodes the policy: a key that holds it stands for the
    narrowest policy (tests/unit/controllers/scheduler/test_tenancy.py)."""
    with pytest.raises(msgspec.ValidationError) as refused:
        policy(quota=quota)
    assert said in str(refused.value)


def test_a_quota_limits_the_resources_it_names_alone() -> None:
    limit = policy(quota={"cpu": "2", "nvidia.com/gpu": 1}).spec.limit
    assert limit is not None and limit.names == ("cpu", "nvidia.com/gpu")
    asked = Resources.of({"cpu": "1500m", "memory": "64Gi", "nvidia.com/gpu": 2})
    assert limit.over(Resources.of({"cpu": "1"}), asked) == [
        "cpu 1500m asked, 1 of 2 left", "nvidia.com/gpu 2 asked, 1 of 1 left"]
    assert limit.over(Resources(), Resources.of({"memory": "1Ti"})) == []  # not named
    assert policy().spec.limit is None


def test_a_good_policy_and_set_have_no_problem() -> None:
    assert problems(cluster_set(namespaces=["platform"])) == []
    assert problems(policy(clusterSets=["shared"], priorityClasses=[], maxPriority=10)) == []
    assert policy().spec.priority_classes is None  # absent: any class
    assert problems(policy(kinds=["ConfigMap", "apps/Deployment", "core/Secret"],
                           targetNamespaces=["team-a"], quota={"cpu": "64", "pods": 100})) == []
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        policy(clusterSet=["typo"])


def test_a_policy_forbids_the_kinds_and_namespaces_it_does_not_list() -> None:
    spec = policy(kinds=["ConfigMap", "apps/Deployment", "core/Secret"],
                  targetNamespaces=["team-a", "team-a-jobs"]).spec

    def obj(api: str, kind: str, namespace: str | None = "team-a") -> dict[str, Any]:
        meta = {"name": "x"} if namespace is None else {"name": "x", "namespace": namespace}
        return {"apiVersion": api, "kind": kind, "metadata": meta}

    assert spec.forbids(obj("v1", "ConfigMap")) == ""
    assert spec.forbids(obj("apps/v1", "Deployment", "team-a-jobs")) == ""
    assert spec.forbids(obj("v1", "Secret")) == ""  # core/Secret: the core group's
    assert spec.forbids(obj("extensions/v1beta1", "Deployment")) == (
        "Deployment x: kind extensions/Deployment is not among ConfigMap, apps/Deployment, "
        "core/Secret")
    assert spec.forbids(obj("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", None)) == (
        "ClusterRoleBinding x: kind rbac.authorization.k8s.io/ClusterRoleBinding is not "
        "among ConfigMap, apps/Deployment, core/Secret")
    assert spec.forbids(obj("v1", "ConfigMap", "kube-system")) == (
        "ConfigMap x: namespace kube-system, not one of team-a, team-a-jobs")
    assert spec.forbids(obj("v1", "ConfigMap", None)) == (
        "ConfigMap x: no namespace, not one of team-a, team-a-jobs")
    nothing = policy(kinds=[]).spec
    assert nothing.forbids(obj("v1", "ConfigMap")) == "ConfigMap x: kind core/ConfigMap is not among none"
    assert policy().spec.forbids(obj("v1", "Anything", None)) == ""  # absent: any


@pytest.mark.parametrize(("identity", "said"), [
    ({}, "identity: name a serviceAccount or a user, one of the two"),
    ({"serviceAccount": "a/b", "user": "c"}, "name a serviceAccount or a user"),
    ({"serviceAccount": "deployer"}, "'deployer' is not <namespace>/<name>"),
    ({"serviceAccount": "Team_A/deployer"}, "is not <namespace>/<name>"),
    ({"serviceAccount": "team-a/deployer", "groups": ["g"]}, "a ServiceAccount's groups"),
    ({"user": "alice\r\nImpersonate-User: admin"}, "is not a name a header can carry"),
    ({"user": "alice", "groups": [" spaced"]}, "is not a name a header can carry"),
    ({"user": "alice", "extra": 1}, "unknown field"),
])
def test_an_identity_that_is_not_one_is_refused_naming_why(identity: dict[str, Any],
                                                         said: str) -> None:
    """Refused where any process decodes the policy: a header never carries what a team
    could smuggle another header in with."""
    with pytest.raises(msgspec.ValidationError) as refused:
        policy(identity=identity)
    assert said in str(refused.value) and "$.spec.identity" in str(refused.value)


def test_an_identity_says_whom_the_member_cluster_sees() -> None:
    sa = policy(identity={"serviceAccount": "team-a/deployer"}).spec.identity
    assert sa is not None and sa.username == "system:serviceaccount:team-a:deployer"
    assert sa.headers() == (("Impersonate-User", "system:serviceaccount:team-a:deployer"),)
    assert str(sa) == "ServiceAccount team-a/deployer"
    user = policy(identity={"user": "ci", "groups": ["team-a", "deployers"]}).spec.identity
    assert user is not None and user.headers() == (
        ("Impersonate-User", "ci"), ("Impersonate-Group", "team-a"),
        ("Impersonate-Group", "deployers"))
    assert str(user) == "user ci (groups team-a, deployers)"
    assert policy().spec.identity is None  # absent: berth's own credential


def test_a_sets_quota_names_a_bound_set_and_quantities() -> None:
    limits = policy(clusterSets=["gpu"], setQuotas={"gpu": {"nvidia.com/gpu": 4,
                                                          "copies": 2}}).spec.set_limits
    assert list(limits) == ["gpu"] and limits["gpu"].names == ("copies", "nvidia.com/gpu")
    for spec, said in (({"setQuotas": {"gpu": {"cpu": 1}}},
                        "setQuotas.gpu: the set is not among clusterSets"),
                       ({"clusterSets": ["gpu"], "setQuotas": {"gpu": {"cpu": "lots"}}},
                        "setQuotas.gpu.cpu: 'lots' is not a quantity")):
        with pytest.raises(msgspec.ValidationError, match=said):
            policy(**spec)
