"""Reading YAML that may be hostile: bounded before it is built, named when refused.

``berth apply``, ``bootstrap`` and the other commands that read YAML (a
configuration file, a kubeconfig) read it here. Before a single Python object
is built, libyaml's event stream (C, fast) is checked against the limits;
only then is the document constructed, with duplicate keys refused:

* **no aliases** (``*name``): a handful of bytes can expand to gigabytes (the
  "billion laughs"), and nothing berth reads needs them;
* **nesting** at most :data:`MAX_DEPTH` (64) levels: deeper YAML is no real
  manifest, and building it recurses;
* **size**: a file at most :data:`MAX_FILE` (16 MiB) and a document at most
  :data:`MAX_DOCUMENT` — etcd's own limit for one request (1.5 MiB, its
  ``--max-request-bytes`` default), so a document etcd would refuse is refused
  here, naming it; at most :data:`MAX_NODES` (100,000) values per document;
* **duplicate keys**: YAML says a mapping's keys are unique, PyYAML keeps the
  last silently; both lines are named.

Every refusal names the file, the document (``apps.yaml#3``) and the line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

MAX_FILE = 16 << 20
MAX_DOCUMENT = 1536 << 10  # 1.5 MiB: etcd's --max-request-bytes default
MAX_DEPTH = 64
MAX_NODES = 100_000

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present


class YamlRefused(ValueError):
    """The input is not read: the message names where and why."""


class _Unique(_Loader):  # type: ignore[misc]
    """The safe loader, refusing a key that a mapping already has."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the constructor says so
                continue
            if first is not None:
                raise YamlRefused(f"line {line}: duplicate key {key!r} (first at line {first})")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


_Unique.add_constructor("tag:yaml.org,2002:map", _Unique.construct_yaml_map)


def _line(mark: Any) -> int:
    return int(getattr(mark, "line", -1)) + 1


def _at(mark: Any) -> int:
    return int(getattr(mark, "index", 0))


def _check(text: str, name: str) -> None:
    """Walk the event stream: aliases, depth, each document's size and values."""
    index = depth = nodes = 0
    began = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.DocumentStartEvent):
                index += 1
                nodes = 0
                began = _at(event.start_mark)
            elif isinstance(event, yaml.DocumentEndEvent):
                size = len(text[began:_at(event.end_mark)].encode())
                if size > MAX_DOCUMENT:
                    raise YamlRefused(f"{name}#{index}: {size:,} bytes; a document may have "
                                      f"at most {MAX_DOCUMENT:,} (etcd's request limit)")
            elif isinstance(event, yaml.AliasEvent):
                raise YamlRefused(f"{name}#{index} (line {_line(event.start_mark)}): alias "
                                  f"*{event.anchor}: aliases are not accepted (one can expand "
                                  "to gigabytes); write the value out")
            elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                depth += 1
                nodes += 1
                if depth > MAX_DEPTH:
                    raise YamlRefused(f"{name}#{index} (line {_line(event.start_mark)}): "
                                      f"nested more than {MAX_DEPTH} levels deep")
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                depth -= 1
            elif isinstance(event, yaml.ScalarEvent):
                nodes += 1
            if nodes > MAX_NODES:
                raise YamlRefused(f"{name}#{index}: more than {MAX_NODES:,} values in one "
                                  "document")
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}#{max(index, 1)}" + (f" (line {mark.line + 1})" if mark else "")
        problem = getattr(exc, "problem", None) or str(exc)
        raise YamlRefused(f"{where}: invalid YAML: {problem}") from None


def documents(text: str, name: str) -> Iterator[tuple[str, Any]]:
    """``(where, data)`` for each non-empty document of ``text`` (read from ``name``);
    YamlRefused names the first problem."""
    if len(text) > MAX_FILE or len(text.encode()) > MAX_FILE:
        raise YamlRefused(f"{name}: larger than {MAX_FILE >> 20} MiB; split it into files")
    _check(text, name)
    index = 0
    try:
        for index, data in enumerate(yaml.load_all(text, Loader=_Unique), start=1):
            if data is not None:
                yield f"{name}#{index}", data
    except YamlRefused as exc:
        raise YamlRefused(f"{name}#{index + 1} {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}#{index + 1}" + (f" (line {mark.line + 1})" if mark else "")
        problem = getattr(exc, "problem", None) or str(exc)
        raise YamlRefused(f"{where}: invalid YAML: {problem}") from None


def one(text: str, name: str) -> Any:
    """The single document of a file (a configuration, a kubeconfig); None if empty."""
    found = list(documents(text, name))
    if len(found) > 1:
        raise YamlRefused(f"{name}: {len(found)} documents; expected one")
    return found[0][1] if found else None
