"""A profile's plugins, made and bound once: the frozen value the runner runs.

:func:`enable` makes each plugin a profile names (one instance per plugin,
whatever points enable it, with its arguments from every entry that names it),
checks that it implements each point it is enabled at, and binds it to the
Protocols of :mod:`plugin` it declares as its bases (:func:`check_declarations`):
each point's plugins in order, and each optional form (a set form, a batch, a
tier, a description for the explanation) by plugin name. Nothing is discovered
later: the runner calls a plugin only through the Protocol it was bound as here,
and asks no plugin what it can do during an attempt.
"""

# The Protocols of :mod:`plugin` are passed as the types a plugin is bound as; mypy
# takes a Protocol for an abstract class there (python/mypy#4717).
# mypy: disable-error-code="type-abstract"

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from berth.controllers.scheduler.framework import plugin as points
from berth.controllers.scheduler.framework.plugin import Plugin
from berth.controllers.scheduler.framework.profile import EXTENDER, Profile

Registry = Mapping[str, Callable[..., Plugin]]

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Enabled:
    """Each extension point's plugins (in the profile's order, score plugins with their
    weights), and each optional form by the name of the plugin offering it."""

    instances: Mapping[str, Plugin]
    queue_sort: points.QueueSort | None
    pre_filters: tuple[points.PreFilter, ...]
    filters: tuple[points.Filter, ...]  # one candidate at a time (or in a set form)
    batch_filters: tuple[points.FilterAll, ...]  # every candidate left in one call, after
    post_filters: tuple[points.PostFilter, ...]
    scores: tuple[tuple[points.Score, float], ...]
    reserves: tuple[points.Reserve, ...]
    permits: tuple[points.Permit, ...]
    pre_binds: tuple[points.PreBind, ...]
    binds: tuple[points.Bind, ...]
    post_binds: tuple[points.PostBind, ...]
    filter_sets: Mapping[str, points.FilterSet]
    # A scorer's base must not depend on the candidates that survive (no normalize),
    # and only base scorers may rank by tier.
    score_bases: Mapping[str, points.ScoreBase]
    score_sets: Mapping[str, points.ScoreSet]
    score_values: Mapping[str, points.ScoreValues]
    score_alls: Mapping[str, points.ScoreAll]
    normalizers: Mapping[str, points.Normalize]
    tiers: Mapping[str, points.Tier]
    adjusters: Mapping[str, points.Adjust]
    selectors: tuple[points.Selects, ...]  # filter plugins that also fill a selection
    describers: tuple[points.Describe, ...]
    rejecters: tuple[points.Reject, ...]  # permit plugins told when a wait is given up
    # Plugins whose filter new metric values alone cannot change (see
    # Plugin.reads_metric_values).
    metric_blind: frozenset[str]


def _plugin_args(profile: Profile) -> dict[str, dict[str, Any]]:
    """Each plugin's arguments, from every entry that names it: one instance serves
    all its extension points (Kubernetes' pluginConfig is per plugin, too), so
    arguments given on the score entry count as much as on the filter's; the same
    argument given two different values is refused, naming both entries."""
    out: dict[str, dict[str, Any]] = {}
    given: dict[tuple[str, str], str] = {}  # (plugin, argument) → the entry that gave it
    for point, specs in profile.plugins.items():
        for spec in specs:
            merged = out.setdefault(spec.name, {})
            for key, value in spec.args.items():
                if key in merged and merged[key] != value:
                    raise ValueError(
                        f"plugins: {spec.name} argument {key!r} is {merged[key]!r} in "
                        f"plugins.{given[spec.name, key]} and {value!r} in plugins.{point}: "
                        "one plugin has one set of arguments")
                merged[key] = value
                given.setdefault((spec.name, key), point)
    return out


def _takes(factory: Callable[..., Plugin]) -> frozenset[str]:
    """The arguments a registry entry's plugin takes (none for a factory that is not a
    Plugin class)."""
    return factory.takes() if isinstance(factory, type) and issubclass(factory, Plugin) else (
        frozenset())


# The extension points and their forms (the Protocols the plugin module defines), each
# with the methods it is called by; and what every plugin has from its base.
_POINTS: dict[type, frozenset[str]] = {
    proto: frozenset(attr for attr in vars(proto) if not attr.startswith("_")
                     and callable(vars(proto)[attr]))
    for proto in vars(points).values()
    if isinstance(proto, type) and getattr(proto, "_is_protocol", False)
    and proto.__module__ == points.__name__ and proto is not points.Named}
_POINT_METHODS = frozenset(m for methods in _POINTS.values() for m in methods)
_BASE = frozenset(attr for attr in dir(Plugin) if not attr.startswith("_"))


