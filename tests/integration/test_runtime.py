"""The controller runtime against a real etcd: informers and leader election."""

from __future__ import annotations

import base64
import threading
import time
import urllib.request
from collections.abc import Callable

import msgspec
import pytest

from berth.controllers.runtime import Event, EventType, HealthServer, Informer, LeaderElection
from berth.store import Put, Store, encode, keys

P = "/berth/v1/applications/default/"  # any prefix of berth's layout


class Thing(msgspec.Struct):
    name: str
    size: int = 0


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"condition not met within {timeout}s")


def recorder(informer: Informer[Thing]) -> list[Event[Thing]]:
    events: list[Event[Thing]] = []
    informer.add_handler(events.append)
    return events


def test_the_informer_lists_then_follows_changes(store: Store) -> None:
    store.create(P + "a", encode(Thing("a", 1)))
    inf = Informer(store, P, Thing, idle_timeout=5)
    events = recorder(inf)
    inf.start()
    try:
        assert inf.wait_synced(10)
        assert [(e.type, e.key) for e in events] == [(EventType.ADDED, P + "a")]
        rev = store.update(P + "a", encode(Thing("a", 2)), store.get(P + "a").mod_revision)  # type: ignore[union-attr]
        store.create(P + "b", encode(Thing("b")))
        store.delete(P + "a")
        assert inf.wait_for_revision(rev + 2, 10)
        assert [(e.type, e.key) for e in events[1:]] == [
            (EventType.MODIFIED, P + "a"), (EventType.ADDED, P + "b"), (EventType.DELETED, P + "a")]
        assert events[1].old == Thing("a", 1) and events[3].obj == Thing("a", 2)
        assert set(inf.list_keys()) == {P + "b"}
    finally:
        inf.stop()


def test_the_informer_skips_garbage_and_keeps_running(store: Store) -> None:
    inf = Informer(store, P, Thing, idle_timeout=5)
    events = recorder(inf)
    inf.start()
    try:
        assert inf.wait_synced(10)
        store.create(P + "garbage", b"{not json")
        store.create(P + "wrong-shape", b'{"size": "big"}')
        rev = store.create(P + "good", encode(Thing("good")))
        assert inf.wait_for_revision(rev, 10)
        assert [e.key for e in events] == [P + "good"]
        assert inf.get(P + "good") == Thing("good")
    finally:
        inf.stop()


def test_a_conversion_that_fails_unforeseen_skips_that_value_and_blocks_nothing(
        store: Store) -> None:
    """An exception the converter did not foresee (a TypeError on a field of a shape
    nobody expected, a bug) is that value's: skipped and logged, as an undecodable
    one. Listing again would meet it again, for ever, and keep every other key out."""
    def convert(key: str, thing: Thing) -> Thing:
        if thing.name == "trap":
            raise RuntimeError("a conversion that fails on this value")
        return thing

    store.create(P + "trap-listed", encode(Thing("trap")))
    store.create(P + "listed", encode(Thing("listed")))
    inf = Informer(store, P, Thing, idle_timeout=5, convert=convert, retry_delay=0.1)
    invalid: list[str] = []
    inf.add_invalid_handler(lambda key, revision: invalid.append(key))
    inf.start()
    try:
        assert inf.wait_synced(10)
        store.create(P + "trap", encode(Thing("trap")))
        rev = store.create(P + "good", encode(Thing("good")))
        assert inf.wait_for_revision(rev, 10)
        assert sorted(inf.list_keys()) == [P + "good", P + "listed"]
        assert invalid == [P + "trap-listed", P + "trap"]
        rev = store.update(P + "trap", encode(Thing("mended")),
                           store.get(P + "trap").mod_revision)  # type: ignore[union-attr]
        assert inf.wait_for_revision(rev, 10)
        assert inf.get(P + "trap") == Thing("mended") and inf.alive()
    finally:
        inf.stop()


def test_the_informer_relists_after_compaction_and_sees_what_it_missed(store: Store) -> None:
    keep = store.create(P + "keep", encode(Thing("keep")))
    store.create(P + "gone", encode(Thing("gone")))
    inf = Informer(store, P, Thing, idle_timeout=5)
    events = recorder(inf)
    inf.sync()  # listed, not yet watching: it will miss what follows
    del events[:]
    store.delete(P + "gone")
    store.update(P + "keep", encode(Thing("keep", 9)), keep)
    last = store.create(P + "new", encode(Thing("new")))
    store.compact(last)
    inf.start()
    try:
        wait_until(lambda: len(events) == 3)
        assert sorted((e.type.value, e.key) for e in events) == [
            ("ADDED", P + "new"), ("DELETED", P + "gone"), ("MODIFIED", P + "keep")]
        assert inf.get(P + "keep") == Thing("keep", 9)
    finally:
        inf.stop()


def test_keys_outside_the_layout_are_ignored_and_garbage_deleted_is_cleared(
        store: Store) -> None:
    inf = Informer(store, P, Thing, idle_timeout=5)
    events = recorder(inf)
    seen: list[tuple[str, str]] = []
    inf.add_invalid_handler(lambda key, _rev: seen.append(("invalid", key)))
    inf.add_cleared_handler(lambda key, _rev: seen.append(("cleared", key)))
    inf.start()
    try:
        assert inf.wait_synced(10)
        store.create(P + "odd/extra", encode(Thing("x")))  # an extra segment
        store.call("kv/put", {"key": base64.b64encode(P.encode() + b"bad\xff").decode(),
                              "value": base64.b64encode(b"{}").decode()}, "raw")
        store.create(P + "junk", b"{not json")
        last = store.create(P + "fine", encode(Thing("fine")))
        store.delete(P + "junk")
        assert inf.wait_for_revision(last + 1, 10)
        assert [e.key for e in events] == [P + "fine"]  # the rest are no items
        assert seen == [("invalid", P + "junk"), ("cleared", P + "junk")]
        assert inf.alive()
    finally:
        inf.stop()


