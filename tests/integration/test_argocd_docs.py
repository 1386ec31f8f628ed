"""docs/argocd.md, followed: its files as written (the Export with the test API
server's address and a token of the page's ServiceAccount, under exactly the rights
the page's RBAC file grants, in place of the example's), berth's four processes, and
the ApplicationSet's generator as Argo CD runs it (``berth_testkit.argocd``). Argo
CD's Applications, rendered from the ApplicationSet's template, point at the cluster
whose energy is cheapest; when the price changes, at the other one."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from berth.store import keys
from berth_testkit.argocd import generate_params
from berth_testkit.scheduler_env import (
    ExporterProcess,
    MetricsCacheProcess,
    PropagatorProcess,
    SchedulerProcess,
    stop_all,
)
from berth_testkit.servers.etcd import ROOT, EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "argocd"


@pytest.fixture(scope="module")
def hub() -> Iterator[KubeCluster]:
    """Argo CD's cluster; it stands for the two workload clusters too (berth deploys
    nothing there: Argo CD would)."""
    yield from serving(lambda: KubeCluster("argo-hub", nodes=0))


def berth_cli(etcd: EtcdServer, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "berth.cli.main", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "BERTH_ETCD": etcd.url})
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def _render(template: Any, params: dict[str, str]) -> Any:
    """An ApplicationSet template with ``{{key}}`` replaced (Argo CD's fasttemplate)."""
    if isinstance(template, str):
        return re.sub(r"\{\{\s*([\w.]+)\s*\}\}", lambda m: params.get(m.group(1), m.group(0)),
                      template)
    if isinstance(template, dict):
        return {k: _render(v, params) for k, v in template.items()}
    if isinstance(template, list):
        return [_render(v, params) for v in template]
    return template


RBAC_PATHS = {  # where each kind of the page's RBAC file is created
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
}


def exporter_kubeconfig(hub: KubeCluster) -> dict[str, Any]:
    """The page's RBAC file applied as written, and a kubeconfig with a token of its
    ServiceAccount: the exporter has the rights the page lists, and no others."""
    for doc in yaml.safe_load_all((EXAMPLES / "exporter-rbac.yaml").read_text()):
        path = RBAC_PATHS[doc["kind"]].format(ns=doc["metadata"].get("namespace"))
        hub.request("POST", path, doc, ok=(200, 201, 409))
    token = hub.request("POST", "/api/v1/namespaces/argocd/serviceaccounts/berth-exporter/"
                        "token", {"apiVersion": "authentication.k8s.io/v1",
                                  "kind": "TokenRequest", "spec": {}})["status"]["token"]
    kubeconfig = hub.kubeconfig()
    kubeconfig["users"] = [{"name": "admin", "user": {"token": token}}]
    return kubeconfig


def test_the_argocd_page_works_as_written(etcd_server: EtcdServer, store: Any,
                                          hub: KubeCluster, tmp_path: Path) -> None:
    hub.request("POST", "/api/v1/namespaces", {"metadata": {"name": "argocd"}},
                ok=(200, 201, 409))  # Argo CD's, as its installation makes it
    export = yaml.safe_load((EXAMPLES / "export.yaml").read_text())
    export["spec"]["kubeconfig"] = exporter_kubeconfig(hub)
    clusters = [{"api": "kubernetes", "kind": "Cluster",
                 "metadata": {"name": c, "namespace": "default"},
                 "spec": {"kubeconfig": hub.kubeconfig(),
                          "metrics": [{"name": f"headroom-{c}", "weight": 1}]}}
                for c in ("paris", "oslo")]
    placement = (EXAMPLES / "placement.yaml").read_text()
    berth_cli(etcd_server, "apply", "-f", "-",
              stdin=yaml.safe_dump_all([export, *clusters]) + "---\n" + placement)
    procs = [cls(etcd_server.url, tmp_path, config=config).start() for cls, config in (
        (SchedulerProcess, "reschedule_after: 1\n"),
        (PropagatorProcess, "probe_interval: 0.5\n"),
        (MetricsCacheProcess, "poll_interval: 0.5\n"),
        (ExporterProcess, ""))]
    try:
        for name in ("paris", "oslo"):  # Argo CD knows the clusters by berth's names
            hub.request("POST", "/api/v1/namespaces/argocd/secrets", {
                "metadata": {"name": f"cluster-{name}",
                             "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
                "data": {k: base64.b64encode(v.encode()).decode() for k, v in (
                    ("name", name), ("server", f"https://{name}.example:6443"))}},
                ok=(200, 201, 409))
        appset = yaml.safe_load((EXAMPLES / "applicationset.yaml").read_text())
        generator = appset["spec"]["generators"][0]["clusterDecisionResource"]

        def applications() -> list[dict[str, Any]] | None:
            params = generate_params(lambda m, p: hub.request(m, p), "argocd", generator)
            return None if params is None else [
                _render(appset["spec"]["template"], p) for p in params]

        apps = _until(lambda: applications(), lambda a: len(a) == 1, 90, "web placed")
        assert apps[0]["metadata"]["name"] == "web-oslo"  # headroom 0.31 > 0.22
        params = generate_params(lambda m, p: hub.request(m, p), "argocd", generator)
        assert params is not None and params[0]["reason"].startswith("current: score 0.7")
        assert apps[0]["spec"]["destination"]["server"] == "https://oslo.example:6443"
        # the price in Paris falls: berth moves web, and Argo CD follows
        berth_cli(etcd_server, "apply", "-f", "-", stdin=placement.replace(
            "headroom_paris: 0.22", "headroom_paris: 0.38"))
        apps = _until(lambda: applications(), lambda a: [x["metadata"]["name"] for x in a]
                      == ["web-paris"], 90, "web moved to paris")
        assert apps[0]["spec"]["destination"]["server"] == "https://paris.example:6443"
        shown = berth_cli(etcd_server, "get", "exports", "-o", "wide")
        # as the page shows it: two ClusterProfiles and a PlacementDecision of each kind
        assert re.search(r"argocd\s+argocd\s+\S+\s+Synced\s+4\s", shown), shown
        described = berth_cli(etcd_server, "describe", "export", "argocd")
        assert "Exported:    Synced" in described, described
        assert "1 OCMPlacementDecision" in described and "2 ClusterProfile" in described
        assert "REPLACE-WITH" not in described and hub.token not in described
        kv = store.get(keys.exported_key("argocd"))
        assert kv is not None and b'"Synced"' in kv.value
        for p in procs:
            assert "Traceback" not in p.output(), p.log.name
    finally:
        stop_all(procs)


def _until(get: Callable[[], Any], check: Callable[[Any], bool], timeout: float,
           what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = get()
        except Exception as exc:  # no decision object yet: Argo CD's generator errs
            last = exc
        else:
            if last is not None and check(last):
                return last
        time.sleep(0.3)
    raise AssertionError(f"{what}: not in {timeout:g} s (last: {last!r})")

