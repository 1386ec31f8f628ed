"""JSON encoding of documents, with errors that name the key and the field.

Values are compact JSON (readable with ``etcdctl get``). A value that does
not decode raises :class:`~store.errors.Invalid` naming the key and the path
of the offending field, e.g. ``/berth/v1/clusters/default/a: spec.metrics[0].weight:
Expected `float`, got `str```.
"""

from __future__ import annotations

import copy
import re
from typing import Any, TypeVar

import msgspec

from berth.store.errors import Invalid

T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def encode(doc: Any) -> bytes:
    """A document (Struct, dict, ...) as compact JSON bytes."""
    return _encoder.encode(doc)


def field_error(exc: msgspec.ValidationError | msgspec.DecodeError) -> str:
    """msgspec's message as ``field.path: message`` (no ``$.`` prefix)."""
    text = str(exc)
    message, sep, path = text.rpartition(" - at `")
    if not sep:
        return text.replace("`", "'")
    path = path.rstrip("`").removeprefix("$").removeprefix(".")
    return f"{path or '(document)'}: {message.replace('`', chr(39))}"


def decode(data: bytes, type_: type[T], key: str = "") -> T:
    """Decode ``data`` as ``type_``; Invalid names ``key`` and the field on failure."""
    decoder = _decoders.get(type_)
    if decoder is None:
        decoder = _decoders[type_] = msgspec.json.Decoder(type_)
    try:
        return decoder.decode(data)  # type: ignore[no-any-return]
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise Invalid(f"{key}: {field_error(exc)}" if key else field_error(exc)) from None


def convert(obj: Any, type_: type[T], where: str = "") -> T:
    """Build ``type_`` from plain Python data (parsed YAML); Invalid on failure,
    naming every field that is wrong (one per line), not only the first."""
    try:
        return msgspec.convert(obj, type_)
    except msgspec.ValidationError as exc:
        found = [field_error(exc), *_more_errors(obj, type_, exc)]
        raise Invalid("\n".join(f"{where} {e}".strip() for e in found)) from None


_UNKNOWN = re.compile(r"Object contains unknown field `(.+)`")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _more_errors(obj: Any, type_: type[Any], exc: msgspec.ValidationError,
                 limit: int = 50) -> list[str]:
    """msgspec stops at the first error: take the wrong field out of a copy and try
    again, for as long as taking it out leaves something to check."""
    data = copy.deepcopy(obj)
    found: list[str] = []
    for _ in range(limit):
        message, _, path = str(exc).rpartition(" - at `")
        steps: list[str | int] = [int(i) if i else k for k, i in
                                  _STEP.findall(path.rstrip("`").removeprefix("$"))]
        unknown = _UNKNOWN.match(message)
        if unknown:
            steps.append(unknown.group(1))
        while steps and isinstance(steps[-1], int):  # a list's element: the whole list
            steps.pop()
        if not steps or not _drop(data, steps) or message.startswith("Object missing"):
            return found
        try:
            msgspec.convert(data, type_)
            return found
        except msgspec.ValidationError as again:
            if str(again).startswith(f"Object missing required field `{steps[-1]}`"):
                return found  # what we took out was required: its error is said
            exc = again
            found.append(field_error(again))
    return found


def _drop(data: Any, steps: list[str | int]) -> bool:
    """Remove the field at ``steps`` (dict keys only) from ``data``; False if not there."""
    for step in steps[:-1]:
        try:
            data = data[step]
        except (KeyError, IndexError, TypeError):
            return False
    last = steps[-1]
    if isinstance(data, dict) and isinstance(last, str) and last in data:
        del data[last]
        return True
    return False


def to_builtins(doc: Any) -> Any:
    return msgspec.to_builtins(doc)
