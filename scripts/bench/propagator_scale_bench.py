"""The propagator scaled out: clusters shared by 1, 2 and 4 replicas, against direct apply.

    python scripts/bench/propagator_scale_bench.py [--clusters 100] [--apps 5000]
        [--servers 4] [--replicas 1,2,4] [--workers 16]

1. Starts etcd and ``--servers`` kube-apiservers (each with its own etcd) and
   registers ``--clusters`` Clusters, spread over them round robin (a
   kubeconfig context each: this machine cannot hold a hundred API servers).
2. For each replica count R: starts R ``berth propagator`` processes, waits
   until every cluster is claimed and the R replicas hold them, writes
   ``--apps`` applications (a Deployment and a Service each, one cluster each,
   round robin) with their Bindings in transactions of 128, and times the
   first write to the last application status RUNNING seen on a watch; then
   stops the replicas. Each run has applications of its own names.
3. The floor, in the same run: the same objects (other names) applied with
   server-side apply directly, from R * ``--workers`` threads (the number of
   appliers the R replicas have), one client per server.
4. Prints, per R: time to all RUNNING, apps/s, the floor, the ratio, how many
   status writes went per etcd transaction, and the replicas' peak RSS.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from lightkube import Client, KubeConfig  # noqa: E402
from propagator_bench import StatusWatcher, floor, manifest  # noqa: E402

from berth.controllers.propagator.shard import CLAIMS, MEMBERS  # noqa: E402
from berth.store import EtcdConfig, Put, Store, encode, keys  # noqa: E402
from berth.store.documents import (  # noqa: E402
    Binding,
    BindingMeta,
    BindingSpec,
    BindingStatus,
    ObjectRef,
    Target,
)
from tests.servers.etcd import EtcdServer, free_port, peak_rss_mb  # noqa: E402
from tests.servers.kube import KubeApiServer  # noqa: E402


def start_replicas(n: int, url: str, work: Path, workers: int) -> list[tuple[subprocess.Popen[
        bytes], int]]:
    config = work / "propagator.yaml"
    config.write_text(f"workers: {workers}\n")
    procs = []
    for i in range(n):
        port = free_port()
        with open(work / f"propagator-{n}-{i}.log", "wb") as log:
            procs.append((subprocess.Popen(
                [sys.executable, "-m", "berth.cli.main", "--log-level", "WARNING", "propagator",
                 "--etcd", url, "--http", f"127.0.0.1:{port}", "--config", str(config),
                 "--lease-ttl", "5"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT), port))
    return procs


def claimed(store: Store, clusters: int, replicas: int, timeout: float = 120) -> float:
    """Seconds until every cluster is claimed and exactly ``replicas`` members hold them."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        claims, _ = store.list_prefix(CLAIMS)
        members, _ = store.list_prefix(MEMBERS)
        holders = {msgspec.json.decode(kv.value)["holder"] for kv in claims}
        if len(claims) == clusters and len(members) == replicas and len(holders) == replicas:
            return time.monotonic() - began
        time.sleep(0.2)
    raise SystemExit(f"the clusters were not shared by {replicas} replicas in {timeout} s")


