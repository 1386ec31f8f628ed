"""CandidateOnline: an offline, deleted or foreign cluster is never chosen (Krake)."""

from __future__ import annotations

from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate


def test_offline_deleted_and_foreign_clusters_are_never_chosen() -> None:
    other_ns = cluster("elsewhere")
    other_ns.ref = type(other_ns.ref)("Cluster", "other", "elsewhere")
    snap = FakeSnapshot([cluster("down", state="OFFLINE"), cluster("new", state=None),
                         cluster("gone", deleted=True), other_ns, cluster("ok")])
    ev, chosen = evaluate(snap, app())
    assert chosen == ["ok"]
    assert {k: s.reason for k, s in ev.rejected.items()} == {
        "Cluster/default/down": "not ONLINE (OFFLINE)",
        "Cluster/default/new": "not ONLINE (no status)",
        "Cluster/default/gone": "deleted",
    }
    assert ev.considered == 4
