"""Who should serve a cluster: rendezvous hashing over the live replicas."""

from __future__ import annotations

from collections import Counter

from berth.controllers.propagator.shard import Shard, owner
from berth_testkit.memory import MemoryStore

CLUSTERS = [f"default/c{i:03d}" for i in range(1000)]


def test_every_replica_computes_the_same_owner_and_the_shares_are_even() -> None:
    members = ["vm-1", "vm-2", "vm-3", "vm-4"]
    owners = {c: owner(c, members) for c in CLUSTERS}
    assert owners == {c: owner(c, list(reversed(members))) for c in CLUSTERS}
    counts = Counter(owners.values())
    assert set(counts) == set(members) and min(counts.values()) > 200  # 250 each, roughly
    assert owner("default/x", []) is None


def test_a_replica_joining_takes_only_its_share_and_one_leaving_gives_only_its_own() -> None:
    three = ["vm-1", "vm-2", "vm-3"]
    before = {c: owner(c, three) for c in CLUSTERS}
    joined = {c: owner(c, [*three, "vm-4"]) for c in CLUSTERS}
    moved = [c for c in CLUSTERS if before[c] != joined[c]]
    assert all(joined[c] == "vm-4" for c in moved) and 200 < len(moved) < 300
    left = {c: owner(c, ["vm-1", "vm-3"]) for c in CLUSTERS}
    assert all(left[c] == before[c] for c in CLUSTERS if before[c] != "vm-2")


def test_a_member_leaving_or_coming_back_is_told_once_per_change() -> None:
    """A replica's key gone (its lease revoked, as when it registers anew) and back:
    ``on_members`` each time the live members change, not for a claim's change."""
    store = MemoryStore()
    told: list[list[str]] = []
    one = Shard(store, "vm-1", ttl=10, clusters=lambda: ["default/a"], on_gain=lambda _c: None,
                on_lose=lambda _c: None, on_members=lambda: told.append(one.members()))
    one.leases.sync()
    one._register()
    one.leases.sync()
    assert told == [["vm-1"]] and one.mine("x")
    one.rebalance()  # it claims default/a: no member changed
    one.leases.sync()
    assert told == [["vm-1"]]
    store.revoke(one._lease)  # its key goes with its lease: nobody's home
    one.leases.sync()
    assert told[-1] == [] and not one.mine("x")
    one._lease = 0
    one._register()
    one.leases.sync()
    assert told == [["vm-1"], [], ["vm-1"]] and one.mine("x")
