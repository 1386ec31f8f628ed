"""Reading YAML that may be hostile: bounded before it is built, named when refused.

``berth apply``, ``bootstrap`` and the other commands that read YAML (a
configuration file, a kubeconfig) read it here. Before a single Python object
is built, libyaml's event stream (C, fast) is checked against the limits;
only then is the document constructed, with duplicate keys refused. The limits
are what a document costs, as kubectl bounds it, not how long the file is:

* **aliases** (``*name``) are accepted, as kubectl accepts them, and counted
  as what they expand to: a document's values, aliases expanded, at most
  :data:`MAX_NODES` (100,000), its nesting, aliases expanded, at most
  :data:`MAX_DEPTH` (64) levels. So a "billion laughs" (a handful of bytes
  that expand to gigabytes) is refused at the alias that crosses the bound,
  and an alias of an anchor still open (a structure that contains itself) is
  refused outright;
* **size**: a document at most :data:`MAX_DOCUMENT` — etcd's own limit for one
  request (1.5 MiB, its ``--max-request-bytes`` default), so a document etcd
  would refuse is refused here, naming it; all the documents of one input at
  most :data:`MAX_TOTAL` values (5,000,000), and a file at most
  :data:`MAX_FILE` (256 MiB) of text;
* **duplicate keys**: YAML says a mapping's keys are unique, PyYAML keeps the
  last silently; both lines are named.

Every refusal names the file, the document (``apps.yaml#3``) and the line.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

MAX_FILE = 256 << 20  # text read into memory at once
MAX_DOCUMENT = 1536 << 10  # 1.5 MiB: etcd's --max-request-bytes default
MAX_DEPTH = 64
MAX_NODES = 100_000  # values of one document, aliases expanded
MAX_TOTAL = 5_000_000  # values of every document of one input

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


class _Frame:
    """An open mapping or sequence: its anchor, its values so far (aliases expanded) and
    the deepest level below it."""

    __slots__ = ("anchor", "depth", "nodes")

    def __init__(self, anchor: str | None) -> None:
        self.anchor = anchor
        self.nodes = 1
        self.depth = 1


def _check(text: str, name: str) -> None:
    """Walk the event stream: each document's values and depth with aliases expanded,
    its size, and the input's values in all."""
    index = nodes = total = 0
    began = 0
    stack: list[_Frame] = []
    sizes: dict[str, tuple[int, int]] = {}  # anchor → (values, depth) it expands to

    def add(count: int, depth: int, line: int) -> None:
        nonlocal nodes, total
        nodes += count
        total += count
        for level, frame in enumerate(reversed(stack)):
            frame.nodes += count
            frame.depth = max(frame.depth, depth + level + 1)
        if len(stack) + depth > MAX_DEPTH:
            raise YamlRefused(f"{name}#{index} (line {line}): nested more than {MAX_DEPTH} "
                              "levels deep" + (" (aliases expanded)" if depth > 1 else ""))
        if nodes > MAX_NODES:
            raise YamlRefused(f"{name}#{index} (line {line}): more than {MAX_NODES:,} values "
                              "in one document (aliases expanded)")
        if total > MAX_TOTAL:
            raise YamlRefused(f"{name}#{index} (line {line}): more than {MAX_TOTAL:,} values "
                              "in one input; split it")

    try:
        for event in yaml.parse(text, Loader=_Loader):
            line = _line(getattr(event, "start_mark", None))
            if isinstance(event, yaml.DocumentStartEvent):
                index += 1
                nodes = 0
                sizes = {}
                began = _at(event.start_mark)
            elif isinstance(event, yaml.DocumentEndEvent):
                size = len(text[began:_at(event.end_mark)].encode())
                if size > MAX_DOCUMENT:
                    raise YamlRefused(f"{name}#{index}: {size:,} bytes; a document may have "
                                      f"at most {MAX_DOCUMENT:,} (etcd's request limit)")
            elif isinstance(event, yaml.AliasEvent):
                anchor = str(event.anchor)
                if any(frame.anchor == anchor for frame in stack):
                    raise YamlRefused(f"{name}#{index} (line {line}): alias *{anchor} inside "
                                      f"&{anchor} itself: a value cannot contain itself")
                count, depth = sizes.get(anchor, (1, 0))
                add(count, depth, line)
            elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                add(1, 1, line)
                stack.append(_Frame(event.anchor))
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                frame = stack.pop()
                if frame.anchor is not None:
                    sizes[frame.anchor] = (frame.nodes, frame.depth)
            elif isinstance(event, yaml.ScalarEvent):
                add(1, 0, line)
                if event.anchor is not None:
                    sizes[event.anchor] = (1, 0)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}#{max(index, 1)}" + (f" (line {mark.line + 1})" if mark else "")
        problem = getattr(exc, "problem", None) or str(exc)
        raise YamlRefused(f"{where}: invalid YAML: {problem}") from None


def documents(text: str, name: str) -> Iterator[tuple[str, Any]]:
    """``(where, data)`` for each non-empty document of ``text`` (read from ``name``);
    YamlRefused names the first problem."""
    if len(text) > MAX_FILE or len(text.encode()) > MAX_FILE:
        raise YamlRefused(f"{name}: larger than {MAX_FILE >> 20} MiB of text; split it into "
                          "files")
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
