"""What a framework is built from (the Kubernetes scheduler's profile): the plugins
enabled per extension point, each with a weight and arguments, and the extenders.

The scheduler's configuration (``config.SchedulerConfig``) is one: the framework
reads it through :class:`Profile` and knows nothing else of it. An extender is a
plugin like the others, made by the registry's :data:`EXTENDER` entry from its
:class:`ExtenderSpec` and its position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import msgspec

EXTENDER = "Extender"  # the registry's entry that makes an extender's plugin


class PluginSpec(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    name: str
    weight: float = 1.0
    args: dict[str, Any] = {}


class ExtenderSpec(msgspec.Struct, forbid_unknown_fields=True, rename="camel",
                   omit_defaults=True):
    """An out-of-process plugin over HTTP JSON (the Kubernetes scheduler and its
    framework)."""

    url: str
    filter_verb: str | None = None
    prioritize_verb: str | None = None
    bind_verb: str | None = None
    weight: float = 1.0
    timeout: float = 5.0
    ignorable: bool = False


class Profile(Protocol):
    """The plugins per extension point (in order), the extenders, and the share of
    feasible candidates scored."""

    @property
    def plugins(self) -> Mapping[str, Sequence[PluginSpec]]: ...

    @property
    def extenders(self) -> Sequence[ExtenderSpec]: ...

    @property
    def percentage_of_clusters_to_score(self) -> float: ...


__all__ = ["EXTENDER", "ExtenderSpec", "PluginSpec", "Profile"]
