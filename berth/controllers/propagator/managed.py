"""Which of an object's fields are berth's: its field manager's entry, made an apply's.

berth makes an object it read as absent in a way the API server refuses when a
namesake exists (``kube.Connection.create``) — a server-side apply without a
precondition would merge into one someone made since the read wherever their
fields do not clash. Where that takes a create (POST: an API server that takes
no resourceVersion on creation), the creation records its fields under
berth's field manager as an *Update*, and fields an Update owns outlive the
manifest: a later apply that drops one leaves it on the object. :func:`claim`
turns that entry into berth's *Apply* entry, as a migration from client-side
apply is done (the fields the same, the operation told apart), so that every
later apply owns, and may drop, exactly what berth made. An object left with
the Update entry (its creator stopped between the two calls) is claimed at
berth's next apply of it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from berth.store.codec import typed


class _Entry(msgspec.Struct):
    manager: str = ""
    operation: str = ""
    subresource: str = ""


class _Meta(msgspec.Struct):
    managedFields: list[_Entry] | None = None


class _Object(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


def _updated_by(manager: str, entries: list[_Entry] | None) -> bool:
    return any(e.manager == manager and e.operation == "Update" and not e.subresource
               for e in entries or [])


def claim(raw: bytes, manager: str) -> bytes | None:
    """A JSON patch of the object ``raw`` (as the API server answered it) that makes
    ``manager``'s Update entry its Apply entry, guarded by the object's
    resourceVersion; None if there is no such entry (or the object does not decode).

    An Apply entry of the manager already there (an apply after a creation whose
    claim was lost) takes the Update entry's fields too, where both name one
    apiVersion; where they do not, the entries are left as they are."""
    try:
        if not _updated_by(manager, typed(raw, _Object).metadata.managedFields):
            return None
        obj = msgspec.json.decode(raw)
        meta = obj["metadata"]
        entries: list[dict[str, Any]] = list(meta["managedFields"])
        version = str(meta["resourceVersion"])
    except (msgspec.DecodeError, KeyError, TypeError):
        return None

    def mine(e: dict[str, Any], operation: str) -> bool:
        return bool(e.get("manager") == manager and e.get("operation") == operation
                    and not e.get("subresource"))

    update = next(e for e in entries if mine(e, "Update"))
    applied = next((e for e in entries if mine(e, "Apply")), None)
    if applied is None:
        claimed = [({**e, "operation": "Apply"} if e is update else e) for e in entries]
    elif applied.get("apiVersion") == update.get("apiVersion"):
        both = {**applied, "fieldsV1": _union(applied.get("fieldsV1") or {},
                                              update.get("fieldsV1") or {})}
        claimed = [both if e is applied else e for e in entries if e is not update]
    else:
        return None
    return msgspec.json.encode([
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "replace", "path": "/metadata/managedFields", "value": claimed}])


def _union(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two field sets (``fieldsV1``: a tree of dicts) as one."""
    out = dict(a)
    for key, value in b.items():
        mine = out.get(key)
        out[key] = (_union(mine, value) if isinstance(mine, dict) and isinstance(value, dict)
                    else value)
    return out


__all__ = ["claim"]