def grouped(port: int) -> tuple[float, float]:
    """(status writes, transactions) of one replica, from its metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    total = count = 0.0
    for m in re.finditer(r'^berth_store_group_commit_writes_(sum|count)\{writer="'
                         r'application-status"\} (\S+)$', text, re.MULTILINE):
        if m.group(1) == "sum":
            total = float(m.group(2))
        else:
            count = float(m.group(2))
    return total, count


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=100)
    ap.add_argument("--apps", type=int, default=5000)
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--replicas", default="1,2,4")
    ap.add_argument("--workers", type=int, default=16)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="berth-propagator-scale-"))
    server = EtcdServer().start()
    kubes: list[KubeApiServer] = []
    try:
        for i in range(args.servers):
            t = time.perf_counter()
            kubes.append(KubeApiServer(f"scale{i}").start())
            print(f"kube-apiserver {i} ready in {time.perf_counter() - t:.1f}s", flush=True)
        store = Store(EtcdConfig(url=server.url))
        names = [f"c{i:03d}" for i in range(args.clusters)]
        store.commit_chunks([Put(keys.resource_key("Cluster", name, "default"),
                                 msgspec.json.encode({
                                     "api": "kubernetes", "kind": "Cluster",
                                     "metadata": {"name": name, "namespace": "default"},
                                     "spec": {"kubeconfig": kubes[i % len(kubes)].kubeconfig()}}))
                             for i, name in enumerate(names)])
        clients = [Client(KubeConfig.from_dict(k.kubeconfig()), trust_env=False) for k in kubes]
        floor(clients, 1, 1)  # lightkube's models decoded once before threads do it at once
        print(f"{args.clusters} clusters on {len(kubes)} kube-apiservers, {args.apps} "
              f"applications (Deployment + Service) per run, {args.workers} workers per "
              "replica", flush=True)
        rows = []
        for replicas in (int(r) for r in args.replicas.split(",")):
            procs = start_replicas(replicas, server.url, work, args.workers)
            try:
                shared = claimed(store, args.clusters, replicas)
                watcher = StatusWatcher(store)
                ops: list[Put] = []
                for i in range(args.apps):
                    name = f"r{replicas}-{i:05d}"
                    ops.append(Put(keys.resource_key("Application", name, "default"),
                                   msgspec.json.encode({
                                       "api": "kubernetes", "kind": "Application",
                                       "metadata": {"name": name, "namespace": "default",
                                                    "generation": 1},
                                       "spec": {"manifest": manifest(name)}})))
                    ops.append(Put(keys.binding_key("Application", "default", name), encode(
                        Binding(BindingMeta(name, "default"), BindingSpec(
                            ObjectRef("Application", name, "default"), 1,
                            [Target("Cluster", names[i % len(names)], "default")]),
                            BindingStatus("Scheduled")))))
                began = time.perf_counter()
                rev0 = store.revision()
                store.commit_chunks(ops)
                if not watcher.wait_for(args.apps, timeout=120 + args.apps * 0.5):
                    raise SystemExit(f"only {len(watcher.running)}/{args.apps} RUNNING with "
                                     f"{replicas} replicas; logs in {work}")
                took = max(watcher.running.values()) - began
                watcher.watch.close()
                writes = txns = 0.0
                for _, port in procs:
                    w, t = grouped(port)
                    writes, txns = writes + w, txns + t
                rss = max(peak_rss_mb(p.pid) for p, _ in procs)
                revisions = store.revision() - rev0
            finally:
                for p, _ in procs:
                    p.terminate()
                for p, _ in procs:
                    p.wait(60)
            threads = replicas * args.workers
            direct = floor(clients, args.apps, threads)
            rows.append((replicas, took, direct, shared, writes, txns, rss, revisions))
            print(f"{replicas} replica(s): all RUNNING in {took:.1f}s ({args.apps / took:.0f} "
                  f"apps/s); direct apply from {threads} threads {direct:.1f}s; ratio "
                  f"{took / direct:.2f}; clusters shared in {shared:.1f}s; status writes "
                  f"{writes:.0f} in {txns:.0f} transactions ({writes / max(txns, 1):.1f} "
                  f"each); peak RSS {rss:.0f} MB per replica", flush=True)
        print()
        print(f"{'replicas':>8} {'all RUNNING':>12} {'apps/s':>7} {'direct SSA':>11} "
              f"{'ratio':>6} {'writes/txn':>11}")
        for replicas, took, direct, _, writes, txns, _, _ in rows:
            print(f"{replicas:>8} {took:>11.1f}s {args.apps / took:>7.0f} {direct:>10.1f}s "
                  f"{took / direct:>6.2f} {writes / max(txns, 1):>11.1f}")
        for c in clients:
            c.close()
    finally:
        for k in kubes:
            k.cleanup()
        server.cleanup()


if __name__ == "__main__":
    main()
