"""A labelled metric's children, kept: counting through them counts as labels() does."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter

from berth.controllers.runtime.observe import Labelled


def test_children_are_looked_up_once_and_count_as_labels_does() -> None:
    registry = CollectorRegistry()
    counter = Counter("t_total", "test", ["result"], registry=registry)
    children = Labelled(counter)
    assert children("ok") is children("ok") is counter.labels("ok")
    children("ok").inc()
    children("ok").inc()
    children("failed").inc()
    assert registry.get_sample_value("t_total", {"result": "ok"}) == 2
    assert registry.get_sample_value("t_total", {"result": "failed"}) == 1
