"""kubectl's ``-o jsonpath=…`` and ``-o custom-columns=…``, over berth's documents.

The template language is kubectl's subset people use: literal text with
``{…}`` expressions — a path of ``.field`` steps (``.metadata.name``,
``.spec.manifest[0].kind``, ``['berth.dev/x']`` for keys with dots), ``[*]``
for every element, ``[N]`` (negative from the end), ``{range PATH}…{end}``
repeating its body for every element, and string literals (``{"\\n"}``,
``{"\\t"}``). Several values of one expression are joined by a space, as
kubectl does. What kubectl also offers but berth does not — filters
(``[?(@.x=="y")]``), slices, recursive descent (``..``) — is refused with a
clear error rather than misread.
"""

from __future__ import annotations

import json
import re
from typing import Any

_STEP = re.compile(r"""\.([A-Za-z0-9_-]+)|\[(\*|-?\d+)\]|\[['"]([^'"]+)['"]\]""")


class TemplateError(ValueError):
    """A template berth cannot read; the message names the part."""


def _path(text: str) -> list[str | int | None]:
    """``.a.b[0][*]['x.y']`` as steps: a key, an index, or None for every element."""
    text = text.strip()
    if text in ("", "."):
        return []
    if text.startswith("..") or "[?(" in text or re.search(r"\[-?\d*:", text):
        raise TemplateError(f"{text!r}: filters, slices and '..' are not supported")
    if not text.startswith((".", "[")):
        text = "." + text
    steps: list[str | int | None] = []
    at = 0
    while at < len(text):
        m = _STEP.match(text, at)
        if m is None:
            raise TemplateError(f"{text!r}: cannot read from {text[at:]!r}")
        if m.group(1) is not None:
            steps.append(m.group(1))
        elif m.group(2) is not None:
            steps.append(None if m.group(2) == "*" else int(m.group(2)))
        else:
            steps.append(m.group(3))
        at = m.end()
    return steps


def values(data: Any, path: str) -> list[Any]:
    """Every value ``path`` selects in ``data`` (none when a step finds nothing)."""
    found = [data]
    for step in _path(path):
        out: list[Any] = []
        for v in found:
            if step is None:
                out += list(v.values()) if isinstance(v, dict) else list(v) if isinstance(
                    v, list) else []
            elif isinstance(step, int):
                if isinstance(v, list) and -len(v) <= step < len(v):
                    out.append(v[step])
            elif isinstance(v, dict) and step in v:
                out.append(v[step])
        found = out
    return found


def text_of(v: Any) -> str:
    """A value as kubectl prints it: strings bare, the rest as JSON."""
    if isinstance(v, str):
        return v
    return json.dumps(v, default=str)


_TOKEN = re.compile(r"\{([^{}]*)\}")


def _tokens(template: str) -> list[tuple[str, str]]:
    """(``text``, literal) and (``expr``, inside braces) in order."""
    out: list[tuple[str, str]] = []
    at = 0
    for m in _TOKEN.finditer(template):
        if m.start() > at:
            out.append(("text", template[at:m.start()]))
        out.append(("expr", m.group(1).strip()))
        at = m.end()
    if at < len(template):
        out.append(("text", template[at:]))
    if any("{" in t or "}" in t for kind, t in out if kind == "text"):
        raise TemplateError(f"{template!r}: unbalanced braces")
    return out


def render(template: str, data: Any) -> str:
    """``template`` (kubectl's jsonpath) applied to ``data``."""
    out, rest = _render(_tokens(template), data)
    if rest:
        raise TemplateError(f"{template!r}: {{end}} without {{range}}")
    return out


def _render(tokens: list[tuple[str, str]], data: Any) -> tuple[str, list[tuple[str, str]]]:
    """The text up to an ``{end}`` (or the last token), and the tokens from that end on."""
    out: list[str] = []
    while tokens:
        (kind, token), tokens = tokens[0], tokens[1:]
        if kind == "text":
            out.append(token)
        elif token == "end":
            return "".join(out), [("expr", "end"), *tokens]
        elif token.startswith("range "):
            items = values(data, token.removeprefix("range "))
            rest: list[tuple[str, str]] = []
            for item in items or [None]:  # the body is read once even when empty
                text, rest = _render(tokens, item)
                if items:
                    out.append(text)
            if not rest:
                raise TemplateError(f"{{{token}}} without {{end}}")
            tokens = rest[1:]
        elif token.startswith(("\"", "'")):
            try:
                out.append(json.loads(token if token.startswith("\"") else
                                      "\"" + token[1:-1] + "\"", strict=False))
            except json.JSONDecodeError as exc:
                raise TemplateError(f"{{{token}}}: not a string literal") from exc
        else:
            out.append(" ".join(text_of(v) for v in values(data, token)))
    return "".join(out), []


def custom_columns(spec: str) -> list[tuple[str, str]]:
    """``NAME:.metadata.name,STATE:.status.state`` as (title, path) pairs."""
    columns = []
    for part in spec.split(","):
        title, colon, path = part.partition(":")
        if not colon or not title.strip():
            raise TemplateError(f"custom-columns: {part!r} is not TITLE:PATH")
        _path(path.strip().removeprefix("{").removesuffix("}"))  # refused now, not per row
        columns.append((title.strip(), path.strip().removeprefix("{").removesuffix("}")))
    return columns


def cell(data: Any, path: str) -> str:
    """One custom column's cell: ``<none>`` when the path finds nothing (kubectl's)."""
    found = values(data, path)
    return ",".join(text_of(v) for v in found) if found else "<none>"
