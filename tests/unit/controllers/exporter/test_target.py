"""An Export's target over its API in memory (testkit's FakeApi): a sync writes only
what differs, a change made there since is a conflict read again (never overwritten),
an object a later term wrote ends the sync, no write goes out once the term may be
over, and an object handed from one source to another is never deleted. The same on a
real API server: tests/integration/test_exporter.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from berth.controllers.exporter.shapes import (
    APPLICATION_ANNOTATION,
    EXPORT_LABEL,
    MANAGED_BY,
    SIG_VERSION,
    TERM_ANNOTATION,
    Ref,
    Wanted,
)
from berth.controllers.exporter.target import Superseded, Target
from berth.store.documents.export import ExportSpec, Shape
from berth_testkit.fakes.exporter import FakeApi

KUBECONFIG: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Config", "current-context": "hub",
    "clusters": [{"name": "hub", "cluster": {"server": "https://127.0.0.1:9"}}],
    "contexts": [{"name": "hub", "context": {"cluster": "hub", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": "t"}}]}
PLURAL = "placementdecisions"


def decision(app: str, *clusters: str, name: str = "") -> Wanted:
    ref = Ref(SIG_VERSION, PLURAL, name or app)
    body = {"metadata": {"name": ref.name,
                         "labels": {MANAGED_BY: "berth", EXPORT_LABEL: "hub"},
                         "annotations": {APPLICATION_ANNOTATION: f"default/{app}"}}}
    return Wanted(ref, "PlacementDecision", body,
                  {"decisions": [{"clusterName": c} for c in clusters]},
                  source=f"app:default/{app}")


@pytest.fixture
def api() -> FakeApi:
    return FakeApi(served_kinds={(SIG_VERSION, PLURAL), (SIG_VERSION, "clusterprofiles")})


@pytest.fixture
def holding() -> list[bool]:
    return [True]


@pytest.fixture
def target(api: FakeApi, holding: list[bool]) -> Iterator[Target]:
    t = Target("hub", ExportSpec(KUBECONFIG, shapes=[Shape.PLACEMENT_DECISION]), KUBECONFIG,
               term=7, holds=lambda: holding[0], timeout=5.0, workers=1)
    t.api.close()
    t.api = api  # type: ignore[assignment]
    t.prepare()
    yield t
    t.close()


def test_a_sync_writes_what_differs_and_nothing_else(target: Target, api: FakeApi) -> None:
    out = target.sync({"app:default/web": [decision("web", "paris")]})
    assert (out.written, out.deleted) == (1, 0)
    assert api.journal == [("create", f"{PLURAL}/web"), ("status", f"{PLURAL}/web")]
    obj = api.objects[Ref(SIG_VERSION, PLURAL, "web")]
    assert obj["metadata"]["annotations"][TERM_ANNOTATION] == "7"
    assert obj["status"] == {"decisions": [{"clusterName": "paris"}]}
    api.journal.clear()
    assert target.sync({"app:default/web": [decision("web", "paris")]}).written == 0
    assert api.journal == []  # unchanged: no request
    target.sync({"app:default/web": [decision("web", "dresden")]})
    assert api.journal == [("status", f"{PLURAL}/web")]  # only the status changed
    api.journal.clear()
    out = target.sync({"app:default/web": []})
    assert (out.deleted, api.journal) == (1, [("delete", f"{PLURAL}/web")])


def test_a_change_made_there_since_is_read_again_never_overwritten(target: Target,
                                                                   api: FakeApi) -> None:
    target.sync({"app:default/web": [decision("web", "paris")]})
    ref = Ref(SIG_VERSION, PLURAL, "web")
    api.touch(ref, note="by hand")
    api.journal.clear()
    changed = decision("web", "paris")
    changed.body["metadata"]["labels"]["tier"] = "gold"
    out = target.sync({"app:default/web": [changed]})
    assert out.retry == {"app:default/web"} and api.journal == []  # refused at its version
    out = target.sync({"app:default/web": [changed]})  # read again: written over it
    assert out.retry == set() and api.journal == [("replace", f"{PLURAL}/web")]
    assert api.objects[ref]["metadata"]["labels"]["tier"] == "gold"


def test_an_object_a_later_term_wrote_ends_the_sync(target: Target, api: FakeApi) -> None:
    target.sync({"app:default/web": [decision("web", "paris")]})
    ref = Ref(SIG_VERSION, PLURAL, "web")
    api.touch(ref, **{TERM_ANNOTATION: "8"})
    with pytest.raises(Superseded, match="written by term 8"):
        target.sync({"app:default/web": [decision("web", "dresden")]})


def test_no_write_goes_out_once_the_term_may_be_over(target: Target, api: FakeApi,
                                                     holding: list[bool]) -> None:
    holding[0] = False
    with pytest.raises(Superseded):
        target.sync({"app:default/web": [decision("web", "paris")]})
    assert api.journal == []


def test_an_object_handed_to_another_source_is_never_deleted(target: Target,
                                                             api: FakeApi) -> None:
    target.sync({"app:default/a": [decision("a", "paris", name="shared")]})
    api.journal.clear()
    target.sync({"app:default/a": [], "app:default/b": [decision("b", "dresden",
                                                                 name="shared")]})
    assert ("delete", f"{PLURAL}/shared") not in api.journal
    assert api.objects[Ref(SIG_VERSION, PLURAL, "shared")]["status"] == {
        "decisions": [{"clusterName": "dresden"}]}
    assert target.sources() == {"app:default/b"}


def test_what_it_owns_is_listed_when_it_starts(api: FakeApi, target: Target,
                                               holding: list[bool]) -> None:
    target.sync({"app:default/web": [decision("web", "paris")]})
    again = Target("hub", target.spec, KUBECONFIG, term=8, holds=lambda: True, timeout=5.0,
                   workers=1)
    again.api.close()
    again.api = api  # type: ignore[assignment]
    again.prepare()  # a new leader: what is there, listed once
    try:
        assert again.sources() == {"app:default/web"}
        api.journal.clear()
        assert again.sync({"app:default/web": [decision("web", "paris")]}).written == 0
        assert api.journal == []
    finally:
        again.close()
