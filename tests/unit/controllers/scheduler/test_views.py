"""Documents as the scheduler keeps them: what repeats across a fleet is held once, and
what it does not read is not held at all."""

from __future__ import annotations

import sys

import msgspec
import pytest

from berth.controllers.scheduler.framework import Subject
from berth.controllers.scheduler.subjects import (
    ValueView,
    compact_binding,
    compact_cluster,
    compact_value,
    subject_from_application,
)
from berth.controllers.scheduler.views import AppView, BindingView, ClusterView
from berth.store.documents.metrics import MetricPicture, MetricValue


def _subject(name: str, replicas: int = 3) -> Subject:
    doc = (b'{"metadata": {"name": "%s", "namespace": "default", "labels": {"team": "data-'
           b'platform-eu"}}, "spec": {"constraints": {"cluster": {"labels": ["location in '
           b'(DE, FR, NL)"], "metrics": ["price-DE < 7.5"]}}, "placement": {"policy": '
           b'"PickN", "numberOfClusters": 2}, "affinity": {"clusterAffinity": {'
           b'"requiredDuringSchedulingIgnoredDuringExecution": {"clusterSelectorTerms": [{'
           b'"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}]}}}, '
           b'"manifest": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": '
           b'"%s"}, "spec": {"replicas": %d, "template": {"spec": {"containers": [{"name": "c", '
           b'"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}}}]}}'
           % (name.encode(), name.encode(), replicas))
    return subject_from_application(f"/berth/v1/applications/default/{name}",
                                    msgspec.json.decode(doc, type=AppView))


def test_what_applications_repeat_is_held_once() -> None:
    """Labels, constraints, demand, placement and affinity decoded apart, equal: one object
    each, shared (memory at 100,000 applications); what differs is not."""
    a, b, other = _subject("a"), _subject("b"), _subject("c", replicas=4)
    assert a.labels == b.labels == {"team": "data-platform-eu"}
    assert a.labels is b.labels
    assert a.label_constraints[0] is b.label_constraints[0]
    assert a.metric_constraints[0] is b.metric_constraints[0]
    assert a.demand is b.demand and a.demand.per_replica.cpu == 500
    assert a.placement is b.placement and a.placement.number_of_clusters == 2
    assert a.affinity is b.affinity and a.affinity is not None
    assert other.demand == a.demand.__class__(4, a.demand.per_replica, a.demand.fixed,
                                              a.demand.per_replica.times(4))
    assert other.demand is not a.demand
    assert a.binding_key == "/berth/v1/bindings/applications/default/a"
    bare = subject_from_application("/berth/v1/applications/default/c", msgspec.json.decode(
        b'{"metadata": {"name": "c"}}', type=AppView))
    assert dict(bare.labels) == {}


def _binding(name: str, cluster: str, score: float, scheduled: str) -> BindingView:
    doc = (b'{"metadata": {"name": "%s", "namespace": "default", "created": '
           b'"2026-11-25T10:00:00Z"}, "spec": {"resource": {"kind": "Application", "name": '
           b'"%s", "namespace": "default"}, "generation": 2, "targets": [{"kind": "Cluster", '
           b'"name": "%s", "namespace": "default", "score": %f}], "scheduled": "%s"}, '
           b'"status": {"state": "Scheduled", "reason": "the best of 3"}}'
           % (name.encode(), name.encode(), cluster.encode(), score, scheduled.encode()))
    return compact_binding(f"/berth/v1/bindings/applications/default/{name}",
                           msgspec.json.decode(doc, type=BindingView))


def test_bindings_on_one_cluster_share_their_target() -> None:
    a = _binding("a", "fr-1", 0.7, "2026-11-25T10:00:00Z")
    b = _binding("b", "fr-1", 0.4, "2026-11-25T11:00:00Z")
    c = _binding("c", "de-1", 0.7, "2026-11-25T10:00:00Z")
    assert a.spec.targets[0] is b.spec.targets[0]  # the score it was chosen with: dropped
    assert (a.spec.targets[0].kind, a.spec.targets[0].name, a.spec.targets[0].namespace,
            a.spec.targets[0].replicas) == ("Cluster", "fr-1", "default", None)
    assert c.spec.targets[0] is not a.spec.targets[0]
    assert a.spec.scheduled is a.metadata.created  # equal: one object
    assert b.spec.scheduled is not None and b.spec.scheduled.hour == 11
    assert a.metadata.name is a.spec.resource.name is _subject("a").ref.name
    assert a.spec.generation == 2 and a.status.reason == ""


