"""TaintToleration: NoSchedule and NoExecute taints reject a cluster unless tolerated;
PreferNoSchedule steers away without rejecting (Kubernetes' taints, Fleet's placement)."""

from __future__ import annotations

import pytest

from berth.store.documents import Taint, Toleration
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate


@pytest.mark.parametrize(
    ("effect", "tolerations", "fits"),
    [
        ("NoSchedule", [], False),
        ("NoExecute", [], False),
        ("NoSchedule", [Toleration(key="gpu", operator="Exists")], True),
        ("NoSchedule", [Toleration(key="gpu", value="yes")], True),
        ("NoSchedule", [Toleration(key="gpu", value="no")], False),
        ("NoSchedule", [Toleration(key="gpu", operator="Exists", effect="NoExecute")], False),
        ("NoExecute", [Toleration(operator="Exists")], True),
    ],
)
def test_taints_and_tolerations(effect: str, tolerations: list[Toleration], fits: bool) -> None:
    snap = FakeSnapshot([cluster("t", taints=(Taint("gpu", effect, "yes"),))])  # type: ignore[arg-type]
    assert evaluate(snap, app(tolerations=tuple(tolerations)))[1] == (["t"] if fits else [])


def test_prefer_no_schedule_steers_away_without_rejecting() -> None:
    tainted = cluster("tainted", taints=(Taint("maint", "PreferNoSchedule"),))
    snap = FakeSnapshot([tainted, cluster("clean")])
    ev, chosen = evaluate(snap, app())
    assert chosen == ["clean"] and len(ev.ranked) == 2
    only = FakeSnapshot([cluster("tainted", taints=(Taint("maint", "PreferNoSchedule"),))])
    assert evaluate(only, app())[1] == ["tainted"]
