"""CustomResources: every custom resource the application needs must be served (Krake)."""

from __future__ import annotations

from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate


def test_custom_resources_must_all_be_served() -> None:
    snap = FakeSnapshot([cluster("a", custom_resources=frozenset({"crontabs.stable.example.com"})),
                         cluster("b")])
    assert evaluate(snap, app(custom_resources=("crontabs.stable.example.com",)))[1] == ["a"]
