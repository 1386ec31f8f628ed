"""Metrics-cache benchmark: many series from a static and a Prometheus provider.

    python scripts/bench/metrics_cache_bench.py [--series 10000] [--window 60] [--change 0.01]

Starts its own etcd, Prometheus and Pushgateway, seeds ``--series`` metrics
(``--prometheus-share`` of them pushed to Prometheus, the others static)
referenced by clusters (4 each), runs ``berth metrics-cache`` (poll interval
10 s) and, after every value is in etcd, measures for ``--window`` seconds
while ``--change`` of the values change every 10 s:

* the process's CPU, as a percentage of one core;
* etcd writes per poll against the values that changed (only changes are written);
* poll-to-etcd latency: a value's ``observed`` time (the poll) to its write on the watch.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from berth.store import EtcdConfig, Put, Store, Watch, decode, encode, keys  # noqa: E402
from berth.store.documents import MetricValue  # noqa: E402
from tests.servers.etcd import EtcdServer, free_port  # noqa: E402
from tests.servers.prometheus import PrometheusServer  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=10000)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--change", type=float, default=0.01)
    ap.add_argument("--prometheus-share", type=float, default=0.5,
                    help="the fraction of the series served by Prometheus (default 0.5)")
    args = ap.parse_args()
    half = int(args.series * (1 - args.prometheus_share))
    static_names = [f"s{i:05d}" for i in range(half)]
    prom_names = [f"p{i:05d}" for i in range(args.series - half)]

    etcd = EtcdServer().start()
    prom = PrometheusServer().start()
    proc = None
    try:
        store = Store(EtcdConfig(url=etcd.url))
        static_values = {n: float(i % 100) for i, n in enumerate(static_names)}
        prom_values = {n: float(i % 100) for i, n in enumerate(prom_names)}
        prom.push(**prom_values)
        prom.wait_value(prom_names[-1], prom_values[prom_names[-1]], timeout=60)

        def static_doc() -> bytes:
            return encode({"api": "core", "kind": "GlobalMetricsProvider",
                           "metadata": {"name": "static"},
                           "spec": {"type": "static", "static": {"metrics": static_values}}})

        ops = [Put(keys.resource_key("GlobalMetricsProvider", "static"), static_doc()),
               Put(keys.resource_key("GlobalMetricsProvider", "prom"), encode({
                   "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "prom"},
                   "spec": {"type": "prometheus", "prometheus": {"url": prom.url}}}))]
        for name in static_names + prom_names:
            ops.append(Put(keys.resource_key("GlobalMetric", name), encode({
                "api": "core", "kind": "GlobalMetric", "metadata": {"name": name},
                "spec": {"min": 0, "max": 100, "provider": {
                    "name": "static" if name[0] == "s" else "prom", "metric": name}}})))
        names = static_names + prom_names
        for c in range(0, len(names), 4):
            ops.append(Put(keys.resource_key("Cluster", f"c{c // 4:05d}", "default"), encode({
                "api": "kubernetes", "kind": "Cluster",
                "metadata": {"name": f"c{c // 4:05d}", "namespace": "default"},
                "spec": {"metrics": [{"name": n, "weight": 1} for n in names[c:c + 4]]}})))
        store.commit_chunks(ops)

        seen: dict[str, float] = {}
        latencies: list[float] = []
        writes = [0]
        watch = Watch(store, keys.METRIC_VALUES, store.revision() + 1)

        def follow() -> None:
            for batch in watch:
                now = time.time()
                for ev in batch.events:
                    if ev.type != "PUT":
                        continue
                    writes[0] += 1
                    doc = decode(ev.value, MetricValue)
                    seen[ev.key] = now
                    if doc.status.observed is not None:
                        latencies.append(now - doc.status.observed.timestamp())

        threading.Thread(target=follow, daemon=True).start()
        config = ROOT / "metrics-cache-bench.yaml"
        config.write_text("poll_interval: 10\nlease_ttl: 15\n")
        log = open(ROOT / "metrics-cache-bench.log", "wb")  # noqa: SIM115
        began = time.perf_counter()
        http = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "berth.cli.main", "--log-level", "WARNING", "metrics-cache",
             "--etcd", etcd.url, "--config", str(config), "--http", f"127.0.0.1:{http}"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        while len(seen) < args.series and time.perf_counter() - began < 180:
            time.sleep(0.2)
        print(f"{len(seen)}/{args.series} series in etcd {time.perf_counter() - began:.1f}s "
              "after the start")
        time.sleep(12)  # one more poll of everything, which must write nothing

        latencies.clear()
        writes[0] = 0
        changed = 0
        cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
        rounds = max(1, int(args.window // 10))
        for _ in range(rounds):
            ks = max(1, int(len(static_names) * args.change))
            kp = max(1, int(len(prom_names) * args.change))
            for n in random.sample(static_names, ks):
                static_values[n] += 1000.0
            for n in random.sample(prom_names, kp):
                prom_values[n] += 1000.0
            changed += ks + kp
            cur = store.get(keys.resource_key("GlobalMetricsProvider", "static"))
            store.update(cur.key, static_doc(), cur.mod_revision)  # type: ignore[union-attr]
            prom.push(**prom_values)
            time.sleep(10)
        time.sleep(11)  # the last changes reach etcd
        cpu = (cpu_seconds(proc.pid) - cpu0) / (time.perf_counter() - t0)
        polls = (time.perf_counter() - t0) / 10
        print(f"CPU: {cpu * 100:.1f}% of one core over {time.perf_counter() - t0:.0f}s "
              f"({args.series} series, polled every 10 s)")
        print(f"etcd writes: {writes[0]} in ~{polls:.0f} polls ({writes[0] / polls:.0f} per poll) "
              f"for {changed} changed values ({changed / rounds:.0f} per change round)")
        if latencies:
            print(f"poll-to-etcd latency: p50 {statistics.median(latencies) * 1e3:.0f} ms, "
                  f"p99 {pct(latencies, 0.99) * 1e3:.0f} ms, max {max(latencies) * 1e3:.0f} ms")
        body = urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics").read().decode()
        for provider in ("static", "prom"):
            def stat(what: str, provider: str = provider) -> float:
                pattern = rf'berth_metrics_cache_poll_seconds_{what}{{provider="{provider}"}} (\S+)'
                return float(re.search(pattern, body).group(1))  # type: ignore[union-attr]

            total, count = stat("sum"), stat("count")
            print(f"poll of {provider}: {total / count * 1e3:.0f} ms on average "
                  f"({count:.0f} polls)")
        watch.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(20)
        prom.cleanup()
        etcd.cleanup()


if __name__ == "__main__":
    main()
