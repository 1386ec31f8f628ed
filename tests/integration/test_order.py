"""A copy's objects in the order they need, on a working cluster (docs/order.md), in
Push and Pull mode: an operator's manifest written in the worst order — its custom
resource, its Deployment, its CRD, its ConfigMap — is applied as what others need
(the ConfigMap; the CRD, Established), then the workload (available), then the custom
resource; removed in reverse, the workload and the ConfigMap stay while the custom
resource's finalizer holds it. A sampler reads the four objects every 0.1 s. The
logic in memory: tests/unit/controllers/propagator/test_order.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from berth.store import Store, decode, encode, keys
from berth.store.documents import ApplicationStatus
from berth_testkit.scheduler_env import (
    PropagatorProcess,
    SchedulerProcess,
    agents_for,
    put,
    reached,
    started,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster

HOLD = "example.com/hold"  # a finalizer no controller removes: the test does
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com"
PATHS = {"cfg": "/api/v1/namespaces/default/configmaps/cfg",
         "operator": "/apis/apps/v1/namespaces/default/deployments/operator",
         "widget": "/apis/example.com/v1/namespaces/default/widgets/w"}
MANIFEST: list[dict[str, Any]] = [  # the worst order a manifest can have
    {"apiVersion": "example.com/v1", "kind": "Widget",
     "metadata": {"name": "w", "finalizers": [HOLD]}, "spec": {"size": 1}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "operator"},
     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "operator"}},
              "template": {"metadata": {"labels": {"app": "operator"}}, "spec": {
                  "containers": [{"name": "c", "image": "example/operator:1"}]}}}},
    {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
     "metadata": {"name": "widgets.example.com"},
     "spec": {"group": "example.com", "scope": "Namespaced",
              "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
              "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                  "openAPIV3Schema": {"type": "object",
                                      "x-kubernetes-preserve-unknown-fields": True}}}]}},
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
     "data": {"mode": "fast"}},
]


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeCluster]:
    server = KubeCluster("order", ready_delay=2.0, pods="ready").start()
    try:
        yield server
    finally:
        server.cleanup()


@pytest.fixture(params=["Push", "Pull"])  # the agent applies in steps as the propagator
def berth(request: pytest.FixtureRequest, etcd_server: EtcdServer, store: Store,
          tmp_path: Path, kube: KubeCluster) -> Iterator[None]:
    put(store, keys.resource_key("Cluster", "one", "default"), encode({
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": "one", "namespace": "default"},
        "spec": reached(request.param, kube.kubeconfig())}))
    # a custom resource with no condition counts available 1 s after it is applied
    procs = [SchedulerProcess(etcd_server.url, tmp_path),
             PropagatorProcess(etcd_server.url, tmp_path, config=(
                 "probe_interval: 0.5\nretry_base_delay: 0.2\nretry_max_delay: 1\n"
                 "untracked_after: 1\n"))]
    procs += agents_for(request.param, etcd_server.url, tmp_path, {"one": kube.kubeconfig()},
                        config="probe_interval: 0.5\nretry_base_delay: 0.2\n"
                               "retry_max_delay: 1\nuntracked_after: 1\n")
    with started(procs, store, ["one"]):
        yield


@dataclass
class Sample:
    at: float
    crd: bool  # there and Established
    cfg: bool
    operator: int | None  # its available replicas (None: not there)
    widget: str  # "" absent, "there", or "going" (deletion began)


class Sampler:
    """The four objects read every 0.1 s, and the application's status: every error it
    ever said is kept."""

    def __init__(self, kube: KubeCluster, store: Store) -> None:
        self.kube, self.store = kube, store
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self.failed: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="order-sampler")

    def _get(self, path: str) -> dict[str, Any]:
        return self.kube.request("GET", path, ok=(404,))

    def _run(self) -> None:
        try:
            self._sample()
        except Exception as exc:  # raised in the test, not lost on the thread
            self.failed = exc

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            crd = self._get(CRD)
            # (a CRD just made may say ``conditions: null``: none yet)
            established = any(c.get("type") == "Established" and c.get("status") == "True"
                              for c in (crd.get("status") or {}).get("conditions") or [])
            op = self._get(PATHS["operator"])
            widget = self._get(PATHS["widget"]) if crd else {}
            self.samples.append(Sample(
                time.monotonic(), established, bool(self._get(PATHS["cfg"])),
                (op.get("status") or {}).get("availableReplicas") or 0 if op else None,
                "" if not widget else
                "going" if widget["metadata"].get("deletionTimestamp") else "there"))
            kv = self.store.get(keys.status_key("Application", "default", "op"))
            if kv is not None:
                st = decode(kv.value, ApplicationStatus, kv.key).status
                self.errors += [f"{c}: {e}" for c, e in st.errors.items()]

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)
        if self.failed is not None:
            raise self.failed


def status(store: Store) -> ApplicationStatus | None:
    kv = store.get(keys.status_key("Application", "default", "op"))
    return decode(kv.value, ApplicationStatus, kv.key) if kv else None


def test_an_operators_objects_go_in_the_order_they_need_and_leave_in_reverse(
        berth: None, store: Store, kube: KubeCluster) -> None:
    key = keys.resource_key("Application", "op", "default")
    with Sampler(kube, store) as sampler:
        put(store, key, encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": "op", "namespace": "default", "generation": 1},
            "spec": {"manifest": MANIFEST}}))
        waited = wait_for(lambda: status(store), lambda s: "waits for" in s.status.reason,
                          timeout=60)
        wait_for(lambda: status(store), lambda s: s.status.state == "RUNNING", timeout=90)
        assert not sampler.errors, sampler.errors  # the first pass: no error said
        made = len(sampler.samples)
        store.delete(key)
        wait_for(lambda: sampler.samples[-1] if sampler.samples else None,
                 lambda s: s.widget == "going", timeout=60)
        time.sleep(3)  # the custom resource held: what it needs stays
        going = [s for s in sampler.samples[made:] if s.widget == "going"]
        kube.request("PATCH", PATHS["widget"], {"metadata": {"finalizers": None}},
                     content="merge")
        wait_for(lambda: sampler.samples[-1] if sampler.samples else None,
                 lambda s: not s.crd and not s.cfg and s.operator is None, timeout=60)
    samples = sampler.samples
    first_op = next(s for s in samples if s.operator is not None)
    assert first_op.cfg and first_op.crd, first_op  # what others need, first and ready
    first_widget = next(s for s in samples if s.widget)
    assert first_widget.operator, first_widget  # the operator available before its resource
    assert "waits for" in waited.status.reason, waited.status.reason
    assert going and all(s.operator is not None and s.cfg and s.crd for s in going), going
    after = samples[made:]
    assert not [s for s in after if s.operator is not None and not s.cfg], (
        "the ConfigMap went before the workload that needs it")
    assert not [s for s in after if s.widget and not s.crd], "the CRD went before its resource"
    assert wait_for(lambda: None if status(store) else True, timeout=30)  # the status went
