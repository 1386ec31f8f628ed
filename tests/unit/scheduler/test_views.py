"""Documents as the scheduler keeps them: what repeats across a fleet is held once, and
what it does not read is not held at all."""

from __future__ import annotations

import sys

import msgspec
import pytest

from berth.controllers.scheduler.framework import Subject
from berth.controllers.scheduler.views import (
    AppView,
    ClusterView,
    compact_cluster,
    subject_from_application,
)


def _subject(name: str) -> Subject:
    doc = (b'{"metadata": {"name": "%s", "namespace": "default", "labels": {"team": "data-'
           b'platform-eu"}}, "spec": {"constraints": {"cluster": {"labels": ["location in '
           b'(DE, FR, NL)"], "metrics": ["price-DE < 7.5"]}}}}' % name.encode())
    return subject_from_application(f"/berth/v1/applications/default/{name}",
                                    msgspec.json.decode(doc, type=AppView))


def test_labels_and_constraints_decoded_apart_are_held_once() -> None:
    a, b = _subject("a"), _subject("b")
    assert a.labels == b.labels == {"team": "data-platform-eu"}
    assert a.labels["team"] is b.labels["team"]
    assert a.label_constraints[0] is b.label_constraints[0]
    assert a.metric_constraints[0] is b.metric_constraints[0]
    bare = subject_from_application("/berth/v1/applications/default/c", msgspec.json.decode(
        b'{"metadata": {"name": "c"}}', type=AppView))
    assert dict(bare.labels) == {}


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
    assert kept.has_kubeconfig is has
    assert kept.metadata.labels == {"location": "FR"}
    assert [m.name for m in kept.spec.metrics] == ["price"]
