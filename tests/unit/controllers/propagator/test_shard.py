"""Who should serve a cluster: rendezvous hashing over the live replicas."""

from __future__ import annotations

from collections import Counter

from berth.controllers.propagator.shard import owner

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
