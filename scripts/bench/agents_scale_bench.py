"""A thousand pull clusters: etcd's cost and the latency of work through it, against push.

    python scripts/bench/agents_scale_bench.py [--agents 1000] [--apps 10000] [--move 0.1]
        [--servers 4] [--no-push]

1. **Pull.** Starts etcd with authentication on and makes ``--agents`` etcd users,
   each with its own role as ``berth cluster approve`` makes it (its work prefix to
   read, its agent prefix to write: ``berth.store.agents.agent_grants``), and as many
   Clusters in Pull mode. Starts that many simulated agents in this process: each
   authenticates as its own user, watches what ``berth agent`` watches (its works, its
   reports, its heartbeat: berth informers, a watch stream each), keeps a heartbeat on
   a lease of its own, and answers each work with a report at once, written as the
   agent writes them (its ``Reports``) — a stand-in for applying (nothing is applied
   anywhere: this measures what goes through etcd). Starts ``berth propagator``, writes ``--apps``
   applications (a ConfigMap each) with their Bindings, round robin over the clusters,
   and times each Binding's write → its agent's report of it → the application's
   status RUNNING; then moves ``--move`` of them to another cluster and times the same
   from the new Binding. Prints etcd's CPU in each phase and its peak RSS.
2. **Push, on the same machine** (``--no-push`` skips it): the same applications on as
   many Clusters in Push mode, kubeconfig contexts over ``--servers`` bare
   kube-apiservers (this machine holds no thousand API servers), the propagator
   applying them itself: Binding → status RUNNING, etcd's CPU and RSS. etcd has
   authentication on in both, and the propagator is root in both (since 2026-12-05;
   push's etcd had it off before).

The agents' passwords are hashed with bcrypt cost 4, not berth's 10: etcd checks each
once, when its agent authenticates (and again after each change to users or roles).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from berth.controllers.propagator.agent.reports import Reports
from berth.controllers.runtime import Event, EventType, Informer
from berth.store import EtcdConfig, Put, Store, StoreError, Watch, auth, encode, keys
from berth.store.agents import agent_grants, agent_user
from berth.store.documents import (
    ApplicationStatus,
    Binding,
    BindingMeta,
    BindingSpec,
    BindingState,
    BindingStatus,
    ClusterApplied,
    HealthState,
    KubeObjectRef,
    ObjectRef,
    Reachability,
    StatusMeta,
    Target,
)
from berth.store.documents.work import (
    AgentState,
    Heartbeat,
    Intent,
    Report,
    ReportState,
    Work,
    WorkMeta,
)
from berth_testkit.figures import pct
from berth_testkit.measure import cpu_seconds, rss_mb
from berth_testkit.scheduler_env import PropagatorProcess
from berth_testkit.scratch import run_bench, scratch
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster

ROOT_PW = "root-" + secrets.token_hex(8)
CONFIG = "workers: 16\nprobe_interval: 10\n"


class Times:
    """When each application's Binding was written, its report came, it was RUNNING."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bound: dict[str, float] = {}
        self.reported: dict[str, float] = {}
        self.running: dict[str, float] = {}

    def reset(self) -> None:
        with self.lock:
            self.bound.clear()
            self.reported.clear()
            self.running.clear()


