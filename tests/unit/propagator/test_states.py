"""The application state after a reconcile, from what is where."""

from __future__ import annotations

from berth.controllers.propagator.plan import summary as _summary
from berth.store.documents import ClusterApplied, KubeObjectRef

CM = KubeObjectRef("v1", "ConfigMap", "x", "default")


def on(**generations: int) -> dict[str, ClusterApplied]:
    return {f"default/{c}": ClusterApplied(g, [CM]) for c, g in generations.items()}


def test_running_everywhere() -> None:
    s = _summary(["default/a", "default/b"], ["default/a", "default/b"], on(a=2, b=2), {}, 2)
    assert (s.state, s.reason, s.generation) == ("RUNNING", "", 2)
    assert [r.name for r in s.running_on] == ["a", "b"]


def test_moving_is_migrating_until_the_old_cluster_is_empty() -> None:
    s = _summary(["default/b"], ["default/b"], on(a=1, b=1), {}, 1)
    assert (s.state, s.reason) == ("MIGRATING", "removing from default/a")
    s = _summary(["default/b"], [], on(a=1), {"default/b": "unreachable"}, 1)
    assert s.state == "MIGRATING"
    assert s.reason == "waiting to apply on default/b: default/b: unreachable"


def test_partly_applied_or_an_older_generation_is_degraded() -> None:
    s = _summary(["default/a", "default/b"], ["default/a"], on(a=2),
                 {"default/b": "HTTP 503"}, 2)
    assert (s.state, s.errors) == ("DEGRADED", {"default/b": "HTTP 503"})
    s = _summary(["default/a"], [], on(a=1), {"default/a": "down"}, 2)
    assert (s.state, s.generation) == ("DEGRADED", 1)
    assert s.reason.startswith("generation 2 not applied on default/a")


def test_running_nowhere_because_of_errors_is_failed_and_retried() -> None:
    s = _summary(["default/a"], [], {}, {"default/a": "down"}, 1)
    assert s.state == "FAILED" and "retrying" in s.reason and s.running_on == []
