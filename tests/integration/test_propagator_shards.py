"""Several `berth propagator` replicas share the clusters (#14 item 5): each cluster is
claimed by one replica at a time, a replica joining takes its share by hand-overs (the
old owner stops before the new one starts), one killed has its clusters claimed by the
others, and an application moved between clusters of different replicas is made before
it is broken. On real kube-apiservers: sixteen clusters, eight on each of two servers.

Which replica a cluster goes to follows from the replicas' identities (host and pid):
with six clusters, one run in 32 gave every cluster to one replica, and the split this
test needs did not happen; with sixteen, about one in 30,000 would."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import msgspec
import pytest
from lightkube import Client
from lightkube.resources.core_v1 import ConfigMap

from berth.controllers.propagator.shard import CLAIMS, Holder, owner
from berth.store import Store, keys
from berth_testkit.scheduler_env import PropagatorProcess, stop_all, wait_for
from berth_testkit.servers.etcd import EtcdServer
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import kube_clients, serving_all
from tests.integration.test_propagator import register
from tests.integration.test_propagator_apply import (
    app,
    bind,
    config_map,
    present,
    running,
    status,
)

CONFIG = ("probe_interval: 0.5\nprobe_timeout: 1\ngrace: 2\nrequest_timeout: 3\n"
          "retry_base_delay: 0.2\nretry_max_delay: 1\nresync_interval: 600\n")
CLUSTERS = {f"c{i}": ("east", "west")[i % 2] for i in range(16)}  # cluster → its server


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, KubeCluster]]:
    yield from serving_all(KubeCluster, ("east", "west"))


@pytest.fixture
def kube(servers: dict[str, KubeCluster]) -> Iterator[dict[str, Client]]:
    yield from kube_clients(servers)


def holders(store: Store) -> dict[str, str]:
    """cluster → the pid of the replica holding its claim."""
    kvs, _ = store.list_prefix(CLAIMS)
    return {kv.key.rsplit("/", 1)[1]: msgspec.json.decode(kv.value, type=Holder).holder.rsplit(
        "-", 1)[1] for kv in kvs}


def pid(p: PropagatorProcess) -> str:
    assert p.proc is not None
    return str(p.proc.pid)


STAMP = re.compile(r"^(\S+ \S+) INFO \S+: propagator (\S+) (serves|hands) cluster default/(\w+)")


def serving_times(procs: list[PropagatorProcess]) -> dict[str, list[tuple[datetime, str, str]]]:
    """cluster → (when, pid, serves|hands) from every replica's log, in time order."""
    out: dict[str, list[tuple[datetime, str, str]]] = {}
    for p in procs:
        for line in p.output().splitlines():
            m = STAMP.match(line)
            if m:
                when = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f")
                out.setdefault(m.group(4), []).append(
                    (when, m.group(2).rsplit("-", 1)[1], m.group(3)))
    return {c: sorted(v) for c, v in out.items()}


def test_replicas_share_the_clusters_and_hand_them_over(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, servers: dict[str, KubeCluster],
    kube: dict[str, Client]
) -> None:
    for name, server in CLUSTERS.items():
        register(store, name, servers[server].kubeconfig())
    procs = [PropagatorProcess(etcd_server.url, tmp_path, config=CONFIG, name="1").start()]
    try:
        wait_for(lambda: holders(store), lambda h: len(h) == len(CLUSTERS) and set(h.values()) == {
            pid(procs[0])}, timeout=30)
        for i, cluster in enumerate(CLUSTERS):
            app(store, f"app{i}", [config_map(f"app{i}", n=str(i))])
            bind(store, f"app{i}", 1, cluster)
        for i, cluster in enumerate(CLUSTERS):
            wait_for(lambda i=i: status(store, f"app{i}"), running("RUNNING", cluster),
                     timeout=30)

        # A second replica joins: the clusters split, each held by exactly one.
        procs.append(PropagatorProcess(etcd_server.url, tmp_path, config=CONFIG,
                                       name="2").start())
        ids = {f"{socket.gethostname()}-{pid(p)}": pid(p) for p in procs}
        expected = {c: ids[str(owner(f"default/{c}", sorted(ids)))] for c in CLUSTERS}
        assert set(expected.values()) == set(ids.values()), expected  # see the docstring
        split = wait_for(lambda: holders(store), lambda h: h == expected, timeout=30)
        moved = sorted(c for c, p in split.items() if p == pid(procs[1]))
        # (the processes write their log lines a tenth of a second at a time)
        times = wait_for(lambda: serving_times(procs), lambda t: all(
            len(t.get(c, [])) >= 3 for c in moved), timeout=10)
        for c in moved:  # the first replica handed over before the second served it
            events = [(who, what) for _, who, what in times[c]]
            assert events == [(pid(procs[0]), "serves"), (pid(procs[0]), "hands"),
                              (pid(procs[1]), "serves")], (c, times[c])

        # A move between clusters of the two replicas, on the two servers: made before
        # broken, the status written by both.
        first = next(c for c, p in split.items() if p == pid(procs[0]))
        other = next(c for c, p in split.items() if p == pid(procs[1])
                     and CLUSTERS[c] != CLUSTERS[first])
        i = list(CLUSTERS).index(first)
        bind(store, f"app{i}", 1, other)
        wait_for(lambda: status(store, f"app{i}"), running("RUNNING", other), timeout=30)
        assert present(kube[CLUSTERS[other]], ConfigMap, f"app{i}")
        assert not present(kube[CLUSTERS[first]], ConfigMap, f"app{i}")

        # The first replica killed: its clusters are claimed by the second once its
        # lease ends, and work on them goes on there.
        procs[0].kill()
        wait_for(lambda: holders(store), lambda h: len(h) == len(CLUSTERS) and set(h.values()) == {
            pid(procs[1])}, timeout=30)
        app(store, f"app{i}", [config_map(f"app{i}", n="changed")], generation=2)
        bind(store, f"app{i}", 2, first)  # back to the dead replica's cluster, changed
        wait_for(lambda: status(store, f"app{i}"), running("RUNNING", first, generation=2),
                 timeout=30)
        got = kube[CLUSTERS[first]].get(ConfigMap, f"app{i}", namespace="default")
        assert got.data == {"n": "changed"}
        assert not present(kube[CLUSTERS[other]], ConfigMap, f"app{i}")
        for k in range(len(CLUSTERS)):
            if k != i:
                assert status(store, f"app{k}").status.state == "RUNNING"  # type: ignore[union-attr]
    finally:
        stop_all(procs)
        for p in procs:
            print(p.output()[-3000:])
    assert store.list_prefix(keys.LEASES + "propagator/members/")[0] == []  # clean stops
