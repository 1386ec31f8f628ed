"""Applications to available, and moves that keep them available, against direct apply.

    python scripts/bench/availability_bench.py [--apps 1000] [--servers 3] [--contexts 4]
        [--ready-delay 2] [--move 0.3] [--workers 16] [--rollout Rolling] [--profile PREFIX]
        [--mode Pull]

1. Starts berth's etcd and ``--servers`` working clusters (``berth_testkit.servers.kube``:
   API server, controllers, kube-scheduler, kwok's kubelets: Pods become Ready
   ``--ready-delay`` seconds after they are placed). Each is registered as
   ``--contexts`` berth Clusters, one kubeconfig context and Kubernetes
   namespace each (this machine cannot hold a dozen control planes; stated in the
   output). Clusters come in pairs on different servers; each application may run
   on its pair only, on the one with the higher ``green`` metric (a static
   provider). Starts one scheduler, metrics-cache and propagator.
2. **Apply**: writes ``--apps`` applications (a Deployment of 2 replicas each) in
   transactions of 128 and times, from a watch on the status keys, each one's
   write → RUNNING (available on its cluster): p50, p99, all; and the lag from each
   Deployment available on its cluster (the benchmark's own watch) to RUNNING in etcd.
3. **The floor**: the same Deployments (other names) applied by server-side apply
   from ``--workers`` threads, one client per server, and each watched until
   available (its ``availableReplicas`` from a watch of every server's Deployments):
   p50, p99, all, each counted from the moment all were handed to the threads (as
   berth's count from their write), and berth's ratios to it; the same from each
   apply's return (the Pods' time alone, the ratio printed before 2026-11-28); and
   where berth's time went, p50 and p99 of each step (write → its Binding written,
   Binding → the Deployment on its cluster, there → available), against the
   floor's (handed over → on its cluster, there → available).
4. **Moves**: the metric flips for ``--move`` of the pairs. Times each moved
   application's change → RUNNING on its new cluster alone (the old copy removed),
   less the Pods' own readiness delay; a sampler reads every Deployment's available
   replicas on every server every 100 ms and reports the fewest available / desired
   of any application at any moment of the moves (1.0: none ever went below).
5. **The floor for a move**: as many of the floor's Deployments applied by
   server-side apply on another server from ``--workers`` threads, each watched
   until available there, then deleted from its old server (by the same threads):
   p50, p99, all, and berth's ratios to it.

``--profile PREFIX`` records py-spy profiles of the propagator while the applications
are placed (``PREFIX-apply.txt``) and while they move (``PREFIX-moves.txt``); the
propagator's CPU per application in each phase and its status writes per etcd
transaction are printed either way.

``--mode Pull`` registers every cluster in Pull mode and starts an agent of its own
for each (``berth agent``, one process each, with that cluster's kubeconfig): the
propagator writes their work to etcd and reads their reports (docs/agents.md); the
agents' CPU per application is printed beside the propagator's.

``--chain 3`` makes the first half of the applications chains of three, each
depending on the one before it (``spec.dependsOn``, docs/order.md: placed with it,
applied on its cluster once it is available there, its old copy kept until the
dependent left) and the three on one pair; the second half stays as it was. Every
figure is then printed for each half as well: what order across applications costs,
measured against its own run.

``--rollout Rolling`` gives every application ``spec.rollout: {strategy: Rolling}``:
a move is no new generation, so this measures what the rollout's bookkeeping costs
the propagator on every reconcile (docs/rollouts.md); run it with and without.

Over 600 lines, on purpose: one run's phases (placements, their floor, moves, theirs)
share the control planes, the watches and the sampler, and compare against each
other; apart, each would start its own.
"""

from __future__ import annotations

import argparse
import os
import re
import threading
import time
import urllib.request
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import msgspec
from lightkube import Client, KubeConfig
from lightkube.resources.apps_v1 import Deployment
from lightkube.types import PatchType

from berth.store import EtcdConfig, Put, Store, Watch, decode, encode, keys
from berth.store.documents import ApplicationStatus
from berth_testkit.figures import pct
from berth_testkit.measure import Profile, cpu_seconds
from berth_testkit.scheduler_env import (
    AgentProcess,
    MetricsCacheProcess,
    PropagatorProcess,
    SchedulerProcess,
)
from berth_testkit.scratch import run_bench, scratch
from berth_testkit.servers.etcd import EtcdServer, free_port
from berth_testkit.servers.kube import KubeCluster


