"""The console at fleet scale (docs/console.md), measured.

    python scripts/bench/console_bench.py [--clusters 1000] [--apps 10000]
        [--churn 1000] [--seconds 30] [--requests 20]

On an etcd of its own it writes a fleet as the processes would leave it:
``--clusters`` Clusters (labels, taints on some, three metrics each, a status with
capacity), their metric values, ``--apps`` Applications (a Deployment each, of
varied size and replicas, some divided), their Bindings (one to three targets,
with an explanation as long as the scheduler's) and statuses (health per cluster),
in transactions of 128. Then it starts the real ``berth console`` and measures:

- the time until its informers hold the fleet, and its resident memory (VmRSS,
  and the peak VmHWM) at rest and after the churn;
- each page's latency (p50, p99 over ``--requests`` requests: fleet, the
  applications list's first page and a filtered one, one application, metrics),
  at rest and while a writer rewrites ``--churn`` Bindings a second (new targets,
  in transactions of 100), and what the writer achieved;
- in Debian's chromium (``--browser``, on by default): the time from asking for
  the fleet page and the applications page to their rows drawn, at rest and under
  the churn;
- the floor, in the same run: etcd listing the Applications' prefix, the read the
  list page would need without the console's informers (``ratio`` = page / floor).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import requests

from berth.store import EtcdConfig, Put, Store, keys
from berth_testkit.scheduler_env import ConsoleProcess
from berth_testkit.servers.etcd import EtcdServer

ROOT = Path(__file__).resolve().parents[2]
ZONES = ("eu-west", "eu-central", "eu-north", "us-east", "us-west", "ap-south")


def _clusters(n: int, rng: random.Random) -> list[tuple[keys.Key, dict[str, Any]]]:
    out = []
    for i in range(n):
        name = f"c{i:04d}"
        zone = ZONES[i % len(ZONES)]
        doc = {"api": "kubernetes", "kind": "Cluster",
               "metadata": {"name": name, "namespace": "fleet", "generation": 1,
                            "labels": {"zone": zone, "tier": rng.choice(["gold", "silver"]),
                                       "provider": rng.choice(["aws", "gcp", "onprem"])}},
               "spec": {"metrics": [{"name": f"price-{zone}", "weight": 1.0},
                                    {"name": f"renewable-{zone}", "weight": 2.0},
                                    {"name": f"load-{name}", "weight": 0.5,
                                     "namespaced": True}],
                        "taints": [{"key": "maintenance", "effect": "NoSchedule"}]
                        if i % 97 == 0 else []}}
        out.append((keys.resource_key("Cluster", name, "fleet"), doc))
        cpu = rng.choice([16000, 32000, 64000])
        out.append((keys.status_key("Cluster", "fleet", name), {
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "fleet"},
            "status": {"state": "ONLINE" if i % 50 else "OFFLINE", "reason": "",
                       "capacity": {"allocatable": {"cpu": cpu, "memory": cpu << 22,
                                                    "pods": 110},
                                    "requested": {"cpu": rng.randrange(cpu // 2),
                                                  "memory": rng.randrange(cpu << 21),
                                                  "pods": rng.randrange(60)},
                                    "nodes": rng.randrange(3, 12)}}}))
        out.append((keys.resource_key("Metric", f"load-{name}", "fleet"), {
            "api": "core", "kind": "Metric",
            "metadata": {"name": f"load-{name}", "namespace": "fleet"},
            "spec": {"min": 0, "max": 100, "provider": {"name": "prom", "metric": "load"}}}))
        out.append((keys.metric_value_key(f"load-{name}", "fleet"), {
            "api": "core", "kind": "MetricValue",
            "metadata": {"name": f"load-{name}", "namespace": "fleet"},
            "status": {"value": rng.uniform(0, 100), "observed": "2026-11-28T00:00:00Z"}}))
    for zone in ZONES:
        for m, hi in ((f"price-{zone}", 400.0), (f"renewable-{zone}", 1.0)):
            out.append((keys.resource_key("GlobalMetric", m), {
                "api": "core", "kind": "GlobalMetric", "metadata": {"name": m},
                "spec": {"min": 0, "max": hi, "provider": {"name": "prom", "metric": m}}}))
            out.append((keys.metric_value_key(m), {
                "api": "core", "kind": "MetricValue", "metadata": {"name": m},
                "status": {"value": rng.uniform(0, hi), "observed": "2026-11-28T00:00:00Z"}}))
    return out


def _binding(ns: str, name: str, on: list[str], rng: random.Random, gen: int = 1
             ) -> dict[str, Any]:
    explanation = [{"candidate": f"Cluster/fleet/{c}", "score": rng.random(), "tier": 1,
                    "scores": {"MetricScore": rng.random(), "Capacity": rng.random()}}
                   for c in on + [f"c{rng.randrange(1000):04d}" for _ in range(3)]]
    explanation.append({"rejected_by": "TaintToleration", "count": 11,
                        "reason": "untolerated taint maintenance:NoSchedule",
                        "candidates": [f"Cluster/fleet/c{i * 97:04d}" for i in range(11)]})
    return {"api": "scheduling", "kind": "Binding",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"resource": {"kind": "Application", "name": name, "namespace": ns},
                     "generation": gen,
                     "targets": [{"kind": "Cluster", "name": c, "namespace": "fleet",
                                  "score": rng.random()} for c in on],
                     "scheduled": "2026-11-28T00:00:00Z", "decision": "20261128T000000.000000Z"},
            "status": {"state": "Scheduled", "reason": f"{len(on)}/1000 clusters are available",
                       "explanation": explanation}}


def _apps(n: int, clusters: int, rng: random.Random) -> list[tuple[keys.Key, dict[str, Any]]]:
    out = []
    for i in range(n):
        ns, name = f"team-{i % 40:02d}", f"app-{i:05d}"
        replicas = rng.choice([1, 2, 3, 5, 8])
        containers = [{"name": f"c{j}", "image": f"registry.example/{name}/c{j}:1.{i % 7}",
                       "resources": {"requests": {"cpu": f"{rng.choice([50, 100, 250])}m",
                                                  "memory": f"{rng.choice([64, 128, 512])}Mi"}},
                       "env": [{"name": f"K{k}", "value": "v" * rng.randrange(8, 64)}
                               for k in range(rng.randrange(2, 10))]}
                      for j in range(rng.randrange(1, 4))]
        manifest = [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                     "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                              "template": {"metadata": {"labels": {"app": name}},
                                           "spec": {"containers": containers}}}},
                    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                     "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}]
        out.append((keys.resource_key("Application", name, ns), {
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": ns, "generation": 1,
                         "labels": {"team": ns, "tier": rng.choice(["web", "batch", "db"])}},
            "spec": {"manifest": manifest}}))
        on = [f"c{rng.randrange(clusters):04d}" for _ in range(rng.choice([1, 1, 2, 3]))]
        out.append((keys.binding_key("Application", ns, name), _binding(ns, name, on, rng)))
        out.append((keys.status_key("Application", ns, name), {
            "api": "kubernetes", "kind": "Application", "metadata": {"name": name, "namespace": ns},
            "status": {"state": "RUNNING", "generation": 1,
                       "running_on": [{"kind": "Cluster", "name": c, "namespace": "fleet"}
                                      for c in on],
                       "applied": {f"fleet/{c}": {"generation": 1, "health": "Healthy",
                                                  "available": replicas, "desired": replicas}
                                   for c in on}}}))
    return out


def write(store: Store, docs: list[tuple[keys.Key, dict[str, Any]]]) -> None:
    for i in range(0, len(docs), 128):
        store.commit([Put(k, json.dumps(d).encode(), None) for k, d in docs[i:i + 128]])


def rss(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text()
                  .splitlines() if ":" in line)
    return (int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024)


def timed(session: requests.Session, url: str, n: int) -> tuple[float, float, int]:
    """p50 and p99 seconds of ``n`` GETs, and the body's size."""
    took, size = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        r = session.get(url, timeout=60)
        took.append(time.perf_counter() - t0)
        r.raise_for_status()
        size = len(r.content)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * 0.99))], size


