"""Reading YAML input and turning it into validated documents.

Every document of every input is read and checked before anything is
written; all problems are collected, each named by source, document number
(1-based, counted as the YAML stream yields documents) and field:
``apps.yaml#3 spec.constraints.cluster.labels[0]: cannot parse 'location iz DE'``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from berth import yamlfile
from berth.store import Invalid, keys
from berth.store.codec import convert, encode
from berth.store.documents import RESOURCE_TYPES, Resource
from berth.store.documents.validate import problems

YAML_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True, slots=True)
class Loaded:
    """A valid document, where it came from, and the key it belongs at."""

    where: str  # "apps.yaml#3"
    doc: Resource
    key: keys.Key


class LoadErrors(Exception):
    """Every problem found in the input; nothing may be written."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def sources(paths: Iterable[str]) -> Iterator[tuple[str, TextIO | Path]]:
    """Expand files, directories (their YAML files, sorted, recursively) and ``-``."""
    for raw in paths:
        if raw == "-":
            yield "<stdin>", sys.stdin
            continue
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix in YAML_SUFFIXES and p.is_file())
            if not files:
                raise LoadErrors([f"{raw}: no .yaml, .yml or .json files in this directory"])
            for file in files:
                yield str(file), file
        elif path.exists():
            yield raw, path
        else:
            raise LoadErrors([f"{raw}: no such file or directory"])


def read_documents(name: str, source: TextIO | Path) -> Iterator[tuple[str, Any]]:
    """``(where, data)`` for each non-empty document, read within ``berth.yamlfile``'s
    limits (no aliases, bounded size and depth, unique keys); problems raise LoadErrors."""
    try:
        if isinstance(source, Path):
            if source.stat().st_size > yamlfile.MAX_FILE:
                raise LoadErrors([f"{name}: larger than {yamlfile.MAX_FILE >> 20} MiB of "
                                  "text; split it into files"])
            text = source.read_text()
        else:
            text = source.read(yamlfile.MAX_FILE + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise LoadErrors([f"{name}: cannot read: {exc}"]) from None
    try:
        yield from yamlfile.documents(text, name)
    except yamlfile.YamlRefused as exc:
        raise LoadErrors([str(exc)]) from None


# Fields whose contents are somebody else's documents (Kubernetes objects, a
# kubeconfig, TOSCA): passed on exactly as written, nulls included.
_OPAQUE = frozenset({"manifest", "kubeconfig", "tosca", "observer_schema"})


def _defaults_for_nulls(data: Any) -> Any:
    """Krake writes ``labels: null`` and ``metrics: null`` for empty constraints: a
    null means the field's default, so it is left out (berth's own fields too)."""
    if isinstance(data, dict):
        return {k: (v if k in _OPAQUE else _defaults_for_nulls(v))
                for k, v in data.items() if v is not None}
    if isinstance(data, list):
        return [_defaults_for_nulls(v) for v in data]
    return data


def ignored(loaded: Loaded) -> list[str]:
    """What is accepted but has no effect in berth, said when it is loaded."""
    out = []
    if loaded.doc.metadata.inherit_labels is not None:
        out.append(f"{loaded.where} metadata.inherit_labels: accepted for Krake's YAML, but "
                   "berth does not implement it: the cluster keeps only its own labels")
    spec = getattr(loaded.doc, "spec", None)
    if getattr(spec, "inherit_metrics", None) is not None:
        out.append(f"{loaded.where} spec.inherit_metrics: accepted for Krake's YAML, but berth "
                   "does not implement it: the cluster keeps only its own metrics")
    return out


def to_document(where: str, data: Any) -> Loaded:
    """Decode and validate one document; Invalid lists its problems."""
    if not isinstance(data, dict):
        raise Invalid(f"{where}: expected a mapping with api, kind, metadata and spec")
    if "apiVersion" in data and "api" not in data:
        raise Invalid(f"{where} apiVersion: berth's documents say api: (api: kubernetes for "
                      "Clusters and Applications, api: core for metrics and providers), "
                      "not apiVersion")
    kind = data.get("kind")
    if kind not in RESOURCE_TYPES:
        known = ", ".join(sorted(RESOURCE_TYPES))
        raise Invalid(f"{where} kind: {kind!r} is not a kind berth stores (one of {known})")
    info = keys.kind(kind)
    data = _defaults_for_nulls(data)
    metadata = data.get("metadata")
    if info.namespaced and isinstance(metadata, dict) and not metadata.get("namespace"):
        data = {**data, "metadata": {**metadata, "namespace": "default"}}
    doc = convert(data, RESOURCE_TYPES[kind], where)
    found = problems(doc)
    if found:
        raise Invalid("\n".join(f"{where} {p}" for p in found))
    key = keys.resource_key(kind, doc.metadata.name, doc.metadata.namespace)
    return Loaded(where, doc, key)


def load(paths: Iterable[str]) -> list[Loaded]:
    """Every document of every input, validated; LoadErrors lists all problems."""
    loaded: list[Loaded] = []
    errors: list[str] = []
    first_seen: dict[str, str] = {}
    for name, source in sources(paths):
        try:
            docs = list(read_documents(name, source))
        except LoadErrors as exc:
            errors.extend(exc.errors)
            continue
        for where, data in docs:
            try:
                item = to_document(where, data)
            except Invalid as exc:
                errors.extend(str(exc).splitlines())
                continue
            size = len(encode(item.doc))
            if size > yamlfile.MAX_DOCUMENT:
                errors.append(f"{where}: {size:,} bytes stored; etcd takes at most "
                              f"{yamlfile.MAX_DOCUMENT:,} in one request")
                continue
            if item.key in first_seen:
                errors.append(f"{where}: {item.key} is also defined at {first_seen[item.key]}")
                continue
            first_seen[item.key] = where
            loaded.append(item)
    if errors:
        raise LoadErrors(errors)
    return loaded
