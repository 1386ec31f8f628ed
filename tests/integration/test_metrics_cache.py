"""The real `berth metrics-cache` process against a real etcd and a real Prometheus."""

from __future__ import annotations

import io
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import yaml

from berth.bootstrap import load, plan, write
from berth.controllers.metrics_cache.cache import MetricsCache
from berth.controllers.metrics_cache.config import MetricsCacheConfig
from berth.store import Store, Watch, decode, encode, keys
from berth.store.documents import MetricPicture, MetricValue
from berth_testkit.scheduler_env import (
    MetricsCacheProcess,
    cluster,
    put,
    record_puts,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kafka import KafkaServer, produce
from berth_testkit.servers.ksql import KsqlServer
from berth_testkit.servers.prometheus import PrometheusServer
from berth_testkit.servers.serving import serving

CONFIG = "poll_interval: 0.5\nlease_ttl: 2\nstale_after: 2\ntimeout: 1\nretries: 0\n"


@pytest.fixture
def cache(etcd_server: EtcdServer, store: Store, tmp_path: Path) -> Iterator[MetricsCacheProcess]:
    proc = MetricsCacheProcess(etcd_server.url, tmp_path, config=CONFIG).start()
    yield proc
    proc.stop()
    print(proc.output()[-3000:])


@pytest.fixture(scope="module")
def prometheus() -> Iterator[PrometheusServer]:
    yield from serving(lambda: PrometheusServer())


def provider(store: Store, name: str, spec: dict[str, object]) -> None:
    put(store, keys.resource_key("GlobalMetricsProvider", name), encode({
        "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": name},
        "spec": spec}))


def metric(store: Store, name: str, provider_name: str, query: str, lo: float = 0,
           hi: float = 5) -> None:
    put(store, keys.resource_key("GlobalMetric", name), encode({
        "api": "core", "kind": "GlobalMetric", "metadata": {"name": name},
        "spec": {"min": lo, "max": hi, "provider": {"name": provider_name, "metric": query}}}))


def value(store: Store, name: str) -> MetricValue | None:
    kv = store.get(keys.metric_value_key(name))
    return decode(kv.value, MetricValue, kv.key) if kv else None


def test_static_values_reach_etcd_and_follow_the_spec(store: Store,
                                                     cache: MetricsCacheProcess) -> None:
    provider(store, "static", {"type": "static", "static": {"metrics": {"heat": 0.9,
                                                                        "unused": 1}}})
    metric(store, "heat", "static", "heat")
    metric(store, "unused", "static", "unused")
    cluster(store, "c", metrics={"heat": 1.0})
    v = wait_for(lambda: value(store, "heat"))
    assert (v.status.value, v.status.normalized) == (0.9, pytest.approx(0.18))
    assert v.status.provider is not None and v.status.provider.type == "static"
    assert store.get(keys.metric_value_key("heat")).lease != 0  # type: ignore[union-attr]
    provider(store, "static", {"type": "static", "static": {"metrics": {"heat": 4.5}}})
    wait_for(lambda: value(store, "heat"), lambda v: v.status.value == 4.5, timeout=5)
    assert value(store, "unused") is None  # referenced by no cluster: never polled


def test_a_value_is_written_only_when_it_changes(store: Store,
                                                cache: MetricsCacheProcess) -> None:
    provider(store, "static", {"type": "static", "static": {"metrics": {"m": 1.0}}})
    metric(store, "m", "static", "m")
    cluster(store, "c", metrics={"m": 1.0})
    wait_for(lambda: value(store, "m"))
    writes: list[int] = []
    watch = Watch(store, keys.metric_value_key("m"), store.revision() + 1)
    threading.Thread(target=lambda: [writes.extend(e.mod_revision for e in b.events)
                                     for b in watch], daemon=True).start()
    time.sleep(3)  # six polls
    watch.close()
    assert writes == []