def test_the_informer_delivers_a_large_batch_in_order(store: Store) -> None:
    inf = Informer(store, P, Thing, idle_timeout=5)
    events = recorder(inf)
    inf.start()
    try:
        assert inf.wait_synced(10)
        revs = store.commit_chunks([Put(f"{P}{i:05d}", encode(Thing(str(i))))
                                    for i in range(3000)])
        assert inf.wait_for_revision(revs[-1], 30)
        assert [e.key for e in events] == [f"{P}{i:05d}" for i in range(3000)]
    finally:
        inf.stop()


def test_leadership_moves_within_the_ttl_when_the_leader_dies(store: Store) -> None:
    ttl = 2
    first = LeaderElection(store, "testproc", identity="first", ttl=ttl)
    second = LeaderElection(store, "testproc", identity="second", ttl=ttl)
    first.start()
    assert first.leading.wait(5)
    second.start()
    time.sleep(ttl)
    assert not second.is_leader, "two leaders at once"
    # A crash: the leader stops refreshing its lease but does not revoke it.
    first._stop.set()
    died = time.monotonic()
    assert second.leading.wait(ttl + 3)
    handover = time.monotonic() - died
    assert handover <= ttl + 2, f"handover took {handover:.1f}s"
    second.resign()
    assert store.get("/berth/v1/leases/testproc") is None


def test_resigning_hands_over_at_once(store: Store) -> None:
    first = LeaderElection(store, "quick", identity="first", ttl=10)
    second = LeaderElection(store, "quick", identity="second", ttl=10)
    first.start()
    assert first.leading.wait(5)
    second.start()
    time.sleep(0.5)
    began = time.monotonic()
    first.resign()
    assert second.leading.wait(3)
    assert time.monotonic() - began < 3
    assert not first.is_leader
    second.resign()


def test_resigning_while_a_campaign_wins_leaves_no_lease_behind(store: Store) -> None:
    """resign() between the campaign's create and its bookkeeping: the won lease is revoked
    at once (before, it was left to expire, and a successor waited a whole TTL)."""
    from berth.store import keys

    election = LeaderElection(store, "racy", identity="first", ttl=30)
    create = store.create
    resigned = threading.Event()

    class Racing:  # the store, except that resign() runs inside the winning create
        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        def create(self, key: str, value: bytes, lease: int = 0) -> int:
            revision = create(key, value, lease=lease)
            threading.Thread(target=lambda: (election.resign(), resigned.set())).start()
            time.sleep(0.3)  # resign() has read the lease (none yet) by now
            return revision

    election.store = Racing()  # type: ignore[assignment]
    election.start()
    assert resigned.wait(40)
    deadline = time.monotonic() + 3
    while store.get(keys.lease_key("racy")) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.get(keys.lease_key("racy")) is None
    assert not election.is_leader


def test_health_endpoints_report_checks() -> None:
    ready = threading.Event()
    server = HealthServer()
    server.add_liveness("alive", lambda: True)
    server.add_readiness("synced", ready.is_set)
    server.start()
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert urllib.request.urlopen(base + "/healthz").status == 200
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/readyz")
        assert err.value.code == 503 and b"synced" in err.value.read()
        ready.set()
        assert urllib.request.urlopen(base + "/readyz").status == 200
        body = urllib.request.urlopen(base + "/metrics").read()
        assert b"berth_informer_events_total" in body
    finally:
        server.stop()


class _Meta(msgspec.Struct):
    name: str
    namespace: str | None = None


class _Doc(msgspec.Struct):
    metadata: _Meta


@pytest.mark.parametrize("kind", sorted(keys.KINDS))
def test_the_key_is_the_name_for_every_kind(store: Store, kind: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    """A document at a key whose name (or namespace) is not its own is refused like one
    that does not decode: named once, never an item — so never placed nor propagated.
    The informer is every process's: one check covers every kind each of them reads."""
    k = keys.KINDS[kind]
    ns = "default" if k.namespaced else None

    def doc(name: str, namespace: str | None) -> bytes:
        meta: dict[str, str] = {"name": name}
        if namespace:
            meta["namespace"] = namespace
        return encode({"api": k.api, "kind": kind, "metadata": meta, "spec": {}})

    good = keys.resource_key(kind, "real", ns)
    alias = keys.resource_key(kind, "alias", ns)
    store.create(good, doc("real", ns))
    store.create(alias, doc("real", ns))  # a second copy of "real", written by hand
    wrong_ns = keys.resource_key(kind, "elsewhere", ns)
    store.create(wrong_ns, doc("elsewhere", "other" if k.namespaced else "default"))
    inf = Informer(store, keys.resource_prefix(kind), _Doc, idle_timeout=5)
    events: list[Event[_Doc]] = []
    inf.add_handler(events.append)
    inf.start()
    try:
        assert inf.wait_synced(10)
        assert inf.list_keys() == [good] and [e.key for e in events] == [good]
        said = [r.getMessage() for r in caplog.records if alias in r.getMessage()]
        assert len(said) == 1 and "metadata.name 'real' is not the key's name 'alias'" in said[0]
        assert any(wrong_ns in r.getMessage() and "metadata.namespace" in r.getMessage()
                   for r in caplog.records)
    finally:
        inf.stop()
        for key in (good, alias, wrong_ns):
            store.delete(key)
