"""ClusterSelector: a cluster must carry every label of ``clusterSelector``."""

from __future__ import annotations

from berth_testkit.fakes.scheduler import app, evaluate
from tests.unit.controllers.scheduler.plugins.test_cluster_affinity import FLEET


def test_cluster_selector() -> None:
    assert evaluate(FLEET, app(cluster_selector={"provider": "aws"}))[1] == ["aws-1"]
