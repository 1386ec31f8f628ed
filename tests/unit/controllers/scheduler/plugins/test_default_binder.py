"""DefaultBinder: the bind point's default approves; the scheduler writes the Binding."""

from __future__ import annotations

from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.framework import CycleState, Framework
from berth.controllers.scheduler.plugins import REGISTRY
from berth.controllers.scheduler.plugins.default_binder import DefaultBinder
from berth.store.documents import Target
from berth_testkit.fakes.scheduler import app


def test_it_approves_and_is_the_bind_point_of_the_default_profile() -> None:
    targets = [Target("Cluster", "a", "default")]
    assert DefaultBinder().bind(CycleState(), app(), targets).ok
    framework = Framework(SchedulerConfig(), REGISTRY)
    assert [p.name for p in framework.on.binds] == ["DefaultBinder"]
    assert framework.bind(CycleState(), app(), targets).ok
