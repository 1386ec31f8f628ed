"""Propagator benchmark on three real kube-apiservers, against a direct-apply floor.

    python scripts/bench/propagator_bench.py [--apps 1000] [--workers 16]

1. Starts etcd and three bare kube-apiservers (each with its own etcd; no Nodes,
   no controllers: this measures applying, ``availability_bench.py`` measures
   available), registers them as Clusters and starts ``berth propagator`` as a
   child process.
2. Writes ``--apps`` applications (a Deployment and a Service each) and their
   Bindings (round robin over the three clusters) in transactions of 128, and
   times the first write to the last application status saying it is applied
   everywhere (PROGRESSING: nothing runs its Pods here) seen on a watch.
3. The floor, in the same run: the same objects (other names) applied with
   server-side apply from one lightkube client, one request after another;
   and, for reference, from ``--workers`` threads at once.
4. Prints both, the ratio, and the propagator's peak RSS.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
from lightkube import Client, KubeConfig
from lightkube.core.resource_registry import resource_registry
from lightkube.types import PatchType

from berth.store import EtcdConfig, Put, Store, Watch, decode, encode, keys
from berth.store.documents import (
    ApplicationStatus,
    Binding,
    BindingMeta,
    BindingSpec,
    BindingState,
    BindingStatus,
    ObjectRef,
    Target,
)
from berth_testkit.measure import rss_mb
from berth_testkit.scratch import run_bench, scratch
from berth_testkit.servers.etcd import EtcdServer, free_port
from berth_testkit.servers.kube import KubeCluster

ROOT = Path(__file__).resolve().parents[2]
CLUSTERS = ("one", "two", "three")


def manifest(name: str) -> list[dict[str, Any]]:
    labels = {"app": name}
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
         "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {"containers": [
                      {"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
         "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 80}]}},
    ]


APPLIED = ("PROGRESSING", "RUNNING")  # applied on every target (available or not yet)


class StatusWatcher:
    """Counts applications whose status reached one of ``states`` (first time), from a
    watch. The propagator benchmarks run on bare API servers (no Nodes, no
    controllers): they measure applying, so they count PROGRESSING too;
    ``availability_bench.py`` measures available."""

    def __init__(self, store: Store, states: tuple[str, ...] = APPLIED) -> None:
        self.states = states
        self.running: dict[str, float] = {}
        self.watch = Watch(store, keys.status_prefix("Application"), store.revision() + 1)
        self.cond = threading.Condition()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self) -> None:
        for batch in self.watch:
            now = time.perf_counter()
            with self.cond:
                for ev in batch.events:
                    if ev.type == "PUT" and decode(
                            ev.value, ApplicationStatus).status.state in self.states:
                        self.running.setdefault(ev.key, now)
                self.cond.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while len(self.running) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True


def launch(store: Store, url: str, work: Path, workers: int
           ) -> tuple[subprocess.Popen[bytes], int, Path]:
    """``berth propagator`` as a child process, once it is ready and has probed the
    clusters: (the process, its metrics port, its log)."""
    port = free_port()
    config = work / "propagator.yaml"
    config.write_text(f"workers: {workers}\n")
    log_path = work / "propagator.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "berth.cli.main", "--log-level", "WARNING", "propagator",
             "--etcd", url, "--http", f"127.0.0.1:{port}", "--config", str(config)],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").status == 200 and (
                    store.get(keys.status_key("Cluster", "default", CLUSTERS[-1]))):
                break
        except OSError:
            pass
        time.sleep(0.1)
    return proc, port, log_path


def floor(clients: list[Client], apps: int, workers: int) -> float:
    """Seconds to server-side apply the objects of ``apps`` applications directly."""
    deployment = resource_registry.load("apps/v1", "Deployment")
    service = resource_registry.load("v1", "Service")
    prefix = f"floor{workers}"

    def one(i: int) -> None:
        client = clients[i % len(clients)]
        for cls, body in zip((deployment, service), manifest(f"{prefix}-{i:05d}"), strict=True):
            body["metadata"]["namespace"] = "default"
            client.patch(cls, body["metadata"]["name"], body,  # type: ignore[type-var]
                         namespace="default",
                         patch_type=PatchType.APPLY, field_manager="floor", force=True)

    began = time.perf_counter()
    if workers == 1:
        for i in range(apps):
            one(i)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(apps)))
    return time.perf_counter() - began


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=16)
    args = ap.parse_args()
    work = scratch("berth-propagator-bench-")
    server = EtcdServer().start()
    kubes: list[KubeCluster] = []
    proc: subprocess.Popen[bytes] | None = None
    watcher: StatusWatcher | None = None
    try:
        for name in CLUSTERS:
            t = time.perf_counter()
            kubes.append(KubeCluster(name, nodes=0).start())
            print(f"kube-apiserver {name} ready in {time.perf_counter() - t:.1f}s")
        store = Store(EtcdConfig(url=server.url))
        store.commit([Put(keys.resource_key("Cluster", name, "default"), msgspec.json.encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"kubeconfig": kube.kubeconfig()}})) for name, kube in zip(
                CLUSTERS, kubes, strict=True)])
        proc, port, log_path = launch(store, server.url, work, args.workers)
        watcher = StatusWatcher(store)

        names = [f"app-{i:05d}" for i in range(args.apps)]
        ops: list[Put] = []
        for i, name in enumerate(names):
            ops.append(Put(keys.resource_key("Application", name, "default"), msgspec.json.encode({
                "api": "kubernetes", "kind": "Application",
                "metadata": {"name": name, "namespace": "default", "generation": 1},
                "spec": {"manifest": manifest(name)}})))
            ops.append(Put(keys.binding_key("Application", "default", name), encode(Binding(
                BindingMeta(name, "default"), BindingSpec(
                    ObjectRef("Application", name, "default"), 1,
                    [Target("Cluster", CLUSTERS[i % 3], "default")]),
                BindingStatus(BindingState.SCHEDULED)))))
        began = time.perf_counter()
        store.commit_chunks(ops)
        wrote = time.perf_counter() - began
        if not watcher.wait_for(args.apps, timeout=60 + args.apps * 0.5):
            print(f"only {len(watcher.running)}/{args.apps} applied; see {log_path}")
            sys.exit(1)
        took = max(watcher.running.values()) - began
        rss = rss_mb(proc.pid)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
        counted = {m.group(1): float(m.group(2)) for m in re.finditer(
            r'^berth_propagator_(applies_total\{result="\w+"\}|drift_total) (\S+)$', metrics,
            re.MULTILINE)}
        print(f"propagator: {args.apps} applications ({2 * args.apps} objects) on "
              f"{len(CLUSTERS)} clusters in {took:.2f}s = {args.apps / took:.0f} apps/s "
              f"(writing them to etcd took {wrote:.2f}s); peak RSS {rss:.0f} MB")
        print("propagator counters: " + ", ".join(f"{k} {v:.0f}" for k, v in counted.items()))

        clients = [Client(KubeConfig.from_dict(k.kubeconfig()), trust_env=False) for k in kubes]
        try:
            one = floor(clients, args.apps, 1)
            many = floor(clients, args.apps, args.workers)
        finally:
            for c in clients:
                c.close()
        print(f"floor, one client, sequential: {one:.2f}s = {args.apps / one:.0f} apps/s")
        print(f"floor, {args.workers} threads:            {many:.2f}s = "
              f"{args.apps / many:.0f} apps/s")
        print(f"ratio propagator / sequential floor: {took / one:.2f}; "
              f"/ {args.workers}-thread floor: {took / many:.2f}")
    finally:
        if watcher is not None:
            watcher.watch.close()
        if proc is not None:
            proc.terminate()
            proc.wait(30)
        for k in kubes:
            k.cleanup()
        server.cleanup()


if __name__ == "__main__":
    run_bench(main)
