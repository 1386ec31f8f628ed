"""Deferrable work, end to end: a static provider's price series through the real
metrics-cache, scheduler and propagator on a real etcd and a real kube-apiserver. The
work waits Pending (nothing on the cluster) for the cheaper hour, starts then on the
cluster that is cheapest then, and work whose deadline comes first starts at once."""

from __future__ import annotations

import contextlib
import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from lightkube import Client, KubeConfig
from lightkube.resources.core_v1 import ConfigMap

from berth.cli.main import main
from berth.store import Store, encode, keys
from berth_testkit.scheduler_env import (
    MetricsCacheProcess,
    PropagatorProcess,
    SchedulerProcess,
    application,
    binding,
    put,
    targets,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving
from tests.integration.test_propagator_apply import present


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeCluster]:
    yield from serving(lambda: KubeCluster("deferral"))


@pytest.fixture
def processes(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[None]:
    cache = MetricsCacheProcess(etcd_server.url, tmp_path, config="poll_interval: 0.5\n"
                                "lease_ttl: 2\n").start()
    scheduler = SchedulerProcess(etcd_server.url, tmp_path, config="deferral_margin: 2\n"
                                 "reschedule_after: 1\n").start()
    propagator = PropagatorProcess(etcd_server.url, tmp_path, config="probe_interval: 0.5\n"
                                   "retry_base_delay: 0.2\nretry_max_delay: 1\n").start()
    yield
    for proc in (scheduler, cache, propagator):
        proc.stop()
        print(proc.output()[-3000:])


def test_deferred_work_waits_for_the_cheaper_start_and_never_past_its_deadline(
    store: Store, processes: None, kube: KubeCluster, tmp_path: Path
) -> None:
    client = Client(KubeConfig.from_dict(kube.kubeconfig()), trust_env=False)
    for name in ("a", "b"):
        # Two contexts of one API server: the work goes to one of them only. The price
        # is a cost (lower is better), not a score (higher is better): weight 0.
        put(store, keys.resource_key("Cluster", name, "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"kubeconfig": kube.kubeconfig(),
                     "metrics": [{"name": f"price-{name}", "weight": 0.0}]}}))
    for name in ("a", "b"):
        wait_for(lambda name=name: store.get(keys.status_key("Cluster", "default", name)),
                 lambda kv: b'"ONLINE"' in kv.value, timeout=30)
    now = time.time()
    drop = now + 20  # b's price falls from 50 to 10 then; a stays at 80
    put(store, keys.resource_key("GlobalMetricsProvider", "prices"), encode({
        "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "prices"},
        "spec": {"type": "static", "static": {"series": {
            "a": [{"at": iso(now - 60), "value": 80}],
            "b": [{"at": iso(now - 60), "value": 50}, {"at": iso(drop), "value": 10}]}}}}))
    for name in ("a", "b"):
        put(store, keys.resource_key("GlobalMetric", f"price-{name}"), encode({
            "api": "core", "kind": "GlobalMetric",
            "metadata": {"name": f"price-{name}", "labels": {"berth.dev/measures": "price"}},
            "spec": {"min": 0, "max": 100, "provider": {"name": "prices", "metric": name}}}))
    # As in a running fleet, the values are published before work comes (without any,
    # deferrable work waits for them up to its latest start: another test's case).
    for name, price in (("a", 80), ("b", 50)):
        wait_for(lambda name=name: store.get(keys.metric_value_key(f"price-{name}")),
                 lambda kv, price=price: msgspec.json.decode(kv.value)["status"].get(
                     "value") == price, timeout=20)
    time.sleep(1.0)  # the picture that makes them count follows them
    now = time.time()
    assert now < drop - 5, "the values took too long to come"
    application(store, "batch", placement={"startBefore": iso(now + 60), "costMetric": "price"},
                migration=False)  # a batch job: not moved once started
    application(store, "urgent", placement={"startBefore": iso(now + 6),
                                            "costMetric": "price"})

    pending = wait_for(lambda: binding(store, "batch"), lambda b: b.status.state == "Pending",
                       timeout=20)
    assert pending.spec.targets == []
    assert pending.status.reason.startswith(f"deferred until {iso(drop)[:19]}Z: price is "
                                            "forecast lowest then, on b")
    [note] = pending.status.explanation
    assert note["deferred"]["cost"] == 10 and note["deferred"]["cheapest_now"] == 50
    # What-if answers as the scheduler decided: deferred, not "Scheduled on b" (exit 1:
    # not placed now).
    doc = msgspec.json.decode(store.get(keys.resource_key("Application", "batch",
                                                          "default")).value)  # type: ignore[union-attr]
    asked = tmp_path / "batch.json"
    asked.write_text(msgspec.json.encode(doc).decode())
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        code = main(["explain", "--what-if", str(asked), "-o", "json", "--etcd",
                     store.config.url])
    answer = json.loads(said.getvalue())["answers"][0]
    assert (code, answer["state"], answer["targets"]) == (1, "Pending", ["b"])
    assert answer["reason"].startswith(f"deferred until {iso(drop)[:19]}Z")
    assert not present(client, ConfigMap, "batch")  # Pending: nothing runs yet
    # Its latest start (6 s less the 2 s margin) comes before b's drop: it starts now,
    # on the cheapest cluster now.
    urgent = wait_for(lambda: binding(store, "urgent"), lambda b: b.status.state == "Scheduled",
                      timeout=20)
    assert targets(urgent) == ["b"] and urgent.spec.scheduled is not None
    assert urgent.spec.scheduled.timestamp() <= now + 4
    wait_for(lambda: present(client, ConfigMap, "urgent") or None, timeout=20)
    assert not present(client, ConfigMap, "batch")

    started = wait_for(lambda: binding(store, "batch"), lambda b: b.status.state == "Scheduled",
                       timeout=40)
    assert targets(started) == ["b"]
    assert started.spec.scheduled is not None
    assert drop - 1 <= started.spec.scheduled.timestamp() <= now + 58
    wait_for(lambda: present(client, ConfigMap, "batch") or None, timeout=20)  # runs now
    client.close()
