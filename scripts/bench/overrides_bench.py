"""What rendering overrides costs the propagator, against the same work without them.

    python scripts/bench/overrides_bench.py [--apps 1000] [--rounds 4] [--workers 16]

1. Starts etcd and three bare kube-apiservers (``propagator_bench.py``'s set-up:
   no Nodes, this measures applying), registers them as Clusters with labels, and
   starts ``berth propagator``.
2. Writes three Overrides that select every application labelled
   ``overrides: "yes"``: an image registry per cluster
   (``${cluster.name}.registry.example``), two environment variables from the
   cluster's name and a label, and a label on every object: each cluster's copy
   of such an application is rendered by all three.
3. Rounds: ``--apps`` applications without the label (nothing to render), and
   ``--apps`` with it (other names), in turn first (each batch lands on clusters
   fuller than the one before it), each batch written at once
   with its Bindings (round robin over the clusters); times the first write to
   the last status saying it is applied everywhere, and the propagator's CPU
   (``/proc``) over that time.
4. Prints each round, the medians and the ratios (with / without): the target
   is at most 1.10 for the time. Alternate rounds: the machine's noise is a few
   per cent.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from typing import Any

import msgspec
from propagator_bench import CLUSTERS, StatusWatcher, launch, manifest

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
from berth_testkit.measure import cpu_seconds
from berth_testkit.scratch import run_bench, scratch
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster

OVERRIDES: list[dict[str, Any]] = [
    {"rules": [{"image": {"registry": "${cluster.name}.registry.example"}}]},
    {"rules": [{"env": {"set": {"CLUSTER": "${cluster.name}",
                                "ZONE": "${cluster.labels.zone}"}}}]},
    {"rules": [{"labels": {"set": {"berth.dev/zone": "${cluster.labels.zone}"}}}]},
]



def batch(store: Store, watcher: StatusWatcher, pid: int, prefix: str, apps: int,
          labelled: bool) -> tuple[float, float]:
    """(seconds, CPU seconds of the propagator) to apply ``apps`` new applications."""
    names = [f"{prefix}-{i:05d}" for i in range(apps)]
    ops: list[Put] = []
    for i, name in enumerate(names):
        labels = {"overrides": "yes"} if labelled else {}
        ops.append(Put(keys.resource_key("Application", name, "default"), msgspec.json.encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": "default", "generation": 1,
                         "labels": labels},
            "spec": {"manifest": manifest(name)}})))
        ops.append(Put(keys.binding_key("Application", "default", name), encode(Binding(
            BindingMeta(name, "default"), BindingSpec(
                ObjectRef("Application", name, "default"), 1,
                [Target("Cluster", CLUSTERS[i % 3], "default")]),
            BindingStatus(BindingState.SCHEDULED)))))
    wanted = {keys.status_key("Application", "default", n) for n in names}
    cpu = cpu_seconds(pid)
    began = time.perf_counter()
    store.commit_chunks(ops)
    deadline = time.monotonic() + 60 + apps
    while True:
        with watcher.cond:
            done = [watcher.running[k] for k in wanted if k in watcher.running]
            if len(done) == len(wanted):
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(done)}/{apps} of {prefix} applied")
            watcher.cond.wait(1.0)
    return max(done) - began, cpu_seconds(pid) - cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=16)
    args = ap.parse_args()
    work = scratch("berth-overrides-bench-")
    server = EtcdServer().start()
    kubes: list[KubeCluster] = []
    proc: subprocess.Popen[bytes] | None = None
    watcher: StatusWatcher | None = None
    try:
        for name in CLUSTERS:
            kubes.append(KubeCluster(name, nodes=0).start())
        store = Store(EtcdConfig(url=server.url))
        store.commit([Put(keys.resource_key("Cluster", name, "default"), msgspec.json.encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "default", "labels": {"zone": f"z{i}"}},
            "spec": {"kubeconfig": kube.kubeconfig()}})) for i, (name, kube) in enumerate(zip(
                CLUSTERS, kubes, strict=True))])
        store.commit([Put(keys.resource_key("Override", f"bench-{i}", "default"), encode({
            "api": "core", "kind": "Override",
            "metadata": {"name": f"bench-{i}", "namespace": "default", "generation": 1},
            "spec": {"applications": {"matchLabels": {"overrides": "yes"}}, **spec}}))
            for i, spec in enumerate(OVERRIDES)])
        proc, _port, _log = launch(store, server.url, work, args.workers)
        watcher = StatusWatcher(store)
        plain: list[tuple[float, float]] = []
        rendered: list[tuple[float, float]] = []
        for r in range(args.rounds):
            # ABBA: each batch lands on clusters fuller than the one before, so which
            # goes first alternates
            if r % 2 == 0:
                plain.append(batch(store, watcher, proc.pid, f"plain{r}", args.apps, False))
                rendered.append(batch(store, watcher, proc.pid, f"ov{r}", args.apps, True))
            else:
                rendered.append(batch(store, watcher, proc.pid, f"ov{r}", args.apps, True))
                plain.append(batch(store, watcher, proc.pid, f"plain{r}", args.apps, False))
            print(f"round {r + 1}: without overrides {plain[-1][0]:.2f} s "
                  f"({plain[-1][1]:.2f} s CPU), with 3 each {rendered[-1][0]:.2f} s "
                  f"({rendered[-1][1]:.2f} s CPU)")
        sample = store.get(keys.status_key("Application", "default", "ov0-00000"))
        assert sample is not None and b"Override default/bench-0@1" in sample.value, \
            "the overrides did not make the copies"
        t0, c0 = (statistics.median(x) for x in zip(*plain, strict=True))
        t1, c1 = (statistics.median(x) for x in zip(*rendered, strict=True))
        print(f"medians: {args.apps} applications in {t0:.2f} s without overrides, "
              f"{t1:.2f} s with 3 each; the propagator's CPU {c0 / args.apps * 1000:.1f} "
              f"against {c1 / args.apps * 1000:.1f} ms per application")
        print(f"ratio with / without: time {t1 / t0:.2f} (target <= 1.10), "
              f"CPU {c1 / c0:.2f}")
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
