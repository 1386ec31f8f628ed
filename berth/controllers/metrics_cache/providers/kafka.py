"""The Kafka provider: consume a topic of metric values, the latest per metric wins.

Each record's key is the metric name; its value a number, or JSON
``{"value": ..., "timestamp": ..., "forecast": [[time, value], ...]}``
(times in seconds or milliseconds since the epoch, or ISO 8601; timestamp
and forecast optional). A forecast's points become the value as their times
pass, so one record can carry a day of published prices. The latest value
wins: by the JSON timestamp when the record has one, else by Kafka's record
timestamp. The consumer (aiokafka, in an asyncio
loop on its own thread) runs continuously in the provider's consumer group.
The topic is a table's changelog, so whenever partitions are assigned (a
start, a failover to another replica, a reconnect) they are read again from
their beginning: a value sent once is known again after a restart, as it was
before (a restart that resumed from committed offsets forgot every metric
whose producer had not sent since, and the scheduler moved their clusters'
applications away). Give the topic ``cleanup.policy=compact`` so that this
reads about one record per metric; re-reading is harmless, as the latest
value wins by timestamp.
``fetch`` answers from what has been consumed: a metric never seen is
UNKNOWN_METRIC, a record that is not a number INVALID_METRIC, and while the
consumer cannot reach the brokers every metric is UNREACHABLE_METRICS_PROVIDER.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from berth.controllers.metrics_cache.providers.base import (
    UNKNOWN_METRIC,
    UNREACHABLE,
    Failure,
    Forecasted,
    NotYet,
    Reading,
    number,
    series,
    stamp,
)
from berth.store.documents.metrics import KafkaSpec

log = logging.getLogger(__name__)


def parse_record(value: bytes | None, name: str) -> tuple[Reading, float | None]:
    """A record's value and its timestamp (if the record carries one)."""
    if value is None:
        return Failure("INVALID_METRIC", f"{name}: empty record"), None
    text = value.decode("utf-8", errors="replace").strip()
    try:
        body: Any = json.loads(text)
    except ValueError:
        return number(text, name), None
    if isinstance(body, dict):
        when = stamp(body.get("timestamp"))
        reading = number(body.get("value"), name)
        if "forecast" in body and not isinstance(reading, Failure):
            points = series(body["forecast"], f"{name} forecast")
            reading = points if isinstance(points, Failure) else Forecasted(
                float(reading), points)  # type: ignore[arg-type]
        return reading, when
    return number(body, name), None


