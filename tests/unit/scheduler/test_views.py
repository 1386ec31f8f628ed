"""Applications as the scheduler keeps them: what repeats across a fleet is held once."""

from __future__ import annotations

import msgspec

from berth.controllers.scheduler.framework import Subject
from berth.controllers.scheduler.views import AppView, subject_from_application


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
