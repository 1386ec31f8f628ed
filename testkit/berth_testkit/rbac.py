"""A member cluster's RBAC as a team's tests need it (docs/teams.md "Applied as the
namespace's identity"): a deployer that may manage some kinds of one namespace, and the
objects a team must never get to make — a binding to cluster-admin, one in kube-system."""

from __future__ import annotations

from typing import Any

from berth_testkit.servers.kube import KubeCluster

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def deployer(cluster: KubeCluster, namespace: str = "default",
             resources: tuple[str, ...] = ("configmaps", "deployments")) -> dict[str, str]:
    """ServiceAccount ``deployer`` of ``namespace``, which may do anything with those
    ``resources`` there and nothing else; the policy's ``identity`` naming it."""
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "deployer"}
    for path, body in (
            (f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "deployer"}}),
            (f"{RBAC}/namespaces/{namespace}/roles", {"metadata": {"name": "deployer"}, "rules": [
                {"apiGroups": ["", "apps"], "resources": list(resources), "verbs": ["*"]}]}),
            (f"{RBAC}/namespaces/{namespace}/rolebindings", {
                "metadata": {"name": "deployer"}, "roleRef": role,
                "subjects": [{"kind": "ServiceAccount", "name": "deployer",
                              "namespace": namespace}]})):
        cluster.request("POST", path, body, ok=(409,))
    return {"serviceAccount": f"{namespace}/deployer"}


def cluster_admin(name: str, group: str) -> dict[str, Any]:
    """A ClusterRoleBinding of ``group`` to cluster-admin: what a team must never make."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "Group", "name": group,
                          "apiGroup": "rbac.authorization.k8s.io"}]}


def in_kube_system(name: str) -> dict[str, Any]:
    """A ConfigMap in kube-system: where a team's objects must never land."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "kube-system"}}
