"""The book of what clusters showed keeps an object's spec and status, not the buffer
they were decoded from."""

from __future__ import annotations

import sys

import msgspec

from berth.controllers.propagator.kube import KubeObject
from berth.controllers.propagator.objects import Book, observed
from berth.store.documents import KubeObjectRef


def test_what_the_book_keeps_does_not_hold_the_list_it_came_from() -> None:
    """A LIST's answer (or a watch event, managed fields and all) decoded into Raw fields
    stays in memory while any of them does; the book copies the bytes it judges by."""
    items = [b'{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d%d", '
             b'"generation": 2, "managedFields": [{"manager": "%s"}]}, "spec": {"replicas": '
             b'%d}, "status": {"readyReplicas": %d}}' % (i, b"m" * 4096, i, i)
             for i in range(3)]
    body = b'{"items": [%s]}' % b", ".join(items)
    held = sys.getrefcount(body)
    decoded = msgspec.json.decode(body, type=dict[str, list[KubeObject]])["items"]
    assert sys.getrefcount(body) > held  # the decoded objects hold the whole answer
    book = Book()
    for i, obj in enumerate(decoded):
        book.put("c1", KubeObjectRef("apps/v1", "Deployment", f"d{i}", "default"), obj)
    del decoded, obj
    assert sys.getrefcount(body) == held  # what the book keeps does not
    seen = book.get("c1", KubeObjectRef("apps/v1", "Deployment", "d2", "default"))
    assert seen is not None and seen.generation == 2
    assert msgspec.json.decode(seen.spec) == {"replicas": 2}
    assert msgspec.json.decode(seen.status) == {"readyReplicas": 2}
    assert observed(KubeObject()).spec == msgspec.Raw(b"{}")


def _deployment(version: str, observed_generation: int, uid: str = "u1") -> KubeObject:
    return msgspec.json.decode(msgspec.json.encode({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "generation": 2,
                     "resourceVersion": version, "uid": uid,
                     "annotations": {"berth.dev/application": "default/web"}},
        "spec": {"replicas": 2},
        "status": {"observedGeneration": observed_generation}}), type=KubeObject)


def test_an_apply_answer_a_watch_overtook_does_not_take_the_book_back() -> None:
    """The fault table, 2026-11-30: the watch showed the Deployment as its controller
    had updated it (resourceVersion 12) before the apply's own answer (11) was put in
    the book, which then held the answer for good — 'generation 2 not yet observed by
    its controller' for minutes, since no event came after. An answer older than what
    the watch showed is not kept; what the watch shows always is (an API server back
    with an empty store counts its versions from the start again)."""
    ref = KubeObjectRef("apps/v1", "Deployment", "web", "default")
    changed: list[str] = []
    book = Book(lambda cid, owner: changed.append(owner))
    book.put("c1", ref, _deployment("11", 1))  # the apply's own event, on the watch
    book.put("c1", ref, _deployment("12", 2))  # the controller's status
    book.put("c1", ref, _deployment("11", 1), answer=True)  # the apply's answer, late
    seen = book.get("c1", ref)
    assert seen is not None and msgspec.json.decode(seen.status) == {"observedGeneration": 2}
    assert changed == ["default/web", "default/web"]  # an answer tells nobody
    # the cluster's API server back with an empty store: versions start again, and the
    # object made anew has another uid: its answer is kept, though smaller by number
    book.put("c1", ref, _deployment("5", 1, uid="u2"), answer=True)
    seen = book.get("c1", ref)
    assert seen is not None and msgspec.json.decode(seen.status) == {"observedGeneration": 1}
    book.put("c1", ref, _deployment("6", 2, uid="u2"))  # the watch shows it
    seen = book.get("c1", ref)
    assert seen is not None and msgspec.json.decode(seen.status) == {"observedGeneration": 2}
    book.put("c1", ref, _deployment("", 1), answer=True)  # no version to compare: kept
    seen = book.get("c1", ref)
    assert seen is not None and msgspec.json.decode(seen.status) == {"observedGeneration": 1}
