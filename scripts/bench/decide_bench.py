"""Decisions alone, in memory: what the engine costs per application, without etcd.

    python scripts/bench/decide_bench.py [--clusters 1000] [--apps 3000] [--rounds 3]

Builds ``workload.py``'s diverse fleet (clusters reporting capacity) on an
in-memory snapshot (the unit tests' FakeSnapshot: fixed rooms, nothing
assumed, nothing written) and decides every application once per round, its
explanation included, as the scheduler would for a new one. Prints the best
round's time per decision for the applications without workloads (plain),
with the same workloads asking for nothing (the ratio issue #26 sets), with
workloads (every one a Deployment with requests, 20 % divided), and
with workloads but Capacity left out of the score (then of the filter too,
then of the pre-filter), each as a ratio of plain's time measured in the same
run: what Capacity's score and filter add to a decision, apart from what
``diverse_bench.py`` also counts (decoding, assuming, writing).
"""

from __future__ import annotations

import argparse
import gc
import random
import time

import msgspec
from workload import app_doc, cluster_capacity, cluster_doc

from berth.controllers.scheduler.config import SchedulerConfig, default_plugins
from berth.controllers.scheduler.decide import Decision, decide
from berth.controllers.scheduler.framework import (
    Candidate,
    Fleet,
    Framework,
    MetricReading,
    Room,
    Subject,
)
from berth.controllers.scheduler.framework.rooms import Rooms
from berth.controllers.scheduler.plugins import REGISTRY
from berth.controllers.scheduler.subjects import subject_from_application
from berth.controllers.scheduler.views import AppView
from berth.store import keys
from berth.store.documents import Taint
from berth.store.documents.resources import Resources
from berth_testkit.fakes.scheduler import FakeSnapshot, cluster


class Snapshot(FakeSnapshot):
    """One fleet and one index of rooms, kept (the scheduler's cache keeps them too)."""

    kept_fleet: Fleet | None = None
    kept_rooms: Rooms | None = None

    def fleet(self, subject: Subject) -> Fleet:
        if self.kept_fleet is None:
            self.kept_fleet = super().fleet(subject)
        return self.kept_fleet

    def rooms(self, fleet: Fleet) -> Rooms:
        if self.kept_rooms is None:
            self.kept_rooms = super().rooms(fleet)
        return self.kept_rooms


def fleet_snapshot(n: int, rng: random.Random) -> Snapshot:
    clusters: list[Candidate] = []
    values: dict[tuple[str, str], MetricReading | float] = {}
    rooms: dict[str, Room] = {}
    for i in range(n):
        name, doc, metrics = cluster_doc(i, rng)
        taints = tuple(msgspec.convert(t, Taint) for t in doc["spec"]["taints"])
        clusters.append(cluster(name, labels=doc["metadata"]["labels"], taints=taints,
                                metrics=dict(zip(metrics, (0.5, 0.3, 0.2), strict=True))))
        for m in metrics:
            values[(name, m)] = rng.random()
        cap = cluster_capacity(rng)
        alloc = Resources.counted(cap["allocatable"])
        rooms[name] = Room(alloc, alloc - Resources.counted(cap["requested"]))
    return Snapshot(clusters, values, room_of=rooms)


def subjects(n: int, rng: random.Random, *, workloads: bool, requests: bool = True
             ) -> list[Subject]:
    out = []
    for k in range(n):
        name = f"a{k:06d}"
        doc = app_doc(name, rng, workloads=workloads, requests=requests)
        view = msgspec.json.decode(msgspec.json.encode(doc), type=AppView)
        out.append(subject_from_application(keys.resource_key("Application", name, "default"),
                                            view))
    return out


def framework(without: tuple[str, ...] = ()) -> Framework:
    """The default plugins, Capacity left out of the extension points ``without``."""
    plugins = default_plugins()
    for point in without:
        plugins[point] = [p for p in plugins[point] if p.name != "Capacity"]
    return Framework(SchedulerConfig(plugins=plugins), REGISTRY, {"stickiness_weight": 0.1})


def per_decision(fw: Framework, snap: Snapshot, apps: list[Subject], rounds: int
                 ) -> tuple[float, int]:
    """The best round's µs per decision, and how many were placed."""
    best, placed = float("inf"), 0
    for _ in range(rounds):
        placed = 0
        t0 = time.perf_counter()
        for subject in apps:
            outcome = decide(fw, subject, snap, [])
            if isinstance(outcome, Decision):
                outcome.explained(fw, snap, 3)
                placed += 1
        best = min(best, (time.perf_counter() - t0) / len(apps) * 1e6)
    return best, placed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--apps", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(7)
    snap = fleet_snapshot(args.clusters, rng)
    plain = subjects(args.apps, rng, workloads=False)
    state = rng.getstate()
    loaded = subjects(args.apps, rng, workloads=True)
    rng.setstate(state)  # the same applications, asking for nothing
    unrequested = subjects(args.apps, rng, workloads=True, requests=False)
    gc.collect()
    gc.freeze()  # the fleet and the subjects live on, as the scheduler's cache does
    runs = [("plain", (), plain), ("workloads without requests", (), unrequested),
            ("workloads", (), loaded),
            ("workloads, Capacity not scoring", ("score",), loaded),
            ("workloads, nor filtering", ("score", "filter"), loaded),
            ("workloads, nor pre-filtering", ("score", "filter", "preFilter"), loaded)]
    base = same = 0.0
    for label, without, apps in runs:
        took, placed = per_decision(framework(without), snap, apps, args.rounds)
        base = base or took
        if apps is unrequested:
            same = took
        print(f"{label}: {took:.1f} µs per decision ({placed} of {len(apps)} placed), "
              f"{took / base:.2f} x plain"
              + (f", {took / same:.2f} x without requests" if label == "workloads" else ""))


if __name__ == "__main__":
    main()
