"""Scheduler benchmark on its own etcd, against the floor of etcd's own write rate.

    python scripts/bench/scheduler_bench.py [--clusters 1000] [--apps 10000] [--rate 200]

1. Seeds ``--clusters`` ONLINE clusters (labels; 3 metrics each from a static
   provider, values written as the metrics-cache would) and starts
   ``berth scheduler`` as a child process.
2. Throughput: writes ``--apps`` applications (a label constraint and a
   metric constraint each) in transactions of 128 and times the first
   write to the last Binding seen on a watch: apps/s.
3. Latency: offers new applications at ``--rate`` per second for
   ``--seconds`` and prints p50/p99 time-to-bind (write → Binding on the watch).
4. Rescheduling: makes one cluster better than an application's current one
   by more than the stickiness and times the new Binding.
5. The floor: writes the same Binding documents to a scratch prefix in the
   scheduler's mean batch size and prints the ratio.
6. The scheduler's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from berth.store import EtcdConfig, Put, Store, Watch, decode, encode, keys
from berth.store.documents import Binding
from berth_testkit.figures import pct
from berth_testkit.measure import rss_mb
from berth_testkit.scheduler_env import value
from berth_testkit.servers.etcd import EtcdServer, free_port

ROOT = Path(__file__).resolve().parents[2]
LOCATIONS = ["DE", "FR", "IT", "NL", "PL"]
ZONES = 20


def cluster_metrics(i: int) -> list[str]:
    """A zone's heat demand, the cluster's own energy cost, and a fleet-wide load."""
    return [f"heat-z{i % ZONES}", f"cost-{i}", "load"]


def seed(store: Store, clusters: int) -> int:
    ops: list[Put] = [Put(keys.resource_key("GlobalMetricsProvider", "static"), encode({
        "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "static"},
        "spec": {"type": "static", "static": {"metrics": {}}}}))]
    names = sorted({m for i in range(clusters) for m in cluster_metrics(i)})
    for name in names:
        ops.append(Put(keys.resource_key("GlobalMetric", name), encode({
            "api": "core", "kind": "GlobalMetric", "metadata": {"name": name},
            "spec": {"min": 0, "max": 10, "provider": {"name": "static", "metric": name}}})))
    for i in range(clusters):
        name = f"cluster-{i:04d}"
        ops.append(Put(keys.resource_key("Cluster", name, "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"location": LOCATIONS[i % len(LOCATIONS)]}},
            "spec": {"kubeconfig": {"apiVersion": "v1", "kind": "Config"},
                     "metrics": [{"name": m, "weight": w} for m, w in
                                 zip(cluster_metrics(i), (0.5, 0.3, 0.2), strict=True)]}})))
        ops.append(Put(keys.status_key("Cluster", "default", name), (
            f'{{"api":"kubernetes","kind":"Cluster","metadata":{{"name":"{name}",'
            f'"namespace":"default"}},"status":{{"state":"ONLINE"}}}}').encode()))
    store.commit_chunks(ops)
    for j, name in enumerate(names):
        value(store, name, float((j * 7) % 9) + 0.5, 0, 10)
    return len(names)


def app_doc(name: str, locations: str = "DE, FR, NL") -> bytes:
    return encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": name, "namespace": "default", "generation": 1},
        "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": name}, "data": {"x": "y" * 200}}],
                 "constraints": {"cluster": {"labels": [f"location in ({locations})"],
                                             "metrics": ["load < 9"]}}}})


class BindingWatcher:
    """Records when each Binding first appears (and each change) on a watch."""

    def __init__(self, store: Store) -> None:
        self.seen: dict[str, float] = {}
        self.targets: dict[str, list[str]] = {}
        self.watch = Watch(store, keys.binding_prefix("Application"), store.revision() + 1)
        self.cond = threading.Condition()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self) -> None:
        for batch in self.watch:
            now = time.perf_counter()
            with self.cond:
                for ev in batch.events:
                    name = ev.key.rsplit("/", 1)[1]
                    if ev.type == "PUT":
                        b = decode(ev.value, Binding)
                        self.seen.setdefault(name, now)
                        self.targets[name] = [t.name for t in b.spec.targets]
                self.cond.notify_all()

    def wait(self, predicate, timeout: float) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True


def batch_mean(port: int) -> float:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    count = float(re.search(r"berth_scheduler_binding_batch_size_count (\S+)", body).group(1))  # type: ignore[union-attr]
    total = float(re.search(r"berth_scheduler_binding_batch_size_sum (\S+)", body).group(1))  # type: ignore[union-attr]
    return total / count if count else 1.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--apps", type=int, default=10000)
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()

    server = EtcdServer(progress_interval="1s").start()
    port = free_port()
    proc = None
    try:
        store = Store(EtcdConfig(url=server.url))
        t = time.perf_counter()
        n_metrics = seed(store, args.clusters)
        print(f"seeded {args.clusters} clusters, {n_metrics} metric values "
              f"in {time.perf_counter() - t:.1f}s")
        log = open(ROOT / "scheduler-bench.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "berth.cli.main", "--log-level", "WARNING", "scheduler",
             "--etcd", server.url, "--http", f"127.0.0.1:{port}"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        for _ in range(300):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").status == 200 and (
                        store.get(keys.lease_key("scheduler"))):
                    break
            except OSError:
                pass
            time.sleep(0.1)
        time.sleep(1.0)
        watcher = BindingWatcher(store)

        # -- throughput
        names = [f"app-{i:05d}" for i in range(args.apps)]
        ops = [Put(keys.resource_key("Application", n, "default"), app_doc(n)) for n in names]
        began = time.perf_counter()
        store.commit_chunks(ops)
        wrote = time.perf_counter() - began
        ok = watcher.wait(lambda: len(watcher.seen) >= args.apps, 600)
        mean = batch_mean(port)  # the scheduler's batch size while bursting
        last = max(watcher.seen.values())
        took = last - began
        print(f"throughput: {len(watcher.seen)}/{args.apps} applications bound "
              f"{'' if ok else '(TIMED OUT) '}in {took:.2f}s from the first write "
              f"(writes took {wrote:.2f}s): {args.apps / took:.0f} apps/s")

        # -- latency at an offered rate
        offered: dict[str, float] = {}
        n_lat = int(args.rate * args.seconds)
        start = time.perf_counter()
        for i in range(n_lat):
            due = start + i / args.rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            name = f"lat-{i:05d}"
            store.create(keys.resource_key("Application", name, "default"), app_doc(name))
            offered[name] = time.perf_counter()
        watcher.wait(lambda: all(n in watcher.seen for n in offered), 120)
        lat = [watcher.seen[n] - t0 for n, t0 in offered.items() if n in watcher.seen]
        print(f"latency at {args.rate:.0f} apps/s offered ({n_lat} apps): "
              f"p50 {statistics.median(lat) * 1e3:.1f} ms, p99 {pct(lat, 0.99) * 1e3:.1f} ms, "
              f"max {max(lat) * 1e3:.1f} ms")

        # -- rescheduling on a metric change: one application among all the others
        probe = "probe-it"
        store.create(keys.resource_key("Application", probe, "default"), app_doc(probe, "IT"))
        watcher.wait(lambda: probe in watcher.targets, 30)
        here = watcher.targets[probe][0]
        zone = int(here.rsplit("-", 1)[1]) % ZONES
        better = next(f"cluster-{i:04d}" for i in range(args.clusters)
                      if LOCATIONS[i % len(LOCATIONS)] == "IT" and i % ZONES != zone)
        i = int(better.rsplit("-", 1)[1])
        time.sleep(1.0)
        t0 = time.perf_counter()
        value(store, f"cost-{i}", 10.0, 0, 10)
        value(store, f"heat-z{i % ZONES}", 10.0, 0, 10)
        moved = watcher.wait(lambda: watcher.targets.get(probe) == [better], 60)
        print(f"rescheduling: {probe} moved {here} -> {better} "
              f"{'in' if moved else 'NOT within'} {time.perf_counter() - t0:.2f}s after the "
              f"metric change, with {len(watcher.targets)} placed applications to check")

        # -- the floor
        docs = [kv.value for kv in store.list_prefix(keys.binding_prefix("Application"))[0]]
        size = max(1, round(mean))
        floor_ops = [Put(keys.bench_key(f"floor/{i:06d}"), d)
                     for i, d in enumerate(docs[: args.apps])]
        t0 = time.perf_counter()
        for s in range(0, len(floor_ops), size):
            store.commit(floor_ops[s : s + size])
        floor = time.perf_counter() - t0
        print(f"floor: etcd writes the same {len(floor_ops)} Bindings in batches of {size} "
              f"(the scheduler's mean) in {floor:.2f}s: {len(floor_ops) / floor:.0f}/s; "
              f"scheduler/floor time ratio {took / floor:.2f}")
        print(f"scheduler peak RSS: {rss_mb(proc.pid):.0f} MB")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(20)
        server.cleanup()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