class Churn:
    """Rewrites ``rate`` Bindings a second with new targets, in transactions of 100."""

    def __init__(self, store: Store, apps: list[tuple[str, str]], clusters: int, rate: int
                 ) -> None:
        self.store, self.apps, self.clusters, self.rate = store, apps, clusters, rate
        self.written = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.began = 0.0

    def run(self) -> None:
        rng = random.Random(7)
        self.began = time.monotonic()
        gen = 2
        while not self.stop.is_set():
            due = self.began + (self.written + 100) / self.rate
            batch = rng.sample(self.apps, min(100, len(self.apps)))
            self.store.commit([Put(keys.binding_key("Application", ns, name), json.dumps(
                _binding(ns, name, [f"c{rng.randrange(self.clusters):04d}"], rng, gen)
            ).encode(), None) for ns, name in batch])
            self.written += len(batch)
            gen += 1
            self.stop.wait(max(0.0, due - time.monotonic()))

    def achieved(self) -> float:
        return self.written / max(1e-9, time.monotonic() - self.began)


def browse(url: str, phase: str, clusters: int, apps: int) -> None:
    """Seconds from asking for each list page in chromium to its rows drawn (median of 5)."""
    from berth_testkit.browser import chromium

    with chromium() as driver:
        for page, css, want in (("fleet", "tr[data-cluster]", clusters),
                                ("applications", "#apps tbody tr", min(apps, 500))):
            took = []
            for _ in range(5):
                driver.get("about:blank")
                t0 = time.perf_counter()
                driver.get(f"{url}#/{page}")
                while driver.execute_script(
                        "return document.querySelectorAll(arguments[0]).length", css) < want:
                    if time.perf_counter() - t0 > 60:
                        raise SystemExit(f"the {page} page did not draw {want} rows in 60 s")
                    time.sleep(0.01)
                took.append(time.perf_counter() - t0)
            print(f"  {phase:5} {page + ' in chromium':22} p50 "
                  f"{statistics.median(took) * 1000:6.0f} ms  max {max(took) * 1000:6.0f} ms "
                  "(asked to rows drawn; target < 1 s)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clusters", type=int, default=1000)
    p.add_argument("--apps", type=int, default=10000)
    p.add_argument("--churn", type=int, default=1000, help="Bindings rewritten a second")
    p.add_argument("--seconds", type=float, default=30.0, help="of churn")
    p.add_argument("--requests", type=int, default=20, help="per page and phase")
    p.add_argument("--no-browser", action="store_true", help="skip the browser's figures")
    args = p.parse_args()
    rng = random.Random(42)
    etcd = EtcdServer(extra=["--quota-backend-bytes", str(8 << 30)]).start()
    work = Path(etcd.workdir) / "console-bench"
    work.mkdir(parents=True, exist_ok=True)
    store = Store(EtcdConfig(url=etcd.url))
    console: ConsoleProcess | None = None
    try:
        t0 = time.monotonic()
        fleet = _clusters(args.clusters, rng)
        apps = _apps(args.apps, args.clusters, rng)
        write(store, fleet + apps)
        print(f"fleet: {args.clusters} clusters, {args.apps} applications written "
              f"({len(fleet) + len(apps)} keys) in {time.monotonic() - t0:.1f} s")
        floor = []
        for _ in range(5):
            t1 = time.perf_counter()
            store.list_prefix(keys.resource_prefix("Application"))
            floor.append(time.perf_counter() - t1)
        etcd_list = statistics.median(floor)
        print(f"floor: etcd lists the applications' prefix in {etcd_list * 1000:.0f} ms "
              "(median of 5)")
        t0 = time.monotonic()
        console = ConsoleProcess(etcd.url, work).start()
        url = console.url(timeout=300)
        s = requests.Session()
        s.verify = False
        while not s.get(url + "api/fleet", timeout=60).json()["synced"]:
            time.sleep(0.2)
        assert console.proc is not None
        pid = console.proc.pid
        print(f"console: synced in {time.monotonic() - t0:.1f} s (start included); "
              f"memory {rss(pid)[0]:.0f} MiB resident")
        pages = {"fleet": "api/fleet", "applications": "api/applications",
                 "applications tier=web": "api/applications?labels=tier%3Dweb",
                 "application": "api/applications/team-07/app-00007",
                 "metrics": "api/metrics"}

        def measure(phase: str) -> None:
            for label, path in pages.items():
                p50, p99, size = timed(s, url + path, args.requests)
                print(f"  {phase:5} {label:22} p50 {p50 * 1000:6.0f} ms  p99 {p99 * 1000:6.0f} ms"
                      f"  ratio {p50 / etcd_list:5.2f}  ({size / 1024:.0f} KiB)")

        print("pages (ratio: p50 against the floor):")
        measure("rest")
        if not args.no_browser:
            browse(url, "rest", args.clusters, args.apps)
        names = [(k.split("/")[-2], k.split("/")[-1]) for k, _ in apps
                 if k.startswith(keys.resource_prefix("Application"))]
        churn = Churn(store, names, args.clusters, args.churn)
        churn.thread.start()
        time.sleep(2)
        measure("churn")
        if not args.no_browser:
            browse(url, "churn", args.clusters, args.apps)
        deadline = churn.began + args.seconds
        stream = s.get(url + "api/stream", stream=True, timeout=60)
        heard, t_stream = 0, time.monotonic()
        for line in stream.iter_lines():
            if line.startswith(b"event: change"):
                heard += 1
            if time.monotonic() > deadline:
                break
        stream.close()
        churn.stop.set()
        churn.thread.join()
        listened = time.monotonic() - t_stream
        print(f"churn: {churn.achieved():.0f} Bindings/s written for {args.seconds:.0f} s; the "
              f"stream told a page {heard} times in {listened:.0f} s "
              f"({heard / max(1e-9, listened):.1f}/s: coalesced)")
        now, peak = rss(pid)
        print(f"memory: {now:.0f} MiB resident after the churn, peak {peak:.0f} MiB "
              f"(target < 300)")
    finally:
        if console is not None:
            console.stop()
        store.close()
        etcd.cleanup()


if __name__ == "__main__":
    main()
