"""ClusterAffinity: required terms filter, preferred ones rank (Crossplane's workload
scheduler, Fleet's placement)."""

from __future__ import annotations

import msgspec
import pytest

from berth.store.documents import Affinity, Placement
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate


def affinity(required: list[dict[str, object]] | None = None,
             preferred: list[dict[str, object]] | None = None) -> Affinity:
    body: dict[str, object] = {}
    if required is not None:
        body["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "clusterSelectorTerms": required}
    if preferred is not None:
        body["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return msgspec.convert({"clusterAffinity": body}, Affinity)


FLEET = FakeSnapshot([
    cluster("aws-1", labels={"provider": "aws", "cpus": "8"}),
    cluster("gcp-1", labels={"provider": "gcp", "cpus": "32"}),
    cluster("bare", labels={}),
])


@pytest.mark.parametrize(
    ("terms", "names"),
    [
        ([{"matchExpressions": [{"key": "provider", "operator": "In", "values": ["aws"]}]}],
         {"aws-1"}),
        ([{"matchExpressions": [{"key": "provider", "operator": "NotIn", "values": ["aws"]}]}],
         {"gcp-1", "bare"}),
        ([{"matchExpressions": [{"key": "provider", "operator": "Exists"}]}], {"aws-1", "gcp-1"}),
        ([{"matchExpressions": [{"key": "provider", "operator": "DoesNotExist"}]}], {"bare"}),
        ([{"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["16"]}]}],
         {"gcp-1"}),
        ([{"matchExpressions": [{"key": "cpus", "operator": "Lt", "values": ["16"]}]}],
         {"aws-1"}),
        ([{"matchLabels": {"provider": "gcp"}},
          {"matchExpressions": [{"key": "provider", "operator": "DoesNotExist"}]}],
         {"gcp-1", "bare"}),  # terms are ORed
    ],
)
def test_required_cluster_affinity(terms: list[dict[str, object]], names: set[str]) -> None:
    ev, _ = evaluate(FLEET, app(affinity=affinity(required=terms),
                                placement=Placement(policy="PickAll")))
    assert {r.candidate.ref.name for r in ev.ranked} == names


def test_preferred_cluster_affinity_ranks() -> None:
    pref = [{"weight": 1, "preference": {"matchLabels": {"provider": "aws"}}},
            {"weight": 3, "preference": {"matchExpressions": [
                {"key": "cpus", "operator": "Gt", "values": ["16"]}]}}]
    ev, chosen = evaluate(FLEET, app(affinity=affinity(preferred=pref)))
    assert chosen == ["gcp-1"]
    assert {r.candidate.ref.name: r.score for r in ev.ranked} == pytest.approx(
        {"gcp-1": 0.75, "aws-1": 0.25, "bare": 0.0})