def test_a_missing_provider_and_bad_ranges_are_reasons_not_crashes(
    store: Store, cache: MetricsCacheProcess
) -> None:
    metric(store, "orphan", "no-such-provider", "x")
    provider(store, "static", {"type": "static", "static": {"metrics": {"flat": 3, "high": 9}}})
    metric(store, "flat", "static", "flat", lo=1, hi=1)
    metric(store, "high", "static", "high", lo=0, hi=5)
    cluster(store, "c", metrics={"orphan": 1.0, "flat": 1.0, "high": 1.0})
    orphan = wait_for(lambda: value(store, "orphan"))
    assert orphan.status.error is not None
    assert orphan.status.error.reason == "UNKNOWN_METRICS_PROVIDER"
    flat = wait_for(lambda: value(store, "flat"))
    assert flat.status.invalid_range and flat.status.normalized is None
    high = wait_for(lambda: value(store, "high"))
    assert high.status.out_of_range and high.status.normalized == 1.0


def test_prometheus_values_errors_expiry_and_recovery(
    store: Store, cache: MetricsCacheProcess, prometheus: PrometheusServer
) -> None:
    prometheus.push(load=2.5, noise="NaN")
    prometheus.wait_value("load", 2.5)
    provider(store, "prom", {"type": "prometheus", "prometheus": {"url": prometheus.url}})
    metric(store, "load", "prom", "load")
    metric(store, "noise", "prom", "noise")
    metric(store, "absent", "prom", "absent_metric")
    cluster(store, "c", metrics={"load": 1.0, "noise": 1.0, "absent": 1.0})
    v = wait_for(lambda: value(store, "load"))
    assert (v.status.value, v.status.normalized) == (2.5, 0.5)
    noise = wait_for(lambda: value(store, "noise"))
    assert noise.status.error is not None and noise.status.error.reason == "INVALID_METRIC"
    absent = wait_for(lambda: value(store, "absent"))
    assert absent.status.error is not None and absent.status.error.reason == "UNKNOWN_METRIC"

    prometheus.push(load=4.0)
    prometheus.wait_value("load", 4.0)
    wait_for(lambda: value(store, "load"), lambda v: v.status.value == 4.0, timeout=3)
    # Constant for longer than stale_after, yet confirmed by every poll: as fresh as new
    # (staleness used to count from when the value was first seen).
    time.sleep(3)

    prometheus.stop_prometheus()  # the provider goes down
    down = wait_for(lambda: value(store, "load"), lambda v: v.status.error is not None,
                    timeout=5)
    assert down.status.error.reason == "UNREACHABLE_METRICS_PROVIDER"  # type: ignore[union-attr]
    assert down.status.value == 4.0  # the last value, until it is stale
    wait_for(lambda: value(store, "load"), lambda v: v.status.value is None, timeout=6)

    prometheus.start_prometheus()  # and comes back
    back = wait_for(lambda: value(store, "load"),
                    lambda v: v.status.error is None and v.status.value == 4.0, timeout=30)
    assert back.status.normalized == 0.8
    said = cache.output()  # once each way, at WARNING (#11 item 11)
    assert said.count("WARNING berth.controllers.metrics_cache.cache: metrics provider prom "
                      "(prometheus) is unreachable: ") == 1
    assert said.count("WARNING berth.controllers.metrics_cache.cache: metrics provider prom "
                      "(prometheus) answers again") == 1


def test_values_expire_when_the_cache_dies_and_return_when_it_restarts(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    provider(store, "static", {"type": "static", "static": {"metrics": {"m": 2.0}}})
    metric(store, "m", "static", "m")
    cluster(store, "c", metrics={"m": 1.0})
    first = MetricsCacheProcess(etcd_server.url, tmp_path, config=CONFIG, name="1").start()
    wait_for(lambda: value(store, "m"))
    whole = wait_for(lambda: picture(store), lambda p: p.complete)  # after the value
    assert store.get(keys.METRIC_PICTURE).lease == store.get(  # type: ignore[union-attr]
        keys.metric_value_key("m")).lease  # type: ignore[union-attr]
    first.kill()
    wait_for(lambda: value(store, "m") is None or None, timeout=10)  # lease TTL 2 s
    assert picture(store) is None  # the picture went with the values
    second = MetricsCacheProcess(etcd_server.url, tmp_path, config=CONFIG, name="2").start()
    try:
        assert wait_for(lambda: value(store, "m")).status.value == 2.0
        again = wait_for(lambda: picture(store), lambda p: p.complete)
        assert again.generation >= 2 and whole.generation >= 2  # incomplete first, then whole
    finally:
        second.stop()
    assert value(store, "m") is None and picture(store) is None  # a clean stop revokes the lease


def picture(store: Store) -> MetricPicture | None:
    kv = store.get(keys.METRIC_PICTURE)
    return decode(kv.value, MetricPicture) if kv else None


def test_garbage_in_a_provider_key_is_skipped(store: Store, cache: MetricsCacheProcess) -> None:
    store.create(keys.resource_key("GlobalMetricsProvider", "broken"), b"{not json")
    provider(store, "static", {"type": "static", "static": {"metrics": {"m": 1.5}}})
    metric(store, "m", "static", "m")
    cluster(store, "c", metrics={"m": 1.0})
    assert wait_for(lambda: value(store, "m")).status.value == 1.5
    assert cache.proc is not None and cache.proc.poll() is None
    assert "skipping undecodable value: /berth/v1/globalmetricsproviders/broken" in cache.output()


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaServer]:
    yield from serving(lambda: KafkaServer())


