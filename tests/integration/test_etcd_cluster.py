"""The store on a real three-member etcd cluster: the member it talks to dies, and
reads, writes, watches and leases carry on through the others."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from berth.store import Conflict, EtcdConfig, KeptLease, Store, Unavailable, Watch
from berth_testkit.servers.etcd import EtcdCluster
from berth_testkit.servers.serving import serving

P = "/berth/v1/test/cluster/"


@pytest.fixture(scope="module")
def cluster() -> Iterator[EtcdCluster]:
    yield from serving(lambda: EtcdCluster(3))


def write_all(store: Store, n: int, tag: str, progress: list[int]) -> list[str]:
    """Create n keys one by one as berth's writers do: an Unavailable error is retried
    after a pause, and a Conflict on a retried create means the first try landed."""
    retried: list[str] = []
    for i in range(n):
        key = f"{P}{tag}/{i:04d}"
        tried = False
        while True:
            try:
                store.create(key, f"{tag}-{i}".encode())
                break
            except Unavailable:
                tried = True
                retried.append(key)
                time.sleep(0.05)
            except Conflict:
                assert tried, f"{key} exists although it was never written"
                break
        progress.append(i)
    return retried


def test_the_member_in_use_dies_and_nothing_is_lost(cluster: EtcdCluster) -> None:
    store = Store(EtcdConfig(url=cluster.url, timeout=3))
    first = cluster.members[0]
    assert store.endpoint == first.url
    start = store.revision() + 1
    seen: list[str] = []
    watch = Watch(store, P + "a/", start, idle_timeout=5)

    def follow() -> None:
        for batch in watch:
            seen.extend(ev.key for ev in batch.events)

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    lease = KeptLease(store, 3)
    store.create(P + "leased", b"x", lease=lease.id)
    progress: list[int] = []
    writer = threading.Thread(target=lambda: write_all(store, 600, "a", progress), daemon=True)
    writer.start()
    while len(progress) < 150:
        time.sleep(0.005)
    t_kill = time.monotonic()
    first.kill()  # the member this process talks to, mid-burst
    writer.join(120)
    took = time.monotonic() - t_kill
    assert not writer.is_alive()
    try:
        assert store.endpoint != first.url
        keys = [kv.key for kv in store.list_prefix(P + "a/")[0]]
        assert keys == [f"{P}a/{i:04d}" for i in range(600)]
        deadline = time.monotonic() + 30
        while len(seen) < 600 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert seen == keys, f"watch delivered {len(seen)} of 600 (or out of order/twice)"
        time.sleep(4)  # longer than the lease's TTL: it was refreshed through another member
        assert not lease.lost.is_set()
        assert store.get(P + "leased") is not None
        assert store.link.up()
        print(f"\nmember killed at 150/600 writes; the rest written {took:.2f} s later; "
              f"without etcd for {store.link.last_outage:.3f} s")
        # The dead member comes back (its data kept) and the next one dies: the store moves
        # on again, round robin.
        first.start()
        second = store.endpoint
        next(m for m in cluster.members if m.url == second).kill()
        write_all(store, 1, "after", [])  # a write may meet the cluster electing a leader
        assert store.endpoint != second
        assert store.get(P + "after/0000") is not None
    finally:
        watch.close()
        lease.revoke()
        store.close()
        for m in cluster.members:
            if m.proc is None or m.proc.poll() is not None:
                m.start()


def test_a_read_moves_at_once_a_write_that_may_have_landed_does_not(
        cluster: EtcdCluster) -> None:
    """A refused connection never reached etcd: any request moves to the next member at
    once. Only reads are repeated after a failure that may have reached it."""
    store = Store(EtcdConfig(url=cluster.url, timeout=3))
    try:
        victim = next(m for m in cluster.members if m.url == store.endpoint)
        victim.kill()
        # The pooled connection to the dead member fails as it is used; the read is
        # repeated on the next member within the same call.
        assert store.get(P + "nothing") is None
        assert store.endpoint != victim.url
        store.create(P + "moved", b"1")  # goes to the live member directly
    finally:
        store.close()
        victim.start()


def test_every_member_dead_is_unavailable_naming_them(cluster: EtcdCluster) -> None:
    store = Store(EtcdConfig(url=cluster.url, timeout=2))
    try:
        cluster.stop()
        with pytest.raises(Unavailable):
            store.get(P + "x")
        assert not store.link.up()
    finally:
        store.close()
        cluster.start()