class SimAgent:
    """One pull cluster's agent, simulated: its own etcd user; its watches and writes
    as ``berth agent``'s (its works, its reports through the agent's own
    :class:`Reports`, its heartbeat); each work is answered with a report at once, as if
    applied and healthy."""

    def __init__(self, url: str, cid: str, password: str, pool: ThreadPoolExecutor,
                 times: Times) -> None:
        self.cid = cid
        self.store = Store(EtcdConfig(url=url, user=agent_user(cid), password=password,
                                      timeout=30))
        self.pool = pool
        self.times = times
        self.works: Informer[Work] = Informer(self.store, keys.work_prefix(cid), Work,
                                              layout=keys.cluster_key_problem,
                                              idle_timeout=120)
        self.works.add_handler(self._on_work)
        self.reports = Reports(self.store, cid, idle_timeout=120)
        self.beat: Informer[Heartbeat] = Informer(self.store, keys.heartbeat_key(cid), Heartbeat,
                                                  layout=keys.cluster_key_problem,
                                                  idle_timeout=120)
        self.lease = 0

    def start(self) -> None:
        self.lease = self.store.grant(30)
        namespace, _, name = self.cid.partition("/")
        self.store.commit([Put(keys.heartbeat_key(self.cid), encode(Heartbeat(
            StatusMeta(name, namespace), AgentState("sim", Reachability.ONLINE))), 0, self.lease)])
        for informer in self.informers:
            informer.start()

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return self.works, self.reports.informer, self.beat

    def _on_work(self, event: Event[Work]) -> None:
        if event.type is not EventType.DELETED:
            self.pool.submit(self._answer, event.key)

    def _answer(self, key: str) -> None:
        item = self.works.item(key)
        if item is None:
            return
        work = item.obj
        ref = keys.parse_cluster_key(key)
        spec = work.spec
        if spec.intent is Intent.DELETE:
            state = ReportState(item.mod_revision, Intent.DELETE, cleared=True)
        else:
            objects = [KubeObjectRef(str(b["apiVersion"]), str(b["kind"]),
                                     str(b["metadata"]["name"]),
                                     b["metadata"].get("namespace") or "default")
                       for b in spec.objects]
            state = ReportState(item.mod_revision, Intent.APPLY, ClusterApplied(
                spec.generation, objects, spec.replicas, health=HealthState.HEALTHY))
        if not self.reports.write(keys.report_key(self.cid, ref.namespace, ref.name),
                                  Report(WorkMeta(ref.name, ref.namespace, self.cid), state)):
            print(f"agent {self.cid}: the report of {key} not written", file=sys.stderr)
            return
        if spec.intent is Intent.APPLY:
            with self.times.lock:
                self.times.reported.setdefault(ref.name, time.perf_counter())

    def keep_alive(self) -> None:
        self.store.keep_alive(self.lease)

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop(wait=False)
        self.store.close()


def watch_running(store: Store, times: Times, stop: threading.Event) -> Watch:
    """Record when each application's status says RUNNING where its Binding points."""
    watch = Watch(store, keys.status_prefix("Application"), store.revision() + 1)

    def run() -> None:
        for batch in watch:
            now = time.perf_counter()
            for ev in batch.events:
                if ev.type != "PUT":
                    continue
                st = msgspec.json.decode(ev.value, type=ApplicationStatus).status
                if st.state == "RUNNING":
                    with times.lock:
                        name = ev.key.rsplit("/", 1)[1]
                        if name in times.bound:
                            times.running.setdefault(name, now)
            if stop.is_set():
                return

    threading.Thread(target=run, daemon=True, name="statuses").start()
    return watch


def app_ops(n: int, clusters: list[str], offset: int = 0) -> tuple[list[Put], list[Put]]:
    apps, bindings = [], []
    for i in range(n):
        name = f"app-{i:05d}"
        apps.append(Put(keys.resource_key("Application", name, "default"), encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": "default", "generation": 1},
            "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": name, "namespace": "default"},
                                   "data": {"n": str(i)}}]}}), None))
        bindings.append(bind(name, clusters[(i + offset) % len(clusters)]))
    return apps, bindings


def bind(name: str, cluster: str) -> Put:
    return Put(keys.binding_key("Application", "default", name), encode(Binding(
        BindingMeta(name, "default"), BindingSpec(ObjectRef("Application", name, "default"), 1,
                                                  [Target("Cluster", cluster, "default")]),
        BindingStatus(BindingState.SCHEDULED))), None)


def phase(store: Store, times: Times, ops: list[Put], etcd: int, prop: int, label: str,
          want: int, timeout: float, agents: bool) -> dict[str, float]:
    """Write ``ops`` (Bindings), wait for ``want`` applications RUNNING; print figures."""
    cpu = (cpu_seconds(etcd), cpu_seconds(prop), cpu_seconds(os.getpid()))
    began = time.perf_counter()
    for start in range(0, len(ops), 128):
        store.commit(ops[start:start + 128])
        now = time.perf_counter()
        with times.lock:
            for op in ops[start:start + 128]:
                times.bound[op.key.rsplit("/", 1)[1]] = now
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with times.lock:
            done = len(times.running)
        if done >= want:
            break
        time.sleep(0.2)
    else:
        raise SystemExit(f"{label}: only {done}/{want} RUNNING in {timeout:.0f} s")
    took = time.perf_counter() - began
    used = (cpu_seconds(etcd) - cpu[0], cpu_seconds(prop) - cpu[1],
            cpu_seconds(os.getpid()) - cpu[2])
    with times.lock:
        running = [times.running[n] - times.bound[n] for n in times.running]
        reported = [times.reported[n] - times.bound[n] for n in times.reported
                    if n in times.bound]
    line = (f"{label}: {want} RUNNING in {took:.1f} s; Binding → RUNNING p50 "
            f"{pct(running, 0.5):.2f} s, p99 {pct(running, 0.99):.2f} s")
    if agents:
        line += (f"; Binding → its agent's report p50 {pct(reported, 0.5):.2f} s, p99 "
                 f"{pct(reported, 0.99):.2f} s")
    print(line + f"; CPU: etcd {used[0]:.1f} s ({used[0] / want * 1e3:.2f} ms per "
          f"application), propagator {used[1]:.1f} s" + (
              f", the simulated agents {used[2]:.1f} s" if agents else ""), flush=True)
    return {"took": took, "p50": pct(running, 0.5), "p99": pct(running, 0.99),
            "etcd_cpu": used[0]}


