"""Loading a process's YAML configuration over its defaults, with clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import msgspec
import yaml

from berth import yamlfile
from berth.store.codec import decoder, field_error

T = TypeVar("T")


def load_yaml(path: str | None, type_: type[T]) -> T:
    """``type_`` from the YAML file at ``path`` (defaults when None); ValueError names the field."""
    decoder(type_)  # msgspec's view of the type, built under the store's lock
    if path is None:
        return msgspec.convert({}, type_)
    try:
        data: Any = yamlfile.one(Path(path).read_text(), path) or {}
    except (OSError, UnicodeDecodeError, yamlfile.YamlRefused) as exc:
        raise ValueError(f"{path}: {exc}" if isinstance(exc, OSError | UnicodeDecodeError)
                         else str(exc)) from None
    try:
        return msgspec.convert(data, type_)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{path}: {field_error(exc)}") from None


def dump_yaml(config: Any) -> str:
    return yaml.safe_dump(msgspec.to_builtins(config), sort_keys=False)
