"""JSON encoding of documents, with errors that name the key and the field.

Values are compact JSON (readable with ``etcdctl get``). A value that does
not decode raises :class:`~store.errors.Invalid` naming the key and the path
of the offending field, e.g. ``/berth/v1/clusters/default/a: spec.metrics[0].weight:
Expected `float`, got `str```.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from store.errors import Invalid

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
    """Build ``type_`` from plain Python data (parsed YAML); Invalid on failure."""
    try:
        return msgspec.convert(obj, type_)
    except msgspec.ValidationError as exc:
        raise Invalid(f"{where} {field_error(exc)}".strip()) from None


def to_builtins(doc: Any) -> Any:
    return msgspec.to_builtins(doc)
