"""Scheduler benchmark with a diverse workload (every application differs), on its own etcd.

    python scripts/bench/diverse_bench.py [--clusters 1000] [--apps 10000]
        [--rate 500] [--seconds 10] [--no-latency] [--no-reaction] [--idle SECONDS]
        [--workloads [--no-requests]] [--changed SHARE] [--log-level LEVEL] [--config FILE]
        [--no-ledger] [--no-events] [--profile PREFIX] [--max-txn-ops N] [--quiet SECONDS]
        [--namespaces N]

1. Seeds ``--clusters`` ONLINE clusters and their metric values (workload.py)
   and starts ``berth scheduler`` as a child process.
2. Throughput: writes ``--apps`` applications, each with constraints of its
   own, in transactions of 128; times the first write to the last Binding
   seen on a watch.
3. Reaction: every metric value (``--changed``: that share of them, picked
   at random) changes at once (one poll of the
   metrics-cache); times the first Binding whose targets changed, the one
   by which half of them had, and the last, and counts the applications
   that moved. The reaction has ended once no Binding changed for ``--quiet``
   seconds (5; the pause before it and before the last RSS is as long, 3 s at
   most before it: the suite's smoke runs, whose figures say nothing, wait less).
4. Latency: offers new (diverse) applications at ``--rate`` per second for
   ``--seconds``; p50/p99 time-to-bind.
5. The etcd floor, in the same run: the same Bindings written to a scratch
   prefix in the scheduler's mean batch size; the moved Bindings alone; and
   every Binding the reaction wrote (the issue's "Bindings that must change":
   a placed application no cluster fits any more keeps its targets, but its
   state changes). Ratios to the floor.
6. The scheduler's peak and final RSS, and (``--idle``) whether it stays flat
   while nothing happens.
7. The ledger (docs/ledger.md): the records the scheduler wrote with its
   Bindings, their count and mean size (``--no-ledger``: the scheduler writes
   none; scripts/bench/ledger_bench.py compares the two).

``--namespaces N``: the applications belong to N teams' namespaces, round robin,
each with a NamespacePolicy (docs/teams.md) binding a ClusterSet of every cluster
and a quota of every resource and count, too large to refuse anything: the same
candidates and decisions as without, plus the cost of the policies — the set's
filter and the quota's counting (scripts/bench/tenancy_bench.py compares the two).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
from scheduler_bench import batch_mean
from workload import app_doc, cluster_capacity, cluster_doc

from berth.store import EtcdConfig, Put, Store, Watch, encode, keys, ledger
from berth.store.documents import Metadata, MetricValue, MetricValueStatus, ProviderInfo
from berth_testkit.figures import pct
from berth_testkit.measure import Profile, cpu_seconds, rss_mb
from berth_testkit.scheduler_env import picture
from berth_testkit.servers.etcd import EtcdServer, free_port

ROOT = Path(__file__).resolve().parents[2]


class _Target(msgspec.Struct):
    name: str


class _Spec(msgspec.Struct):
    targets: list[_Target] = []


class _Binding(msgspec.Struct):
    spec: _Spec




class Watcher:
    """When each Binding first appears, and when its targets last changed."""

    def __init__(self, store: Store) -> None:
        self.first: dict[str, float] = {}
        self.targets: dict[str, tuple[str, ...]] = {}
        self.changes: list[tuple[float, str]] = []  # (when, name) of each change of targets
        self.puts = 0  # Bindings written, whether their targets changed or not
        self.moves: dict[str, list[tuple[str, ...]]] = {}  # name → its targets over time
        self.cond = threading.Condition()
        self.watch = Watch(store, keys.binding_prefix("Application"), store.revision() + 1)
        threading.Thread(target=self.run, daemon=True).start()

    def run(self) -> None:
        decoder = msgspec.json.Decoder(_Binding)
        for batch in self.watch:
            now = time.perf_counter()
            with self.cond:
                for ev in batch.events:
                    if ev.type != "PUT":
                        continue
                    name = ev.key.rsplit("/", 1)[1]
                    self.puts += 1
                    targets = tuple(t.name for t in decoder.decode(ev.value).spec.targets)
                    self.first.setdefault(name, now)
                    if self.targets.get(name) != targets:
                        if name in self.targets:
                            self.changes.append((now, name))
                            self.moves.setdefault(name, [self.targets[name]]).append(targets)
                        self.targets[name] = targets
                self.cond.notify_all()

    def wait(self, predicate: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def quiet(self, seconds: float, timeout: float) -> None:
        """Wait until no Binding changed targets for ``seconds``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.cond:
                n = len(self.changes)
            time.sleep(seconds)
            with self.cond:
                if len(self.changes) == n:
                    return


