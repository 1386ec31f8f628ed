"""Least privilege on a real etcd with mutual TLS and authentication, set up by
scripts/etcd-secure.sh: each process works under its own role and is refused
outside it; every secret lives apart, is read only by the role that uses it, and never
shows in a log or the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import requests
import yaml

from berth.store import Delete, EtcdConfig, Fence, Put, Store, Unauthorized, auth, encode, keys
from berth.store.documents import MovesStarted
from berth.store.teams import team_role
from berth_testkit.scheduler_env import (
    ConsoleProcess,
    ExporterProcess,
    MetricsCacheProcess,
    PropagatorProcess,
    SchedulerProcess,
    stop_all,
    wait_for,
)
from berth_testkit.servers.etcd import ROOT
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving
from tests.integration.conftest import Secure
from tests.integration.test_agent_security import refused

USERS = ("berth-scheduler", "berth-propagator", "berth-metrics-cache", "berth-exporter",
         "berth-inventory", "berth-console", "berth-admin")


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeCluster]:
    yield from serving(lambda: KubeCluster("roles"))


# Secrets of every kind that carries one, as users write them (inline, Krake's shapes).
KAFKA_PW, OS_PW, OS_APP_SECRET, DB_PW = ("kafka-sasl-pw-1", "openstack-pw-2",
                                         "openstack-app-secret-3", "ZGItcHctNA==")


def documents(kube: KubeCluster) -> str:
    """A cluster with its token inline (Krake's shape), a metric, an application with a
    Secret, and every other kind that carries a secret: a Kafka provider, a Project and
    a Cloud with OpenStack auth, an Export (the cluster's own API, its token inline)."""
    return yaml.safe_dump_all([
        {"api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "static"},
         "spec": {"type": "static", "static": {"metrics": {"heat": 0.4}}}},
        {"api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "kafka"},
         "spec": {"type": "kafka", "kafka": {"bootstrap_servers": "127.0.0.1:1", "topic": "t",
                                             "sasl_mechanism": "PLAIN",
                                             "sasl_username": "berth",
                                             "sasl_password": KAFKA_PW}}},
        {"api": "openstack", "kind": "Project",
         "metadata": {"name": "os-a", "namespace": "default"},
         "spec": {"url": "https://keystone.example:5000/v3", "template": "t",
                  "auth": {"type": "password", "password": {
                      "user": {"id": "u1", "password": OS_PW}, "project": {"id": "p1"}}}}},
        {"api": "infrastructure", "kind": "GlobalCloud", "metadata": {"name": "os-cloud"},
         "spec": {"type": "openstack", "openstack": {
             "url": "https://keystone.example:5000/v3", "auth": {
                 "type": "application_credential",
                 "application_credential": {"id": "a1", "secret": OS_APP_SECRET}}}}},
        {"api": "core", "kind": "GlobalMetric", "metadata": {"name": "heat"},
         "spec": {"min": 0, "max": 1, "provider": {"name": "static", "metric": "heat"}}},
        {"api": "kubernetes", "kind": "Cluster",
         "metadata": {"name": "east", "namespace": "default", "labels": {"zone": "z1"}},
         "spec": {"kubeconfig": kube.kubeconfig(), "metrics": [{"name": "heat",
                                                              "weight": 1}]}},
        {"api": "kubernetes", "kind": "Application",
         "metadata": {"name": "web", "namespace": "default"},
         "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "web"}, "data": {"a": "1"}},
                               {"apiVersion": "v1", "kind": "Secret",
                                "metadata": {"name": "web-db"}, "data": {"password": DB_PW}}]}},
        {"api": "core", "kind": "Export", "metadata": {"name": "hub"},
         "spec": {"kubeconfig": kube.kubeconfig(), "namespace": "argocd",
                  "argocd": {"configMap": "berth-placements"}}},
    ])


SECRET_VALUES = (KAFKA_PW, OS_PW, OS_APP_SECRET, DB_PW)