def test_kafka_topic_values_are_all_known_again_after_a_restart(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, kafka: KafkaServer
) -> None:
    produce(kafka.bootstrap, "energy", [("early", b"1.0"), ("price", b"2.0"),
                                        ("junk", b"not a number")])
    provider(store, "k", {"type": "kafka", "kafka": {
        "bootstrap_servers": kafka.bootstrap, "topic": "energy", "group_id": "berth-test"}})
    for name in ("early", "price", "junk"):
        metric(store, name, "k", name)
    cluster(store, "c", metrics={"early": 1.0, "price": 1.0, "junk": 1.0})
    first = MetricsCacheProcess(etcd_server.url, tmp_path, config=CONFIG, name="k1").start()
    try:
        wait_for(lambda: value(store, "price"), lambda v: v.status.value == 2.0, timeout=30)
        wait_for(lambda: value(store, "early"), lambda v: v.status.value == 1.0)
        junk = wait_for(lambda: value(store, "junk"), lambda v: v.status.error is not None
                        and v.status.error.reason != "UNREACHABLE_METRICS_PROVIDER")
        assert junk.status.error is not None and junk.status.error.reason == "INVALID_METRIC"
        stamp = int(time.time() * 1000)
        produce(kafka.bootstrap, "energy",
                [("price", b'{"value": 3.0, "timestamp": %d}' % stamp)])
        wait_for(lambda: value(store, "price"), lambda v: v.status.value == 3.0, timeout=5)
        # A record with a forecast: its points are published with the value, and each
        # becomes the value when its time comes.
        soon, later = time.time() + 3, time.time() + 3600
        produce(kafka.bootstrap, "energy", [("price", b'{"value": 3.5, "forecast": '
                                             b'[[%.3f, 2.5], [%.3f, 1.5]]}' % (soon, later))])
        ahead = wait_for(lambda: value(store, "price"), lambda v: v.status.value == 3.5,
                         timeout=5)
        assert [(p.at.timestamp(), p.value) for p in ahead.status.forecast] == [
            pytest.approx((soon, 2.5), abs=1e-3), pytest.approx((later, 1.5), abs=1e-3)]
        due = wait_for(lambda: value(store, "price"), lambda v: v.status.value == 2.5,
                       timeout=8)
        assert [p.value for p in due.status.forecast] == [1.5]
        time.sleep(1.5)  # offsets are committed every second
    finally:
        first.stop()
    produce(kafka.bootstrap, "energy", [("price", b"4.0")])  # while the cache is down
    seen, watch = record_puts(store, keys.metric_value_key("early"), MetricValue)
    second = MetricsCacheProcess(etcd_server.url, tmp_path, config=CONFIG, name="k2").start()
    try:
        assert wait_for(lambda: value(store, "price"), lambda v: v.status.value == 4.0,
                        timeout=30).status.error is None
        # The topic is read again from its start: a value sent once, before the first
        # run, is known again (a restart must not forget it and move applications).
        early = wait_for(lambda: value(store, "early"), lambda v: v.status.value == 1.0)
        assert early.status.error is None
        # ... and never said unknown meanwhile: the provider answers once it has read
        # the topic up to where it ended.
        assert [v.status.value for v in seen] == [1.0], seen
    finally:
        watch.close()
        second.stop()