def test_a_binding_keeps_its_decision() -> None:
    """What the next write carries on (docs/ledger.md); the times of its moves an
    earlier version kept in a Binding are read past."""
    doc = (b'{"metadata": {"name": "a", "namespace": "default"}, "spec": {"resource": '
           b'{"kind": "Application", "name": "a", "namespace": "default"}, "generation": 1, '
           b'"targets": [], "decision": "20261125T100000.000000Z", "moved": '
           b'["2026-11-25T10:00:00Z"]}}')
    kept = compact_binding("/berth/v1/bindings/applications/default/a",
                           msgspec.json.decode(doc, type=BindingView))
    assert kept.spec.decision == "20261125T100000.000000Z"


@pytest.mark.parametrize(("kubeconfig", "has"), [
    (b'{"apiVersion": "v1", "users": [{"user": {"client-key-data": "%s"}}]}' % (b"k" * 65536),
     True),
    (b"null", False), (b"{}", False)])
def test_a_cluster_keeps_whether_it_has_a_kubeconfig_and_not_its_document(
        kubeconfig: bytes, has: bool) -> None:
    """A Raw field is a view into the whole document it was decoded from: kept, it would
    keep every cluster's document (certificates and all) in the scheduler's memory."""
    doc = (b'{"metadata": {"name": "fr-1", "namespace": "default", "labels": {"location": '
           b'"FR"}}, "spec": {"kubeconfig": %s, "metrics": [{"name": "price", "weight": 1}]}}'
           % kubeconfig)
    held = sys.getrefcount(doc)
    decoded = msgspec.json.decode(doc, type=ClusterView)
    assert sys.getrefcount(doc) > held  # the decoded view holds the document
    kept = compact_cluster("/berth/v1/clusters/default/fr-1", decoded)
    del decoded
    assert sys.getrefcount(doc) == held  # what is kept does not
    assert kept.existing is has
    assert kept.metadata.labels == {"location": "FR"}
    assert [m.name for m in kept.spec.metrics] == ["price"]
    other = compact_cluster("/berth/v1/clusters/default/fr-1", msgspec.json.decode(
        doc, type=ClusterView))  # another cluster's labels and metrics: held once
    assert other.metadata.labels["location"] is kept.metadata.labels["location"]
    assert other.spec.metrics[0] is kept.spec.metrics[0]


def test_a_metric_value_keeps_what_the_scheduler_reads_of_it() -> None:
    """A metric value is kept as its value, error and forecast: not its metadata, its
    provider or when it was observed (about a tenth of the decoded document)."""
    decoder = msgspec.json.Decoder(MetricValue | MetricPicture)
    doc = decoder.decode(
        b'{"kind": "MetricValue", "metadata": {"name": "price", "labels": {"a": "b"}, '
        b'"finalizers": ["x"]}, "status": {"value": 7.5, "normalized": 0.75, "observed": '
        b'"2026-11-26T01:00:00Z", "provider": {"name": "prom", "type": "prometheus"}, '
        b'"error": {"reason": "STALE", "message": "kept"}, "forecast": [["2026-11-26T02:00:00Z",'
        b' 6.0]]}}')
    kept = compact_value("/berth/v1/metricvalues/price", doc)
    assert isinstance(kept, ValueView) and kept.value == 7.5
    assert kept.error is not None and kept.error.reason == "STALE"
    assert [p.value for p in kept.forecast] == [6.0]
    bare = compact_value("/berth/v1/metricvalues/price", decoder.decode(
        b'{"kind": "MetricValue", "metadata": {"name": "price"}, "status": {"value": 1}}'))
    assert isinstance(bare, ValueView) and bare.forecast == () and bare.error is None
    picture = decoder.decode(b'{"kind": "MetricPicture", "complete": true, "generation": 3}')
    assert compact_value("/berth/v1/metricvalues/picture", picture) is picture
    with pytest.raises(msgspec.ValidationError):  # still decoded whole: a bad one is refused
        decoder.decode(b'{"kind": "MetricValue", "metadata": {}, "status": {"value": 1}}')