def measure(args: argparse.Namespace, store: Store, clusters: list[str], times: Times,
            stop: threading.Event, etcd_pid: int, prop_pid: int, mode: str
            ) -> dict[str, Any]:
    """The applications placed, then a share of them moved; each phase's figures, and
    etcd's peak RSS and database size."""
    pull = mode == "pull"
    watch = watch_running(store, times, stop)
    apps, bindings = app_ops(args.apps, clusters)
    store.commit_chunks(apps)
    first = phase(store, times, bindings, etcd_pid, prop_pid, f"{mode}, first placements",
                  args.apps, 600 + args.apps * 0.2, pull)
    moving = int(args.apps * args.move)
    times.reset()
    _, moved = app_ops(moving, clusters, offset=1)
    second = phase(store, times, moved, etcd_pid, prop_pid, f"{mode}, {moving} moves",
                   moving, 600, pull)
    first["rss"] = rss_mb(etcd_pid)
    print(f"{mode}: etcd's peak RSS {first['rss']:.0f} MB; its database "
          f"{int(store.call('maintenance/status', {}, 'status')['dbSize']) / 1e6:.0f} MB",
          flush=True)
    watch.close()
    return {"first": first, "moves": second}


# etcd's progress notifications as deployed (deploy/compose: 10 s), not the tests' 1 s: a
# watch stream each gets one per interval, and pull mode has three per agent
PROGRESS = "10s"


