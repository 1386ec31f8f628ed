"""docs/teams.md "A worked example: two teams", followed: its files as written, two
working clusters of namespace platform (``shared``, ``gpu``; the members' RBAC file
applied to both), berth's scheduler and propagator under their own etcd roles on an
etcd with mutual TLS and authentication, and each team's person with the credential
``berth access grant`` gave them. Each team is placed only on its sets, applied as its
deployer, confined by etcd to its namespace, refused a class it may not use and what
the members' RBAC refuses its deployer, and held to its quota — through a burst with
the scheduler killed as it lands."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.store import decode, keys
from berth.store.documents import ApplicationStatus, Binding
from berth_testkit.scheduler_env import PropagatorProcess, SchedulerProcess, stop_all, wait_for
from berth_testkit.servers.etcd import ROOT
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving_all
from tests.integration.conftest import Secure

EXAMPLES = ROOT / "docs" / "examples" / "teams"
PATHS = {  # where each kind of the members' RBAC file is created
    "Namespace": "/api/v1/namespaces",
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
}


@pytest.fixture(scope="module")
def members() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(lambda name: KubeCluster(f"teams-{name}"), ("shared", "gpu"))


def berth(env: dict[str, str], *args: str, stdin: str | None = None
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "berth.cli.main", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, **env})


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_two_teams_share_the_fleet_as_the_page_says(secure: Secure,
                                                    members: dict[str, KubeCluster],
                                                    tmp_path: Path) -> None:
    admin = secure.env("berth-admin")
    for member in members.values():  # what each member's administrator applies
        for doc in yaml.safe_load_all((EXAMPLES / "member-rbac.yaml").read_text()):
            member.request("POST", PATHS[doc["kind"]].format(
                ns=doc["metadata"].get("namespace")), doc, ok=(409,))
    clusters = yaml.safe_dump_all([
        {"api": "kubernetes", "kind": "Cluster",
         "metadata": {"name": name, "namespace": "platform", "labels": {"pool": name}},
         "spec": {"kubeconfig": member.kubeconfig()}} for name, member in members.items()])
    ok(berth(admin, "apply", "-f", str(EXAMPLES / "platform.yaml")))
    ok(berth(admin, "apply", "-f", "-", stdin=clusters))
    procs = [cls(secure.etcd.url, tmp_path, name="t", env=secure.env(f"berth-{cls.command}"),
                 config=config).start()
             for cls, config in ((SchedulerProcess, "reschedule_after: 1\n"),
                                 (PropagatorProcess, "probe_interval: 0.5\n"))]
    root = secure.store("root")
    try:
        people = {}
        for team, user in (("team-a", "alice"), ("team-b", "bob")):
            password = ok(berth(secure.env("root"), "access", "grant", team, "--user", user))
            people[user] = {**secure.env("root"), "BERTH_ETCD_USER": user,
                            "BERTH_ETCD_PASSWORD": password.strip()}
        alice, bob = people["alice"], people["bob"]
        ok(berth(alice, "apply", "-f", str(EXAMPLES / "team-a.yaml")))
        ok(berth(bob, "apply", "-f", str(EXAMPLES / "team-b.yaml")))

        def status(team: str, name: str) -> ApplicationStatus | None:
            kv = root.get(keys.status_key("Application", team, name))
            return decode(kv.value, ApplicationStatus, kv.key) if kv else None

        def binding(team: str, name: str) -> Binding | None:
            kv = root.get(keys.binding_key("Application", team, name))
            return decode(kv.value, Binding, kv.key) if kv else None

        def deployed(member: str, team: str, name: str) -> dict[str, Any]:
            return members[member].request(
                "GET", f"/apis/apps/v1/namespaces/{team}/deployments/{name}", ok=(404,))

        for team, name, where in (("team-a", "web", "shared"), ("team-b", "trainer", "gpu")):
            st = wait_for(lambda team=team, name=name: status(team, name),
                          lambda s: s.status.state == "RUNNING", timeout=90)
            assert list(st.status.applied) == [f"platform/{where}"], st.status.applied
            assert st.status.applied[f"platform/{where}"].identity == (
                f"system:serviceaccount:{team}:deployer")
            assert deployed(where, team, name) and not deployed(
                "gpu" if where == "shared" else "shared", team, name)
        assert members["shared"].request(
            "GET", "/api/v1/namespaces/team-a/configmaps/web-settings")["data"] == {
                "greeting": "hello"}
        shown = ok(berth(alice, "get", "app", "team-a/web", "-o", "yaml"))
        assert "identity: system:serviceaccount:team-a:deployer" in shown, shown
        theirs = berth(alice, "get", "apps", "-n", "team-b")
        assert theirs.returncode != 0 and "permission denied" in theirs.stderr
        assert "Traceback" not in theirs.stderr

        ok(berth(alice, "apply", "-f", str(EXAMPLES / "team-a-more.yaml")))
        b = wait_for(lambda: binding("team-a", "grab"), lambda b: bool(b.spec.targets),
                     timeout=30)
        assert b.status.reason.startswith(
            "priority class 'urgent' is not allowed in namespace team-a: placed at its own "
            "priority"), b.status.reason
        assert [t.name for t in b.spec.targets] == ["shared"]
        st = wait_for(lambda: status("team-a", "grab"),
                      lambda s: "forbidden to" in s.status.reason, timeout=60)
        reason = st.status.reason
        assert ("forbidden to ServiceAccount team-a/deployer by cluster platform/shared's "
                "RBAC") in reason, reason
        assert "ClusterRoleBinding team-a-admin" in reason
        assert "ConfigMap kube-system/team-a-was-here" in reason
        shared = members["shared"]
        assert shared.request("GET", "/api/v1/namespaces/team-a/configmaps/grab")
        assert shared.request("GET", "/api/v1/namespaces/kube-system/configmaps/"
                              "team-a-was-here", ok=(404,)) == {}
        assert shared.request("GET", "/apis/rbac.authorization.k8s.io/v1/"
                              "clusterrolebindings/team-a-admin", ok=(404,)) == {}

        over = "over the quota of namespace team-a: cpu 400m asked, 300m of 500m left"
        b = wait_for(lambda: binding("team-a", "batch"),
                     lambda b: b.status.state == "Unschedulable", timeout=30)
        assert b.status.reason == over and not b.spec.targets
        ok(berth(alice, "delete", "app", "team-a/web"))  # room comes free: batch is placed
        b = wait_for(lambda: binding("team-a", "batch"), lambda b: bool(b.spec.targets),
                     timeout=60)
        assert [t.name for t in b.spec.targets] == ["shared"]
        wait_for(lambda: deployed("shared", "team-a", "batch") or None, timeout=60)

        # beyond the page: a burst over the quota (grab and batch placed: one more of
        # three applications left) with the scheduler killed as it lands; its successor
        # counts the use again from the Bindings, and the team is never over
        burst = [f"burst-{i}" for i in range(4)]
        ok(berth(alice, "apply", "-f", "-", stdin=yaml.safe_dump_all([
            {"api": "kubernetes", "kind": "Application",
             "metadata": {"name": name, "namespace": "team-a"},
             "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": name, "namespace": "team-a"}}]}}
            for name in burst])))
        procs[0].kill()
        procs[0].start()
        decided = {name: wait_for(lambda name=name: binding("team-a", name),
                                  lambda b: b.status.state in ("Scheduled", "Unschedulable"),
                                  timeout=60) for name in burst}
        placed = [n for n, b in decided.items() if b.spec.targets]
        assert len(placed) == 1, {n: b.status.reason for n, b in decided.items()}
        assert all(b.status.reason == "over the quota of namespace team-a: applications 1 "
                   "asked, 0 of 3 left" for n, b in decided.items() if n not in placed)
        for p in procs:
            assert "Traceback" not in p.output()
    finally:
        stop_all(procs)
        root.close()