def test_each_process_works_under_its_role(secure: Secure, kube: KubeCluster,
                                           tmp_path: Path) -> None:
    said = secure.berth("berth-admin", "bootstrap", "-", stdin=documents(kube))
    admin = secure.store("berth-admin")
    cluster = admin.get(keys.resource_key("Cluster", "east", "default"))
    assert cluster is not None and kube.token.encode() not in cluster.value
    secret = admin.get(keys.secrets_key("Cluster", "east", "default"))
    assert secret is not None and kube.token.encode() in secret.value
    procs = [cls(secure.etcd.url, tmp_path, name="r", env=secure.env(f"berth-{cls.command}"),
                 config=config).start()
             for cls, config in ((SchedulerProcess, ""),
                                 (PropagatorProcess, "probe_interval: 0.5\n"),
                                 (MetricsCacheProcess, "poll_interval: 0.5\n"),
                                 (ExporterProcess, "settle: 0.05\n"))]
    try:
        status_key = keys.status_key("Application", "default", "web")
        running = wait_for(lambda: admin.get(status_key),
                           lambda kv: b'"RUNNING"' in kv.value, timeout=90)
        assert b'"east"' in running.value
        wait_for(lambda: admin.get(keys.metric_value_key("heat")), timeout=30)  # the cache wrote
        # the exporter, with the Export's credentials, wrote web's decision into the API
        wait_for(lambda: kube.request(
            "GET", "/apis/cluster.open-cluster-management.io/v1beta1/namespaces/argocd/"
            "placementdecisions/default.web-decision-1", ok=(200, 404)),
            lambda d: [x["clusterName"] for x in d.get("status", {}).get("decisions", [])]
            == ["east"], timeout=60)
        wait_for(lambda: admin.get(keys.exported_key("hub")),
                 lambda kv: b'"Synced"' in kv.value, timeout=30)
        # The CLI, as the admin, shows the cluster without its token; so does apply's diff.
        shown = secure.berth("berth-admin", "get", "clusters", "-o", "yaml")
        shown += secure.berth("berth-admin", "describe", "cluster", "east")
        shown += secure.berth("berth-admin", "bootstrap", "--dry-run", "--force", "-",
                              stdin=documents(kube))
        # the Secret reached the cluster whole: the propagator put its data back
        applied = kube.request("GET", "/api/v1/namespaces/default/secrets/web-db")
        assert applied["data"] == {"password": DB_PW}
        secrets = [kube.token, *SECRET_VALUES] + [(secure.passwords / u).read_text().strip()
                                                  for u in USERS]
        logs = "".join(p.output() for p in procs) + said + shown
        leaked = [s[:6] + "…" for s in secrets if s in logs]
        assert not leaked, f"credentials in logs or CLI output: {leaked}"
        # the console under its role: reads the fleet and the application, pauses its
        # rollout (the one write it may make), and shows no credential
        token = tmp_path / "console-token"
        token.write_text("roles-console-token-0123456789\n")
        console = ConsoleProcess(secure.etcd.url, tmp_path, env=secure.env("berth-console"),
                                 extra=["--token-file", str(token)]).start()
        procs.append(console)
        bearer = {"Authorization": "Bearer roles-console-token-0123456789"}
        url = console.url()
        wait_for(lambda: requests.get(url + "api/fleet", headers=bearer, timeout=10).json(),
                 lambda d: d["synced"] and d["count"] == 1, timeout=30)
        page = requests.get(url + "api/applications/default/web", headers=bearer, timeout=10)
        assert page.status_code == 200 and page.json()["decision"]["targets"][0]["name"] == "east"
        paused = requests.post(url + "api/applications/default/web/rollout/pause",
                               headers=bearer, timeout=10)
        assert paused.status_code == 200, paused.text
        shown += page.text + requests.get(url + "api/fleet", headers=bearer, timeout=10).text
        leaked = [s[:6] + "…" for s in secrets if s in shown]
        assert not leaked, f"credentials in the console's pages: {leaked}"
        for p in procs:  # and nothing was refused along the way
            assert "permission denied" not in p.output(), p.log.name
        # the scheduler's trimmer reads how full etcd is under its role: status and alarms
        sched = secure.store("berth-scheduler")
        try:
            assert int(sched.call("maintenance/status", {}, "status")["dbSizeInUse"]) > 0
            assert sched.call("maintenance/alarm", {"action": "GET"}, "alarms").get(
                "alarms") in (None, [])
            # ... and writes the moves its leader started, for the next one
            said = encode(MovesStarted(started=[(1, 1)]))
            sched.commit([Put(keys.SCHEDULER_MOVES, said, None)])
        finally:
            sched.close()
    finally:
        stop_all(procs)
        admin.close()


