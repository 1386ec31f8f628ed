"""The propagator scaled out: clusters shared by 1, 2 and 4 replicas, against direct apply.

    python scripts/bench/propagator_scale_bench.py [--clusters 100] [--apps 5000]
        [--servers 4] [--replicas 1,2,4] [--workers 16] [--profile PREFIX]

1. Starts etcd and ``--servers`` bare kube-apiservers (each with its own etcd; no
   Nodes, no controllers: this measures applying) and
   registers ``--clusters`` Clusters, spread over them round robin (a
   kubeconfig context each: this machine cannot hold a hundred API servers).
2. For each replica count R, on a fresh etcd and fresh kube-apiservers (else
   each run would find the servers fuller than the one before and be slower
   for that alone): starts R ``berth propagator`` processes, waits
   until every cluster is claimed and the R replicas hold them, writes
   ``--apps`` applications (a Deployment and a Service each, one cluster each,
   round robin) with their Bindings in transactions of 128, and times the
   first write to the last application status saying it is applied everywhere
   (PROGRESSING: nothing runs its Pods here) seen on a watch; then
   stops the replicas.
3. The floor, in the same run: the same objects (other names) applied with
   server-side apply directly, from R * ``--workers`` threads (the number of
   appliers the R replicas have), one client per server.
4. Prints, per R: time to all applied, apps/s, the floor, the ratio, how many
   status writes went per etcd transaction, the replicas' peak RSS, and the CPU
   the replicas, the kube-apiservers (with their etcds) and berth's etcd used
   while applying (on a small machine they share its cores), and the
   kube-apiservers' CPU for the floor's same objects.

``--profile PREFIX`` records py-spy profiles (GIL holders) of the first replica
while it applies: ``PREFIX-<replicas>.txt``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import msgspec
from lightkube import Client, KubeConfig
from propagator_bench import StatusWatcher, floor, manifest

from berth.controllers.propagator.shard import CLAIMS, MEMBERS
from berth.store import EtcdConfig, Put, Store, encode, keys
from berth.store.documents import (
    Binding,
    BindingMeta,
    BindingSpec,
    BindingState,
    BindingStatus,
    ObjectRef,
    Target,
)
from berth_testkit.measure import Profile, cpu_seconds, rss_mb
from berth_testkit.scratch import run_bench, scratch
from berth_testkit.servers.etcd import EtcdServer, free_port
from berth_testkit.servers.kube import KubeCluster

ROOT = Path(__file__).resolve().parents[2]


def start_replicas(n: int, url: str, work: Path, workers: int) -> list[tuple[subprocess.Popen[
        bytes], int]]:
    config = work / "propagator.yaml"
    config.write_text(f"workers: {workers}\n")
    procs = []
    for i in range(n):
        port = free_port()
        with open(work / f"propagator-{n}-{i}.log", "wb") as log:
            procs.append((subprocess.Popen(
                [sys.executable, "-m", "berth.cli.main", "--log-level", LOG_LEVEL, "propagator",
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


LOG_LEVEL = os.environ.get("BERTH_BENCH_LOG_LEVEL", "WARNING")



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
    ap.add_argument("--profile", metavar="PREFIX",
                    help="record py-spy profiles of the first replica: PREFIX-<replicas>.txt")
    args = ap.parse_args()
    work = scratch("berth-propagator-scale-")
    names = [f"c{i:03d}" for i in range(args.clusters)]
    print(f"{args.clusters} clusters on {args.servers} kube-apiservers, {args.apps} "
          f"applications (Deployment + Service) per run, {args.workers} workers per replica; "
          "every run on a fresh etcd and fresh kube-apiservers", flush=True)
    print(f"note: each kube-apiserver serves {args.clusters / args.servers:.0f} of the cluster "
          "contexts (as one user): berth watches each server once per kind and hands each "
          "event to the contexts it concerns, as separate clusters would each be watched "
          "once; the kube-apiservers do the work of that many clusters each", flush=True)
    rows = []
    for replicas in (int(r) for r in args.replicas.split(",")):
        server = EtcdServer().start()
        kubes: list[KubeCluster] = []
        try:
            t = time.perf_counter()
            kubes = [KubeCluster(f"scale{i}", nodes=0).start() for i in range(args.servers)]
            print(f"{replicas} replica(s): {args.servers} kube-apiservers ready in "
                  f"{time.perf_counter() - t:.1f}s", flush=True)
            store = Store(EtcdConfig(url=server.url))
            store.commit_chunks([Put(keys.resource_key("Cluster", name, "default"),
                                     msgspec.json.encode({
                                         "api": "kubernetes", "kind": "Cluster",
                                         "metadata": {"name": name, "namespace": "default"},
                                         "spec": {"kubeconfig": kubes[
                                             i % len(kubes)].kubeconfig()}}))
                                 for i, name in enumerate(names)])
            rows.append((replicas, *run(args, replicas, names, store, server, kubes, work)))
        finally:
            for k in kubes:
                k.cleanup()
            server.cleanup()
    print()
    print(f"{'replicas':>8} {'all RUNNING':>12} {'apps/s':>7} {'direct SSA':>11} "
          f"{'ratio':>6} {'writes/txn':>11}")
    for replicas, took, direct, writes, txns in rows:
        print(f"{replicas:>8} {took:>11.1f}s {args.apps / took:>7.0f} {direct:>10.1f}s "
              f"{took / direct:>6.2f} {writes / max(txns, 1):>11.1f}")


def run(args: argparse.Namespace, replicas: int, names: list[str], store: Store,
        server: EtcdServer, kubes: list[KubeCluster], work: Path
        ) -> tuple[float, float, float, float]:
    """One replica count: (time to all applied, direct apply's time, status writes,
    their transactions)."""
    procs = start_replicas(replicas, server.url, work, args.workers)
    try:
        shared = claimed(store, args.clusters, replicas)
        watcher = StatusWatcher(store)
        ops: list[Put] = []
        for i in range(args.apps):
            name = f"app-{i:05d}"
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
                    BindingStatus(BindingState.SCHEDULED)))))
        pids = [p.pid for p, _ in procs]
        servers = [k.proc.pid for k in kubes if k.proc] + [
            k.etcd.proc.pid for k in kubes if k.etcd.proc]
        etcd = [server.proc.pid] if server.proc else []
        used = (cpu_seconds(pids), cpu_seconds(servers), cpu_seconds(etcd))
        profile = Profile(args.profile, str(replicas), pids[0])
        began = time.perf_counter()
        store.commit_chunks(ops)
        if not watcher.wait_for(args.apps, timeout=120 + args.apps * 0.5):
            raise SystemExit(f"only {len(watcher.running)}/{args.apps} applied with "
                             f"{replicas} replicas; logs in {work}")
        took = max(watcher.running.values()) - began
        profile.stop()
        spent = (cpu_seconds(pids) - used[0], cpu_seconds(servers) - used[1],
                 cpu_seconds(etcd) - used[2])
        watcher.watch.close()
        writes = txns = 0.0
        for _, port in procs:
            w, t = grouped(port)
            writes, txns = writes + w, txns + t
        rss = max(rss_mb(p.pid) for p, _ in procs)
    finally:
        for p, _ in procs:
            p.terminate()
        for p, _ in procs:
            p.wait(60)
    clients = [Client(KubeConfig.from_dict(k.kubeconfig()), trust_env=False) for k in kubes]
    try:
        floor(clients, 1, 1)  # lightkube's models decoded once before threads do it at once
        threads = replicas * args.workers
        used_floor = cpu_seconds(servers)
        direct = floor(clients, args.apps, threads)
        floor_servers = cpu_seconds(servers) - used_floor
    finally:
        for c in clients:
            c.close()
    print(f"  all applied in {took:.1f}s ({args.apps / took:.0f} apps/s); direct apply from "
          f"{threads} threads {direct:.1f}s; ratio {took / direct:.2f}; clusters shared in "
          f"{shared:.1f}s; status writes {writes:.0f} in {txns:.0f} transactions "
          f"({writes / max(txns, 1):.1f} each); peak RSS {rss:.0f} MB per replica", flush=True)
    print(f"  CPU while applying: propagator replicas {spent[0]:.0f} s "
          f"({spent[0] / args.apps * 1e3:.1f} ms per application), kube-apiservers and "
          f"their etcds {spent[1]:.0f} s, berth's etcd {spent[2]:.0f} s, of "
          f"{took * (os.cpu_count() or 1):.0f} s on {os.cpu_count()} cores; direct apply: "
          f"kube-apiservers and their etcds {floor_servers:.0f} s", flush=True)
    return took, direct, writes, txns


if __name__ == "__main__":
    run_bench(main)