def test_ksql_pull_queries_quote_names_and_report_nonsense(
    store: Store, cache: MetricsCacheProcess
) -> None:
    ksql = KsqlServer()
    try:
        ksql.tables["energy"] = {"heat": 2.5, "it's": 1.0}
        provider(store, "kq", {"type": "kafka", "kafka": {  # Krake's spelling of the KSQL provider
            "url": ksql.url, "table": "energy", "comparison_column": "metric_name",
            "value_column": "metric_value"}})
        metric(store, "heat", "kq", "heat")
        metric(store, "quoted", "kq", "it's")
        metric(store, "gone", "kq", "no_such_row")
        cluster(store, "c", metrics={"heat": 1.0, "quoted": 1.0, "gone": 1.0})
        assert wait_for(lambda: value(store, "heat")).status.value == 2.5
        assert wait_for(lambda: value(store, "quoted")).status.value == 1.0
        gone = wait_for(lambda: value(store, "gone"))
        assert gone.status.error is not None and gone.status.error.reason == "UNKNOWN_METRIC"
        statement = ksql.statements[-1]
        assert statement == ("SELECT `metric_name`, `metric_value` FROM `energy` WHERE "
                             "`metric_name` IN ('heat', 'it''s', 'no_such_row');")
        ksql.tables["energy"]["heat"] = 3.5
        wait_for(lambda: value(store, "heat"), lambda v: v.status.value == 3.5, timeout=3)
        ksql.answer = {"nonsense": True}
        bad = wait_for(lambda: value(store, "heat"), lambda v: v.status.error is not None,
                       timeout=3)
        assert bad.status.error.reason == "INVALID_METRIC"  # type: ignore[union-attr]
    finally:
        ksql.close()
    down = wait_for(lambda: value(store, "heat"), lambda v: v.status.error is not None and
                    v.status.error.reason == "UNREACHABLE_METRICS_PROVIDER", timeout=5)
    assert down.status.error is not None


def test_kafka_going_away_is_unreachable_and_coming_back_recovers(
    store: Store, cache: MetricsCacheProcess, kafka: KafkaServer
) -> None:
    produce(kafka.bootstrap, "flaky", [("wind", b"0.5")])
    provider(store, "kf", {"type": "kafka", "kafka": {
        "bootstrap_servers": kafka.bootstrap, "topic": "flaky"}})
    metric(store, "wind", "kf", "wind", lo=0, hi=1)
    cluster(store, "c", metrics={"wind": 1.0})
    wait_for(lambda: value(store, "wind"), lambda v: v.status.value == 0.5, timeout=30)
    kafka.stop()
    try:
        down = wait_for(lambda: value(store, "wind"), lambda v: v.status.error is not None,
                        timeout=20)
        assert down.status.error.reason == "UNREACHABLE_METRICS_PROVIDER"  # type: ignore[union-attr]
    finally:
        kafka.start()
    wait_for(lambda: value(store, "wind"),
             lambda v: v.status.error is None and v.status.value == 0.5, timeout=40)


def test_the_scheduler_follows_values_from_the_metrics_cache(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, cache: MetricsCacheProcess
) -> None:
    from berth_testkit.scheduler_env import (
        SchedulerProcess,
        application,
        binding,
        targets,
    )

    provider(store, "static", {"type": "static", "static": {"metrics": {
        "green_a": 1.0, "green_b": 4.0}}})
    metric(store, "green_a", "static", "green_a")
    metric(store, "green_b", "static", "green_b")
    cluster(store, "a", metrics={"green_a": 1.0})
    cluster(store, "b", metrics={"green_b": 1.0})
    wait_for(lambda: value(store, "green_a"))
    wait_for(lambda: value(store, "green_b"))
    scheduler = SchedulerProcess(etcd_server.url, tmp_path, name="with-cache").start()
    try:
        application(store, "app")
        placed = wait_for(lambda: binding(store, "app"),
                          lambda b: b.status.state == "Scheduled" and targets(b) == ["b"])
        assert placed.spec.targets[0].score == pytest.approx(0.8)
        provider(store, "static", {"type": "static", "static": {"metrics": {
            "green_a": 5.0, "green_b": 4.0}}})  # a is now better by more than the stickiness
        wait_for(lambda: binding(store, "app"), lambda b: targets(b) == ["a"], timeout=10)
    finally:
        scheduler.stop()


