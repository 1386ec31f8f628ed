"""Metrics-cache benchmark: many series from a static and a Prometheus provider.

    python scripts/bench/metrics_cache_bench.py [--prometheus 10000] [--static 10000]
        [--window 60] [--change 0.01] [--batch 200] [--poll 10]

Starts its own Prometheus and Pushgateway and, for each way of asking Prometheus
(``--batch`` metrics per query, then one query per metric: the floor), its own etcd
and ``berth metrics-cache`` (poll interval ``--poll``, 10 s). It seeds the metrics — every
tenth Prometheus metric an aggregation (``max by (job) (...)``) rather than a plain
name, values all different — referenced by clusters (4 each), waits until every
value is in etcd and, for ``--window`` seconds while ``--change`` of the values
change every poll interval, measures:

* the metrics-cache's CPU (and Prometheus's), as a percentage of one core;
* Prometheus queries per poll, and the poll's duration per provider;
* etcd writes per poll against the values that changed (only changes are written);
* poll-to-etcd latency: a value's ``observed`` time (the poll) to its write on the watch.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from berth.controllers.metrics_cache.config import MetricsCacheConfig
from berth.store import EtcdConfig, Put, Store, Watch, decode, encode, keys
from berth.store.documents import MetricValue
from berth_testkit.figures import pct
from berth_testkit.measure import cpu_seconds
from berth_testkit.servers.etcd import EtcdServer, free_port
from berth_testkit.servers.prometheus import PrometheusServer

ROOT = Path(__file__).resolve().parents[2]



@dataclass
class Figures:
    cpu: float  # of one core
    prometheus_cpu: float
    queries_per_poll: float
    poll_ms: dict[str, float]
    writes: int
    changed: int
    p50_ms: float
    p99_ms: float
    first_all_s: float


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as page:
        body: bytes = page.read()
    return body.decode()


def sample(body: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{name}{re.escape(labels)} (\S+)$", body, re.M)
    return float(found.group(1)) if found else 0.0


def run(prom: PrometheusServer, batch: int, static_names: list[str], prom_names: list[str],
        window: float, change: float, poll: float) -> Figures:
    """One metrics-cache asking Prometheus ``batch`` metrics per query, on its own etcd."""
    rng = random.Random(batch)
    etcd = EtcdServer().start()
    proc = None
    try:
        store = Store(EtcdConfig(url=etcd.url))
        static_values = {n: float(i % 997) for i, n in enumerate(static_names)}
        prom_values = {n: float(i % 991) for i, n in enumerate(prom_names)}
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
        for i, name in enumerate(static_names + prom_names):
            prometheus = name[0] == "p"
            query = f"max by (job) ({name})" if prometheus and i % 10 == 0 else name
            ops.append(Put(keys.resource_key("GlobalMetric", name), encode({
                "api": "core", "kind": "GlobalMetric", "metadata": {"name": name},
                "spec": {"min": 0, "max": 5000, "provider": {
                    "name": "prom" if prometheus else "static", "metric": query}}})))
        names = static_names + prom_names
        rng.shuffle(names)  # clusters mix both providers
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
            for got in watch:
                now = time.time()
                for ev in got.events:
                    if ev.type != "PUT" or ev.key == keys.METRIC_PICTURE:
                        continue  # the picture is one key per poll, not a value
                    writes[0] += 1
                    doc = decode(ev.value, MetricValue)
                    seen[ev.key] = now
                    if doc.status.observed is not None:
                        latencies.append(now - doc.status.observed.timestamp())

        threading.Thread(target=follow, daemon=True).start()
        config = Path(etcd.workdir) / "metrics-cache-bench.yaml"
        config.write_text(f"poll_interval: {poll}\nlease_ttl: 15\nbatch: {batch}\n")
        log = open(Path(etcd.workdir) / "metrics-cache-bench.log", "wb")  # noqa: SIM115
        began = time.perf_counter()
        http = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "berth.cli.main", "--log-level", "WARNING", "metrics-cache",
             "--etcd", etcd.url, "--config", str(config), "--http", f"127.0.0.1:{http}"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        series = len(static_names) + len(prom_names)
        while len(seen) < series and time.perf_counter() - began < 300:
            time.sleep(0.2)
        first_all = time.perf_counter() - began
        print(f"  {len(seen)}/{series} series in etcd {first_all:.1f} s after the start",
              flush=True)
        time.sleep(poll * 1.2)  # one more poll of everything, which must write nothing

        latencies.clear()
        writes[0] = 0
        changed = 0
        body0 = scrape(http)
        cpu0, pcpu0, t0 = cpu_seconds(proc.pid), cpu_seconds(prom.prometheus.pid), \
            time.perf_counter()
        rounds = max(1, int(window // poll))
        for _ in range(rounds):
            ks = max(1, int(len(static_names) * change))
            kp = max(1, int(len(prom_names) * change))
            for n in rng.sample(static_names, ks):
                static_values[n] += 1000.0
            for n in rng.sample(prom_names, kp):
                prom_values[n] += 1000.0
            changed += ks + kp
            cur = store.get(keys.resource_key("GlobalMetricsProvider", "static"))
            store.update(cur.key, static_doc(), cur.mod_revision)  # type: ignore[union-attr]
            prom.push(**prom_values)
            time.sleep(poll)
        time.sleep(poll * 1.1)  # the last changes reach etcd
        elapsed = time.perf_counter() - t0
        body = scrape(http)
        polls = elapsed / poll

        def delta(name: str, labels: str = "") -> float:
            return sample(body, name, labels) - sample(body0, name, labels)

        poll_ms = {}
        for provider in ("static", "prom"):
            labels = f'{{provider="{provider}"}}'
            count = delta("berth_metrics_cache_poll_seconds_count", labels)
            poll_ms[provider] = (delta("berth_metrics_cache_poll_seconds_sum", labels)
                                 / max(count, 1) * 1e3)
        watch.close()
        return Figures(
            cpu=(cpu_seconds(proc.pid) - cpu0) / elapsed,
            prometheus_cpu=(cpu_seconds(prom.prometheus.pid) - pcpu0) / elapsed,
            queries_per_poll=delta("berth_metrics_cache_prometheus_queries_total") / polls,
            poll_ms=poll_ms, writes=writes[0], changed=changed,
            p50_ms=statistics.median(latencies) * 1e3 if latencies else float("nan"),
            p99_ms=pct(latencies, 0.99) * 1e3 if latencies else float("nan"),
            first_all_s=first_all)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(20)
        etcd.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prometheus", type=int, default=10000, help="Prometheus series")
    ap.add_argument("--static", type=int, default=10000, help="static series")
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--change", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=MetricsCacheConfig().batch,
                    help="metrics per Prometheus query (default: the configuration's)")
    ap.add_argument("--poll", type=float, default=10.0,
                    help="the metrics-cache's poll interval, seconds (the changes' period)")
    args = ap.parse_args()
    if args.poll <= 0:
        ap.error("--poll must be positive")
    static_names = [f"s{i:05d}" for i in range(args.static)]
    prom_names = [f"p{i:05d}" for i in range(args.prometheus)]
    prom = PrometheusServer().start()
    try:
        results = {}
        for batch in (args.batch, 1):
            label = f"{batch} metrics per query" if batch > 1 else "one query per metric (floor)"
            print(f"{label}:", flush=True)
            f = results[batch] = run(prom, batch, static_names, prom_names, args.window,
                                     args.change, args.poll)
            print(f"  CPU: metrics-cache {f.cpu * 100:.1f}% of one core, Prometheus "
                  f"{f.prometheus_cpu * 100:.1f}% ({args.prometheus} Prometheus + "
                  f"{args.static} static series, polled every {args.poll:g} s)")
            print(f"  Prometheus queries per poll: {f.queries_per_poll:.0f}; poll duration: "
                  + ", ".join(f"{k} {v:.0f} ms" for k, v in f.poll_ms.items()))
            print(f"  etcd writes of values: {f.writes} while {f.changed} values changed "
                  f"(every {args.poll:g} s, {args.change:.0%} of each provider's)")
            print(f"  poll-to-etcd latency: p50 {f.p50_ms:.0f} ms, p99 {f.p99_ms:.0f} ms",
                  flush=True)
        b, one = results[args.batch], results[1]
        print(f"batched vs one query per metric: CPU {b.cpu / one.cpu:.2f}x, Prometheus CPU "
              f"{b.prometheus_cpu / one.prometheus_cpu:.2f}x, queries "
              f"{b.queries_per_poll / one.queries_per_poll:.4f}x, prom poll "
              f"{b.poll_ms['prom'] / one.poll_ms['prom']:.2f}x, p99 {b.p99_ms / one.p99_ms:.2f}x")
    finally:
        prom.cleanup()


if __name__ == "__main__":
    main()
