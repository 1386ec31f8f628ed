"""The exporter, measured: a first export of every application, then the lag of moves,
each against writing the same objects straight to the same API server.

    python scripts/bench/export_bench.py [--apps 10000] [--clusters 100] [--moves 300]
        [--rate 20] [--workers 4] [--seed 7]

On its own etcd and Kubernetes API server (``KubeCluster`` without nodes): ``--clusters``
clusters with labels and a metric value each, ONLINE or not; ``--apps`` applications,
their Bindings and statuses as the scheduler and the propagator leave them — on 1 to 5
clusters (most on one), some in the middle of a move (a copy leaving, one arriving),
some chosen nowhere, names of every length — and one Export of every shape.

First, the floor: the same objects (built by the exporter's own ``shapes`` from the
same documents) written straight to the API server with the exporter's own client and
as many requests in flight (``--workers``), then deleted. Then ``berth exporter``, the
process as it ships, from its start until its status says Synced with every object
written; the ratio of the two times; the exporter's CPU per object.

Then the lag: ``--moves`` Bindings changed to other clusters, ``--rate`` per second,
each timed from its write to etcd until a watch on the API server sees the
application's OCM PlacementDecision name the new cluster; against the floor of the
same path without berth: an object's status written straight to the API server and
seen on the same watch.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import ssl
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec

from berth.controllers.exporter.api import Api, crd_documents
from berth.controllers.exporter.shapes import (
    OCM_PLACEMENT,
    OCM_VERSION,
    Profile,
    Property,
    Ref,
    Wanted,
    argocd_config_map,
    base_name,
    ocm_decisions,
    profile,
    sig_decisions,
)
from berth.controllers.exporter.views import AppStatusView, BindingView, placement
from berth.store import EtcdConfig, Put, Store, encode, keys
from berth_testkit.scratch import run_bench, scratch
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster

NS = "argocd"
NOW = "2026-11-30T12:00:00+00:00"


def _binding(name: str, targets: list[str], reason: str) -> dict[str, Any]:
    return {"kind": "Binding", "api": "scheduling",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"resource": {"kind": "Application", "name": name, "namespace": "default"},
                     "generation": 1, "scheduled": NOW,
                     "targets": [{"kind": "Cluster", "name": t, "namespace": "default",
                                  "score": 0.5} for t in targets]},
            "status": {"state": "Scheduled", "reason": reason, "explanation": [
                {"candidate": f"Cluster/default/{t}", "score": round(0.4 + i / 20, 4),
                 "scores": {"MetricScore": round(0.4 + i / 20, 4)}}
                for i, t in enumerate(targets)]}}


def _status(name: str, copies: dict[str, bool]) -> dict[str, Any]:
    return {"kind": "Application", "api": "kubernetes",
            "metadata": {"name": name, "namespace": "default"},
            "status": {"applied": {f"default/{c}": {"generation": 1, "health": "Healthy",
                                                   "new": not ok}
                                   for c, ok in copies.items()}}}


def seed(store: Store, apps: int, clusters: int, rng: random.Random
         ) -> tuple[list[str], dict[str, tuple[dict[str, Any], dict[str, Any]]]]:
    """The fleet in etcd; the clusters' names and each application's Binding and status."""
    names = [f"c{i:03d}-{rng.choice(['eu', 'us', 'ap'])}" for i in range(clusters)]
    ops: list[Put] = []
    for i, c in enumerate(names):
        ops.append(Put(keys.resource_key("Cluster", c, "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": c, "namespace": "default", "generation": 1,
                         "labels": {"zone": c[-2:], "tier": rng.choice(["gold", "bronze"])}},
            "spec": {"metrics": [{"name": f"price-{c}", "weight": 1}]}})))
        ops.append(Put(keys.status_key("Cluster", "default", c), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": c, "namespace": "default"},
            "status": {"state": "ONLINE" if i % 17 else "OFFLINE", "version": "v1.36.3"}})))
        ops.append(Put(keys.metric_value_key(f"price-{c}"), encode({
            "api": "core", "kind": "MetricValue", "metadata": {"name": f"price-{c}"},
            "status": {"value": round(rng.uniform(0.05, 0.4), 3), "observed": NOW}})))
    docs: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for a in range(apps):
        name = f"app-{a:05d}" + "-x" * rng.choice([0, 0, 0, 3, 20])  # long names too
        n = rng.choice([1, 1, 1, 1, 2, 2, 3, 5]) if a % 40 else 0
        targets = rng.sample(names, n)
        copies = {t: True for t in targets}
        if a % 25 == 1 and targets:  # in the middle of a move
            copies[rng.choice([c for c in names if c not in targets])] = True
            copies[targets[0]] = False
        binding = _binding(name, targets, f"{len(targets)}/{len(targets)} clusters are "
                           "available" if targets else "no cluster fits")
        status = _status(name, copies)
        docs[name] = (binding, status)
        ops.append(Put(keys.resource_key("Application", name, "default"), encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": "default", "generation": 1,
                         "labels": {"team": f"t{a % 7}"}}, "spec": {}})))
        ops.append(Put(keys.binding_key("Application", "default", name), encode(binding)))
        ops.append(Put(keys.status_key("Application", "default", name), encode(status)))
    store.commit_chunks(ops)
    return names, docs


def wanted(export: str, names: list[str],
           docs: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> list[Wanted]:
    """The objects the exporter is to write, built by its own shapes."""
    out = [argocd_config_map(export, "berth-placements")]
    for c in names:
        out.append(profile(export, "berth", Profile(
            f"default/{c}", c, "True", "Online", "ok", "v1.36.3",
            (Property("label.berth.io/zone", c[-2:]),)), datetime.now(UTC)))
    for name, (binding, status) in docs.items():
        p = placement(f"default/{name}", msgspec.convert(binding, BindingView),
                      msgspec.convert(status, AppStatusView), {})
        out += sig_decisions(export, NS, p) + ocm_decisions(export, p)
    return out


def floor(kube: KubeCluster, objs: list[Wanted], workers: int) -> float:
    """The same objects written straight to the API server (create, then status where
    the kind has one), ``workers`` in flight; seconds. Deleted afterwards."""
    api = Api(kube.kubeconfig(), NS, 30.0)
    api.ensure_namespace()
    for crd in crd_documents().values():
        api.install(crd)

    def write(w: Wanted) -> str:
        """The object written; its resourceVersion."""
        body = {"apiVersion": w.ref.api_version, "kind": w.kind, **w.body,
                "metadata": {**w.body["metadata"], "namespace": NS}}
        obj = api.create(w.ref, body)
        if w.status is not None:
            obj = api.replace(w.ref, {**obj, "status": w.status}, status=True)
        return str(obj["metadata"]["resourceVersion"])

    warm = {(w.ref.api_version, w.ref.plural): w for w in objs}  # a CRD's first write
    for w in warm.values():  # builds its storage: once for each kind, untimed
        api.delete(w.ref, write(w))
    began = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        versions = list(pool.map(write, objs))
    took = time.perf_counter() - began
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda wv: api.delete(wv[0].ref, wv[1]), zip(objs, versions, strict=True)))
    api.close()
    return took


class Watch:
    """The API server's OCM PlacementDecisions, watched: when each application's object
    was last seen naming which clusters."""

    def __init__(self, kube: KubeCluster) -> None:
        self.kube = kube
        self.seen: dict[str, list[tuple[float, frozenset[str]]]] = {}
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.conn: http.client.HTTPSConnection | None = None

    def start(self) -> Watch:
        self.thread.start()
        return self

    def _run(self) -> None:
        parts = urlsplit(self.kube.url)
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        self.conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, context=ctx)
        self.conn.request("GET", f"/apis/cluster.open-cluster-management.io/v1beta1/namespaces/"
                          f"{NS}/placementdecisions?watch=1&allowWatchBookmarks=false",
                          headers={"Authorization": f"Bearer {self.kube.token}"})
        resp = self.conn.getresponse()
        for line in resp:
            at = time.monotonic()
            event = json.loads(line)
            obj = event.get("object") or {}
            placed = (obj.get("metadata") or {}).get("labels", {}).get(OCM_PLACEMENT)
            decisions = (obj.get("status") or {}).get("decisions") or []
            if placed:
                with self.lock:
                    self.seen.setdefault(placed, []).append(
                        (at, frozenset(d["clusterName"] for d in decisions)))

    def when(self, base: str, clusters: frozenset[str], after: float) -> float | None:
        with self.lock:
            for at, named in self.seen.get(base, []):
                if at >= after and named == clusters:
                    return at
        return None


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--apps", type=int, default=10_000)
    p.add_argument("--clusters", type=int, default=100)
    p.add_argument("--moves", type=int, default=300)
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    rng = random.Random(args.seed)
    etcd = EtcdServer().start()
    kube = KubeCluster("export-bench", nodes=0).start()
    proc: subprocess.Popen[bytes] | None = None
    workdir = scratch("berth-export-bench-")
    try:
        store = Store(EtcdConfig(url=etcd.url))
        names, docs = seed(store, args.apps, args.clusters, rng)
        objs = wanted("argocd", names, docs)
        print(f"{args.apps} applications on {args.clusters} clusters: {len(objs)} objects "
              f"({sum(1 for o in objs if o.status is not None)} with a status subresource)")
        floor_s = floor(kube, objs, args.workers)
        print(f"floor, written straight to the API server ({args.workers} in flight): "
              f"{floor_s:.1f} s ({len(objs) / floor_s:.0f} objects/s)")
        store.commit([Put(keys.resource_key("Export", "argocd"), encode({
            "api": "core", "kind": "Export", "metadata": {"name": "argocd", "generation": 1},
            "spec": {"kubeconfig": kube.kubeconfig(), "namespace": NS,
                     "argocd": {"configMap": "berth-placements"}}}))])
        config = workdir / "export-bench-exporter.yaml"
        config.write_text(f"workers: {args.workers}\n")
        watch = Watch(kube).start()
        began = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "berth.cli.main", "--log-level", "WARNING",
                                 "exporter", "--etcd", etcd.url, "--http", "127.0.0.1:0",
                                 "--config", str(config)])
        while True:
            kv = store.get(keys.exported_key("argocd"))
            if kv is not None:
                status = json.loads(kv.value)["status"]
                if status["state"] == "Synced" and sum(status["objects"].values()) == len(
                        objs) - 1:  # the ConfigMap is not counted among the shapes
                    break
            if time.monotonic() - began > 3600:
                raise SystemExit("the exporter did not sync within an hour")
            time.sleep(0.2)
        first = time.monotonic() - began
        cpu = cpu_seconds(proc.pid)
        print(f"berth exporter, from its start to Synced: {first:.1f} s "
              f"({len(objs) / first:.0f} objects/s); CPU {cpu:.1f} s, "
              f"{cpu / len(objs) * 1e6:.0f} µs per object")
        print(f"ratio, exporter to floor (first export): {first / floor_s:.2f}x")
        # the lag of moves
        lags: list[float] = []
        movers = rng.sample([n for n, (b, _) in docs.items() if b["spec"]["targets"]],
                            min(args.moves, len(docs)))
        pending: list[tuple[str, frozenset[str], float]] = []
        cpu0 = cpu_seconds(proc.pid)
        start = time.monotonic()
        for i, name in enumerate(movers):
            binding, _ = docs[name]
            was = [t["name"] for t in binding["spec"]["targets"]]
            to = rng.choice([c for c in names if c not in was])
            moved = _binding(name, [to], "1/1 clusters are available")
            at = time.monotonic()
            store.commit([Put(keys.binding_key("Application", "default", name), encode(moved),
                              None),
                          Put(keys.status_key("Application", "default", name),
                              encode(_status(name, {to: True})), None)])
            pending.append((base_name(f"default/{name}"), frozenset([to]), at))
            time.sleep(max(0.0, start + (i + 1) / args.rate - time.monotonic()))
        deadline = time.monotonic() + 120
        for base, clusters, at in pending:
            while (seen := watch.when(base, clusters, at)) is None:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{base}: its move never reached the API server")
                time.sleep(0.05)
            lags.append(seen - at)
        cpu_moves = cpu_seconds(proc.pid) - cpu0
        # the floor of the same path: a status written straight, seen on the same watch
        api = Api(kube.kubeconfig(), NS, 30.0)
        direct: list[float] = []
        for i, name in enumerate(movers[: min(100, len(movers))]):
            base = base_name(f"default/{name}")
            ref_name = f"{base}-decision-1"
            obj = kube.request("GET", f"/apis/cluster.open-cluster-management.io/v1beta1/"
                               f"namespaces/{NS}/placementdecisions/{ref_name}")
            mark = frozenset([f"floor-{i}"])
            at = time.monotonic()
            api.replace(Ref(OCM_VERSION, "placementdecisions", ref_name),
                        {**obj, "status": {"decisions": [{"clusterName": f"floor-{i}",
                                                          "reason": "floor"}]}}, status=True)
            while (seen := watch.when(base, mark, at)) is None:
                time.sleep(0.001)
            direct.append(seen - at)
        api.close()
        print(f"lag of {len(lags)} moves at {args.rate:g}/s, Binding written to the API "
              f"server's watch saying it: p50 {pct(lags, 0.5) * 1000:.0f} ms, "
              f"p90 {pct(lags, 0.9) * 1000:.0f} ms, p99 {pct(lags, 0.99) * 1000:.0f} ms, "
              f"max {max(lags) * 1000:.0f} ms; exporter CPU {cpu_moves / len(lags) * 1000:.1f}"
              " ms per move")
        print(f"floor, a status written straight to the watch saying it ({len(direct)}): "
              f"p50 {statistics.median(direct) * 1000:.1f} ms, "
              f"p99 {pct(direct, 0.99) * 1000:.1f} ms")
        print(f"ratio, move lag to floor (p50): {pct(lags, 0.5) / statistics.median(direct):.1f}x")
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        kube.cleanup()
        etcd.cleanup()


if __name__ == "__main__":
    run_bench(main)