def test_garbage_or_a_delete_in_our_keys_is_replaced_with_ours(
    store: Store, cache: MetricsCacheProcess
) -> None:
    provider(store, "static", {"type": "static", "static": {"metrics": {"owned": 2.0}}})
    metric(store, "owned", "static", "owned")
    cluster(store, "c", metrics={"owned": 1.0})
    wait_for(lambda: value(store, "owned"))
    wait_for(lambda: store.get(keys.METRIC_PICTURE))
    # Nothing changes at the provider: only the owner's repair can rewrite these keys.
    put(store, keys.metric_value_key("owned"), b"{not a value")
    put(store, keys.METRIC_PICTURE, b"[1, 2]")
    back = wait_for(lambda: value(store, "owned") if store.get(
        keys.metric_value_key("owned")).value != b"{not a value" else None,  # type: ignore[union-attr]
        timeout=5)
    assert back.status.value == 2.0
    whole = wait_for(lambda: store.get(keys.METRIC_PICTURE), lambda kv: kv.value != b"[1, 2]",
                     timeout=5)
    assert decode(whole.value, MetricPicture).complete
    store.delete(keys.metric_value_key("owned"))
    wait_for(lambda: value(store, "owned"), lambda v: v.status.value == 2.0, timeout=5)
    out = cache.output()
    assert out.count("was overwritten with something that is not a metric value") == 2
    assert "was deleted by someone else" in out


@pytest.mark.parametrize(("status", "reason"), [
    (503, "UNREACHABLE_METRICS_PROVIDER"), (502, "UNREACHABLE_METRICS_PROVIDER"),
    (429, "UNREACHABLE_METRICS_PROVIDER"), (422, "INVALID_METRIC"), (400, "INVALID_METRIC")])
def test_a_prometheus_that_is_unavailable_is_unreachable_not_an_invalid_metric(
    status: int, reason: str
) -> None:
    """What Prometheus (or a proxy before it) answers while starting or overloaded: the
    provider is down, the metric is fine (it was recorded INVALID_METRIC)."""
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from berth.controllers.metrics_cache.providers.base import Failure
    from berth.controllers.metrics_cache.providers.prometheus import PrometheusProvider
    from berth.store.documents.metrics import PrometheusSpec

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"status":"error","errorType":"unavailable","error":"try later"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    provider = PrometheusProvider(PrometheusSpec(f"http://127.0.0.1:{server.server_address[1]}"))
    try:
        got = provider.fetch(["heat_demand"])["heat_demand"]
        assert isinstance(got, Failure) and got.reason == reason, got
        if status == 503:
            assert got.message.endswith("HTTP 503: Prometheus is unavailable or overloaded")
    finally:
        provider.close()
        server.shutdown()
        server.server_close()


def test_a_providers_secret_is_kept_apart_and_used(store: Store) -> None:
    """A Kafka provider's ``sasl_password`` is written apart by bootstrap; the
    metrics-cache (whose role may read it) polls with it, put back."""
    docs = [{"api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "kafka"},
             "spec": {"type": "kafka", "kafka": {"bootstrap_servers": "127.0.0.1:1",
                                                 "topic": "t", "sasl_username": "berth",
                                                 "sasl_password": "sasl-pw-42"}}},
            {"api": "core", "kind": "GlobalMetric", "metadata": {"name": "wind"},
             "spec": {"min": 0, "max": 1, "provider": {"name": "kafka", "metric": "wind"}}}]
    stdin, sys.stdin = sys.stdin, io.StringIO(yaml.safe_dump_all(docs))
    try:
        write(store, plan(store, load(["-"]), force=False))
    finally:
        sys.stdin = stdin
    cluster(store, "c", metrics={"wind": 1.0})
    stored = store.get(keys.resource_key("GlobalMetricsProvider", "kafka"))
    assert stored is not None and b"sasl-pw-42" not in stored.value
    apart = store.get(keys.secrets_key("GlobalMetricsProvider", "kafka"))
    assert apart is not None and b"sasl-pw-42" in apart.value
    cache = MetricsCache(store, MetricsCacheConfig())
    for inf in cache.informers:
        inf.start()
    try:
        assert all(inf.wait_synced(10) for inf in cache.informers)
        plans = cache.plan()
        spec = msgspec.json.decode(plans[keys.resource_key("GlobalMetricsProvider", "kafka")].spec)
        assert spec["kafka"]["sasl_password"] == "sasl-pw-42"
    finally:
        for inf in cache.informers:
            inf.stop()