@pytest.mark.parametrize(("user", "op", "key"), [
    ("berth-scheduler", "write", keys.resource_key("Application", "x", "default")),
    ("berth-scheduler", "write", keys.status_key("Application", "default", "x")),
    ("berth-scheduler", "read", keys.secrets_key("Cluster", "east", "default")),
    ("berth-scheduler", "list", keys.SECRETS),
    ("berth-propagator", "write", keys.binding_key("Application", "default", "x")),
    ("berth-propagator", "write", keys.resource_key("Cluster", "x", "default")),
    ("berth-propagator", "write", keys.METRIC_PICTURE),
    ("berth-propagator", "write", keys.SCHEDULER_MOVES),
    ("berth-metrics-cache", "write", keys.SCHEDULER_MOVES),
    ("berth-console", "write", keys.SCHEDULER_MOVES),
    ("berth-metrics-cache", "write", keys.resource_key("Cluster", "x", "default")),
    ("berth-metrics-cache", "write", keys.binding_key("Application", "default", "x")),
    ("berth-metrics-cache", "write", "/berth/v1/ledger/applications/default/x/"
                                     "20261128T010000.000000Z.scheduler.2"),
    ("berth-metrics-cache", "read", keys.secrets_key("Cluster", "east", "default")),
    ("berth-metrics-cache", "list", keys.SECRETS),
    ("berth-metrics-cache", "read", keys.secrets_key("Application", "web", "default")),
    ("berth-metrics-cache", "read", keys.secrets_key("Project", "os-a", "default")),
    ("berth-propagator", "read", keys.secrets_key("Project", "os-a", "default")),
    ("berth-propagator", "read", keys.secrets_key("GlobalCloud", "os-cloud")),
    ("berth-propagator", "read", keys.secrets_key("GlobalMetricsProvider", "kafka")),
    ("berth-propagator", "list", keys.SECRETS),
    ("berth-scheduler", "read", keys.secrets_key("GlobalMetricsProvider", "kafka")),
    ("berth-admin", "write", keys.binding_key("Application", "default", "x")),
    ("berth-admin", "write", keys.status_key("Application", "default", "x")),
    ("berth-admin", "write", keys.METRIC_PICTURE),
    ("berth-admin", "write", keys.lease_key("scheduler")),
    ("berth-console", "write", keys.binding_key("Application", "default", "x")),
    ("berth-console", "write", keys.status_key("Application", "default", "x")),
    ("berth-console", "write", keys.resource_key("Application", "x", "default")),
    ("berth-console", "read", keys.secrets_key("Cluster", "east", "default")),
    ("berth-console", "list", keys.SECRETS),
    ("berth-exporter", "write", keys.binding_key("Application", "default", "x")),
    ("berth-exporter", "write", keys.status_key("Application", "default", "x")),
    ("berth-exporter", "write", keys.resource_key("Export", "x")),
    ("berth-exporter", "write", keys.METRIC_PICTURE),
    ("berth-exporter", "read", keys.secrets_key("Cluster", "east", "default")),
    ("berth-exporter", "read", keys.secrets_key("Application", "web", "default")),
    ("berth-exporter", "list", keys.SECRETS),
    ("berth-scheduler", "read", keys.secrets_key("Export", "hub")),
    ("berth-propagator", "read", keys.secrets_key("Export", "hub")),
    ("berth-console", "write", keys.exported_key("hub")),
    # the inventory writes Clusters in its own berth namespaces alone (default: inventory)
    ("berth-inventory", "write", keys.resource_key("Cluster", "x", "default")),
    ("berth-inventory", "write", keys.secrets_key("Cluster", "x", "default")),
    ("berth-inventory", "read", keys.secrets_key("Cluster", "east", "default")),
    ("berth-inventory", "write", keys.binding_key("Application", "default", "x")),
    ("berth-inventory", "write", keys.resource_key("Application", "x", "inventory")),
    ("berth-inventory", "write", keys.resource_key("Inventory", "hub")),
    ("berth-inventory", "list", keys.SECRETS),
    ("berth-exporter", "read", keys.secrets_key("Inventory", "hub")),
    ("berth-propagator", "read", keys.secrets_key("Inventory", "hub")),
])
def test_each_process_is_refused_outside_its_role(secure: Secure, user: str, op: str,
                                                  key: str) -> None:
    store = secure.store(user)
    try:
        with pytest.raises(Unauthorized, match="permission denied"):
            if op == "write":
                store.commit([Put(key, b'{"garbage": true}')])
            elif op == "read":
                store.get(key)
            else:
                store.list_prefix(key)
    finally:
        store.close()