def pull(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    server = EtcdServer(progress_interval=PROGRESS).start()
    agents: list[SimAgent] = []
    stop = threading.Event()
    prop: PropagatorProcess | None = None
    try:
        server.etcdctl("user", "add", f"root:{ROOT_PW}")
        server.etcdctl("auth", "enable")
        root = Store(EtcdConfig(url=server.url, user="root", password=ROOT_PW, timeout=60))
        clusters = [f"p{i:04d}" for i in range(args.agents)]
        passwords: dict[str, str] = {}
        t = time.perf_counter()
        for c in clusters:
            cid = f"default/{c}"
            passwords[cid] = secrets.token_hex(12)
            auth.add_user(root, agent_user(cid), auth.hashed(passwords[cid], rounds=4))
            auth.set_role(root, agent_user(cid), agent_grants(cid), agent_user(cid))
        root.commit_chunks([Put(keys.resource_key("Cluster", c, "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": c, "namespace": "default"}, "spec": {"mode": "Pull"}}))
            for c in clusters])
        etcd_pid = server.proc.pid if server.proc else 0
        print(f"pull: {args.agents} etcd users and roles, one per agent, and Clusters made in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
        times = Times()
        pool = ThreadPoolExecutor(16, thread_name_prefix="report")
        cpu0 = cpu_seconds(etcd_pid)
        t = time.perf_counter()
        for c in clusters:
            agent = SimAgent(server.url, f"default/{c}", passwords[f"default/{c}"], pool, times)
            agent.start()
            agents.append(agent)
        for agent in agents:
            for informer in agent.informers:
                informer.wait_synced(120)
        print(f"pull: {args.agents} agents authenticated, heartbeating and watching their "
              f"own prefix in {time.perf_counter() - t:.1f} s (etcd CPU "
              f"{cpu_seconds(etcd_pid) - cpu0:.1f} s)", flush=True)

        def beat() -> None:
            while not stop.wait(10):
                for agent in agents:
                    with contextlib.suppress(StoreError):
                        agent.keep_alive()

        threading.Thread(target=beat, daemon=True, name="leases").start()
        prop = PropagatorProcess(server.url, work, config=CONFIG, name="pull",
                                 env={"BERTH_ETCD_USER": "root",
                                      "BERTH_ETCD_PASSWORD": ROOT_PW})
        prop.args[prop.args.index("DEBUG")] = "WARNING"
        del prop.args[prop.args.index("--lease-ttl"):prop.args.index("--lease-ttl") + 2]
        prop.start()
        prop_pid = prop.proc.pid if prop.proc else 0
        deadline = time.monotonic() + 300
        while root.count_prefix(keys.status_prefix("Cluster")) < args.agents:
            if time.monotonic() > deadline:
                raise SystemExit("the propagator did not see every agent ONLINE")
            time.sleep(1)
        return measure(args, root, clusters, times, stop, etcd_pid, prop_pid, "pull")
    finally:
        stop.set()
        if prop is not None:
            prop.stop()
        for agent in agents:
            agent.stop()
        server.cleanup()


def push(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    server = EtcdServer(progress_interval=PROGRESS).start()
    kubes: list[KubeCluster] = []
    stop = threading.Event()
    prop: PropagatorProcess | None = None
    try:
        t = time.perf_counter()
        # authentication on, as pull's etcd (and as berth is deployed: every process
        # has a role), the propagator as root in both: the same checks per request
        server.etcdctl("user", "add", f"root:{ROOT_PW}")
        server.etcdctl("auth", "enable")
        kubes = [KubeCluster(f"agents-push{i}", nodes=0).start() for i in range(args.servers)]
        store = Store(EtcdConfig(url=server.url, user="root", password=ROOT_PW, timeout=60))
        clusters = [f"p{i:04d}" for i in range(args.agents)]
        store.commit_chunks([Put(keys.resource_key("Cluster", c, "default"), encode({
            "api": "kubernetes", "kind": "Cluster", "metadata": {"name": c, "namespace": "default"},
            "spec": {"kubeconfig": kubes[i % len(kubes)].kubeconfig()}}))
            for i, c in enumerate(clusters)])
        print(f"push: {args.servers} kube-apiservers and {args.agents} Clusters (contexts over "
              f"them) in {time.perf_counter() - t:.1f} s", flush=True)
        prop = PropagatorProcess(server.url, work, config=CONFIG, name="push",
                                 env={"BERTH_ETCD_USER": "root",
                                      "BERTH_ETCD_PASSWORD": ROOT_PW})
        prop.args[prop.args.index("DEBUG")] = "WARNING"
        del prop.args[prop.args.index("--lease-ttl"):prop.args.index("--lease-ttl") + 2]
        prop.start()
        etcd_pid = server.proc.pid if server.proc else 0
        prop_pid = prop.proc.pid if prop.proc else 0
        deadline = time.monotonic() + 600
        while store.count_prefix(keys.status_prefix("Cluster")) < args.agents:
            if time.monotonic() > deadline:
                raise SystemExit("the propagator did not probe every cluster")
            time.sleep(1)
        return measure(args, store, clusters, Times(), stop, etcd_pid, prop_pid, "push")
    finally:
        stop.set()
        if prop is not None:
            prop.stop()
        for k in kubes:
            k.cleanup()
        server.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=1000)
    ap.add_argument("--apps", type=int, default=10000)
    ap.add_argument("--move", type=float, default=0.1)
    ap.add_argument("--servers", type=int, default=4)
    ap.add_argument("--no-push", action="store_true")
    args = ap.parse_args()
    work = scratch("berth-agents-scale-")
    print(f"{args.agents} clusters, {args.apps} applications (a ConfigMap each), "
          f"{args.move:.0%} moved; {os.cpu_count()} cores; logs in {work} (kept if it fails)",
          flush=True)
    results = {"pull": pull(args, work)}
    if not args.no_push:
        results["push"] = push(args, work)
    if "push" in results:
        p, q = results["pull"], results["push"]
        print(f"pull / push: first placements all {p['first']['took'] / q['first']['took']:.2f}"
              f", p99 {p['first']['p99'] / q['first']['p99']:.2f}; moves p99 "
              f"{p['moves']['p99'] / q['moves']['p99']:.2f}; etcd CPU "
              f"{p['first']['etcd_cpu'] / q['first']['etcd_cpu']:.2f}; etcd RSS "
              f"{p['first']['rss'] / q['first']['rss']:.2f}", flush=True)


if __name__ == "__main__":
    run_bench(main)
