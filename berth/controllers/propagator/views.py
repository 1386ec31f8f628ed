"""The fields of users' documents the propagator reads; msgspec skips the rest."""

from __future__ import annotations

from typing import Any

import msgspec


class _Meta(msgspec.Struct):
    name: str
    namespace: str | None = None
    generation: int = 0
    deleted: Any = None
    finalizers: list[str] = []


class _ClusterSpec(msgspec.Struct):
    kubeconfig: dict[str, Any] | None = None


class ClusterView(msgspec.Struct):
    metadata: _Meta
    spec: _ClusterSpec = msgspec.field(default_factory=_ClusterSpec)


class _AppSpec(msgspec.Struct):
    manifest: list[Any] = []


class AppView(msgspec.Struct):
    metadata: _Meta
    spec: _AppSpec = msgspec.field(default_factory=_AppSpec)
