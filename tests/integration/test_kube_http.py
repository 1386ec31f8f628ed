"""A cluster's unary calls through berth's own HTTP client against a real kube-apiserver,
authenticated each way a kubeconfig says: a token, a token file read again after a
401 (rotated), an exec plugin run once and again after a 401 or once its token
expired (its calls and a watch sharing it), a cluster reached from its ClusterProfile
through the consumer's access provider; TLS by the embedded CA,
skipped when the kubeconfig says so, refused with the wrong CA. A creation meets a
namesake someone else made as Exists, touching nothing of it, and claims its fields
as an apply's."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.controllers.propagator.kube import Connection, Exists, Forbidden, KubeObject, Rejected
from berth.controllers.propagator.watches import ClusterWatches, Hub
from berth.kubeaccess import kubeconfig, providers
from berth.store.documents import KubeObjectRef
from berth.store.documents.tenancy import Identity
from berth_testkit.plugins import token_reader
from berth_testkit.servers.etcd import ServerUnavailable
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving_all

CRDS = Path(__file__).resolve().parents[2] / "berth" / "controllers" / "exporter" / "crds"


@pytest.fixture(scope="module")
def cluster() -> Iterator[KubeCluster]:
    for servers in serving_all(KubeCluster, ("auth",)):
        yield servers["auth"]


def with_user(cluster: KubeCluster, user: dict[str, Any], **server: Any) -> dict[str, Any]:
    config = cluster.kubeconfig()
    config["users"][0]["user"] = user
    config["clusters"][0]["cluster"].update(server)
    return config


def config_map(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"v": "1"}}


def test_a_token_applies_reads_and_deletes(cluster: KubeCluster) -> None:
    conn = Connection(cluster.kubeconfig(), 5.0)
    try:
        probe = conn.probe(5.0)
        # a cluster without a CRD: its metadata-only list says "items": null (the probe
        # once called its custom resources unknown there)
        assert (probe.state, probe.reason, probe.custom_resources) == ("ONLINE", "", ()), probe
        kind, ref = conn.locate(config_map("by-token"))
        stored = conn.apply(kind, ref, config_map("by-token"))
        assert isinstance(stored, KubeObject) and stored.metadata.resourceVersion
        got = conn.get(ref)
        assert got is not None and got.metadata.uid == stored.metadata.uid
        with pytest.raises(Rejected, match="by-token"):  # the server's own message
            conn.apply(kind, ref, {**config_map("by-token"), "data": {"v": 1}})
        conn.delete(ref)
        assert conn.get(ref) is None
        assert conn.get(KubeObjectRef("v1", "ConfigMap", "never", "default")) is None
    finally:
        conn.close()


def test_a_creation_touches_no_namesake_and_claims_its_fields_as_an_apply(
        cluster: KubeCluster) -> None:
    """What berth read as absent it creates (execute.py): a namesake someone made since
    is met as Exists and left as it was — whether or not its fields clash with
    berth's (a server-side apply without a precondition would merge into it where they
    do not: the robustness run, seed 29). Either way of creating (the apply naming a
    resourceVersion; the POST and the claim, for API servers that take none on
    creation) leaves berth's apply owning what it made, so that an apply that drops a
    field removes it; a POSTed creation left unclaimed (its creator stopped between
    the two calls) is claimed at the next apply, and a claim overtaken by another's
    write is made again."""
    conn = Connection(cluster.kubeconfig(), 5.0)
    path = "/api/v1/namespaces/default/configmaps"

    def managers(name: str) -> list[tuple[str, str]]:
        got = cluster.request("GET", f"{path}/{name}")["metadata"]["managedFields"]
        return sorted((m["manager"], m["operation"]) for m in got)

    try:
        two = {**config_map("made"), "data": {"v": "1", "w": "2"}}
        for name, create in (("made", conn.create), ("posted", conn.create_and_claim)):
            kind, ref = conn.locate(config_map(name))
            made = create(kind, ref, {**two, "metadata": {"name": name,
                                                          "namespace": "default"}})
            assert managers(name) == [("berth", "Apply")], name
            assert conn.apply(kind, ref, config_map(name)).metadata.uid == made.metadata.uid
            assert cluster.request("GET", f"{path}/{name}")["data"] == {"v": "1"}  # w dropped
            with pytest.raises(Exists):
                create(kind, ref, config_map(name))

        cluster.request("POST", f"{path}?fieldManager=someone",
                        {**config_map("theirs"), "data": {"other": "theirs"}})
        kind, theirs = conn.locate(config_map("theirs"))
        for create in (conn.create, conn.create_and_claim):  # no field of theirs clashes
            with pytest.raises(Exists):  # with berth's: refused all the same
                create(kind, theirs, config_map("theirs"))
        stored = cluster.request("GET", f"{path}/theirs")
        assert stored["data"] == {"other": "theirs"} and "annotations" not in stored[
            "metadata"] and managers("theirs") == [("someone", "Update")]  # untouched

        # made as berth's creation whose claim was lost: claimed at the next apply
        cluster.request("POST", f"{path}?fieldManager=berth", {**two, "metadata": {
            "name": "unclaimed", "namespace": "default"}})
        kind, unclaimed = conn.locate(config_map("unclaimed"))
        assert managers("unclaimed") == [("berth", "Update")]
        conn.apply(kind, unclaimed, config_map("unclaimed"))
        assert managers("unclaimed") == [("berth", "Apply")]
        assert cluster.request("GET", f"{path}/unclaimed")["data"] == {"v": "1"}

        # a claim from an answer another's write has overtaken: read again, claimed
        raw = cluster.request("POST", f"{path}?fieldManager=berth", {**two, "metadata": {
            "name": "overtaken", "namespace": "default"}})
        cluster.request("PATCH", f"{path}/overtaken?fieldManager=someone",
                        {"metadata": {"labels": {"someone": "was-here"}}}, content="merge")
        kind, overtaken = conn.locate(config_map("overtaken"))
        conn._claim(kind, overtaken, json.dumps(raw).encode())
        assert managers("overtaken") == [("berth", "Apply"), ("someone", "Update")]
        for name in ("made", "posted", "theirs", "unclaimed", "overtaken"):
            conn.delete(KubeObjectRef("v1", "ConfigMap", name, "default"))
    finally:
        conn.close()


def test_calls_made_as_an_identity_are_bounded_by_the_clusters_rbac(
        cluster: KubeCluster) -> None:
    """Kubernetes impersonation (docs/teams.md "Applied as the namespace's identity"):
    berth's credential here is a ServiceAccount that may impersonate team-i's deployer
    alone, which may manage the ConfigMaps of namespace team-i. As the deployer a
    ConfigMap there is made, applied, read and deleted; a ClusterRoleBinding and a
    ConfigMap in kube-system are Forbidden, with the API server's reason; another
    identity, which berth may not impersonate, is Forbidden whatever it asks; berth's
    own calls are its own."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    for path, body in (
            ("/api/v1/namespaces", {"metadata": {"name": "team-i"}}),
            ("/api/v1/namespaces/team-i/serviceaccounts", {"metadata": {"name": "deployer"}}),
            ("/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "berth"}}),
            (f"{rbac}/namespaces/team-i/roles", {"metadata": {"name": "deployer"}, "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}),
            (f"{rbac}/namespaces/team-i/rolebindings", {
                "metadata": {"name": "deployer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": "deployer"},
                "subjects": [{"kind": "ServiceAccount", "name": "deployer",
                              "namespace": "team-i"}]}),
            (f"{rbac}/namespaces/team-i/roles", {"metadata": {"name": "berth"}, "rules": [
                {"apiGroups": [""], "resources": ["serviceaccounts"],
                 "resourceNames": ["deployer"], "verbs": ["impersonate"]}]}),
            (f"{rbac}/namespaces/team-i/rolebindings", {
                "metadata": {"name": "berth"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                            "name": "berth"},
                "subjects": [{"kind": "ServiceAccount", "name": "berth",
                              "namespace": "default"}]})):
        cluster.request("POST", path, body, ok=(409,))
    token = cluster.request("POST", "/api/v1/namespaces/default/serviceaccounts/berth/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600}})["status"]["token"]
    conn = Connection(with_user(cluster, {"token": token}), 5.0)
    deployer = Identity(service_account="team-i/deployer")
    team = conn.acting_as(deployer)
    assert team is conn.acting_as(Identity(service_account="team-i/deployer"))  # one each
    mine = {**config_map("mine"), "metadata": {"name": "mine", "namespace": "team-i"}}
    grab = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "team-i-admin"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"},
            "subjects": [{"kind": "Group", "name": "team-i",
                          "apiGroup": "rbac.authorization.k8s.io"}]}
    system = {**config_map("system"), "metadata": {"name": "system",
                                                     "namespace": "kube-system"}}
    try:
        kind, ref = team.locate(mine)
        made = team.create(kind, ref, mine)
        assert team.apply(kind, ref, mine).metadata.uid == made.metadata.uid
        got = team.get(ref)
        assert got is not None and got.metadata.uid == made.metadata.uid
        team.delete(ref, uid=made.metadata.uid)
        assert cluster.request("GET", "/api/v1/namespaces/team-i/configmaps/mine",
                               ok=(404,)) == {}
        for body in (grab, system):
            kind, ref = team.locate(body)
            for call in (team.create, team.apply):
                with pytest.raises(Forbidden, match="system:serviceaccount:team-i:deployer"):
                    call(kind, ref, body)
            with pytest.raises(Forbidden):
                team.get(ref)
        other = conn.acting_as(Identity(service_account="team-j/deployer"))
        kind, ref = other.locate(mine)
        with pytest.raises(Forbidden, match="impersonate"):
            other.create(kind, ref, mine)
        with pytest.raises(Forbidden):  # berth itself may not write there
            conn.create(kind, ref, mine)
        assert not [b for b in cluster.request("GET", f"{rbac}/clusterrolebindings")["items"]
                    if b["metadata"]["name"] == "team-i-admin"]
    finally:
        conn.close()


def test_a_token_file_is_read_again_when_the_server_refuses_it(
        cluster: KubeCluster, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("not-the-token\n")
    conn = Connection(with_user(cluster, {"tokenFile": str(token)}), 5.0)
    try:
        probe = conn.probe(5.0)
        assert (probe.state, probe.reason) == ("UNHEALTHY", "credentials refused (HTTP 401)")
        token.write_text(cluster.token + "\n")  # rotated, as the kubelet does
        assert conn.probe(5.0).state == "ONLINE"
        assert conn.get(KubeObjectRef("v1", "ConfigMap", "none", "default")) is None
    finally:
        conn.close()


def test_an_exec_plugin_runs_once_and_again_after_a_401(cluster: KubeCluster,
                                                        tmp_path: Path) -> None:
    token, runs = tmp_path / "token", tmp_path / "runs"
    token.write_text(cluster.token)
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import json, pathlib, sys\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1',\n"
        "                  'kind': 'ExecCredential', 'status': {'token':\n"
        f"                  pathlib.Path({str(token)!r}).read_text()}}}}))\n")
    conn = Connection(with_user(cluster, {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
        "args": [str(plugin)]}}), 5.0)
    try:
        for _ in range(3):
            assert conn.probe(5.0).state == "ONLINE"
        assert runs.read_text() == "x"  # its credential kept
        token.write_text("expired")
        bad = Connection(with_user(cluster, {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable, "args": [str(plugin)]}}), 5.0)
        try:  # a plugin that gives a refused token: refused, once run again
            assert bad.probe(5.0).reason == "credentials refused (HTTP 401)"
            token.write_text(cluster.token)
            assert bad.probe(5.0).state == "ONLINE"  # the 401 ran it again
        finally:
            bad.close()
    finally:
        conn.close()


