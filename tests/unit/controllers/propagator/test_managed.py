"""managed.claim: a creation's Update entry made berth's Apply entry (the real-server twin:
tests/integration/test_kube_http.py, a creation claims its fields as an apply)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from berth.controllers.propagator.managed import claim

pytestmark = pytest.mark.unit


def entry(manager: str, operation: str, fields: dict[str, Any], *, version: str = "v1",
          subresource: str = "") -> dict[str, Any]:
    out = {"manager": manager, "operation": operation, "apiVersion": version,
           "fieldsType": "FieldsV1", "fieldsV1": fields}
    return out | ({"subresource": subresource} if subresource else {})


def raw(*entries: dict[str, Any]) -> bytes:
    return msgspec.json.encode({"metadata": {"name": "x", "resourceVersion": "42",
                                             "managedFields": list(entries)}})


def ops(patch: bytes | None) -> list[dict[str, Any]]:
    assert patch is not None
    return list(msgspec.json.decode(patch))


def test_a_creation_becomes_berths_apply_guarded_by_its_version() -> None:
    theirs = entry("kube-controller-manager", "Update", {"f:status": {}}, subresource="status")
    made = entry("berth", "Update", {"f:data": {"f:a": {}}})
    test, replace = ops(claim(raw(made, theirs), "berth"))
    assert test == {"op": "test", "path": "/metadata/resourceVersion", "value": "42"}
    assert replace["path"] == "/metadata/managedFields"
    assert replace["value"] == [{**made, "operation": "Apply"}, theirs]  # theirs as it was


def test_an_apply_entry_there_takes_the_creations_fields_too() -> None:
    applied = entry("berth", "Apply", {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {}}})
    made = entry("berth", "Update", {"f:data": {"f:b": {}}})
    _, replace = ops(claim(raw(applied, made), "berth"))
    assert replace["value"] == [entry("berth", "Apply", {
        "f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {}}})]
    # of another apiVersion the paths may differ: left as they are
    assert claim(raw(applied, entry("berth", "Update", {}, version="v2")), "berth") is None


def test_nothing_to_claim() -> None:
    assert claim(raw(entry("berth", "Apply", {})), "berth") is None
    assert claim(raw(entry("someone", "Update", {})), "berth") is None
    assert claim(raw(entry("berth", "Update", {}, subresource="status")), "berth") is None
    assert claim(raw(), "berth") is None
    for garbage in (b"", b"[]", b'{"metadata": {"managedFields": "no"}}',
                    b'{"metadata": {"managedFields": [{"manager": "berth", '
                    b'"operation": "Update"}]}}'):  # no resourceVersion
        assert claim(garbage, "berth") is None
