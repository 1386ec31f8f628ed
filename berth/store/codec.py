"""JSON encoding of documents, with errors that name the key and the field.

Values are compact JSON (readable with ``etcdctl get``). A value that does
not decode raises :class:`~store.errors.Invalid` naming the key and the path
of the offending field, e.g. ``/berth/v1/clusters/default/a: spec.metrics[0].weight:
Expected `float`, got `str```.

**Decoders are built here, one at a time.** msgspec builds what it knows of a
type (its fields, their types; for ``from __future__ import annotations``
classes by evaluating the annotations, which runs Python code) the first time
a decoder for it is made or ``msgspec.json.decode(..., type=)`` /
``msgspec.convert`` is called, and caches it on the class. Two threads doing
that for the same class at once crash the process (msgspec 0.22, Python
3.11: a half-built cache is used; ``tests/integration/test_decoding_threads.py``
reproduces it in 54 of 60 runs without the lock, 0 with it). So every
decoder in berth comes from :func:`decoder`, which builds each under one
lock, and :func:`convert` builds the type's decoder first; a decoder once
built is safe to use from any thread.
"""

from __future__ import annotations

import copy
import re
import threading
from typing import Any, TypeVar

import msgspec

from berth.store.errors import Invalid

T = TypeVar("T")

_encoder = msgspec.json.Encoder()
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}
_building = threading.Lock()  # msgspec's first look at a type: one thread at a time


def decoder(type_: Any) -> msgspec.json.Decoder[Any]:
    """The JSON decoder of ``type_``: made once, under the lock, then shared."""
    found = _decoders.get(type_)
    if found is None:
        with _building:
            found = _decoders.get(type_)
            if found is None:
                found = _decoders[type_] = msgspec.json.Decoder(type_)
    return found


def typed(data: bytes, type_: type[T]) -> T:
    """``msgspec.json.decode(data, type=type_)``, through :func:`decoder`; msgspec's
    own errors (DecodeError, ValidationError)."""
    return decoder(type_).decode(data)  # type: ignore[no-any-return]


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
    try:
        return decoder(type_).decode(data)  # type: ignore[no-any-return]
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise Invalid(f"{key}: {field_error(exc)}" if key else field_error(exc)) from None


def convert(obj: Any, type_: type[T], where: str = "") -> T:
    """Build ``type_`` from plain Python data (parsed YAML); Invalid on failure,
    naming every field that is wrong (one per line), not only the first."""
    decoder(type_)  # msgspec's view of the type, built under the lock
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