def test_an_exec_plugins_token_is_renewed_when_it_expires_and_a_watch_goes_through_it(
        cluster: KubeCluster, tmp_path: Path) -> None:
    """client.authentication.k8s.io/v1, a token valid for two seconds, told which
    cluster (its exec extension): the calls and a watch of one connection share it,
    and it is asked for again once it expires."""
    runs, asked = tmp_path / "runs", tmp_path / "asked"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import datetime, json, os, pathlib\n"
        f"runs = pathlib.Path({str(runs)!r})\n"
        "runs.write_text(runs.read_text() + 'x' if runs.exists() else 'x')\n"
        f"pathlib.Path({str(asked)!r}).write_text(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "until = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=2)\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1',\n"
        "                  'kind': 'ExecCredential', 'status': {\n"
        f"                  'token': {cluster.token!r},\n"
        "                  'expirationTimestamp': until.strftime('%Y-%m-%dT%H:%M:%SZ')}}))\n")
    config = with_user(cluster, {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": [str(plugin)], "interactiveMode": "Never", "provideClusterInfo": True}},
        extensions=[{"name": "client.authentication.k8s.io/exec",
                     "extension": {"clusterName": "spoke-1"}}])
    conn = Connection(config, 5.0)
    try:
        assert conn.probe(5.0).state == "ONLINE"
        assert json.loads(asked.read_text())["spec"]["cluster"]["config"] == {
            "clusterName": "spoke-1"}

        hub = Hub("test-exec")  # never started: its loop is closed below

        async def watch() -> int:
            client = ClusterWatches(hub, "k", conn).client
            try:
                r = await client.get("/api/v1/namespaces/default/configmaps",
                                     params={"watch": "1", "timeoutSeconds": "1"})
                return r.status_code
            finally:
                await client.aclose()

        assert asyncio.run(watch()) == 200  # the calls' token, not run again
        assert runs.read_text() == "x"
        time.sleep(2.2)  # expired: run again before the next call
        assert conn.get(KubeObjectRef("v1", "ConfigMap", "none", "default")) is None
        assert runs.read_text() == "xx"
        hub.loop.close()
    finally:
        conn.close()


def test_a_cluster_is_reached_from_its_clusterprofile_through_the_consumers_provider(
        cluster: KubeCluster, tmp_path: Path) -> None:
    """A ClusterProfile stored under the upstream CRD lists where its cluster is for an
    access provider; the consumer's provider file names that provider's exec plugin,
    which learns from the cluster's exec extension which token to read (as the
    reference secretreader plugin reads a Secret): the credential comes from the
    plugin, never from the profile."""
    crd = yaml.safe_load((CRDS / "multicluster.x-k8s.io_clusterprofiles.yaml").read_text())
    cluster.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd,
                    ok=(201, 409))
    base = "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/default/clusterprofiles"
    deadline = time.monotonic() + 30
    while not any(c.get("type") == "Established" and c.get("status") == "True" for c in (
            cluster.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                            "clusterprofiles.multicluster.x-k8s.io").get("status") or {}
            ).get("conditions") or []):
        assert time.monotonic() < deadline, "the ClusterProfile CRD was never established"
        time.sleep(0.2)
    token = tmp_path / "spoke-1.token"
    token.write_text(cluster.token)
    said = cluster.kubeconfig()["clusters"][0]["cluster"]
    body = {"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
            "metadata": {"name": "spoke-1"},
            "spec": {"displayName": "spoke-1", "clusterManager": {"name": "test-hub"}}}
    while True:  # established, and served once discovery has it
        try:
            cluster.request("POST", base, body, ok=(201, 409))
            break
        except (OSError, ServerUnavailable):
            assert time.monotonic() < deadline, "the ClusterProfile CRD was never served"
            time.sleep(0.5)
    stored = cluster.request("GET", f"{base}/spoke-1")
    stored["status"] = {"accessProviders": [{"name": "token-reader", "cluster": {
        "server": said["server"], "certificate-authority-data": said["certificate-authority-data"],
        "extensions": [{"name": "client.authentication.k8s.io/exec",
                        "extension": {"tokenFile": str(token)}}]}}]}
    cluster.request("PUT", f"{base}/spoke-1/status", stored)
    profile = cluster.request("GET", f"{base}/spoke-1")  # as a consumer lists it
    plugin = token_reader(tmp_path / "reader.py")
    offered = providers({"providers": [
        {"name": "gke-fleet", "execConfig": {"command": "absent"}},
        {"name": "token-reader", "execConfig": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
            "args": [str(plugin)], "provideClusterInfo": True}}]})
    config = kubeconfig(profile, offered)
    assert cluster.token not in json.dumps(config)  # the credential is in no kubeconfig
    conn = Connection(config, 5.0)
    try:
        assert conn.probe(5.0).state == "ONLINE"
        assert conn.get(KubeObjectRef("v1", "ConfigMap", "none", "default")) is None
    finally:
        conn.close()
    cluster.request("DELETE", f"{base}/spoke-1", ok=(200, 404))


def test_tls_by_the_ca_skipped_when_said_and_refused_with_another_ca(
        cluster: KubeCluster, tmp_path: Path) -> None:
    insecure = cluster.kubeconfig()
    insecure["clusters"][0]["cluster"] = {"server": cluster.url,
                                          "insecure-skip-tls-verify": True}
    conn = Connection(insecure, 5.0)
    try:
        assert conn.probe(5.0).state == "ONLINE"
    finally:
        conn.close()
    # CAs that did not sign the server's certificate: the system's (Debian's ca-certificates)
    wrong_ca = Path(ssl.get_default_verify_paths().openssl_cafile)
    assert wrong_ca.exists(), f"{wrong_ca}: install ca-certificates"
    wrong = with_user(cluster, {"token": cluster.token}, **{
        "certificate-authority-data": base64.b64encode(wrong_ca.read_bytes()).decode()})
    conn = Connection(wrong, 5.0)
    try:
        probe = conn.probe(5.0)
        assert probe.state == "OFFLINE" and "CERTIFICATE_VERIFY_FAILED" in probe.reason, probe
    finally:
        conn.close()
    assert json.dumps(probe.reason).find(cluster.token) == -1  # never the credentials
