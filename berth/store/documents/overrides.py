"""Overrides: what one cluster's copy of an application changes from its manifest.

An ``Override`` (namespaced: it selects applications of its namespace) or a
``GlobalOverride`` (any namespace) selects applications (by name, by labels,
or all) and clusters (by name, by a label selector, or all), and carries an
ordered list of rules, each of one kind:

- ``image``: the registry, repository, tag or digest of every container and
  initContainer of the manifest's pod templates (each part replaceable
  alone; ``container`` narrows it to one name);
- ``command`` / ``args``: replaced or appended to, per container;
- ``env``: variables set or removed, per container;
- ``labels`` / ``annotations``: set (added or replaced) or removed, on every
  object of the manifest;
- ``patch``: RFC 6902 JSON patch operations on one named object.

Values may name the cluster: ``${cluster.name}``, ``${cluster.namespace}``
and ``${cluster.labels.<key>}``; a label the cluster does not have fails that
cluster's copy, naming the label. The propagator renders each cluster's copy
when it applies it (``berth.controllers.propagator.overrides``).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from berth.store.documents.base import CamelStrict, Metadata, Strict
from berth.store.documents.selection import ClusterChoice


class ApplicationSelector(CamelStrict):
    """Applications by name, or by labels (every one must match); neither: all."""

    names: list[str] = []
    match_labels: dict[str, str] = {}


class ImageRule(Strict):
    container: str | None = None  # None: every container and initContainer
    registry: str | None = None
    repository: str | None = None
    tag: str | None = None
    digest: str | None = None


class ListRule(Strict):
    """``command`` or ``args`` of a container: replaced, or appended to."""

    container: str | None = None
    replace: list[str] | None = None
    append: list[str] = []


class EnvRule(Strict):
    container: str | None = None
    set: dict[str, str] = {}
    remove: list[str] = []


class MetaRule(Strict):
    """``labels`` or ``annotations`` of every object: set (added or replaced) or removed."""

    set: dict[str, str] = {}
    remove: list[str] = []


class PatchTarget(CamelStrict):
    kind: str
    name: str
    api_version: str | None = None


class PatchOperation(Strict):
    op: Literal["add", "remove", "replace", "move", "copy", "test"]
    path: str
    value: Any = None
    from_: str | None = msgspec.field(default=None, name="from")


class PatchRule(Strict):
    object: PatchTarget
    operations: list[PatchOperation]


class OverrideRule(Strict):
    """One rule: exactly one of its kinds (validate.py says which are set)."""

    name: str | None = None  # for explanations: "rule 2" otherwise
    image: ImageRule | None = None
    command: ListRule | None = None
    args: ListRule | None = None
    env: EnvRule | None = None
    labels: MetaRule | None = None
    annotations: MetaRule | None = None
    patch: PatchRule | None = None


class OverrideSpec(CamelStrict):
    applications: ApplicationSelector = msgspec.field(default_factory=ApplicationSelector)
    clusters: ClusterChoice = msgspec.field(default_factory=ClusterChoice)
    rules: list[OverrideRule] = []


class Override(Strict, tag_field="kind", tag="Override"):
    metadata: Metadata
    spec: OverrideSpec
    api: str = "core"
    status: dict[str, Any] | None = None


class GlobalOverride(Override, tag="GlobalOverride"):
    pass


RULE_KINDS = ("image", "command", "args", "env", "labels", "annotations", "patch")
