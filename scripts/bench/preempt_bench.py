"""Making room, measured: a plan per high-priority arrival on a full fleet, against the
same arrivals decided on an emptier one.

    python scripts/bench/preempt_bench.py [--clusters 1000] [--apps 10000]
        [--arrivals 100] [--full 0.95] [--empty 0.6] [--seed 7]

For each fill (``--full`` of every cluster's CPU requested, then ``--empty``)
on its own etcd: ``--clusters`` ONLINE clusters with a zone label, ``--apps``
applications (a Deployment of 1-4 replicas asking 250 m - 2 CPUs each;
priorities 0-9; one in ten refuses to be stopped, one in twenty to be moved)
placed by Binding on clusters at random, each cluster then sized so that what
runs there is its share of its CPU (the same applications in both fleets),
and the clusters' reports counting their pods. Then ``--arrivals``
applications of priority 100 asking 4 CPUs, one replica (more than any cluster
of the full fleet has free). The scheduler's own cache syncs from that etcd,
and each arrival is decided as the scheduler decides it: ``decide``, and on
the full fleet, nothing fitting, ``preempt.plan`` with the occupants the
scheduler reads (``makeroom.occupants``) — what runs on the scheduling thread
before the plan's writes. Prints per arrival the wall time and CPU
(median, p90, max), the plans found and their victims moved and stopped, and
the ratio of the full fleet's plan to the emptier fleet's decision: what
making room costs over placing where there is room.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from berth.controllers.scheduler import makeroom, preempt
from berth.controllers.scheduler.cache import Cache
from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.decide import Decision, NoFit, decide
from berth.controllers.scheduler.scheduler import framework_for
from berth.store import EtcdConfig, Put, Store, encode, keys
from berth_testkit.servers.etcd import EtcdServer

NODE_CPU = 8_000
ARRIVAL_CPU = 4_000


def deployment(name: str, replicas: int, cpu: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"a": name}},
                     "template": {"metadata": {"labels": {"a": name}}, "spec": {"containers": [
                         {"name": "main", "image": f"registry.example/{name}:1",
                          "resources": {"requests": {"cpu": f"{cpu}m"}}}]}}}}


def app(name: str, spec: dict[str, Any]) -> bytes:
    return encode({"api": "kubernetes", "kind": "Application",
                   "metadata": {"name": name, "namespace": "default", "generation": 1},
                   "spec": spec})


def seed(store: Store, clusters: int, apps: int, arrivals: int, fill: float,
         rng: random.Random) -> None:
    """The fleet: every application placed, each cluster sized so that what is placed
    on it is ``fill`` of its CPU; and the arrivals."""
    ops: list[Put] = []
    used = [0] * clusters
    placed: list[dict[str, int]] = [{} for _ in range(clusters)]
    names = [f"c{i:04d}" for i in range(clusters)]
    for i, name in enumerate(names):
        ops.append(Put(keys.resource_key("Cluster", name, "default"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"zone": f"z{i % 10}"}, "generation": 1},
            "spec": {"kubeconfig": {"apiVersion": "v1", "kind": "Config"}}})))
    for a in range(apps):
        replicas, cpu = rng.randint(1, 4), rng.choice([250, 500, 1000, 2000])
        at = rng.randrange(clusters)
        used[at] += replicas * cpu
        name = f"app-{a:06d}"
        placed[at][f"default/{name}"] = replicas
        spec: dict[str, Any] = {"manifest": [deployment(name, replicas, cpu)],
                                "priority": rng.randint(0, 9)}
        if a % 10 == 0:
            spec["preemptible"] = {"stop": False}
        elif a % 20 == 1:
            spec["preemptible"] = {"move": False}
        ops.append(Put(keys.resource_key("Application", name, "default"), app(name, spec)))
        ops.append(Put(keys.binding_key("Application", "default", name), encode({
            "kind": "Binding", "api": "scheduling",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"resource": {"kind": "Application", "name": name, "namespace": "default"},
                     "generation": 1,
                     "targets": [{"kind": "Cluster", "name": names[at], "namespace": "default"}]},
            "status": {"state": "Scheduled"}})))
    for i, name in enumerate(names):  # the reports count every pod placed
        size = max(1000, int(used[i] / fill))
        ops.append(Put(keys.status_key("Cluster", "default", name), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default"},
            "status": {"state": "ONLINE", "capacity": {
                "allocatable": {"cpu": size, "pods": 1100},
                "requested": {"cpu": used[i], "pods": sum(placed[i].values())},
                "nodes": -(-size // NODE_CPU), "placed": placed[i]}}})))
    for j in range(arrivals):
        name = f"arrival-{j:03d}"
        ops.append(Put(keys.resource_key("Application", name, "default"), app(name, {
            "manifest": [deployment(name, 1, ARRIVAL_CPU)], "priority": 100})))
    store.commit_chunks(ops)


def measure(url: str, arrivals: int) -> dict[str, Any]:
    """Decide every arrival as the scheduler would, timed; plan where nothing fits."""
    config = SchedulerConfig()
    store = Store(EtcdConfig(url=url))
    cache = Cache(store, assume_ttl=config.assume_ttl)
    cache.start()
    assert cache.wait_synced(120), "the cache did not sync"
    framework = framework_for(config)
    walls: list[float] = []
    cpus: list[float] = []
    planning: list[float] = []  # the plan alone, its decision (nothing fits) left out
    plans = moved = stopped = fitted = 0
    try:
        for j in range(arrivals):
            subject = cache.subject(keys.resource_key("Application", f"arrival-{j:03d}",
                                                      "default"))
            assert subject is not None
            wall, cpu = time.perf_counter(), time.process_time()
            out = decide(framework, subject, cache, [])
            if isinstance(out, NoFit) and out.evaluation is not None:
                alone = time.process_time()
                priority = cache.priorities.of(subject).value
                occupants = makeroom.Occupants(cache, time.time(), 600.0, priority)
                found = preempt.plan(
                    framework, subject, priority, out.evaluation, cache, occupants,
                    limit=config.preemption.candidates, lowest=occupants.lowest)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
                planning.append(time.process_time() - alone)
                if isinstance(found, preempt.Plan):
                    plans += 1
                    moved += len(found.moved)
                    stopped += len(found.stopped)
            else:
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
                fitted += isinstance(out, Decision)
    finally:
        cache.stop()
        store.close()
    return {"walls": walls, "cpus": cpus, "planning": planning, "plans": plans, "moved": moved,
            "stopped": stopped, "fitted": fitted}


def summary(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return (f"median {1000 * statistics.median(ordered):.1f} ms, p90 {1000 * p90:.1f} ms, "
            f"max {1000 * ordered[-1]:.1f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clusters", type=int, default=1000)
    p.add_argument("--apps", type=int, default=10000)
    p.add_argument("--arrivals", type=int, default=100)
    p.add_argument("--full", type=float, default=0.95)
    p.add_argument("--empty", type=float, default=0.6)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    results = {}
    for label, fill in (("full", args.full), ("emptier", args.empty)):
        server = EtcdServer(extra=["--quota-backend-bytes", str(4 * 2**30)]).start()
        try:
            store = Store(EtcdConfig(url=server.url))
            t = time.perf_counter()
            seed(store, args.clusters, args.apps, args.arrivals, fill,
                 random.Random(args.seed))
            store.close()
            print(f"{label} fleet ({fill:.0%} of CPU requested): {args.clusters} clusters, "
                  f"{args.apps} applications placed, seeded in {time.perf_counter() - t:.1f}s")
            r = results[label] = measure(server.url, args.arrivals)
        finally:
            server.stop()
        print(f"  {args.arrivals} arrivals: {r['fitted']} fitted, {r['plans']} plans "
              f"({r['moved']} victims moved, {r['stopped']} stopped)")
        print(f"  wall per arrival: {summary(r['walls'])}")
        print(f"  CPU per arrival:  {summary(r['cpus'])}")
        if r["planning"]:
            print(f"  of which the plan: {summary(r['planning'])} (CPU; target: median "
                  "≤ 5 ms at 1,000 clusters)")
    full, empty = results["full"], results["emptier"]
    print("ratio, full fleet's plan to emptier fleet's decision (medians): "
          f"wall {statistics.median(full['walls']) / statistics.median(empty['walls']):.1f}x, "
          f"CPU {statistics.median(full['cpus']) / statistics.median(empty['cpus']):.1f}x")


if __name__ == "__main__":
    main()
