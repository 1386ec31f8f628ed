"""What every berth document shares: ``api``, ``kind``, ``metadata``.

Documents are msgspec Structs. The full types in this package are what users
write (bootstrap validates against them, unknown fields are refused so a typo
is an error rather than a silently ignored setting). A process that reads only
a few fields declares its own small Struct and decodes with that: msgspec
skips the rest without building it, so a large manifest costs it nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec


class Strict(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Base of the user-facing types: unknown fields are errors."""


class CamelStrict(Strict, rename="camel"):
    """User-facing types spelled in the Kubernetes style (``clusterSelector``)."""


class Metadata(Strict):
    """Identity and bookkeeping of a resource (docs/architecture.md "Store contract")."""

    name: str
    namespace: str | None = None
    uid: str | None = None
    labels: dict[str, str] = {}
    created: datetime | None = None
    modified: datetime | None = None
    generation: int = 0
    finalizers: list[str] = []
    deleted: datetime | None = None
    # Krake's own metadata fields, accepted so its YAML loads unchanged.
    owners: list[Any] | None = None
    inherit_labels: bool | None = None


class ObjectRef(msgspec.Struct, omit_defaults=True):
    """A reference to another resource: kind, namespace (if namespaced), name."""

    kind: str
    name: str
    namespace: str | None = None

    def __str__(self) -> str:
        return (
            f"{self.kind} {self.namespace}/{self.name}"
            if self.namespace
            else (f"{self.kind} {self.name}")
        )


class Header(msgspec.Struct):
    """The smallest view of any document: enough to route it by kind."""

    kind: str
    metadata: NameOnly
    api: str = ""


class NameOnly(msgspec.Struct):
    name: str
    namespace: str | None = None
    deleted: datetime | None = None
    generation: int = 0
