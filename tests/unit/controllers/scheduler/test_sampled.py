"""Time per plugin and extension point, by status (berth_scheduler_plugin_duration_seconds),
measured on one attempt in ten: set forms and one-at-a-time forms alike."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.decide import Decision, decide
from berth.controllers.scheduler.framework import Framework
from berth.controllers.scheduler.framework.sampled import SAMPLE
from berth.controllers.scheduler.plugins import REGISTRY as PLUGINS
from berth.store.documents import Reachability
from berth_testkit.fakes.scheduler import app, cluster, ranked_fleet

METRIC = "berth_scheduler_plugin_duration_seconds_count"


def count(plugin: str, point: str, status: str) -> float:
    return REGISTRY.get_sample_value(METRIC, {"plugin": plugin, "point": point,
                                              "status": status}) or 0.0


@pytest.mark.parametrize("reference", [False, True], ids=["set forms", "one at a time"])
def test_one_attempt_in_ten_is_timed_per_plugin_and_point(reference: bool) -> None:
    fw = Framework(SchedulerConfig(), PLUGINS, reference=reference)
    snap = ranked_fleet()
    snap.clusters.append(cluster("down", state=Reachability.OFFLINE))
    before = [count("CandidateOnline", "filter", "Unschedulable"),
              count("CandidateOnline", "filter", "Success"),
              count("DefaultBinder", "bind", "Success")]
    measured = 0
    for i in range(2 * SAMPLE):
        subject = app(f"a{i}", labels={"i": str(i)})  # no two alike: no memo between them
        out = decide(fw, subject, snap, [])
        assert isinstance(out, Decision)
        if fw.sampled.on:
            measured += 1
            assert fw.bind(out.state, subject, out.targets).ok
    after = [count("CandidateOnline", "filter", "Unschedulable"),
             count("CandidateOnline", "filter", "Success"),
             count("DefaultBinder", "bind", "Success")]
    assert measured == 2
    # it rejected the OFFLINE cluster at each measured attempt, and bound twice
    assert [a - b for a, b in zip(after, before, strict=True)] == [2, 0, 2]