def test_only_the_processes_that_use_credentials_read_them(secure: Secure) -> None:
    for user, prefix in (("berth-propagator", keys.SECRETS + "clusters/"),
                         ("berth-propagator", keys.SECRETS + "applications/"),
                         ("berth-metrics-cache", keys.SECRETS + "globalmetricsproviders/"),
                         ("berth-metrics-cache", keys.SECRETS + "metricsproviders/"),
                         ("berth-exporter", keys.SECRETS + "exports/"),
                         ("berth-admin", keys.SECRETS)):
        store = secure.store(user)
        try:
            store.list_prefix(prefix)  # allowed: no error
        finally:
            store.close()


def _view(store: Store, prefixes: tuple[str, ...]) -> bytes:
    """Everything ``store``'s role may read of ``prefixes`` (the rest is refused)."""
    seen = b""
    for prefix in prefixes:
        try:
            kvs, _ = store.list_prefix(prefix)
        except Unauthorized:
            continue
        seen += b"".join(kv.key.encode() + kv.value for kv in kvs)
    return seen


def test_no_process_role_reads_a_secret_it_does_not_use(secure: Secure, kube: KubeCluster
                                                        ) -> None:
    """Every key each process's role can read, read: the scheduler finds no secret at all,
    the metrics-cache only its providers', the propagator only its clusters' and
    applications'. A document an older berth stored with its secrets inline is moved
    apart by ``berth upgrade``."""
    secure.berth("berth-admin", "apply", "-f", "-", stdin=documents(kube))
    admin = secure.store("berth-admin")
    old_key = keys.resource_key("Project", "os-old", "default")
    admin.commit([Put(old_key, encode({  # as an older berth left it: inline
        "api": "openstack", "kind": "Project",
        "metadata": {"name": "os-old", "namespace": "default", "generation": 3},
        "spec": {"url": "https://k", "template": "t", "auth": {"type": "password", "password": {
            "user": {"id": "u9", "password": "old-inline-pw"}}}}}), 0)])
    said = secure.berth("berth-admin", "upgrade")
    assert "1 document(s) upgraded" in said, said
    assert b"old-inline-pw" not in admin.get(old_key).value  # type: ignore[union-attr]
    assert b'"generation":3' in admin.get(old_key).value  # type: ignore[union-attr]
    assert "0 document(s) upgraded" in secure.berth("berth-admin", "upgrade")  # once is enough
    prefixes = (*(keys.resource_prefix(k) for k in keys.KINDS), keys.BINDINGS, keys.STATUS,
                keys.METRIC_VALUES, keys.LEASES, keys.SECRETS,
                *(keys.SECRETS + k.plural + "/" for k in keys.KINDS.values()))
    every = (*SECRET_VALUES, kube.token, "old-inline-pw")
    uses = {"berth-scheduler": (),
            "berth-metrics-cache": (KAFKA_PW,),
            "berth-propagator": (DB_PW, kube.token),
            "berth-exporter": (kube.token,),  # the Export's: the same cluster's API
            "berth-console": ()}
    try:
        for user, used in uses.items():
            store = secure.store(user)
            try:
                view = _view(store, prefixes)
            finally:
                store.close()
            assert view, user
            found = sorted(s for s in every if s.encode() in view)
            assert found == sorted(used), f"{user} reads {found}, uses only {sorted(used)}"
    finally:
        admin.close()


# -- a team's access to its namespace (docs/teams.md "Access"): `berth access grant`
# makes a user whose role writes the namespace's applications and reads what berth
# says of them; every verb outside it refused (the grants, prefix by prefix, in
# tests/unit/store/test_teams.py)


def as_team(secure: Secure, env: dict[str, str], *args: str, stdin: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "berth.cli.main", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, **env})


def as_user(secure: Secure, user: str, password: str) -> dict[str, str]:
    return {**secure.env("root"), "BERTH_ETCD_USER": user, "BERTH_ETCD_PASSWORD": password}


def team_app(name: str, namespace: str) -> str:
    return msgspec.json.encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": name}}]}}).decode()