def metric_value(name: str, v: float) -> bytes:
    from datetime import UTC, datetime
    return encode(MetricValue(Metadata(name=name), MetricValueStatus(
        value=v, normalized=v / 10.0, observed=datetime.now(UTC),
        provider=ProviderInfo("static", "static"))))


def seed(store: Store, clusters: int, rng: random.Random, workloads: bool = False) -> list[str]:
    ops: list[Put] = [Put(keys.resource_key("GlobalMetricsProvider", "static"), encode({
        "api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "static"},
        "spec": {"type": "static", "static": {"metrics": {}}}}))]
    metrics: set[str] = set()
    for i in range(clusters):
        name, doc, names = cluster_doc(i, rng)
        metrics.update(names)
        ops.append(Put(keys.resource_key("Cluster", name, "default"), encode(doc)))
        status: dict[str, Any] = {"state": "ONLINE"}
        if workloads:
            status["capacity"] = cluster_capacity(rng)
        ops.append(Put(keys.status_key("Cluster", "default", name), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default"}, "status": status})))
    for m in sorted(metrics):
        ops.append(Put(keys.resource_key("GlobalMetric", m), encode({
            "api": "core", "kind": "GlobalMetric", "metadata": {"name": m},
            "spec": {"min": 0, "max": 10, "provider": {"name": "static", "metric": m}}})))
        ops.append(Put(keys.metric_value_key(m), metric_value(m, rng.uniform(0, 8))))
    store.commit_chunks(ops)
    picture(store)  # the values are whole: the scheduler decides on them
    return sorted(metrics)


def teams(store: Store, namespaces: int) -> list[str]:
    """``namespaces`` teams' namespaces, each with a policy binding every cluster (of
    namespace default) and a quota that refuses nothing."""
    names = [f"team-{i:02d}" for i in range(namespaces)]
    ops = [Put(keys.resource_key("ClusterSet", "fleet"), encode({
        "api": "core", "kind": "ClusterSet", "metadata": {"name": "fleet"},
        "spec": {"namespaces": ["default"]}}))]
    ops += [Put(keys.resource_key("NamespacePolicy", ns), encode({
        "api": "core", "kind": "NamespacePolicy", "metadata": {"name": ns},
        "spec": {"clusterSets": ["fleet"], "quota": {
            "cpu": "1000000", "memory": "1000Ti", "pods": 10**9, "applications": 10**9,
            "copies": 10**9}}})) for ns in names]
    store.commit_chunks(ops)
    return names


def start_scheduler(url: str, port: int, store: Store, level: str = "WARNING",
                    config: str | None = None, max_txn_ops: int = 128
                    ) -> subprocess.Popen[bytes]:
    log = open(ROOT / "diverse-bench.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "berth.cli.main", "--log-level", level, "scheduler",
         "--etcd", url, "--http", f"127.0.0.1:{port}", "--etcd-max-txn-ops", str(max_txn_ops),
         *(["--config", config] if config else [])],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").status == 200 and (
                    store.get(keys.lease_key("scheduler"))):
                return proc
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the scheduler did not become ready")



def attempts(port: int) -> str:
    """The scheduler's attempts, sweep decisions and Binding writes so far, by result (from
    /metrics)."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    out = []
    for m in re.finditer(r'^berth_scheduler_(attempts|sweep_subjects|binding_writes)_total'
                         r'\{result="([^"]+)"\} (\S+)$', body, re.M):
        out.append(f"{m.group(1)}:{m.group(2)}={float(m.group(3)):.0f}")
    for m in re.finditer(r'^berth_gc_seconds_total\{generation="(\d)"\} (\S+)$', body, re.M):
        out.append(f"gc{m.group(1)}={float(m.group(2)):.2f}s")
    return ", ".join(out)


def ledger_size(store: Store) -> tuple[int, int]:
    """How many ledger records etcd holds, and their values' bytes (from their keys)."""
    entries = [ledger.parse(k) for page in store.keys_under(ledger.LEDGER) for k in page]
    return len(entries), sum(e.size for e in entries)


def floor(store: Store, docs: list[bytes], size: int, path: str) -> float:
    ops = [Put(keys.bench_key(f"{path}/{i:07d}"), d) for i, d in enumerate(docs)]
    t0 = time.perf_counter()
    for s in range(0, len(ops), size):
        store.commit(ops[s : s + size])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--apps", type=int, default=10000)
    ap.add_argument("--rate", type=float, default=500.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--no-reaction", action="store_true")
    ap.add_argument("--changed", type=float, default=1.0, metavar="SHARE",
                    help="the share of metric values the reaction changes (default: all)")
    ap.add_argument("--idle", type=float, default=0.0, metavar="SECONDS",
                    help="then watch the idle scheduler's RSS for this long")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quiet", type=float, default=5.0, metavar="SECONDS",
                    help="no Binding changed for this long: the reaction has ended")
    ap.add_argument("--workloads", action="store_true",
                    help="applications carry Deployments with requests (20 %% divided); "
                         "clusters report capacity")
    ap.add_argument("--no-requests", action="store_true",
                    help="with --workloads: the same Deployments and divisions, asking for "
                         "nothing (what issue #26 compares the workloads' rate with)")
    ap.add_argument("--log-level", default="WARNING", help="the scheduler's (diverse-bench.log)")
    ap.add_argument("--config", metavar="FILE", help="the scheduler's configuration")
    ap.add_argument("--max-txn-ops", type=int, default=128,
                    help="etcd's --max-txn-ops, and the scheduler's --etcd-max-txn-ops")
    ap.add_argument("--ledger-samples", metavar="FILE",
                    help="append up to 2,000 of the ledger's records to FILE (JSON lines)")
    ap.add_argument("--no-ledger", action="store_true",
                    help="the scheduler writes no ledger records (ledger.enabled: false)")
    ap.add_argument("--no-events", action="store_true",
                    help="the scheduler writes no events (events: false)")
    ap.add_argument("--figures", metavar="FILE",
                    help="also write the figures as JSON (fleet_ratios.py reads them)")
    ap.add_argument("--namespaces", type=int, default=0, metavar="N",
                    help="the applications in N teams' namespaces, each with a policy")
    ap.add_argument("--profile", metavar="PREFIX",
                    help="record py-spy profiles of the scheduler: PREFIX-<phase>.txt")
    args = ap.parse_args()
    if args.no_requests and not args.workloads:
        ap.error("--no-requests goes with --workloads")
    if args.no_ledger or args.no_events:
        if args.config:
            ap.error("--no-ledger and --no-events make the configuration: with --config, say "
                     "'ledger: {enabled: false}' or 'events: false' in it")
        args.config = str(ROOT / "diverse-bench-off.yaml")
        Path(args.config).write_text(("ledger:\n  enabled: false\n" if args.no_ledger else "")
                                     + ("events: false\n" if args.no_events else ""))
    rng = random.Random(args.seed)

    server = EtcdServer(progress_interval="1s",
                        extra=["--quota-backend-bytes", str(8 * 2**30),
                               "--max-txn-ops", str(args.max_txn_ops)]).start()
    port = free_port()
    proc = None
    figures: dict[str, float] = {}
    try:
        store = Store(EtcdConfig(url=server.url, max_txn_ops=args.max_txn_ops))
        t = time.perf_counter()
        metrics = seed(store, args.clusters, rng, args.workloads)
        spaces = teams(store, args.namespaces) if args.namespaces else ["default"]
        print(f"seeded {args.clusters} clusters, {len(metrics)} metric values "
              f"{f'and {args.namespaces} teams with policies ' if args.namespaces else ''}"
              f"in {time.perf_counter() - t:.1f}s")
        proc = start_scheduler(server.url, port, store, args.log_level, args.config,
                               args.max_txn_ops)
        time.sleep(1.0)
        watcher = Watcher(store)

        # -- throughput
        names = [f"app-{i:06d}" for i in range(args.apps)]
        docs_by_name = {n: app_doc(n, rng, workloads=args.workloads,
                                   requests=not args.no_requests) for n in names}
        for i, made in enumerate(docs_by_name.values()):
            made["metadata"]["namespace"] = spaces[i % len(spaces)]
        ops = [Put(keys.resource_key("Application", n, d["metadata"]["namespace"]), encode(d))
               for n, d in docs_by_name.items()]
        profile = Profile(args.profile, "throughput", proc.pid)
        assert server.proc is not None
        cpu, etcd_cpu = cpu_seconds(proc.pid), cpu_seconds(server.proc.pid)
        own_cpu = time.process_time()
        began = time.perf_counter()
        store.commit_chunks(ops)
        wrote = time.perf_counter() - began
        ok = watcher.wait(lambda: len(watcher.first) >= args.apps, 1800)
        cpu = cpu_seconds(proc.pid) - cpu
        etcd_cpu = cpu_seconds(server.proc.pid) - etcd_cpu
        own_cpu = time.process_time() - own_cpu
        waited = time.perf_counter() - began
        profile.stop()
        last = max(watcher.first.values())
        took = last - began
        mean = batch_mean(port)
        placed = sum(1 for n in names if watcher.targets.get(n))
        print(f"throughput: {len(watcher.first)}/{args.apps} applications bound "
              f"{'' if ok else '(TIMED OUT) '}in {took:.2f}s from the first write "
              f"(writes took {wrote:.2f}s): {args.apps / took:.0f} apps/s; "
              f"{placed} placed, {args.apps - placed} unschedulable; "
              f"mean Binding batch {mean:.1f}; the scheduler's CPU {cpu:.2f}s "
              f"({cpu / args.apps * 1e6:.0f} µs per application)")
        print(f"  so far: {attempts(port)}")
        print(f"scheduler RSS after the burst: {rss_mb(proc.pid, 'VmRSS'):.0f} MB "
              f"(peak {rss_mb(proc.pid):.0f} MB)")
        docs = [kv.value for kv in store.list_prefix(keys.binding_prefix("Application"))[0]]
        size = max(1, round(mean))
        floor_cpu = cpu_seconds(server.proc.pid)
        f_all = floor(store, docs, size, "floor")
        floor_cpu = cpu_seconds(server.proc.pid) - floor_cpu
        print(f"floor: etcd writes the same {len(docs)} Bindings (mean "
              f"{sum(map(len, docs)) / max(1, len(docs)):.0f} bytes) in batches of {size} in "
              f"{f_all:.2f}s ({len(docs) / f_all:.0f}/s, etcd's CPU {floor_cpu:.2f}s); "
              f"scheduler/floor {took / f_all:.2f} (wall clock, as information)")
        # The target: what the scheduler spends per Binding against what etcd spends to
        # store the same Binding — a ratio of CPU, which holds on any number of cores.
        per, etcd_per = cpu / max(1, len(docs)) * 1e6, floor_cpu / max(1, len(docs)) * 1e6
        print(f"CPU per Binding: the scheduler {per:.0f} µs, etcd {etcd_per:.0f} µs for the "
              f"same writes (the floor's); scheduler/etcd {per / max(etcd_per, 1e-9):.2f} "
              f"(target ≤ 2)")
        # The cores are shared: the burst cannot take less than all the CPU its processes
        # used spread over every core, however the scheduler split its work.
        cores = os.cpu_count() or 1
        spent = cpu + etcd_cpu + own_cpu
        print(f"  CPU while the burst was bound ({waited:.2f}s, {cores} cores): scheduler "
              f"{cpu:.2f}s, etcd {etcd_cpu:.2f}s, this benchmark {own_cpu:.2f}s, "
              f"{spent / (waited * cores):.0%} of the machine; spread over every core "
              f"{spent / cores:.2f}s at least, scheduler/floor {spent / cores / f_all:.2f} at best")
        records, record_bytes = ledger_size(store)
        print(f"ledger: {records} records, {record_bytes / max(1, records):.0f} bytes each "
              f"on average ({record_bytes / 2**20:.1f} MiB)")
        figures.update(records=records, record_bytes=record_bytes / max(1, records))
        figures.update(apps_per_s=args.apps / took, cpu_us=cpu / args.apps * 1e6,
                       floor_ratio=took / f_all, floor_best=spent / cores / f_all,
                       cpu_ratio=per / max(etcd_per, 1e-9), etcd_floor_cpu_us=etcd_per,
                       peak_rss_mb=rss_mb(proc.pid), etcd_cpu_us=etcd_cpu / args.apps * 1e6,
                       binding_bytes=sum(map(len, docs)) / max(1, len(docs)))

        # -- reaction to every metric value (or --changed of them) changing at once
        if not args.no_reaction:
            time.sleep(min(3.0, args.quiet))
            with watcher.cond:
                before, puts_before = len(watcher.changes), watcher.puts
            revs = {kv.key: kv.mod_revision for kv in store.list_prefix(keys.METRIC_VALUES)[0]}
            changing = metrics if args.changed >= 1 else rng.sample(
                metrics, max(1, round(len(metrics) * args.changed)))
            vals = [Put(k, metric_value(m, rng.uniform(0, 10)), revs[k])
                    for m in sorted(changing) for k in [keys.metric_value_key(m)]]
            profile = Profile(args.profile, "reaction", proc.pid)
            t0 = time.perf_counter()
            store.commit_chunks(vals)
            picture(store)  # as the metrics-cache does after a poll's values
            written = time.perf_counter() - t0
            watcher.quiet(args.quiet, 600)
            profile.stop()
            with watcher.cond:
                changes = watcher.changes[before:]
                rewritten = watcher.puts - puts_before
            moved = {n for _, n in changes}
            if changes:
                first, last_c = changes[0][0] - t0, changes[-1][0] - t0
                half = changes[(len(changes) - 1) // 2][0] - t0  # the sweep's order shows here
                f_moved = floor(store, docs[: len(moved)], size, "floor-moved")
                # What changes besides the targets must be written too (a placed application
                # no cluster fits any more is kept where it runs, its state Unschedulable).
                f_all = floor(store, (docs * (rewritten // max(1, len(docs)) + 1))[:rewritten],
                              size, "floor-rewritten")
                print(f"reaction: {len(vals)} metric values changed (written in {written:.2f}s); "
                      f"{len(moved)} applications moved ({len(changes)} target changes); "
                      f"first new Binding {first * 1e3:.0f} ms, half by {half:.2f}s, last "
                      f"{last_c:.2f}s; "
                      f"etcd floor for {len(moved)} Bindings in batches of {size}: "
                      f"{f_moved:.2f}s; last/(1 s + floor) {last_c / (1 + f_moved):.2f}; "
                      f"for all {rewritten} Bindings written: {f_all:.2f}s, "
                      f"{last_c / (1 + f_all):.2f}")
                figures.update(moved=len(moved), first_ms=first * 1e3, half_s=half, last_s=last_c,
                               moved_floor_s=f_moved, written_floor_s=f_all,
                               written=rewritten, values_written_ms=written * 1e3)
            else:
                print("reaction: nothing moved")
            print(f"  so far: {attempts(port)}")
            print(f"scheduler RSS after the reaction: {rss_mb(proc.pid, 'VmRSS'):.0f} MB")
            after, after_bytes = ledger_size(store)
            print(f"ledger after the reaction: {after - records} records more, "
                  f"{(after_bytes - record_bytes) / max(1, after - records):.0f} bytes each")

        # -- latency at an offered rate
        if not args.no_latency:
            offered: dict[str, float] = {}
            n_lat = int(args.rate * args.seconds)
            docs_lat = [(f"lat-{i:06d}",
                         encode(app_doc(f"lat-{i:06d}", rng, workloads=args.workloads,
                                        requests=not args.no_requests)))
                        for i in range(n_lat)]
            profile = Profile(args.profile, "latency", proc.pid)
            start = time.perf_counter()

            def offer(i: int, name: str, doc: bytes) -> None:
                delay = start + i / args.rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                t_offer = time.perf_counter()
                store.create(keys.resource_key("Application", name, "default"), doc)
                offered[name] = t_offer

            with ThreadPoolExecutor(8) as pool:  # one writer cannot keep 500/s on this machine
                for i, (name, doc) in enumerate(docs_lat):
                    pool.submit(offer, i, name, doc)
            achieved = n_lat / (time.perf_counter() - start)
            watcher.wait(lambda: all(n in watcher.first for n in offered), 300)
            profile.stop()
            lat = [watcher.first[n] - t0 for n, t0 in offered.items() if n in watcher.first]
            print(f"latency at {args.rate:.0f} apps/s offered ({achieved:.0f} achieved, "
                  f"{n_lat} apps): p50 {statistics.median(lat) * 1e3:.1f} ms, "
                  f"p99 {pct(lat, 0.99) * 1e3:.1f} ms, max {max(lat) * 1e3:.1f} ms")
            print(f"  so far: {attempts(port)}")
        if args.ledger_samples:
            kvs, _ = store.list_prefix(ledger.LEDGER)
            with open(args.ledger_samples, "ab") as out:
                for kv in kvs[-2000:]:  # the reaction's, if there was one
                    out.write(kv.value + b"\n")
        time.sleep(args.quiet)
        print(f"scheduler RSS at the end: {rss_mb(proc.pid, 'VmRSS'):.0f} MB "
              f"(peak {rss_mb(proc.pid):.0f} MB)")
        figures["peak_rss_mb"] = rss_mb(proc.pid)
        if args.figures:
            Path(args.figures).write_text(json.dumps(figures))
        if args.idle:
            with watcher.cond:
                moves_before = len(watcher.changes)
            samples = []
            until = time.monotonic() + args.idle
            while time.monotonic() < until:
                samples.append(rss_mb(proc.pid, "VmRSS"))
                time.sleep(min(10.0, max(0.0, until - time.monotonic())))
            samples.append(rss_mb(proc.pid, "VmRSS"))
            print(f"idle for {args.idle:.0f}s (periodic sweeps included): RSS "
                  f"{samples[0]:.1f} -> {samples[-1]:.1f} MB, min {min(samples):.1f}, "
                  f"max {max(samples):.1f}; {len(watcher.changes) - moves_before} target changes; "
                  f"{attempts(port)}")
            for _, name in watcher.changes[moves_before:][:5]:
                spec = docs_by_name.get(name, {}).get("spec", {})
                shown = sorted(k for k in spec if k != "manifest")
                print(f"  {name}: {' -> '.join(','.join(t) for t in watcher.moves[name])} "
                      f"{shown} {sorted(spec.get('affinity', {}))}")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(20)
        server.cleanup()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
