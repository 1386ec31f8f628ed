"""An Export's API in memory, for the exporter's target tests: the calls
:class:`berth.controllers.exporter.api.Api` makes, with resource versions and the
conflicts a real API server answers (a replace or delete at a version no longer
there), and a journal of every write."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from berth.controllers.exporter.api import Conflict, Refused
from berth.controllers.exporter.shapes import Ref


@dataclass
class FakeApi:
    objects: dict[Ref, dict[str, Any]] = field(default_factory=dict)
    served_kinds: set[tuple[str, str]] = field(default_factory=set)  # beyond v1 configmaps
    journal: list[tuple[str, str]] = field(default_factory=list)  # (verb, plural/name)
    version: int = 100

    def _next(self) -> str:
        self.version += 1
        return str(self.version)

    def ensure_namespace(self) -> None:
        pass

    def served(self, api_version: str, plural: str) -> bool:
        return (api_version, plural) in self.served_kinds

    def install(self, crd: dict[str, Any], wait: float = 30.0) -> None:
        self.journal.append(("install", crd["metadata"]["name"]))

    def list(self, api_version: str, plural: str, selector: str) -> list[dict[str, Any]]:
        wanted = dict(term.split("=", 1) for term in selector.split(",") if term)
        return [copy.deepcopy(o) for r, o in self.objects.items()
                if (r.api_version, r.plural) == (api_version, plural)
                and all((o["metadata"].get("labels") or {}).get(k) == v
                        for k, v in wanted.items())]

    def get(self, ref: Ref) -> dict[str, Any] | None:
        obj = self.objects.get(ref)
        return copy.deepcopy(obj) if obj is not None else None

    def create(self, ref: Ref, body: dict[str, Any]) -> dict[str, Any]:
        if ref in self.objects:
            raise Conflict(f"{ref.plural}/{ref.name} already exists")
        obj = copy.deepcopy(body)
        obj.pop("status", None)  # a subresource: written apart
        obj["metadata"]["resourceVersion"] = self._next()
        self.objects[ref] = obj
        self.journal.append(("create", f"{ref.plural}/{ref.name}"))
        return copy.deepcopy(obj)

    def replace(self, ref: Ref, body: dict[str, Any], status: bool = False
                ) -> dict[str, Any]:
        have = self.objects.get(ref)
        if have is None:
            raise Refused(404, f"{ref.plural}/{ref.name} not found")
        if body["metadata"].get("resourceVersion") != have["metadata"]["resourceVersion"]:
            raise Conflict(f"{ref.plural}/{ref.name}: the object has been modified")
        if status:
            obj = copy.deepcopy(have)
            obj["status"] = copy.deepcopy(body.get("status"))
        else:
            obj = copy.deepcopy(body)
            if "status" in have:
                obj["status"] = have["status"]
        obj["metadata"]["resourceVersion"] = self._next()
        self.objects[ref] = obj
        self.journal.append(("status" if status else "replace", f"{ref.plural}/{ref.name}"))
        return copy.deepcopy(obj)

    def delete(self, ref: Ref, resource_version: str) -> None:
        have = self.objects.get(ref)
        if have is None:
            return
        if have["metadata"]["resourceVersion"] != resource_version:
            raise Conflict(f"{ref.plural}/{ref.name}: the object has been modified")
        del self.objects[ref]
        self.journal.append(("delete", f"{ref.plural}/{ref.name}"))

    def touch(self, ref: Ref, **annotations: str) -> None:
        """Someone else changes the object (a new version; ``annotations`` added)."""
        obj = self.objects[ref]
        obj["metadata"].setdefault("annotations", {}).update(annotations)
        obj["metadata"]["resourceVersion"] = self._next()

    def close(self) -> None:
        pass