def test_a_team_writes_its_namespace_and_is_refused_everything_else(secure: Secure) -> None:
    root = secure.store("root")
    admin = secure.env("root")
    done = as_team(secure, admin, "access", "grant", "team-a", "--user", "alice")
    assert done.returncode == 0, done.stderr
    password = done.stdout.strip()
    assert len(password) >= 24 and "shown once" in done.stderr
    again = as_team(secure, admin, "access", "grant", "team-a", "--user", "alice")
    assert again.returncode == 0 and again.stdout == ""  # an existing user keeps its password
    # another team, and what the administrators wrote
    assert as_team(secure, admin, "apply", "-f", "-", stdin=team_app("theirs", "team-b")
                 ).returncode == 0
    root.commit([Put(keys.resource_key("NamespacePolicy", "team-a"), msgspec.json.encode({
        "api": "core", "kind": "NamespacePolicy", "metadata": {"name": "team-a"},
        "spec": {}}), None)])

    alice = as_user(secure, "alice", password)
    applied = as_team(secure, alice, "apply", "-f", "-", stdin=team_app("web", "team-a"))
    assert applied.returncode == 0, applied.stderr
    assert root.get(keys.history_key("team-a", "web")) is not None  # with its history
    listed = as_team(secure, alice, "get", "apps", "-n", "team-a")
    assert listed.returncode == 0 and "web" in listed.stdout, listed.stderr
    foreign = as_team(secure, alice, "get", "apps", "-n", "team-b")
    assert foreign.returncode != 0 and "Traceback" not in foreign.stderr
    assert "permission denied" in foreign.stderr, foreign.stderr
    # placed (as the scheduler would) on its own cluster and a shared one of namespace
    # platform, which its role may not read: explain overrides and rollout status say so
    staged = msgspec.json.decode(team_app("staged", "team-a"))
    staged["metadata"]["generation"] = 1
    staged["spec"]["rollout"] = {"strategy": "Staged", "stages": [
        {"name": "own", "clusters": {"names": ["own"]}}, {"name": "rest", "clusters": {}}]}
    cluster = {"api": "kubernetes", "kind": "Cluster", "spec": {"mode": "Pull"}}
    root.commit([
        Put(keys.resource_key("Application", "staged", "team-a"), encode(staged), None),
        *(Put(keys.resource_key("Cluster", n, ns), encode({**cluster, "metadata": {
            "name": n, "namespace": ns}}), None) for ns, n in (("team-a", "own"),
                                                             ("platform", "shared"))),
        Put(keys.binding_key("Application", "team-a", "staged"), encode({
            "api": "scheduling", "kind": "Binding",
            "metadata": {"name": "staged", "namespace": "team-a"},
            "spec": {"resource": {"kind": "Application", "name": "staged",
                                  "namespace": "team-a"}, "generation": 1, "targets": [
                {"kind": "Cluster", "name": "own", "namespace": "team-a"},
                {"kind": "Cluster", "name": "shared", "namespace": "platform"}]},
            "status": {"state": "Scheduled"}}), None),
        Put(keys.status_key("Application", "team-a", "staged"), encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": "staged", "namespace": "team-a"},
            "status": {"state": "RUNNING", "rollout": {"generation": 1, "phase": "Complete"},
                       "applied": {"team-a/own": {"generation": 1},
                                   "platform/shared": {"generation": 1}}}}), None)])
    explained = as_team(secure, alice, "explain", "overrides", "team-a/staged")
    assert explained.returncode == 0, explained.stderr
    assert "cluster team-a/own: the manifest as written" in explained.stdout
    assert ("cluster platform/shared: a cluster of namespace platform, which this credential "
            "may not read") in explained.stdout, explained.stdout
    status = as_team(secure, alice, "rollout", "status", "team-a/staged")
    assert status.returncode == 0, status.stderr
    rows = {line.split()[1]: line.split()[0] for line in status.stdout.splitlines()
            if "/" in line and line.startswith("  ") and "stage" not in line}
    assert rows == {"team-a/own": "own", "platform/shared": "?"}, status.stdout
    assert "stage ?: platform/shared: a cluster of another namespace" in status.stdout
    shown = as_team(secure, admin, "access", "show", "team-a")
    assert f"role {team_role('team-a')}: users alice" in shown.stdout, shown.stdout

    mine = Store(EtcdConfig(url=secure.etcd.url, ca=secure.tls.ca, cert=secure.tls.client_cert,
                            key=secure.tls.client_key, user="alice", password=password,
                            timeout=5))
    own = keys.resource_key("Application", "web", "team-a")
    assert mine.get(own) is not None
    assert mine.list_prefix(keys.resource_prefix("Application", "team-a"))[0]
    mine.commit([Put(keys.resource_key("Override", "o", "team-a"), b"{}", None)])
    mine.list_prefix(keys.in_namespace(keys.BINDINGS, "Application", "team-a"))
    lease = mine.grant(30)
    theirs = keys.resource_key("Application", "theirs", "team-b")
    attempts: dict[str, Callable[[], Any]] = {
        "get another team's application": lambda: mine.get(theirs),
        "range every application": lambda: mine.list_prefix(keys.resource_prefix("Application")),
        "range a prefix that takes in team-ab": lambda: mine.list_prefix(
            keys.resource_prefix("Application").rstrip("/") + "/team-a"),
        "range everything": lambda: mine.list_prefix(keys.ROOT),
        "range the secrets": lambda: mine.list_prefix(keys.SECRETS),
        "watch every application": lambda: mine.watch(keys.resource_prefix("Application"),
                                                      mine.revision()),
        "watch another team's Bindings": lambda: mine.watch(
            keys.in_namespace(keys.BINDINGS, "Application", "team-b"), mine.revision()),
        "write another team's application": lambda: mine.commit([Put(keys.resource_key(
            "Application", "evil", "team-b"), b"{}", None)]),
        "delete another team's application": lambda: mine.commit([Delete(theirs)]),
        "write its own Binding": lambda: mine.commit([Put(keys.binding_key(
            "Application", "team-a", "web"), b"{}", None)]),
        "write its own status": lambda: mine.commit([Put(keys.status_key(
            "Application", "team-a", "web"), b"{}", None)]),
        "write its namespace's policy": lambda: mine.commit([Put(keys.resource_key(
            "NamespacePolicy", "team-a"), b"{}", None)]),
        "read its namespace's policy": lambda: mine.get(keys.resource_key("NamespacePolicy",
                                                                          "team-a")),
        "write a cluster set": lambda: mine.commit([Put(keys.resource_key(
            "ClusterSet", "mine"), b"{}", None)]),
        "write a cluster in its namespace": lambda: mine.commit([Put(keys.resource_key(
            "Cluster", "c", "team-a"), b"{}", None)]),
        "write a priority class": lambda: mine.commit([Put(keys.resource_key(
            "PriorityClass", "top"), b"{}", None)]),
        "a transaction comparing a foreign key": lambda: mine.commit([
            Put(keys.resource_key("Override", "p", "team-a"), b"{}", None),
            Fence(keys.lease_key("scheduler"), 1)]),
        "a lease attached to a foreign key": lambda: mine.commit([Put(theirs, b"{}", None,
                                                                      lease)]),
        "add a user": lambda: mine.call("auth/user/add", {"name": "evil", "password": "x"},
                                        "add"),
        "grant itself a role": lambda: mine.call("auth/user/grant", {
            "user": "alice", "role": "root"}, "grant"),
    }
    allowed = [what for what, call in attempts.items() if not refused(call)]
    assert not allowed, f"alice may {allowed}"
    assert root.get(keys.resource_key("Application", "evil", "team-b")) is None

    revoked = as_team(secure, admin, "access", "revoke", "team-a", "--user", "alice")
    assert revoked.returncode == 0 and "the user is deleted" in revoked.stdout
    assert "alice" not in auth.users(root)
    assert refused(lambda: Store(EtcdConfig(
        url=secure.etcd.url, ca=secure.tls.ca, cert=secure.tls.client_cert,
        key=secure.tls.client_key, user="alice", password=password, timeout=5)).get(own))
    assert as_team(secure, admin, "access", "revoke", "team-a", "--user", "alice"
                 ).returncode == 1


def test_the_inventory_writes_clusters_in_its_namespaces_alone(secure: Secure) -> None:
    store = secure.store("berth-inventory")
    try:
        made = [keys.resource_key("Cluster", "x", "inventory"),
                keys.secrets_key("Cluster", "x", "inventory"),
                keys.status_key("Inventory", "", "hub")]
        store.commit([Put(k, b"{}", None) for k in made])
        store.commit([Delete(k) for k in made])
    finally:
        store.close()
