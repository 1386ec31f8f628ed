"""The store against a real etcd: guarded writes, batches, leases, watches."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from berth.store import (
    MAX_TXN_OPS,
    Compacted,
    Conflict,
    Delete,
    EtcdConfig,
    KeptLease,
    Op,
    Put,
    Store,
    StoreError,
    Unavailable,
    Watch,
    WatchEvent,
)
from berth.store.group import GroupCommit
from berth_testkit.servers.etcd import EtcdServer

P = "/berth/v1/test/"


def test_create_conflicts_when_the_key_exists(store: Store) -> None:
    rev = store.create(P + "a", b"1")
    with pytest.raises(Conflict, match="already exists") as err:
        store.create(P + "a", b"2")
    assert err.value.key == P + "a"
    kv = store.get(P + "a")
    assert kv is not None and kv.value == b"1" and kv.mod_revision == rev


def test_update_and_delete_are_guarded_by_mod_revision(store: Store) -> None:
    first = store.create(P + "a", b"1")
    second = store.update(P + "a", b"2", first)
    with pytest.raises(Conflict, match="changed since it was read"):
        store.update(P + "a", b"stale", first)
    with pytest.raises(Conflict):
        store.delete(P + "a", first)
    assert store.get(P + "a").value == b"2"  # type: ignore[union-attr]
    store.delete(P + "a", second)
    assert store.get(P + "a") is None
    with pytest.raises(Conflict, match="deleted since it was read"):
        store.update(P + "a", b"3", second)


def test_a_transaction_is_all_or_nothing_and_names_the_conflicting_key(store: Store) -> None:
    store.create(P + "taken", b"x")
    with pytest.raises(Conflict) as err:
        store.commit([Put(P + "new1", b"1"), Put(P + "taken", b"2"), Put(P + "new2", b"3")])
    assert err.value.key == P + "taken"
    assert store.get(P + "new1") is None and store.get(P + "new2") is None


def test_list_is_one_consistent_snapshot_across_pages(store: Store) -> None:
    ops = [Put(f"{P}k{i:05d}", str(i).encode()) for i in range(2500)]
    revs = store.commit_chunks(ops)
    assert len(revs) == -(-2500 // MAX_TXN_OPS)
    store.create(P + "zz-later", b"later")
    kvs, revision = store.list_prefix(P, revision=revs[-1])
    assert [kv.key for kv in kvs] == [op.key for op in ops]
    assert revision == revs[-1]
    found = store.get_many([P + "k00007", P + "missing", P + "zz-later"])
    assert set(found) == {P + "k00007", P + "zz-later"}
    assert store.count_prefix(P + "k") == 2500
    assert store.count_prefix(P + "nothing/") == 0


def test_commit_refuses_more_operations_than_one_transaction_holds(store: Store) -> None:
    with pytest.raises(ValueError, match="exceed"):
        store.commit([Delete(f"{P}{i}") for i in range(MAX_TXN_OPS + 1)])


def test_a_leased_key_vanishes_when_the_lease_is_revoked(store: Store) -> None:
    lease = store.grant(5)
    assert store.keep_alive(lease) > 0
    store.create(P + "leased", b"v", lease=lease)
    assert store.get(P + "leased").lease == lease  # type: ignore[union-attr]
    store.revoke(lease)
    assert store.get(P + "leased") is None
    assert store.keep_alive(lease) == -1


def test_a_kept_lease_outlives_its_ttl_and_its_keys_go_with_it(store: Store) -> None:
    lease = KeptLease(store, 2)
    store.create(P + "kept", b"v", lease=lease.id)
    time.sleep(3)  # longer than the TTL: only the keep-alive keeps the key
    assert store.get(P + "kept") is not None and not lease.lost.is_set()
    lease.revoke()
    assert store.get(P + "kept") is None


def test_unreachable_etcd_is_unavailable() -> None:
    s = Store(EtcdConfig(url="http://127.0.0.1:9", timeout=1))
    with pytest.raises(Unavailable, match="unreachable"):
        s.get(P + "x")


def _collect(watch: Watch, into: list[WatchEvent], stop_after: int) -> None:
    for batch in watch:
        into.extend(batch.events)
        if len(into) >= stop_after:
            return


def test_a_burst_from_many_threads_is_seen_once_each(store: Store) -> None:
    threads, per_thread = 8, 250
    start = store.revision() + 1
    seen: list[WatchEvent] = []
    watch = Watch(store, P, start)
    reader = threading.Thread(target=_collect, args=(watch, seen, threads * per_thread))
    reader.start()

    def writer(t: int) -> None:
        for i in range(per_thread):
            store.create(f"{P}t{t}/{i}", b"x")

    began = time.monotonic()
    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    reader.join(timeout=60)
    elapsed = time.monotonic() - began
    watch.close()
    keys = [ev.key for ev in seen]
    assert len(keys) == threads * per_thread, "events lost"
    assert len(set(keys)) == len(keys), "events duplicated"
    revisions = [ev.mod_revision for ev in seen]
    assert revisions == sorted(revisions)
    print(f"\nburst: {len(keys)} events in {elapsed:.2f}s ({len(keys) / elapsed:.0f}/s)")


def test_the_watch_resumes_across_an_etcd_restart(etcd_server: EtcdServer, store: Store) -> None:
    if not isinstance(etcd_server, EtcdServer):
        pytest.fail("this test restarts etcd: it needs a local etcd binary, not a container")
    total = 300
    start = store.revision() + 1
    seen: list[WatchEvent] = []
    watch = Watch(store, P, start, max_backoff=0.5)
    reader = threading.Thread(target=_collect, args=(watch, seen, total))
    reader.start()

    def write(i: int) -> None:
        while True:
            try:
                store.create(f"{P}r{i:04d}", b"x")
                return
            except Unavailable:
                time.sleep(0.1)
            except Conflict:  # the create went through before the connection broke
                return

    for i in range(total // 2):
        write(i)
    etcd_server.restart()
    for i in range(total // 2, total):
        write(i)
    reader.join(timeout=60)
    watch.close()
    keys = [ev.key for ev in seen]
    assert keys == [f"{P}r{i:04d}" for i in range(total)]
    assert watch.reconnects >= 1


def test_a_watch_on_a_compacted_revision_raises_compacted(store: Store) -> None:
    first = store.create(P + "a", b"1")
    last = store.update(P + "a", b"2", first)
    store.compact(last)
    with pytest.raises(Compacted) as err:
        for _ in Watch(store, P, first):
            pass
    assert err.value.compact_revision >= last - 1


def test_prev_kv_is_decoded(store: Store) -> None:
    first = store.create(P + "a", b"old")
    store.update(P + "a", b"new", first)
    watch = Watch(store, P, first + 1, prev_kv=True)
    batch = next(iter(watch))
    watch.close()
    assert batch.events[0].value == b"new" and batch.events[0].prev_value == b"old"


def test_group_commit_carries_concurrent_writes_in_few_transactions(store: Store) -> None:
    """Eight threads, 50 guarded creates each: every write lands once, in fewer
    transactions than writes; a write whose guard fails gets its own Conflict and
    spoils no other."""
    group = GroupCommit(store, "test")
    before = store.revision()
    revisions: dict[str, int] = {}
    lock = threading.Lock()
    store.commit([Put("/test/group/taken", b"x")])

    def writer(t: int) -> None:
        for i in range(50):
            key = f"/test/group/{t}/{i}"
            rev = group.commit([Put(key, str(i).encode())])
            with lock:
                revisions[key] = rev
        with pytest.raises(Conflict):
            group.commit([Put("/test/group/taken", b"again")])  # exists: the create fails

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    kvs, _ = store.list_prefix("/test/group/")
    assert len(kvs) == 401 and {kv.key: kv.mod_revision for kv in kvs
                                if kv.key in revisions} == revisions
    transactions = store.revision() - before - 1
    assert transactions < 400, transactions  # grouped: fewer revisions than writes
    print(f"400 writes from 8 threads in {transactions} transactions")


def test_commit_surely_recognises_its_own_write_whose_answer_was_lost(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A member dies after landing a write, before answering: the write is sent again
    (to the next member), its guard then fails, and reading back shows every key holds
    what it wrote — it landed, once. Another writer's values are a Conflict."""
    real = Store.commit
    lost: list[int] = []

    def commit_then_lose(self: Store, ops: Sequence[Op]) -> int:
        revision = real(self, ops)
        if not lost:
            lost.append(revision)
            raise Unavailable("connection closed by the server")  # the answer never came
        return revision

    monkeypatch.setattr(Store, "commit", commit_then_lose)
    ops = [Put(f"/berth/v1/test/sure/{i}", f"mine-{i}".encode()) for i in range(3)]
    assert store.commit_surely(ops, delay=0.01) == lost[0]
    assert [kv.version for kv in store.list_prefix("/berth/v1/test/sure/")[0]] == [1, 1, 1]
    lost.clear()
    theirs = [Put("/berth/v1/test/theirs", b"mine")]
    monkeypatch.setattr(Store, "commit", real)
    store.commit([Put("/berth/v1/test/theirs", b"someone else's")])
    monkeypatch.setattr(Store, "commit", commit_then_lose)
    with pytest.raises(Conflict):  # the first try fails its guard: never read back
        store.commit_surely(theirs, delay=0.01)


def test_an_etcd_allowing_more_operations_per_transaction_is_used_so(
        etcd_server: EtcdServer) -> None:
    """``--etcd-max-txn-ops`` as etcd's own ``--max-txn-ops``: one transaction carries
    that many writes; asking more of an etcd that allows fewer is etcd's clear error."""
    wide = EtcdServer(extra=["--max-txn-ops", "256"]).start()
    try:
        store = Store(EtcdConfig(url=wide.url, max_txn_ops=256))
        assert store.room == 256
        revs = store.commit_chunks([Put(f"{P}w{i:04d}", b"x") for i in range(512)])
        assert len(revs) == 2  # 256 a transaction
        assert GroupCommit(store, "test").max_ops == 256
        store.close()
    finally:
        wide.cleanup()
    narrow = Store(EtcdConfig(url=etcd_server.url, max_txn_ops=256))  # etcd allows 128
    with pytest.raises(StoreError, match="too many operations"):
        narrow.commit([Put(f"{P}n{i:04d}", b"x") for i in range(200)])
    narrow.close()
