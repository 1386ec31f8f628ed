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
