"""Leadership is a fence: a write of a term that is over fails in etcd itself.

On the real etcd: a fenced store's writes carry the term (the election key's create
revision) in the same transaction; once the key is gone or made anew, they fail with
``Deposed`` and nothing lands — whatever the writer had queued. A propagator claim
fences status writes the same way (``Fence`` as an operation).
"""

from __future__ import annotations

import threading
import time

import pytest

from berth.controllers.runtime.election import LeaderElection
from berth.controllers.runtime.process import writer_for
from berth.store import Conflict, Deposed, Fence, Put, Store, keys
from berth.store.group import GroupCommit

KEY = keys.lease_key("fence-test")


def test_a_fenced_write_lands_only_while_the_term_lasts(store: Store) -> None:
    term = store.create(KEY, b"{}")
    fenced = store.fenced(Fence(KEY, term))
    fenced.create("/berth/v1/test/a", b"1")
    store.delete(KEY)  # the term ends (the lease expired, say)
    with pytest.raises(Deposed, match=f"the term that began at revision {term} is over"):
        fenced.create("/berth/v1/test/b", b"1")
    store.create(KEY, b"{}")  # another replica leads: a new term
    with pytest.raises(Deposed, match="was created anew at revision"):
        fenced.update("/berth/v1/test/a", b"2", store.get("/berth/v1/test/a").mod_revision)
    assert store.get("/berth/v1/test/b") is None
    assert store.get("/berth/v1/test/a").value == b"1"  # nothing landed
    # a guard that fails while the term holds is still a Conflict
    now = store.get(KEY)
    assert now is not None
    refenced = store.fenced(Fence(KEY, now.create_revision))
    with pytest.raises(Conflict):
        refenced.create("/berth/v1/test/a", b"3")


def test_fences_as_operations_and_grouped(store: Store) -> None:
    claim = keys.LEASES + "propagator/clusters/default/c1"
    revision = store.create(claim, b"{}")
    group = GroupCommit(store, "test")
    results: list[object] = []

    def write(i: int, fence: Fence) -> None:
        try:
            results.append(group.commit([Put(f"/berth/v1/test/s{i}", b"x"), fence]))
        except Deposed as exc:
            results.append(exc)

    threads = [threading.Thread(target=write, args=(i, Fence(claim, revision)))
               for i in range(8)]
    threads.append(threading.Thread(target=write, args=(99, Fence(claim, revision + 1000))))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(isinstance(r, int) for r in results) == 8  # the claim's writes, all landed
    assert sum(isinstance(r, Deposed) for r in results) == 1  # the stale one alone failed
    assert store.get("/berth/v1/test/s99") is None


def test_an_election_fences_its_leaders_writes(store: Store) -> None:
    first = LeaderElection(store, "fence-test", identity="first", ttl=2)
    first.start()
    deadline = time.monotonic() + 10
    while not first.is_leader and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.is_leader
    fence = first.fence()
    fenced = store.fenced(fence)
    fenced.create("/berth/v1/test/first", b"1")
    # As if paused past its lease: the key goes and another replica wins.
    store.revoke(first._lease)
    second = LeaderElection(store, "fence-test", identity="second", ttl=2)
    second.start()
    deadline = time.monotonic() + 10
    while not second.is_leader and time.monotonic() < deadline:
        time.sleep(0.05)
    assert second.is_leader and second.fence().term > fence.term
    with pytest.raises(Deposed):
        fenced.create("/berth/v1/test/late", b"1")  # whatever it had queued
    assert store.get("/berth/v1/test/late") is None
    first.resign()
    second.resign()


def test_a_fence_takes_one_of_the_transactions_operations(store: Store) -> None:
    term = store.create(KEY, b"{}")
    fenced = store.fenced(Fence(KEY, term))
    assert fenced.room == 127 and store.room == 128
    puts = [Put(f"/berth/v1/test/many/{i:03d}", b"1") for i in range(200)]
    with pytest.raises(ValueError, match="128 writes and 1 fences exceed"):
        fenced.commit(puts[:128])
    assert len(fenced.commit_chunks(puts)) == 2  # 127 + 73
    assert store.count_prefix("/berth/v1/test/many/") == 200


def test_a_claim_overwritten_by_hand_fences_its_old_holder_out(store: Store) -> None:
    claim = keys.LEASES + "propagator/clusters/default/c2"
    revision = store.create(claim, b'{"holder": "me"}')
    fence = Fence(claim, revision, mod=True)
    store.commit([Put("/berth/v1/test/by-me", b"1"), fence])
    store.update(claim, b'{"holder": 7}', revision)  # etcdctl put over it
    with pytest.raises(Deposed):
        store.commit([Put("/berth/v1/test/by-me-late", b"1"), fence])
    assert store.get("/berth/v1/test/by-me-late") is None


def test_no_write_lands_in_the_gap_between_two_leaders(store: Store) -> None:
    """Between the end of one term and the start of the next the election key is
    absent, and etcd's compare ``create_revision == 0`` passes on an absent key: so
    there is no term 0. A stepped-down election gives no fence, a controller is not
    started without one, and the store refuses a term-0 fence without sending it."""
    first = LeaderElection(store, "fence-gap", identity="first", ttl=2)
    first.start()
    deadline = time.monotonic() + 10
    while not first.is_leader and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first.is_leader and first.fence() is not None
    gap_key = keys.lease_key("fence-gap")
    store.revoke(first._lease)  # the lease expires: the key is gone, nobody leads yet
    deadline = time.monotonic() + 10
    while first.is_leader and time.monotonic() < deadline:
        time.sleep(0.05)
    first.resign()  # it would campaign again: the gap stays open for the test
    assert store.get(gap_key) is None
    assert not first.is_leader
    assert first.fence() is None  # no term to hand out
    assert writer_for(first, store) is None  # so no controller starts
    with pytest.raises(ValueError, match="no term to fence with"):
        store.fenced(Fence(gap_key, 0))
    # a term-0 fence given as an operation (a claim read as absent, say): refused here,
    # though etcd itself would let it pass on the absent key
    with pytest.raises(Deposed, match="fenced with no term"):
        store.commit([Put("/berth/v1/test/in-the-gap", b"1"), Fence(gap_key, 0)])
    with pytest.raises(Deposed, match="fenced with no term"):
        store.commit([Put("/berth/v1/test/in-the-gap", b"1"), Fence(gap_key, 0, mod=True)])
    assert store.get("/berth/v1/test/in-the-gap") is None


def test_fenced_views_share_one_session(store: Store) -> None:
    """A fenced view is the same session (its member, its token, its link), not a copy:
    a move to another member made through one is seen by every view."""
    term = store.create(KEY, b"{}")
    fenced = store.fenced(Fence(KEY, term))
    assert fenced.link is store.link and fenced.members is store.members
    assert fenced.endpoint == store.endpoint
    assert fenced.fence == Fence(KEY, term) and store.fence is None
    assert fenced.room == store.room - 1
