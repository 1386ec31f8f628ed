"""LabelConstraints: Krake's label constraints filter and explain; an expression that
does not parse is a reason, not a crash."""

from __future__ import annotations

from berth.controllers.scheduler.framework import Code
from berth.controllers.scheduler.framework.selection import summary
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate


def test_label_constraints_filter_and_explain() -> None:
    snap = FakeSnapshot([cluster("de", labels={"location": "DE"}),
                         cluster("fr", labels={"location": "FR"}), cluster("nolabel")])
    ev, chosen = evaluate(snap, app(label_constraints=("location is not FR",)))
    assert chosen == ["de"]  # the unlabelled cluster fails "is not" too
    assert summary("Cluster", ev) == (
        "1/3 clusters are available: 2 label constraint 'location != FR'")


def test_an_invalid_expression_is_a_reason_not_a_crash() -> None:
    ev, chosen = evaluate(FakeSnapshot([cluster("a")]), app(label_constraints=("location iz DE",)))
    assert chosen == []
    status = ev.error
    assert status is not None
    assert status.code is Code.UNRESOLVABLE and status.plugin == "LabelConstraints"
    assert "cannot parse 'location iz DE'" in status.reason
