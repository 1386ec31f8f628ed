"""The queueing hint for a new metric picture: which unschedulable subjects new values can help."""

from __future__ import annotations

from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.framework import Framework
from berth.controllers.scheduler.plugins import REGISTRY
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate


def test_only_a_subject_new_metric_values_can_help_is_tried_again_on_them() -> None:
    """The queueing hint for a metric picture (Framework.metric_blind): a subject that
    only filters which never read metric values rejected everywhere cannot fit on new
    values; one a metric constraint rejected anywhere can."""
    snap = FakeSnapshot([cluster("a", labels={"location": "DE"}, metrics={"heat": 1.0}),
                         cluster("b", labels={"location": "FR"}, metrics={"heat": 1.0})],
                        values={("a", "heat"): 9.0, ("b", "heat"): 9.0})
    fw = Framework(SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.1})
    labels, _ = evaluate(snap, app(label_constraints=("location is PL",)))
    assert not labels.feasible and fw.metric_blind(labels)
    heat, _ = evaluate(snap, app(metric_constraints=("heat < 4",)))
    assert not heat.feasible and not fw.metric_blind(heat)
    both, _ = evaluate(snap, app(label_constraints=("location is DE",),
                                 metric_constraints=("heat < 4",)))  # b by label, a by heat
    assert not both.feasible and not fw.metric_blind(both)
    fits, chosen = evaluate(snap, app(label_constraints=("location is DE",)))
    assert chosen == ["a"] and not fw.metric_blind(fits)
    assert not fw.metric_blind(None)  # pre-filter refused it: tried again on any change