class KafkaProvider:
    type = "kafka"

    def __init__(self, spec: KafkaSpec, *, provider: str, liveness_interval: float = 2.0,
                 catch_up: float = 60.0) -> None:
        self.liveness_interval = liveness_interval
        # Until the topic has been read up to where it ended at the first assignment,
        # fetch answers NotYet (an unknown metric then is only one not read yet);
        # after ``catch_up`` seconds it answers with what it has.
        self._caught_up = threading.Event()
        self._catch_up_until = time.monotonic() + catch_up
        self._ends: dict[Any, int] = {}  # partition → end offset at the first assignment
        servers = spec.bootstrap_servers or []
        self.servers = servers if isinstance(servers, str) else ",".join(servers)
        self.topic = spec.topic or ""
        self.group = spec.group_id or f"berth-metrics-cache-{provider}"
        self.spec = spec
        # The consumer's thread writes, the poller reads: both under _lock.
        self._lock = threading.Lock()
        self.latest: dict[str, tuple[Reading, float]] = {}  # name → (reading, ordering key)
        self._link: tuple[bool, str] = (False, "not connected yet")  # (connected, error)
        self._stop = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"kafka {self.topic}", daemon=True)
        self._thread.start()

    def _consumer_options(self) -> dict[str, Any]:
        s = self.spec
        options: dict[str, Any] = {
            "bootstrap_servers": self.servers, "group_id": self.group,
            "enable_auto_commit": True, "auto_commit_interval_ms": 1000,  # lag, for operators
            "auto_offset_reset": "earliest", "request_timeout_ms": 10000,
        }
        if s.security_protocol:
            options["security_protocol"] = s.security_protocol
        if s.ssl_cafile or s.ssl_certfile:
            from aiokafka.helpers import create_ssl_context

            options["ssl_context"] = create_ssl_context(
                cafile=s.ssl_cafile, certfile=s.ssl_certfile, keyfile=s.ssl_keyfile)
        if s.sasl_mechanism:
            options.update(sasl_mechanism=s.sasl_mechanism, sasl_plain_username=s.sasl_username,
                           sasl_plain_password=s.sasl_password)
        return options

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._consume_forever())

    async def _consume_forever(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka.errors import KafkaError

        class FromTheStart(ConsumerRebalanceListener):  # type: ignore[misc]
            def __init__(self, consumer: AIOKafkaConsumer) -> None:
                self.consumer = consumer

            async def on_partitions_revoked(self, revoked: Any) -> None:
                return None

            async def on_partitions_assigned(self, assigned: Any) -> None:
                if assigned:
                    await self.consumer.seek_to_beginning(*assigned)
                    if not provider._ends:
                        provider._ends = dict(await self.consumer.end_offsets(list(assigned)))

        provider = self

        while not self._stop.is_set():
            consumer = AIOKafkaConsumer(**self._consumer_options())
            consumer.subscribe([self.topic], listener=FromTheStart(consumer))
            try:
                await consumer.start()
                self._set_link(True, "")
                loop_time = asyncio.get_running_loop().time
                last_check = loop_time()
                while not self._stop.is_set():
                    batches = await consumer.getmany(timeout_ms=500)
                    for records in batches.values():
                        for r in records:
                            self._record(r.key, r.value, r.timestamp)
                    if not self._caught_up.is_set() and self._ends:
                        await self._check_caught_up(consumer)
                    if loop_time() - last_check >= self.liveness_interval:
                        # The consumer reconnects silently: ask the brokers for
                        # metadata to know whether they can be reached now.
                        last_check = loop_time()
                        try:
                            await asyncio.wait_for(consumer.topics(), self.liveness_interval)
                            self._set_link(True, "")
                        except (TimeoutError, KafkaError, OSError) as exc:
                            self._set_link(False, f"{self.servers}: unreachable ({exc!r})")
            except (KafkaError, OSError) as exc:
                self._set_link(False, f"{self.servers}: {exc}")
                log.warning("kafka provider %s: %s", self.topic, exc)
            finally:
                try:
                    await consumer.stop()
                except Exception as exc:  # a half-started consumer
                    log.debug("kafka provider %s: stopping: %s", self.topic, exc)
            if not self._stop.is_set():
                await asyncio.sleep(1.0)

    async def _check_caught_up(self, consumer: Any) -> None:
        try:
            at = {tp: await consumer.position(tp) for tp in self._ends}
        except Exception as exc:  # reassigned meanwhile: the deadline still holds
            log.debug("kafka provider %s: position: %s", self.topic, exc)
            return
        if all(at[tp] >= end for tp, end in self._ends.items()):
            self._caught_up.set()

    def _record(self, key: bytes | None, value: bytes | None, timestamp: int) -> None:
        if key is None:
            return
        name = key.decode("utf-8", errors="replace")
        reading, stamp = parse_record(value, name)
        order = stamp if stamp is not None else timestamp / 1000.0
        with self._lock:
            current = self.latest.get(name)
            if current is None or order >= current[1]:
                self.latest[name] = (reading, order)

    def _set_link(self, connected: bool, error: str) -> None:
        with self._lock:
            self._link = (connected, error)

    @property
    def connected(self) -> bool:
        with self._lock:
            return self._link[0]

    def fetch(self, metrics: Sequence[str]) -> Mapping[str, Reading]:
        with self._lock:
            (connected, error), latest = self._link, dict(self.latest)
        if not self._caught_up.is_set():
            if time.monotonic() < self._catch_up_until:
                raise NotYet(f"reading topic {self.topic} up to its end")
            log.warning("kafka provider %s: the topic not read up to its end in time; "
                        "answering with what was read", self.topic)
            self._caught_up.set()
        if not connected:
            return dict.fromkeys(metrics, Failure(UNREACHABLE, error))
        return {m: latest[m][0] if m in latest
                else Failure(UNKNOWN_METRIC, f"no record for {m!r} on topic {self.topic}")
                for m in metrics}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
