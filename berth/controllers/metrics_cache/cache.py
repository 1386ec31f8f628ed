"""The metrics-cache: which metrics are referenced, who provides them, and polling.

It watches metrics providers, metric definitions, and the clusters and clouds
that reference metrics. Only a metric some cluster or cloud references is
polled; a referenced metric's definition names its provider (a namespaced
Metric's MetricsProvider in the same namespace, else a GlobalMetricsProvider
of that name; a GlobalMetric's GlobalMetricsProvider). Each provider is
polled by its own thread, every ``poll_interval`` seconds (the provider's own
setting, else the configured default), jittered, so a slow or dead provider
never delays the others; all the metrics of a provider are fetched in one
call (Prometheus: a few queries, each carrying a chunk of the metrics'
expressions; ksqlDB: one pull query in all; a Kafka topic: the latest values its
consumer has read).

The values are published as a picture (``MetricPicture`` at
``/berth/v1/metricvalues/picture``): incomplete from the start until every
provider planned has answered once, and again after the values' lease was
lost; then a new generation after every poll that changed values, written
after those values. The scheduler decides on metrics only as of a complete
picture. Threads: the planning loop and each poller run supervised; the
pollers share ``_values`` and the picture under ``_lock``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import msgspec
from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric as MetricFamily

from berth.controllers.metrics_cache.config import MetricsCacheConfig
from berth.controllers.metrics_cache.providers import Failure, Provider, Reading, make_provider
from berth.controllers.metrics_cache.providers.base import (
    UNKNOWN_PROVIDER,
    UNREACHABLE,
    NotYet,
)
from berth.controllers.metrics_cache.values import ProviderPlan, Series, Wanted, value_status
from berth.controllers.metrics_cache.writer import ValueWriter
from berth.controllers.runtime import Event, EventType, Informer
from berth.controllers.runtime.clock import SYSTEM, Clock
from berth.controllers.runtime.events import Recorder
from berth.controllers.runtime.supervise import Loop
from berth.store import Deposed, Store, StoreError, keys
from berth.store.credentials import STORED, Credentials, completed
from berth.store.documents import (
    GlobalMetric,
    GlobalMetricsProvider,
    Metadata,
    Metric,
    MetricPicture,
    MetricRef,
    MetricsProvider,
    MetricValue,
    MetricValueStatus,
    ProviderInfo,
)
from berth.store.events import NORMAL, WARNING, InvolvedObject

log = logging.getLogger(__name__)

POLLS = Counter("berth_metrics_cache_polls_total", "Provider polls", ["provider", "result"])
POLL_SECONDS = Histogram("berth_metrics_cache_poll_seconds", "Time of one provider poll",
                         ["provider"])


class _RefsMeta(msgspec.Struct):
    name: str
    namespace: str | None = None


class _RefsSpec(msgspec.Struct):
    metrics: list[MetricRef] = []


class Referencing(msgspec.Struct):
    """A cluster or a cloud, as far as its metric references go."""

    metadata: _RefsMeta
    spec: _RefsSpec = msgspec.field(default_factory=_RefsSpec)


class Poller:
    """Polls one provider on its own thread."""

    def __init__(self, cache: MetricsCache, plan: ProviderPlan) -> None:
        self.cache = cache
        self.plan = plan
        self.provider: Provider | None = None
        self.failure: Failure | None = None
        if plan.doc is None:
            self.failure = Failure(UNKNOWN_PROVIDER, f"no metrics provider {plan.name}")
        else:
            try:
                self.provider = make_provider(plan.name, plan.doc.spec,
                                              timeout=cache.config.timeout,
                                              retries=cache.config.retries,
                                              batch=cache.config.batch)
            except Exception as exc:
                self.failure = Failure(UNKNOWN_PROVIDER, f"{plan.name}: {exc}")
        self.wake = threading.Event()
        self.answered_at: float | None = None  # the clock's time() of the last poll answered
        self._loop = Loop(f"poll {plan.name}", self._step,
                          deadline=self.interval * 2 + cache.config.timeout * 4 + 60.0)

    def start(self) -> None:
        """Poll from now on, on the poller's own thread (once it is among the pollers:
        its first poll may be recorded before ``start`` returns)."""
        self._loop.start()

    @property
    def interval(self) -> float:
        doc = self.plan.doc
        if doc is not None:
            s = doc.spec
            own = [s.poll_interval] + [getattr(sub, "poll_interval", None) for sub in
                                       (s.prometheus, s.kafka, s.ksql)]
            for value in own:
                if value:
                    return float(value)
        return self.cache.config.poll_interval

    def alive(self) -> bool:
        return self._loop.alive()

    def _step(self) -> None:
        began = time.monotonic()
        try:
            self.poll()
        finally:
            jitter = self.cache.config.jitter
            # A fixed rate: the poll's own duration counts against the interval.
            delay = self.interval * random.uniform(1 - jitter, 1 + jitter)
            if not self._loop.stopping:
                self.wake.wait(max(0.0, delay - (time.monotonic() - began)))
            self.wake.clear()

    def poll(self) -> None:
        wanted = list(self.plan.wanted)
        if not wanted:
            return
        began = time.perf_counter()
        readings: dict[str, Reading]
        if self.provider is None:
            readings = {w.query: self.failure or Failure(UNKNOWN_PROVIDER) for w in wanted}
        else:
            try:
                readings = dict(self.provider.fetch(sorted({w.query for w in wanted})))
            except NotYet as exc:
                log.debug("provider %s: no answer yet (%s)", self.plan.name, exc)
                return
            except Exception as exc:  # a provider bug must not stop the others
                log.exception("provider %s failed", self.plan.name)
                readings = {w.query: Failure("UNREACHABLE_METRICS_PROVIDER", repr(exc))
                            for w in wanted}
        POLL_SECONDS.labels(self.plan.name).observe(time.perf_counter() - began)
        failed = sum(1 for r in readings.values() if isinstance(r, Failure))
        POLLS.labels(self.plan.name, "error" if failed else "ok").inc()
        if not readings or any(not isinstance(r, Failure) or r.reason != UNREACHABLE
                               for r in readings.values()):
            self.answered_at = self.cache.clock.time()
        kind = self.plan.doc.spec.effective_type() if self.plan.doc else "unknown"
        self.cache.record(self.plan.key, wanted, readings, ProviderInfo(self.plan.name, kind))

    def stop(self) -> None:
        self._loop.halt()
        self.wake.set()
        self._loop.stop(timeout=15)
        if self.provider is not None:
            self.provider.close()


class MetricsCache:
    def __init__(self, store: Store, config: MetricsCacheConfig, *,
                 clock: Clock = SYSTEM) -> None:
        self.store = store
        self.config = config
        self.clock = clock  # when a value was observed, and how old it is
        r = keys.resource_prefix

        def informer(prefix: keys.Prefix, type_: type) -> Informer:  # type: ignore[type-arg]
            return Informer(store, prefix, type_, idle_timeout=config.watch_idle_timeout)

        self.global_providers: Informer[GlobalMetricsProvider] = informer(
            r("GlobalMetricsProvider"), GlobalMetricsProvider)
        self.providers: Informer[MetricsProvider] = informer(r("MetricsProvider"),
                                                             MetricsProvider)
        self.global_metrics: Informer[GlobalMetric] = informer(r("GlobalMetric"), GlobalMetric)
        self.metrics: Informer[Metric] = informer(r("Metric"), Metric)
        self.clusters: Informer[Referencing] = informer(r("Cluster"), Referencing)
        self.global_clouds: Informer[Referencing] = informer(r("GlobalCloud"), Referencing)
        self.clouds: Informer[Referencing] = informer(r("Cloud"), Referencing)
        self.projects: Informer[Referencing] = informer(r("Project"), Referencing)
        # the providers' secrets (a Kafka password), kept apart: this process's to read
        self.secrets: Informer[Credentials] = informer(keys.secrets_prefix("GlobalMetricsProvider"),
                                                       STORED)
        self.ns_secrets: Informer[Credentials] = informer(keys.secrets_prefix("MetricsProvider"),
                                                          STORED)
        self.informers: list[Informer[Any]] = [
            self.global_providers, self.providers, self.global_metrics, self.metrics,
            self.clusters, self.global_clouds, self.clouds, self.projects, self.secrets,
            self.ns_secrets]
        # Our own keys, watched so that what someone else writes there is replaced.
        self.values: Informer[MetricValue | MetricPicture] = informer(
            keys.METRIC_VALUES, MetricValue | MetricPicture)  # type: ignore[arg-type]
        self.values.add_invalid_handler(lambda key, _rev: self._foreign(key, "garbage"))
        self.values.add_handler(self._on_value)
        self.writer: ValueWriter | None = None
        # Providers that stop answering and metrics whose value fails, as events (the
        # leader's: the store is fenced).
        self.events = Recorder(store, "metrics-cache", ttl=config.event_ttl, clock=clock) if (
            config.events) else None
        self.pollers: dict[str, Poller] = {}  # the planning loop's own
        self._lock = threading.Lock()  # guards _values and the picture below (pollers share them)
        self._values: dict[str, MetricValueStatus] = {}  # last status per value key
        self._unreachable: set[str] = set()  # providers whose last poll reached nothing
        self._complete = False  # every provider has answered since start (or the lease's loss)
        self._pending: set[str] = set()  # providers yet to answer before the picture is whole
        self._planned: set[str] = set()  # the providers polled (a copy of the pollers' keys)
        self._generation = 0
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._loop = Loop("plan", self._plan_step, deadline=120.0)
        for inf in self.informers:
            inf.add_handler(lambda _e: self._changed.set())

    # -- lifecycle --------------------------------------------------------------

    def start(self, sync_timeout: float = 60.0) -> None:
        for inf in (*self.informers, self.values):
            inf.start()
        if not all(inf.wait_synced(sync_timeout) for inf in (*self.informers, self.values)):
            raise TimeoutError("the metrics-cache did not sync with etcd")
        self.writer = ValueWriter(self.store, lease_ttl=self.config.lease_ttl,
                                  on_lease_lost=self._values_lost)
        self._publish()  # incomplete: a reader keeps its last whole picture meanwhile
        self._changed.set()
        if self.events is not None:
            self.events.start()
        self._loop.start()

    def collect(self) -> Iterator[MetricFamily]:
        """Value series by provider and state, how old each provider's answer is, and each
        metric's current value and normalized value (for Grafana to chart over time)."""
        with self._lock:
            current = list(self._values.items())
        values = [st for _, st in current]
        raw = GaugeMetricFamily(
            "berth_metric_value", "A metric's value as its provider last gave it",
            labels=["namespace", "metric", "provider"])
        scaled = GaugeMetricFamily(
            "berth_metric_normalized", "A metric's value normalized into [0, 1] by its "
            "min and max: what the scheduler scores with", labels=["namespace", "metric",
                                                                    "provider"])
        for key, st in sorted(current):
            if st.value is None:
                continue
            ref = key.removeprefix(keys.METRIC_VALUES).split("/")  # plural, [ns,] name
            labels = [ref[1] if len(ref) == 3 else "", ref[-1],
                      st.provider.name if st.provider else ""]
            raw.add_metric(labels, st.value)
            if st.normalized is not None:
                scaled.add_metric(labels, st.normalized)
        yield raw
        yield scaled
        by: dict[tuple[str, str], int] = {}
        for st in values:
            at = (st.provider.name if st.provider else "", st.error.reason if st.error else "OK")
            by[at] = by.get(at, 0) + 1
        series = GaugeMetricFamily(
            "berth_metrics_cache_series", "Metric value series by provider and state (OK or "
            "the error's reason, e.g. UNREACHABLE_METRICS_PROVIDER, UNKNOWN_METRIC)",
            labels=["provider", "state"])
        for (provider, state), n in sorted(by.items()):
            series.add_metric([provider, state], n)
        yield series
        now = self.clock.time()
        age = GaugeMetricFamily(
            "berth_metrics_cache_value_age_seconds", "Seconds since the provider last "
            "answered a poll: the age of the newest values berth has from it",
            labels=["provider"])
        for poller in list(self.pollers.values()):
            if poller.answered_at is not None:
                age.add_metric([poller.plan.name], max(0.0, now - poller.answered_at))
        yield age

    def ready(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers) and self.writer is not None

    def alive(self) -> bool:
        """The planning loop and every poller run and beat, and every informer runs."""
        return (self._loop.alive() and all(p.alive() for p in list(self.pollers.values()))
                and all(inf.alive() for inf in (*self.informers, self.values))
                and (self.events is None or self.events.alive()))

    def stop(self) -> None:
        self._stop.set()
        self._loop.halt()
        self._changed.set()
        self._loop.stop()
        for poller in self.pollers.values():
            poller.stop()
        self.pollers.clear()
        for inf in (*self.informers, self.values):
            inf.stop(wait=False)
        for inf in (*self.informers, self.values):
            inf.join()
        if self.events is not None:
            self.events.stop()
        if self.writer is not None:
            self.writer.close()

    def _plan_step(self) -> None:
        if not self._changed.wait(30.0) or self._stop.is_set():
            return
        time.sleep(0.05)  # let a burst of changes settle
        self._changed.clear()
        try:
            self.apply(self.plan())
        except Exception:
            self._changed.set()  # plan again after the loop's backoff
            raise

    # -- our keys, changed by someone else ----------------------------------------------

    def _on_value(self, event: Event[MetricValue | MetricPicture]) -> None:
        if event.type is EventType.DELETED:
            self._foreign(event.key, "deleted")

    def _foreign(self, key: keys.Key, what: str) -> None:
        """A key we own was overwritten with garbage or deleted by someone else: ours
        goes back over it (the value at the next poll, the picture now)."""
        if self.writer is None or not self.writer.forget(key):
            return
        log.error("%s was %s by someone else; writing ours over it", key,
                  "overwritten with something that is not a metric value or picture"
                  if what == "garbage" else "deleted")
        if key == keys.METRIC_PICTURE:
            self._publish()

    # -- the picture ------------------------------------------------------------------

    def _values_lost(self) -> None:
        """The lease went, and every value with it: the picture is whole again only when
        every provider has answered anew."""
        with self._lock:
            self._complete = False
            self._pending = set(self._planned)
            self._values.clear()
        self._publish()

    def _answered(self, provider: str, changed: bool) -> None:
        """A provider's poll is in etcd: publish the picture if it became whole or changed."""
        with self._lock:
            self._pending.discard(provider)
            if self._complete and not changed:
                return
            if not self._complete and self._pending:
                return
            self._complete = True
        self._publish()

    def _publish(self) -> None:
        """Write the marker; under the lock, so generations reach etcd in order."""
        if self.writer is None:
            return
        with self._lock:
            self._generation += 1
            picture = MetricPicture(complete=self._complete, generation=self._generation,
                                    updated=self.clock.now())
            try:
                self.writer.publish(picture)
            except Deposed:
                pass  # said once by the writer
            except StoreError as exc:
                log.warning("publishing the metric picture failed (%s); next poll retries", exc)

    # -- what to poll ---------------------------------------------------------------

    def referenced(self) -> set[Series]:
        out: set[Series] = set()
        for inf in (self.clusters, self.global_clouds, self.clouds, self.projects):
            for item in inf.items():
                ns = item.obj.metadata.namespace
                for ref in item.obj.spec.metrics:
                    if ref.namespaced and not ns:
                        continue  # a namespaced metric on a global resource: nothing to poll
                    out.add(Series(ref.name, ns if ref.namespaced else None))
        return out

    def plan(self) -> dict[str, ProviderPlan]:
        plans: dict[str, ProviderPlan] = {}
        for series in sorted(self.referenced(), key=lambda s: s.key):
            definition = (self.metrics.get(keys.resource_key("Metric", series.name,
                                                             series.namespace))
                          if series.namespace else
                          self.global_metrics.get(keys.resource_key("GlobalMetric", series.name)))
            if definition is None:
                continue  # the scheduler reports UNKNOWN_METRIC: nothing to fetch
            pname = definition.spec.provider.name
            pkey, provider = self._provider(pname, series.namespace)
            plan = plans.get(pkey)
            if plan is None:
                spec = msgspec.json.encode(provider.spec) if provider is not None else b""
                plan = plans[pkey] = ProviderPlan(pkey, pname, spec, provider, [])
            plan.wanted.append(Wanted(series, definition.spec.provider.metric,
                                      definition.spec.min, definition.spec.max,
                                      tuple(definition.spec.allowed_values)))
        return plans

    def _provider(self, name: str, namespace: str | None) -> tuple[str, MetricsProvider | None]:
        """The provider a metric of ``namespace`` names, with its secrets put back."""
        if namespace:
            key = keys.resource_key("MetricsProvider", name, namespace)
            found = self.providers.get(key)
            if found is not None:
                return key, completed(found, self.ns_secrets.get(
                    keys.secrets_key("MetricsProvider", name, namespace)))
        key = keys.resource_key("GlobalMetricsProvider", name)
        found = self.global_providers.get(key)
        if found is None:
            return key, None
        return key, completed(found, self.secrets.get(
            keys.secrets_key("GlobalMetricsProvider", name)))

    def apply(self, plans: dict[str, ProviderPlan]) -> None:
        """Start, rebuild, update or stop pollers; remove values nobody references."""
        for pkey in list(self.pollers):
            poller = self.pollers[pkey]
            plan = plans.get(pkey)
            if plan is None or plan.spec != poller.plan.spec or (plan.doc is None) != (
                    poller.plan.doc is None):
                poller.stop()
                del self.pollers[pkey]
        with self._lock:
            self._planned = set(plans)
            if not self._complete:  # the first picture waits for every provider planned
                self._pending = {k for k in self._pending if k in plans} | (
                    set(plans) - set(self.pollers))
            whole = not self._complete and not self._pending
            if whole:
                self._complete = True
        if whole:
            self._publish()  # nothing to wait for
        for pkey, plan in plans.items():
            running = self.pollers.get(pkey)
            if running is None:
                poller = self.pollers[pkey] = Poller(self, plan)
                poller.start()
            elif plan.wanted != running.plan.wanted:
                running.plan = plan
                running.wake.set()  # new metrics: fetch them now
        wanted = {w.series.key for plan in plans.values() for w in plan.wanted}
        if self.writer is not None:
            gone = self.writer.written_keys() - wanted
            for key in gone:
                self.writer.remove(key)
                with self._lock:
                    self._values.pop(key, None)
            if gone and self._complete:
                self._publish()  # the removals are part of the picture too

    # -- results ------------------------------------------------------------------

    def _say_reachable(self, provider_key: str, provider: ProviderInfo,
                       readings: dict[str, Reading]) -> None:
        """One WARNING when a provider stops answering, one when it answers again."""
        failed = [r for r in readings.values()
                  if isinstance(r, Failure) and r.reason == UNREACHABLE]
        down = bool(readings) and len(failed) == len(readings)
        with self._lock:
            was = provider_key in self._unreachable
            if down:
                self._unreachable.add(provider_key)
            else:
                self._unreachable.discard(provider_key)
        if down and not was:
            log.warning("metrics provider %s (%s) is unreachable: %s; its last values stay "
                        "for %g s", provider.name, provider.type, failed[0].message,
                        self.config.stale_after)
            self._say(provider_key, WARNING, "ProviderUnreachable",
                      f"{failed[0].message}; its last values stay for "
                      f"{self.config.stale_after:g} s")
        elif was and not down and readings:
            log.warning("metrics provider %s (%s) answers again", provider.name, provider.type)
            self._say(provider_key, NORMAL, "ProviderReachable", "it answers again")

    def _say(self, key: str, type_: str, reason: str, message: str,
             namespace: str | None = None, name: str = "") -> None:
        """An event of the document at ``key`` (or of the metric ``namespace``/``name``)."""
        if self.events is None:
            return
        if name:
            kind = "Metric" if namespace else "GlobalMetric"
        else:
            try:
                ref = keys.parse_key(key)
            except ValueError:
                return
            kind, namespace, name = ref.kind.name, ref.namespace, ref.name
        self.events.emit(InvolvedObject(kind, name, namespace), type_, reason, message)

    def record(self, provider_key: str, wanted: list[Wanted], readings: dict[str, Reading],
               provider: ProviderInfo) -> None:
        """Write one poll's values, then the picture they complete or change."""
        if self.writer is None or self._stop.is_set():
            return
        self._say_reachable(provider_key, provider, readings)
        now = self.clock.now()
        docs: list[tuple[keys.Key, MetricValue]] = []
        for w in wanted:
            reading = readings.get(w.query, Failure("UNKNOWN_METRIC", f"{w.query}: no answer"))
            key = w.series.key
            with self._lock:
                previous = self._values.get(key)
            status = value_status(w, reading, provider, previous, now, self.config.stale_after,
                                  self.config.forecast_horizon)
            was = previous.error if previous is not None else None
            if status.error is not None and (was is None or was.reason != status.error.reason):
                self._say(key, WARNING, "MetricError", f"{provider.name}: "
                          f"{status.error.reason}: {status.error.message}",
                          w.series.namespace, w.series.name)
            elif status.error is None and was is not None:
                self._say(key, NORMAL, "MetricRecovered", f"{provider.name} answers it again",
                          w.series.namespace, w.series.name)
            if status.error is None or not self.writer.unchanged(key, status):
                with self._lock:  # a value confirmed now counts from now (stale_after)
                    self._values[key] = status
            docs.append((key, MetricValue(
                Metadata(name=w.series.name, namespace=w.series.namespace), status)))
        try:
            written, failed = self.writer.write_many(docs)  # a poll's changes land together
        except Deposed:
            return  # said once by the writer; this replica no longer leads
        except Exception as exc:
            log.warning("writing %d values from %s failed (%s); next poll retries",
                        len(docs), provider.name, exc)
            return
        if failed:  # the poll is not whole in etcd: no picture may say it is
            log.info("%d of %s's values not written; the picture waits for the next poll",
                     failed, provider.name)
            return
        self._answered(provider_key, written > 0)
