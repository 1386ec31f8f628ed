"""The metrics an operator alerts on, scraped from the three real processes: cluster
state, applications by state, queue depths, latencies, metric value age and provider
errors, etcd requests, build info."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from berth.store import Store, keys
from berth_testkit.scheduler_env import (
    MetricsCacheProcess,
    PropagatorProcess,
    SchedulerProcess,
    application,
    put,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeCluster]:
    yield from serving(lambda: KubeCluster("metrics"))


def sample(text: str, name: str, **labels: str) -> float | None:
    """The value of one sample in a Prometheus text exposition (None: absent)."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0]))
        if line[len(name)] in "{ " and all(found.get(k) == v for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_an_operator_can_alert_on_what_matters(store: Store, etcd_server: EtcdServer,
                                               kube: KubeCluster, tmp_path: Path) -> None:
    put(store, keys.resource_key("Cluster", "a", "default"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": "a", "namespace": "default", "labels": {"zone": "z1"}},
        "spec": {"kubeconfig": kube.kubeconfig(), "metrics": [{"name": "heat", "weight": 1}]}}))
    put(store, keys.resource_key("Cluster", "gone", "default"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": "gone", "namespace": "default", "labels": {"zone": "z9"}},
        "spec": {"kubeconfig": {**kube.kubeconfig(), "clusters": [{"name": "x", "cluster": {
            "server": "https://127.0.0.1:9"}}]}}}))
    put(store, keys.resource_key("GlobalMetricsProvider", "static"), msgspec.json.encode({
        "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "static"},
        "spec": {"type": "static", "static": {"metrics": {"heat": 0.5}}}}))
    for name, provider in (("heat", "static"), ("nowhere", "static")):
        put(store, keys.resource_key("GlobalMetric", name), msgspec.json.encode({
            "api": "core", "kind": "GlobalMetric", "metadata": {"name": name},
            "spec": {"min": 0, "max": 1, "provider": {"name": provider, "metric": name}}}))
    put(store, keys.resource_key("Cluster", "b", "default"), msgspec.json.encode({
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": "b", "namespace": "default", "labels": {"zone": "z2"}},
        "spec": {"kubeconfig": kube.kubeconfig(), "metrics": [{"name": "nowhere",
                                                              "weight": 1}]}}))
    config = "probe_interval: 0.5\nprobe_timeout: 1\ngrace: 1\n"
    procs = [SchedulerProcess(etcd_server.url, tmp_path, name="m").start(),
             PropagatorProcess(etcd_server.url, tmp_path, config=config, name="m").start(),
             MetricsCacheProcess(etcd_server.url, tmp_path, config="poll_interval: 0.5\n",
                                 name="m").start()]
    scheduler, propagator, cache = procs
    try:
        wait_for(lambda: sample(scheduler.metrics(), "berth_scheduler_queue_depth",
                                queue="active"), timeout=60)  # leading and synced
        application(store, "fits", constraints={"cluster": {"labels": ["zone is z1"]}})
        application(store, "nowhere", constraints={"cluster": {"labels": ["zone is z7"]}})
        wait_for(lambda: sample(propagator.metrics(), "berth_applications",
                                state="RUNNING") == 1.0 or None, timeout=90)
        p = propagator.metrics()
        assert sample(p, "berth_cluster_state", cluster="default/a", state="ONLINE") == 1.0
        assert sample(p, "berth_cluster_state", cluster="default/a", state="OFFLINE") == 0.0
        assert wait_for(lambda: sample(propagator.metrics(), "berth_cluster_state",
                                       cluster="default/gone", state="OFFLINE") == 1.0 or None,
                        timeout=30)
        p = propagator.metrics()
        assert sample(p, "berth_applications", state="Unschedulable") == 1.0
        assert sample(p, "berth_applications", state="FAILED") == 0.0  # present at 0
        assert (sample(p, "berth_propagator_binding_to_available_seconds_count") or 0) >= 1
        s = scheduler.metrics()
        assert sample(s, "berth_scheduler_queue_depth", queue="unschedulable") == 1.0
        assert (sample(s, "berth_scheduler_application_to_binding_seconds_count") or 0) >= 2
        m = wait_for(cache.metrics, lambda t: sample(
            t, "berth_metrics_cache_series", provider="static", state="UNKNOWN_METRIC") == 1.0,
            timeout=30)
        assert sample(m, "berth_metrics_cache_series", provider="static", state="OK") == 1.0
        # each metric's current value, for Grafana to chart over time
        assert sample(m, "berth_metric_value", namespace="", metric="heat",
                      provider="static") == 0.5
        assert sample(m, "berth_metric_normalized", namespace="", metric="heat",
                      provider="static") == 0.5
        assert sample(m, "berth_metric_value", namespace="", metric="nowhere",
                      provider="static") is None  # no value: no sample
        age = sample(m, "berth_metrics_cache_value_age_seconds", provider="static")
        assert age is not None and 0 <= age < 30
        for proc in procs:
            text = proc.metrics()
            assert sample(text, "berth_build_info", version="0.1.0") == 1.0, proc.log.name
            assert (sample(text, "berth_etcd_request_seconds_count", op="kv/range") or 0) > 0
            assert sample(text, "berth_etcd_member", endpoint=etcd_server.url) == 1.0
    finally:
        for proc in procs:
            proc.stop()
