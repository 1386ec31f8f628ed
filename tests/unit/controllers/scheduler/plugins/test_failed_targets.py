"""FailedTargets: a cluster the application failed on is avoided for the backoff."""

from __future__ import annotations

import msgspec
import pytest

from berth.controllers.scheduler.config import load_config
from berth.controllers.scheduler.framework import CycleState
from berth_testkit.fakes.scheduler import app, evaluate, ranked_fleet, rejected_both_ways


def test_a_cluster_the_application_failed_on_is_avoided_for_the_backoff() -> None:
    import time

    snap = ranked_fleet()
    subject = app()
    snap.failures["app"] = {"Cluster/default/c0": time.time() - 60}  # a minute ago
    ev, chosen = evaluate(snap, subject)
    assert chosen == ["c1"]
    why = [status.reason for status, bits in ev.rejections
           if "c0" in [c.ref.name for c in ev.fleet.select(bits)]]
    assert len(why) == 1 and why[0].startswith("could not become available here in time")
    config = load_config(None)
    config.plugins["filter"] = [p if p.name != "FailedTargets" else msgspec.structs.replace(
        p, args={"backoff": 30}) for p in config.plugins["filter"]]
    config.plugins["preFilter"] = [p if p.name != "FailedTargets" else msgspec.structs.replace(
        p, args={"backoff": 30}) for p in config.plugins["preFilter"]]
    assert evaluate(snap, subject, config)[1] == ["c0"]  # the backoff is over


def test_failed_targets_has_a_set_form_that_agrees() -> None:
    import time

    from berth.controllers.scheduler.plugins.failed_targets import FailedTargets

    snap = ranked_fleet()
    subject = app()
    snap.failures["app"] = {"Cluster/default/c2": time.time(), "Cluster/default/gone": 0.0}
    plugin, state = FailedTargets(), CycleState()
    assert plugin.pre_filter(state, subject, snap).ok
    assert rejected_both_ways(plugin, subject, snap, state) == (["c2"], ["c2"])
    with pytest.raises(ValueError, match="backoff"):
        FailedTargets({"backoff": "soon"})