def deployment(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "containers": [{"name": "c", "image": "example/app:1",
                                         "resources": {"requests": {"cpu": "1m"}}}]}}}}


class Available:
    """Every Deployment's available replicas on every server, from watches: per name,
    when it first had 2 anywhere; per copy (server, namespace, name), when it first had
    2 there."""

    def __init__(self, kubes: list[KubeCluster]) -> None:
        self.kubes = kubes
        self.lock = threading.Lock()
        self.now: dict[tuple[int, str, str], int] = {}  # (server, namespace, name) → avail
        self.first: dict[str, float] = {}  # name → when 2 were available on some server
        self.created: dict[str, float] = {}  # name → when a server first showed it
        self.at: dict[tuple[int, str, str], float] = {}  # copy → when 2 were available
        # name → (when, server, namespace, available) of every event: what a dip shows
        self.seen: dict[str, list[tuple[float, int, str, int]]] = defaultdict(list)
        self.stop = threading.Event()
        for i, k in enumerate(kubes):
            threading.Thread(target=self._watch, args=(i, k), daemon=True).start()

    def _watch(self, i: int, kube: KubeCluster) -> None:
        import requests

        s = requests.Session()
        s.trust_env = False
        s.verify = str(kube.workdir / "certs" / "apiserver.crt")
        s.headers["Authorization"] = f"Bearer {kube.token}"
        since = ""
        while not self.stop.is_set():
            params = {"watch": "1", "timeoutSeconds": "300", "allowWatchBookmarks": "true"}
            if since:
                params["resourceVersion"] = since
            try:
                with s.get(f"{kube.url}/apis/apps/v1/deployments", params=params, stream=True,
                           timeout=(5, 330)) as r:
                    for line in r.iter_lines():
                        ev = msgspec.json.decode(line)
                        obj = ev.get("object") or {}
                        meta = obj.get("metadata") or {}
                        since = meta.get("resourceVersion", since)
                        if ev.get("type") == "BOOKMARK":
                            continue
                        key = (i, meta.get("namespace", ""), meta.get("name", ""))
                        n = 0 if ev.get("type") == "DELETED" else (
                            obj.get("status") or {}).get("availableReplicas", 0)
                        t = time.perf_counter()
                        with self.lock:
                            self.created.setdefault(key[2], t)
                            self.now[key] = n
                            self.seen[key[2]].append((t, i, key[1], n))
                            if n >= 2:
                                self.first.setdefault(key[2], t)
                                self.at.setdefault(key, t)
            except Exception:
                since = ""
                time.sleep(0.5)

    def totals(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        with self.lock:
            for (_, _, name), n in self.now.items():
                out[name] += n
        return out


class Bound:
    """From a watch of the Bindings: per application, when its first Binding was written."""

    def __init__(self, store: Store) -> None:
        self.at: dict[str, float] = {}
        self.watch = Watch(store, keys.binding_prefix("Application"), store.revision() + 1)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        for batch in self.watch:
            t = time.perf_counter()
            for ev in batch.events:
                if ev.type == "PUT":
                    self.at.setdefault(ev.key.rsplit("/", 1)[1], t)


class Statuses:
    """From a watch of the status keys: per application, when it was first RUNNING, and
    when it was RUNNING on one given cluster alone."""

    def __init__(self, store: Store) -> None:
        self.running: dict[str, float] = {}
        self.alone: dict[str, tuple[str, float]] = {}  # name → (cluster, when)
        self.cond = threading.Condition()
        self.watch = Watch(store, keys.status_prefix("Application"), store.revision() + 1)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        for batch in self.watch:
            t = time.perf_counter()
            with self.cond:
                for ev in batch.events:
                    if ev.type != "PUT":
                        continue
                    st = decode(ev.value, ApplicationStatus)
                    if st.status.state != "RUNNING":
                        continue
                    name = st.metadata.name
                    self.running.setdefault(name, t)
                    on = [r.name for r in st.status.running_on]
                    if len(on) == 1 and self.alone.get(name, ("", 0.0))[0] != on[0]:
                        self.alone[name] = (on[0], t)
                self.cond.notify_all()

    def wait(self, done: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not done():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", type=int, default=1000)
    ap.add_argument("--servers", type=int, default=3)
    ap.add_argument("--contexts", type=int, default=4)
    ap.add_argument("--ready-delay", type=float, default=2.0)
    ap.add_argument("--move", type=float, default=0.3)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--rollout", choices=["All", "Rolling", "Staged"], default="All",
                    help="every application's spec.rollout.strategy (Staged: one stage)")
    ap.add_argument("--profile", metavar="PREFIX",
                    help="record py-spy profiles of the propagator: PREFIX-<phase>.txt")
    ap.add_argument("--chain", type=int, default=0,
                    help="the first half of the applications in chains of this many, each "
                    "depending on the one before (0: none)")
    ap.add_argument("--mode", choices=["Push", "Pull"], default="Push",
                    help="Pull: every cluster reached by an agent of its own (a process "
                    "each, with that cluster's kubeconfig), its work through etcd")
    args = ap.parse_args()
    rollout: dict[str, Any] = {"strategy": args.rollout}
    if args.rollout == "Staged":
        rollout["stages"] = [{"name": "all"}]
    work = scratch("berth-availability-")
    n_clusters = args.servers * args.contexts
    pairs: int = n_clusters // 2
    chain: int = args.chain if args.chain > 1 else 0
    chained: int = (args.apps // 2) // chain * chain if chain else 0  # apps 0 .. chained-1

    def pair_of(i: int) -> int:
        """The pair application ``i`` may run on: a chain's members share one."""
        return (i // chain) % pairs if i < chained else i % pairs

    def halves(values: dict[str, float]) -> str:
        """``values`` of the chained half and of the rest, p50 / p99 / all."""
        if not chain:
            return ""
        out = []
        for label, part in (("chained", [v for n, v in values.items()
                                         if int(n.split("-")[1]) < chained]),
                            ("unchained", [v for n, v in values.items()
                                           if int(n.split("-")[1]) >= chained])):
            if part:
                out.append(f"{label} ({len(part)}) p50 {pct(part, 0.5):.2f} s, p99 "
                           f"{pct(part, 0.99):.2f} s, all {max(part):.2f} s")
        return "; ".join(out)
    print(f"{args.apps} applications (a Deployment of 2 replicas each) on {n_clusters} "
          f"clusters: {args.contexts} kubeconfig contexts (each its own namespace) on each of "
          f"{args.servers} working control planes (this 2-core machine does not hold "
          f"{n_clusters}); Pods Ready {args.ready_delay:g} s after they are placed; rollout "
          f"strategy {args.rollout}; clusters in {args.mode} mode" + (
              f" ({n_clusters} agents)" if args.mode == "Pull" else "") + (
              f"; the first {chained} in chains of {chain}, each depending on the one before"
              if chain else ""), flush=True)
    server = EtcdServer().start()
    pods = 2 * args.apps // args.servers + 200
    t = time.perf_counter()
    kubes = [KubeCluster(f"avail{i}", nodes=2, ready_delay=args.ready_delay,
                         node_pods=pods, node_cpu="64") for i in range(args.servers)]
    procs: list[Any] = []
    try:
        for k in kubes:
            k.start()
        print(f"control planes ready in {time.perf_counter() - t:.1f} s", flush=True)
        store = Store(EtcdConfig(url=server.url))
        clusters, configs = register(store, kubes, args.contexts, pull=args.mode == "Pull")
        # pairs on different servers: cluster j and j + pairs (the contexts are round robin)
        green = {c: (0.9 if j < pairs else 0.1) for j, c in enumerate(clusters)}
        provider(store, green)
        procs = [MetricsCacheProcess(server.url, work, config="poll_interval: 0.5\n"),
                 SchedulerProcess(server.url, work),
                 PropagatorProcess(server.url, work, config=f"workers: {args.workers}\n"
                                   "probe_interval: 2\n")]
        agents = [AgentProcess(server.url, work, cluster=f"default/{c}", kubeconfig=configs[c],
                               name=c, config="probe_interval: 2\n")
                  for c in clusters] if args.mode == "Pull" else []
        procs += agents
        port = free_port()
        for p in procs:
            p.args[p.args.index("DEBUG")] = "WARNING"
            # leases as deployed (10 s), not the tests' 2 s: on two cores carrying three
            # control planes a refresh can wait 2 s, and a replica that misses one stops
            # serving its clusters for a while, as it must
            del p.args[p.args.index("--lease-ttl"):p.args.index("--lease-ttl") + 2]
            if isinstance(p, PropagatorProcess):
                p.args[p.args.index("127.0.0.1:0")] = f"127.0.0.1:{port}"
            p.start()
        propagator = procs[2].proc
        assert propagator is not None
        time.sleep(5)
        # every cluster ONLINE before applications come, as in a running fleet (a pull
        # cluster's agent may take longer to start than the sleep above on two cores:
        # else its pair's other cluster takes the first placements, moved back later)
        deadline = time.monotonic() + 120
        while sum(b'"ONLINE"' in kv.value for kv in store.list_prefix(
                keys.status_prefix("Cluster"))[0]) < len(clusters):
            if time.monotonic() > deadline:
                raise SystemExit(f"not every cluster ONLINE after 120 s; logs in {work}")
            time.sleep(0.5)
        statuses = Statuses(store)
        bound = Bound(store)
        avail = Available(kubes)
        written: dict[str, float] = {}
        ops = []
        for i in range(args.apps):
            name = f"app-{i:05d}"
            spec: dict[str, Any] = {"manifest": [deployment(name)], "constraints": {
                "cluster": {"labels": [f"pair = p{pair_of(i)}"]}}, "rollout": rollout}
            if i < chained and i % chain:
                spec["dependsOn"] = [{"name": f"app-{i - 1:05d}"}]
            ops.append(Put(keys.resource_key("Application", name, "default"), encode({
                "api": "kubernetes", "kind": "Application",
                "metadata": {"name": name, "namespace": "default", "generation": 1},
                "spec": spec})))
        profile = Profile(args.profile, "apply", propagator.pid)
        cpu = cpu_seconds(propagator.pid)
        agents_cpu = _cpu(agents)
        began = time.perf_counter()
        for start in range(0, len(ops), 128):
            store.commit(ops[start:start + 128])
            now = time.perf_counter()
            for op in ops[start:start + 128]:
                written[op.key.rsplit("/", 1)[1]] = now
        if not statuses.wait(lambda: len(statuses.running) >= args.apps,
                             timeout=300 + args.apps):
            raise SystemExit(f"only {len(statuses.running)}/{args.apps} RUNNING; logs in {work}")
        cpu = cpu_seconds(propagator.pid) - cpu
        agents_cpu = _cpu(agents) - agents_cpu
        profile.stop()
        took = max(statuses.running.values()) - began
        each = [statuses.running[n] - written[n] for n in written]
        print(f"berth: all {args.apps} available in {took:.1f} s; write → available p50 "
              f"{pct(each, 0.5):.2f} s, p99 {pct(each, 0.99):.2f} s; the propagator's CPU "
              f"{cpu / args.apps * 1e3:.1f} ms per application" + (
                  f", the agents' {agents_cpu / args.apps * 1e3:.1f} ms" if agents else "")
              + f"; {grouped(port)}", flush=True)
        if chain:
            print("write → available by half: " + halves(
                {n: statuses.running[n] - written[n] for n in written}), flush=True)
        with avail.lock:  # the cluster's word (its watch) → berth's (the status key)
            lag = [statuses.running[n] - avail.first[n] for n in written if n in avail.first]
        print(f"a Deployment available on its cluster → its application RUNNING in etcd: p50 "
              f"{pct(lag, 0.5):.3f} s, p99 {pct(lag, 0.99):.3f} s, max {max(lag):.3f} s "
              f"({len(lag)} applications)", flush=True)

        with avail.lock:  # where berth's time goes: to the Binding, to the cluster, to ready
            steps = [(bound.at[n] - written[n], avail.created[n] - bound.at[n],
                      avail.first[n] - avail.created[n]) for n in written
                     if n in bound.at and n in avail.created and n in avail.first]
        fl = floor(kubes, args.apps, args.workers, avail)
        print(f"floor (direct server-side apply from {args.workers} threads, watched until "
              f"available): all in {fl.all:.1f} s (the last apply returned at "
              f"{fl.applied:.1f} s); handed over → available p50 {pct(fl.each, 0.5):.2f} s, "
              f"p99 {pct(fl.each, 0.99):.2f} s; its apply returned → available p50 "
              f"{pct(fl.after, 0.5):.2f} s, p99 {pct(fl.after, 0.99):.2f} s", flush=True)
        if steps and fl.placed and fl.ready:
            cols = list(zip(*steps, strict=True))
            print("berth's steps, p50 / p99: write → Bound "
                  f"{pct(cols[0], 0.5):.2f} / {pct(cols[0], 0.99):.2f} s; Bound → on its "
                  f"cluster {pct(cols[1], 0.5):.2f} / {pct(cols[1], 0.99):.2f} s (the floor's "
                  f"handed over → on its cluster {pct(fl.placed, 0.5):.2f} / "
                  f"{pct(fl.placed, 0.99):.2f} s); on its cluster → available "
                  f"{pct(cols[2], 0.5):.2f} / {pct(cols[2], 0.99):.2f} s (the floor's "
                  f"{pct(fl.ready, 0.5):.2f} / {pct(fl.ready, 0.99):.2f} s)", flush=True)
        print(f"ratio (target: all ≤ 1.1, p99 ≤ 1.3): all {took / fl.all:.2f}, p50 "
              f"{pct(each, 0.5) / pct(fl.each, 0.5):.2f}, p99 "
              f"{pct(each, 0.99) / pct(fl.each, 0.99):.2f} (against the floor from its apply's "
              f"return, as printed before 2026-11-28: p50 "
              f"{pct(each, 0.5) / pct(fl.after, 0.5):.2f}, p99 "
              f"{pct(each, 0.99) / pct(fl.after, 0.99):.2f})", flush=True)

        flip = list(range(round(args.move * pairs)))
        moved = [f"app-{i:05d}" for i in range(args.apps) if pair_of(i) in flip]
        if not moved:
            raise SystemExit(f"--move {args.move:g} moves no application of {args.apps} over "
                             f"{len(clusters)} clusters: give more clusters or a larger share")
        target = {n: clusters[pair_of(int(n.split("-")[1])) + pairs] for n in moved}
        fewest = [float("inf")]
        dips: dict[str, float] = {}  # application → when it was first seen below 2
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                totals = avail.totals()
                now = time.perf_counter()
                for i in range(args.apps):
                    n = totals.get(f"app-{i:05d}", 0)
                    fewest[0] = min(fewest[0], n / 2)
                    if n < 2:
                        dips.setdefault(f"app-{i:05d}", now)
                sampling.wait(0.1)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        time.sleep(0.5)
        for j in flip:
            green[clusters[j]], green[clusters[j + pairs]] = 0.1, 0.9
        profile = Profile(args.profile, "moves", propagator.pid)
        cpu = cpu_seconds(propagator.pid)
        changed = time.perf_counter()
        provider(store, green)
        if not statuses.wait(lambda: all(statuses.alone.get(n, ("", 0.0))[0] == target[n]
                                         for n in moved), timeout=600):
            raise SystemExit(f"not every moved application reached its new cluster; logs in "
                             f"{work}")
        cpu = cpu_seconds(propagator.pid) - cpu
        profile.stop()
        sampling.set()
        sampler.join()
        done = max(statuses.alone[n][1] for n in moved) - changed
        each = [statuses.alone[n][1] - changed for n in moved]
        extra = [e - args.ready_delay for e in each]
        print(f"moves: {len(moved)} applications ({len(moved) / args.apps:.0%}); every one "
              f"available on its new cluster and removed from its old one {done:.1f} s after "
              f"the metric changed; beyond the Pods' {args.ready_delay:g} s readiness delay: "
              f"p50 {pct(extra, 0.5):.2f} s, p99 {pct(extra, 0.99):.2f} s", flush=True)
        if chain:
            print("change → moved by half: " + halves(
                {n: statuses.alone[n][1] - changed for n in moved}), flush=True)
        print(f"fewest available / desired of any application at any sample during the moves: "
              f"{fewest[0]:.2f}; the propagator's CPU {cpu / len(moved) * 1e3:.1f} ms per move; "
              f"{grouped(port)}", flush=True)
        # the copy on the new cluster: cluster c<j> is a namespace of server j mod servers
        copy = {n: (int(target[n][1:]) % len(kubes), target[n], n) for n in moved}
        for name, when in sorted(dips.items(), key=lambda d: d[1])[:3]:  # what it was
            with avail.lock:
                said = ", ".join(f"{w - changed:+.2f} s server {s} {ns}: {n}"
                                 for w, s, ns, n in avail.seen[name] if w >= changed - 1)
            print(f"  {name} below its replicas {when - changed:.2f} s after the change; its "
                  f"copies as the watches told (server, namespace: available): {said}",
                  flush=True)
        with avail.lock:  # available on the new cluster (its watch) → RUNNING there alone
            lag = [statuses.alone[n][1] - avail.at[copy[n]] for n in moved if copy[n] in avail.at]
        print(f"a moved Deployment available on its new cluster → its application RUNNING there "
              f"alone in etcd (the old copy deleted first): p50 {pct(lag, 0.5):.3f} s, p99 "
              f"{pct(lag, 0.99):.3f} s, max {max(lag, default=0):.3f} s ({len(lag)})", flush=True)
        f_done, f_each = move_floor(kubes, len(moved), args.workers, avail)
        print(f"floor for the moves ({len(moved)} of the floor's Deployments applied on another "
              f"server from {args.workers} threads, each deleted from its old server once "
              f"available): all in {f_done:.1f} s; p50 {pct(f_each, 0.5):.2f} s, p99 "
              f"{pct(f_each, 0.99):.2f} s", flush=True)
        print(f"moves / floor (target: all ≤ 1.3, p99 ≤ 1.5): all {done / f_done:.2f}, p50 "
              f"{pct(each, 0.5) / pct(f_each, 0.5):.2f}, p99 "
              f"{pct(each, 0.99) / pct(f_each, 0.99):.2f}", flush=True)
        avail.stop.set()
    finally:
        for p in procs:
            p.stop()
        for k in kubes:
            k.cleanup()
        server.cleanup()
    print(f"{os.cpu_count()} cores")


def _cpu(procs: list[Any]) -> float:
    return sum(cpu_seconds(p.proc.pid) for p in procs if p.proc is not None)


def register(store: Store, kubes: list[KubeCluster], contexts: int, *, pull: bool = False
             ) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``contexts`` Clusters per server, each a context with a namespace of its own;
    labelled with the pair they belong to. Returns their names, round robin over the
    servers, and each one's kubeconfig (``pull``: not in etcd, its agent's)."""
    names = [f"c{j:02d}" for j in range(len(kubes) * contexts)]
    pairs = len(names) // 2
    configs: dict[str, dict[str, Any]] = {}
    for j, name in enumerate(names):
        kube = kubes[j % len(kubes)]
        kube.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": name}}, ok=(201, 409))
        config = configs[name] = kube.kubeconfig()
        config["contexts"][0]["context"]["namespace"] = name
        reach: dict[str, Any] = {"mode": "Pull"} if pull else {"kubeconfig": config}
        store.commit([Put(keys.resource_key("Cluster", name, "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"pair": f"p{j % pairs}"}},
            "spec": {**reach, "metrics": [{"name": f"green-{name}", "weight": 1.0}]}})),
                      Put(keys.resource_key("GlobalMetric", f"green-{name}"), encode({
                          "api": "core", "kind": "GlobalMetric",
                          "metadata": {"name": f"green-{name}"},
                          "spec": {"min": 0, "max": 1,
                                   "provider": {"name": "green", "metric": name}}}))])
    return names, configs


def provider(store: Store, green: dict[str, float]) -> None:
    key = keys.resource_key("GlobalMetricsProvider", "green")
    doc = encode({"api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "green"},
                  "spec": {"type": "static", "static": {"metrics": green}}})
    kv = store.get(key)
    if kv is None:
        store.create(key, doc)
    else:
        store.update(key, doc, kv.mod_revision)


def grouped(port: int) -> str:
    """The propagator's status writes per etcd transaction so far (from its metrics)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    found = dict(re.findall(r'^berth_store_group_commit_writes_(sum|count)\{writer="'
                            r'application-status"\} (\S+)$', text, re.MULTILINE))
    writes, txns = float(found.get("sum", 0)), float(found.get("count", 0))
    took = dict(re.findall(r'^berth_etcd_request_seconds_(sum|count)\{op="kv/txn"\} (\S+)$',
                           text, re.MULTILINE))
    seconds, all_txns = float(took.get("sum", 0)), float(took.get("count", 0))
    return (f"{writes:.0f} status writes in {txns:.0f} transactions "
            f"({writes / max(txns, 1):.2f} each); its etcd transactions took "
            f"{seconds / max(all_txns, 1) * 1e3:.1f} ms on average ({all_txns:.0f} so far)")


def clients_of(kubes: list[KubeCluster]) -> list[Client]:
    return [Client(KubeConfig.from_dict(k.kubeconfig()), trust_env=False) for k in kubes]


class Floor(NamedTuple):
    """The floor's figures, in seconds."""

    all: float  # from handing every Deployment to the threads to the last available
    applied: float  # from then to the last apply returned
    each: list[float]  # each one's from the hand-over (as berth's count from the write: one
    # waiting for a thread waits as an application waits in berth's queue)
    after: list[float]  # each one's from its own apply's return (the Pods' time alone)
    placed: list[float]  # each one's from the hand-over to created on its server
    ready: list[float]  # each one's from created on its server to available


def floor(kubes: list[KubeCluster], apps: int, workers: int, avail: Available) -> Floor:
    """The same Deployments applied directly, each watched until available."""
    clients = clients_of(kubes)
    applied: dict[str, float] = {}

    def one(i: int) -> None:
        name = f"floor-{i:05d}"
        body = deployment(name, "default")
        clients[i % len(clients)].patch(Deployment, name, body, namespace="default",
                                        patch_type=PatchType.APPLY, field_manager="floor",
                                        force=True)
        applied[name] = time.perf_counter()

    try:
        # lightkube's models are decoded once before threads do it at once: msgspec builds
        # a class's type info on first use, and two threads doing that crash the process
        # (docs/architecture.md "Decoding from threads")
        clients[0].patch(Deployment, "floor-warm", deployment("floor-warm", "default"),
                         namespace="default", patch_type=PatchType.APPLY,
                         field_manager="floor", force=True)
        began = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(apps)))
        applied_in = time.perf_counter() - began
        deadline = time.monotonic() + 300 + apps
        while time.monotonic() < deadline:
            with avail.lock:
                done = sum(1 for n in applied if n in avail.first)
            if done >= apps:
                break
            time.sleep(0.1)
        with avail.lock:
            seen = [n for n in applied if n in avail.first]
            each = [avail.first[n] - began for n in seen]
            after = [avail.first[n] - applied[n] for n in seen]
            placed = [avail.created[n] - began for n in seen if n in avail.created]
            ready = [avail.first[n] - avail.created[n] for n in seen if n in avail.created]
        return Floor(max(each, default=0.0), applied_in, each, after, placed, ready)
    finally:
        for c in clients:
            c.close()


