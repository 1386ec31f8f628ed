"""Least privilege on a real etcd with mutual TLS and authentication, set up by
scripts/etcd-secure.sh: each process works under its own role and is refused
outside it; cluster credentials live apart and never show in a log or the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from berth.store import EtcdConfig, Put, Store, Unauthorized, keys
from tests.integration.scheduler_env import (
    MetricsCacheProcess,
    PropagatorProcess,
    SchedulerProcess,
    wait_for,
)
from tests.servers.etcd import ROOT, EtcdServer, ServerUnavailable, Tls, make_tls
from tests.servers.kube import KubeCluster
from tests.servers.serving import serving

pytestmark = pytest.mark.integration

USERS = ("berth-scheduler", "berth-propagator", "berth-metrics-cache", "berth-admin")


@dataclass
class Secure:
    etcd: EtcdServer
    tls: Tls
    passwords: Path

    def env(self, user: str) -> dict[str, str]:
        return {"BERTH_ETCD": self.etcd.url, "BERTH_ETCD_CA": self.tls.ca,
                "BERTH_ETCD_CERT": self.tls.client_cert, "BERTH_ETCD_KEY": self.tls.client_key,
                "BERTH_ETCD_USER": user,
                "BERTH_ETCD_PASSWORD": (self.passwords / user).read_text().strip()}

    def store(self, user: str) -> Store:
        env = self.env(user)
        return Store(EtcdConfig(url=self.etcd.url, ca=self.tls.ca, cert=self.tls.client_cert,
                                key=self.tls.client_key, user=user,
                                password=env["BERTH_ETCD_PASSWORD"], timeout=5))

    def berth(self, user: str, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run([sys.executable, "-m", "berth.cli.main", *args], input=stdin,
                              capture_output=True, text=True, timeout=60, cwd=ROOT,
                              env={**os.environ, **self.env(user)})
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    tls = make_tls(tmp_path_factory.mktemp("tls"))
    try:
        etcd = EtcdServer(tls=tls, client_cert_auth=True).start()
    except ServerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    passwords = tmp_path_factory.mktemp("passwords")
    env = {**os.environ, "ETCDCTL_ENDPOINTS": etcd.url, "ETCDCTL_CACERT": tls.ca,
           "ETCDCTL_CERT": tls.client_cert, "ETCDCTL_KEY": tls.client_key,
           "ETCDCTL": str(etcd.bindir / "etcdctl")}
    for _ in range(2):  # a second run changes nothing and succeeds
        done = subprocess.run(["bash", str(ROOT / "scripts/etcd-secure.sh"), str(passwords)],
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    assert oct(passwords.stat().st_mode)[-3:] == "700"
    yield Secure(etcd, tls, passwords)
    etcd.cleanup()


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeCluster]:
    yield from serving(lambda: KubeCluster("roles"))


def documents(kube: KubeCluster) -> str:
    """A cluster with its token inline (Krake's shape), a metric, an application."""
    return yaml.safe_dump_all([
        {"api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "static"},
         "spec": {"type": "static", "static": {"metrics": {"heat": 0.4}}}},
        {"api": "core", "kind": "GlobalMetric", "metadata": {"name": "heat"},
         "spec": {"min": 0, "max": 1, "provider": {"name": "static", "metric": "heat"}}},
        {"api": "kubernetes", "kind": "Cluster",
         "metadata": {"name": "east", "namespace": "default", "labels": {"zone": "z1"}},
         "spec": {"kubeconfig": kube.kubeconfig(), "metrics": [{"name": "heat",
                                                              "weight": 1}]}},
        {"api": "kubernetes", "kind": "Application",
         "metadata": {"name": "web", "namespace": "default"},
         "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "web"}, "data": {"a": "1"}}]}},
    ])


def test_each_process_works_under_its_role(secure: Secure, kube: KubeCluster,
                                           tmp_path: Path) -> None:
    said = secure.berth("berth-admin", "bootstrap", "-", stdin=documents(kube))
    admin = secure.store("berth-admin")
    cluster = admin.get(keys.resource_key("Cluster", "east", "default"))
    assert cluster is not None and kube.token.encode() not in cluster.value
    secret = admin.get(keys.credentials_key("default", "east"))
    assert secret is not None and kube.token.encode() in secret.value
    procs = [cls(secure.etcd.url, tmp_path, name="r", env=secure.env(f"berth-{cls.command}"),
                 config=config).start()
             for cls, config in ((SchedulerProcess, ""),
                                 (PropagatorProcess, "probe_interval: 0.5\n"),
                                 (MetricsCacheProcess, "poll_interval: 0.5\n"))]
    try:
        status_key = keys.status_key("Application", "default", "web")
        running = wait_for(lambda: admin.get(status_key),
                           lambda kv: b'"RUNNING"' in kv.value, timeout=90)
        assert b'"east"' in running.value
        wait_for(lambda: admin.get(keys.metric_value_key("heat")), timeout=30)  # the cache wrote
        # The CLI, as the admin, shows the cluster without its token; so does apply's diff.
        shown = secure.berth("berth-admin", "get", "clusters", "-o", "yaml")
        shown += secure.berth("berth-admin", "describe", "cluster", "east")
        shown += secure.berth("berth-admin", "bootstrap", "--dry-run", "--force", "-",
                              stdin=documents(kube))
        secrets = [kube.token] + [(secure.passwords / u).read_text().strip() for u in USERS]
        logs = "".join(p.output() for p in procs) + said + shown
        leaked = [s[:6] + "…" for s in secrets if s in logs]
        assert not leaked, f"credentials in logs or CLI output: {leaked}"
        for p in procs:  # and nothing was refused along the way
            assert "permission denied" not in p.output(), p.log.name
    finally:
        for p in procs:
            p.stop()
        admin.close()


@pytest.mark.parametrize(("user", "op", "key"), [
    ("berth-scheduler", "write", keys.resource_key("Application", "x", "default")),
    ("berth-scheduler", "write", keys.status_key("Application", "default", "x")),
    ("berth-scheduler", "read", keys.credentials_key("default", "east")),
    ("berth-scheduler", "list", keys.SECRETS),
    ("berth-propagator", "write", keys.binding_key("Application", "default", "x")),
    ("berth-propagator", "write", keys.resource_key("Cluster", "x", "default")),
    ("berth-propagator", "write", keys.METRIC_PICTURE),
    ("berth-metrics-cache", "write", keys.resource_key("Cluster", "x", "default")),
    ("berth-metrics-cache", "write", keys.binding_key("Application", "default", "x")),
    ("berth-metrics-cache", "read", keys.credentials_key("default", "east")),
    ("berth-metrics-cache", "list", keys.SECRETS),
    ("berth-admin", "write", keys.binding_key("Application", "default", "x")),
    ("berth-admin", "write", keys.status_key("Application", "default", "x")),
    ("berth-admin", "write", keys.METRIC_PICTURE),
    ("berth-admin", "write", keys.lease_key("scheduler")),
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


def test_only_the_propagator_and_the_loader_read_credentials(secure: Secure) -> None:
    for user in ("berth-propagator", "berth-admin"):
        store = secure.store(user)
        try:
            store.list_prefix(keys.SECRETS)  # allowed: no error
        finally:
            store.close()