def check_declarations(name: str, cls: type) -> None:
    """A plugin declares the points it implements as its bases (``class P(Plugin,
    points.Filter)``: mypy checks each method's signature against the point's), and it
    is bound by them: a declared point whose method it does not define, a point's method
    it defines without declaring the point, and a public method named nearly as a point
    (a misspelling) are refused, naming the plugin."""
    declared = {proto for proto in _POINTS if proto in cls.__mro__}
    for proto in sorted(declared, key=lambda p: p.__name__):
        for method in sorted(_POINTS[proto]):
            if getattr(cls, method, None) is vars(proto)[method]:
                raise ValueError(f"plugin {name}: declares {proto.__name__} but defines no "
                                 f"{method}()")
    for proto, methods in sorted(_POINTS.items(), key=lambda kv: kv[0].__name__):
        if proto not in declared and methods and all(hasattr(cls, m) for m in methods) and (
                not any(m in _BASE for m in methods)):
            raise ValueError(f"plugin {name}: defines {', '.join(sorted(methods))}() but does "
                             f"not declare points.{proto.__name__} among its bases")
    for attr in dir(cls):
        if attr.startswith("_") or attr in _POINT_METHODS or attr in _BASE:
            continue
        near = difflib.get_close_matches(attr, _POINT_METHODS, n=1, cutoff=0.8)
        if near:
            raise ValueError(f"plugin {name}: {attr!r} is no extension point; is it "
                             f"{near[0]!r} misspelt?")


def enable(profile: Profile, registry: Registry,
           shared: Mapping[str, Any] | None = None) -> Enabled:
    """Make and bind the plugins ``profile`` enables; a ValueError names the entry at
    fault (an unknown point or plugin, a plugin at a point it does not implement,
    arguments it does not take). ``shared``: arguments given to every plugin that
    takes them (the stickiness weight)."""
    instances: dict[str, Plugin] = {}
    at: dict[str, list[tuple[Plugin, float]]] = {}
    args = _plugin_args(profile)
    for point, specs in profile.plugins.items():
        proto = points.EXTENSION_POINTS.get(point)
        if proto is None:
            raise ValueError(f"plugins: unknown extension point {point!r}; known: "
                             f"{', '.join(points.EXTENSION_POINTS)}")
        enabled = at.setdefault(point, [])
        for spec in specs:
            factory = registry.get(spec.name) if spec.name != EXTENDER else None
            if factory is None:
                raise ValueError(f"plugins.{point}: unknown plugin {spec.name!r}")
            instance = instances.get(spec.name)
            if instance is None:
                wanted = _takes(factory)
                instance = factory({**{k: v for k, v in (shared or {}).items() if k in wanted},
                                    **args[spec.name]})
                check_declarations(spec.name, type(instance))
                instances[spec.name] = instance
            if not (isinstance(instance, proto) or (
                    point == "filter" and isinstance(instance, points.FilterAll))):
                raise ValueError(f"plugins.{point}: {spec.name} does not implement {point}")
            enabled.append((instance, spec.weight))
    if profile.extenders:
        extender = registry.get(EXTENDER)
        if extender is None:
            raise ValueError("extenders: this scheduler's registry makes no extender")
        for i, ext in enumerate(profile.extenders):
            made = extender(ext, i)
            instances[made.name] = made
            at.setdefault("filter", []).append((made, 1.0))
            at.setdefault("score", []).append((made, ext.weight))
            at.setdefault("preBind", []).append((made, 1.0))

    def bound(point: str, proto: type[P]) -> tuple[P, ...]:
        return tuple(p for p, _ in at.get(point, []) if isinstance(p, proto))

    def offering(proto: type[P], unless: Callable[[str], bool] = lambda _: False
                 ) -> dict[str, P]:
        return {n: p for n, p in instances.items() if isinstance(p, proto) and not unless(n)}

    normalizers = offering(points.Normalize)
    tiers = offering(points.Tier)
    score_bases = offering(points.ScoreBase, lambda n: n in normalizers)
    score_sets = offering(points.ScoreSet, lambda n: n in tiers or n in score_bases)
    batch = bound("filter", points.FilterAll)
    batched = {p.name for p in batch}
    sorters = bound("queueSort", points.QueueSort)
    return Enabled(
        instances=instances,
        queue_sort=sorters[0] if sorters else None,
        pre_filters=bound("preFilter", points.PreFilter),
        filters=tuple(p for p in bound("filter", points.Filter) if p.name not in batched),
        batch_filters=batch,
        post_filters=bound("postFilter", points.PostFilter),
        scores=tuple((p, w) for p, w in at.get("score", []) if isinstance(p, points.Score)),
        reserves=bound("reserve", points.Reserve),
        permits=bound("permit", points.Permit),
        pre_binds=bound("preBind", points.PreBind),
        binds=bound("bind", points.Bind),
        post_binds=bound("postBind", points.PostBind),
        filter_sets=offering(points.FilterSet),
        score_bases=score_bases,
        score_sets=score_sets,
        score_values={n: p for n, p in offering(points.ScoreValues).items() if n in score_sets},
        score_alls=offering(points.ScoreAll),
        normalizers=normalizers,
        tiers=tiers,
        adjusters=offering(points.Adjust),
        selectors=bound("filter", points.Selects),
        describers=tuple(offering(points.Describe).values()),
        rejecters=bound("permit", points.Reject),
        metric_blind=frozenset(n for n, p in instances.items() if not p.reads_metric_values),
    )


__all__ = ["Enabled", "Registry", "enable"]