def move_floor(kubes: list[KubeCluster], moves: int, workers: int, avail: Available
               ) -> tuple[float, list[float]]:
    """The floor for ``moves`` moves: the floor's first Deployments (``floor-<i>``, on
    server ``i`` mod the servers) applied on the next server from ``workers`` threads, and
    each deleted from its old server by the same threads once available on its new one.
    All the time, and each one's from the start to its old copy deleted."""
    clients = clients_of(kubes)
    n = len(kubes)
    removed: dict[str, float] = {}
    pending = {f"floor-{i:05d}": ((i + 1) % n, i % n) for i in range(moves)}  # → new, old

    def put(name: str, new: int) -> None:
        clients[new].patch(Deployment, name, deployment(name, "default"), namespace="default",
                           patch_type=PatchType.APPLY, field_manager="floor", force=True)

    def remove(name: str, old: int) -> None:
        clients[old].delete(Deployment, name, namespace="default")
        removed[name] = time.perf_counter()

    try:
        began = time.perf_counter()
        with ThreadPoolExecutor(workers) as pool:
            applies = [pool.submit(put, name, new) for name, (new, _) in pending.items()]
            deadline = time.monotonic() + 300 + moves
            deletes = []
            while pending and time.monotonic() < deadline:
                with avail.lock:
                    ready = [name for name, (new, _) in pending.items()
                             if (new, "default", name) in avail.at]
                for name in ready:
                    deletes.append(pool.submit(remove, name, pending.pop(name)[1]))
                time.sleep(0.01)
            for f in [*applies, *deletes]:
                f.result()
        if pending:
            raise SystemExit(f"the move floor: {len(pending)} Deployments never available on "
                             "their new server")
        each = [t - began for t in removed.values()]
        return max(each), each
    finally:
        for c in clients:
            c.close()


if __name__ == "__main__":
    run_bench(main)
