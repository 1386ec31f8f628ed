"""Kafka provider benchmark: does the topic consumer keep up with a busy topic?

    python scripts/bench/kafka_bench.py [--rate 10000] [--seconds 30] [--metrics 10000]

Starts its own Kafka broker, and a producer process sending ``--rate`` records a
second for ``--seconds`` seconds, each to a random one of ``--metrics`` metric names,
as ``{"value": ..., "timestamp": <ms>}`` with every value different. Meanwhile the
provider (berth's KafkaProvider, in this process) consumes the topic; twice a
second the benchmark takes how far behind it is: the newest record's timestamp it
holds against the clock (the consumer lag, in seconds), and at the end how long it
takes to hold the last record. Then the floor: a bare aiokafka consumer reads the
same topic from its beginning, as the provider does on a start, and both are
timed on that same catch-up (CPU per record of the provider's thread against the
bare consumer's).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from berth.controllers.metrics_cache.providers.kafka import KafkaProvider
from berth.store.documents.metrics import KafkaSpec
from berth_testkit.servers.kafka import KafkaServer

TICKS = os.sysconf("SC_CLK_TCK")
PRODUCER = r"""
import asyncio, json, random, sys, time
from aiokafka import AIOKafkaProducer
bootstrap, topic, rate, seconds, metrics = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])

names = [f"m{i:05d}".encode() for i in range(metrics)]
async def main():
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await p.start()
    sent, t0 = 0, time.monotonic()
    while (now := time.monotonic()) - t0 < seconds:
        due = int((now - t0) * rate)
        while sent < due:
            value = {"value": random.random() * 100, "timestamp": int(time.time() * 1000)}
            await p.send(topic, json.dumps(value).encode(), key=random.choice(names))
            sent += 1
        await asyncio.sleep(0.005)
    await p.flush()
    await p.stop()
    print(sent, f"{sent / (time.monotonic() - t0):.0f}", time.time())
asyncio.run(main())
"""


def thread_cpu(native_id: int) -> float:
    fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def newest(provider: KafkaProvider) -> float:
    with provider._lock:
        return max((order for _, order in provider.latest.values()), default=0.0)


def follow(provider: KafkaProvider, until: float, timeout: float) -> float:
    """Seconds until the provider holds a record stamped ``until`` or later."""
    t0 = time.monotonic()
    while newest(provider) < until - 0.001 and time.monotonic() - t0 < timeout:
        time.sleep(0.05)
    return time.monotonic() - t0


def bare_catch_up(bootstrap: str, topic: str, records: int) -> tuple[float, float]:
    """CPU seconds and wall seconds of a bare aiokafka consumer reading ``records``."""
    from aiokafka import AIOKafkaConsumer

    async def read() -> None:
        c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             group_id=None)
        await c.start()
        got = 0
        try:
            while got < records:
                for batch in (await c.getmany(timeout_ms=500)).values():
                    got += len(batch)
        finally:
            await c.stop()

    c0, t0 = time.thread_time(), time.monotonic()
    asyncio.run(read())
    return time.thread_time() - c0, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=10000, help="records per second")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--metrics", type=int, default=10000, help="distinct metric names")
    args = ap.parse_args()
    kafka = KafkaServer().start()
    topic = "energy"
    try:
        spec = KafkaSpec(bootstrap_servers=kafka.bootstrap, topic=topic)
        provider = KafkaProvider(spec, provider="bench", catch_up=5)
        while not provider.connected:
            time.sleep(0.1)
        producer = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, kafka.bootstrap, topic, str(args.rate),
             str(args.seconds), str(args.metrics)], stdout=subprocess.PIPE, text=True)
        native = provider._thread.native_id
        assert native is not None
        cpu0, t0 = thread_cpu(native), time.monotonic()
        lags: list[float] = []
        while producer.poll() is None:
            time.sleep(0.5)
            held = newest(provider)
            if held:
                lags.append(time.time() - held)
        out = (producer.stdout.read() if producer.stdout else "").split()
        sent, rate, last = int(out[0]), float(out[1]), float(out[2])
        drain = follow(provider, last - 0.5, 120)  # a record of the last half second
        cpu = (thread_cpu(native) - cpu0) / (time.monotonic() - t0)
        provider.close()
        lags = lags[2:]  # the first second: the producer connecting
        print(f"produced {sent} records at {rate:.0f}/s over {args.seconds} s, "
              f"{args.metrics} metric names")
        print(f"provider consumer lag while producing: p50 {statistics.median(lags):.2f} s, "
              f"p99 {sorted(lags)[int(len(lags) * 0.99)]:.2f} s, max {max(lags):.2f} s "
              f"({len(lags)} samples); caught up {drain:.2f} s after the producer stopped")
        print(f"provider thread CPU while producing: {cpu * 100:.0f}% of one core")

        # the floor: reading the whole topic from its beginning, bare and as the provider
        bare_cpu, bare_wall = bare_catch_up(kafka.bootstrap, topic, sent)
        again = KafkaProvider(spec, provider="bench-restart", catch_up=120)
        native = again._thread.native_id
        assert native is not None
        c0, w0 = thread_cpu(native), time.monotonic()
        while not again._caught_up.is_set() and time.monotonic() - w0 < 120:
            time.sleep(0.02)
        prov_wall = time.monotonic() - w0
        prov_cpu = thread_cpu(native) - c0
        again.close()
        print(f"catch-up of {sent} records from the beginning: bare aiokafka consumer "
              f"{bare_cpu / sent * 1e6:.1f} µs CPU per record ({bare_wall:.1f} s, "
              f"{sent / bare_wall:.0f} records/s), provider {prov_cpu / sent * 1e6:.1f} µs "
              f"({prov_wall:.1f} s, {sent / prov_wall:.0f} records/s): "
              f"{prov_cpu / bare_cpu:.2f}x the bare consumer's CPU")
    finally:
        kafka.cleanup()


if __name__ == "__main__":
    main()
