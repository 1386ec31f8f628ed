"""The MetricsCache over etcd in memory and a clock the test moves: no server, no sleep.

(The same promises against a real etcd, a real Prometheus and the real process
are in tests/integration/test_metrics_cache.py.)"""

from __future__ import annotations

from datetime import timedelta

from berth.controllers.metrics_cache.cache import MetricsCache
from berth.controllers.metrics_cache.config import MetricsCacheConfig
from berth.store import decode, encode, keys
from berth.store.documents import MetricPicture, MetricValue
from berth.store.events import listed
from berth_testkit.memory import FakeClock, MemoryStore
from berth_testkit.scheduler_env import cluster, put

# Polled once when a provider is planned; then the test polls (Poller.poll) itself.
CONFIG = MetricsCacheConfig(poll_interval=3600.0, jitter=0.0, lease_ttl=2, stale_after=60.0,
                            timeout=1.0, retries=0)


def provider(store: MemoryStore, name: str, spec: dict[str, object]) -> None:
    put(store, keys.resource_key("GlobalMetricsProvider", name), encode({
        "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": name},
        "spec": spec}))


def metric(store: MemoryStore, name: str, provider_name: str) -> None:
    put(store, keys.resource_key("GlobalMetric", name), encode({
        "api": "core", "kind": "GlobalMetric", "metadata": {"name": name},
        "spec": {"min": 0, "max": 5, "provider": {"name": provider_name, "metric": name}}}))


def value(store: MemoryStore, name: str) -> MetricValue | None:
    kv = store.get(keys.metric_value_key(name))
    return decode(kv.value, MetricValue, kv.key) if kv else None


def reached(store: MemoryStore, name: str, check: object) -> MetricValue:
    """The value once ``check`` holds of it, waiting on writes."""
    assert callable(check)
    store.memory.wait_until(lambda: (v := value(store, name)) is not None and bool(check(v)))
    v = value(store, name)
    assert v is not None
    return v


def test_a_value_is_observed_at_the_clocks_time_and_kept_after_an_error_until_stale() -> None:
    store, clock = MemoryStore(), FakeClock()
    provider(store, "static", {"type": "static", "static": {"metrics": {"heat": 0.9}}})
    metric(store, "heat", "static")
    cluster(store, "c", metrics={"heat": 1.0})
    cache = MetricsCache(store, CONFIG, clock=clock)
    cache.start(sync_timeout=5.0)
    try:
        v = reached(store, "heat", lambda v: v.status.value == 0.9)
        assert v.status.observed == clock.now() and v.status.normalized == 0.18
        kv = store.get(keys.METRIC_PICTURE)
        assert kv is not None and decode(kv.value, MetricPicture).updated == clock.now()

        # The provider now answers nothing (a Prometheus nobody listens for): the last
        # value stays, next to the error, while the clock is within stale_after of it.
        provider(store, "static", {"type": "prometheus",
                                   "prometheus": {"url": "http://127.0.0.1:1"}})
        down = reached(store, "heat", lambda v: v.status.error is not None)
        assert down.status.error is not None
        assert down.status.error.reason == "UNREACHABLE_METRICS_PROVIDER"
        assert down.status.value == 0.9 and down.status.observed == clock.now()
        (poller,) = cache.pollers.values()
        clock.advance(59.0)
        poller.poll()
        assert value(store, "heat").status.value == 0.9  # type: ignore[union-attr]
        clock.advance(2.0)  # past stale_after since it was last confirmed
        poller.poll()
        gone = reached(store, "heat", lambda v: v.status.value is None)
        assert gone.status.error is not None
        assert gone.status.observed is None or (
            clock.now() - gone.status.observed >= timedelta(seconds=60))
        # Said as events, once per change of state (the polls in between add nothing):
        # the provider unreachable, the metric's error.
        assert cache.events is not None
        cache.events.flush(force=True)
        said = {(e.involvedObject.kind, e.reason, e.count) for _, e in listed(store)[0]}
        assert ("GlobalMetricsProvider", "ProviderUnreachable", 1) in said, said
        assert ("GlobalMetric", "MetricError", 1) in said, said
    finally:
        cache.stop()
