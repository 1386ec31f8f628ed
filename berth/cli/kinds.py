"""Kinds as people type them: ``Application``, ``applications``, ``application``,
``app``, in any case, and resources as ``KIND NAME`` or ``TYPE/NAME`` (kubectl's
manner)."""

from __future__ import annotations

from collections.abc import Sequence

from berth.store import keys

SHORT = {
    "app": "Application", "apps": "Application",
    "cl": "Cluster",
    "cloud": "Cloud", "gcl": "GlobalCloud", "gcloud": "GlobalCloud",
    "m": "Metric", "gm": "GlobalMetric",
    "mp": "MetricsProvider", "gmp": "GlobalMetricsProvider",
    "proj": "Project", "mc": "MagnumCluster", "magnum": "MagnumCluster",
    "ov": "Override", "gov": "GlobalOverride",
    "pc": "PriorityClass",  # kubectl's short name
}


def resolve(text: str) -> keys.Kind:
    """The kind ``text`` names; ValueError listing the kinds if none."""
    lowered = text.lower()
    for kind in keys.KINDS.values():
        if lowered in (kind.name.lower(), kind.plural, kind.plural.removesuffix("s")):
            return kind
    if lowered in SHORT:
        return keys.KINDS[SHORT[lowered]]
    names = ", ".join(f"{k.plural} ({k.name})" for k in keys.KINDS.values())
    raise ValueError(f"unknown kind {text!r}; one of: {names}; short: "
                     + ", ".join(sorted(SHORT)))


def named(kind: str, names: Sequence[str]) -> list[tuple[keys.Kind, list[str]]]:
    """What ``KIND NAME...`` or kubectl's ``TYPE/NAME...`` names: each kind with its names
    (``[NAMESPACE/]NAME``), in the order first given. In the second form every argument
    is ``TYPE/[NAMESPACE/]NAME``, and the kinds may differ (``app/web cluster/de-1``);
    a ``TYPE/NAME`` after a separate ``KIND`` is refused, as kubectl refuses it."""
    if "/" not in kind:
        return [(resolve(kind), list(names))]
    plain = [n for n in names if "/" not in n]
    if plain:
        raise ValueError(f"{plain[0]!r}: after {kind!r} give each as TYPE/NAME too "
                         f"(e.g. {kind.partition('/')[0]}/{plain[0]})")
    out: dict[str, tuple[keys.Kind, list[str]]] = {}
    for word in (kind, *names):
        type_, _, rest = word.partition("/")
        if not type_ or not rest or rest.startswith("/") or rest.endswith("/"):
            raise ValueError(f"{word!r}: TYPE/NAME or TYPE/NAMESPACE/NAME (e.g. app/web)")
        k = resolve(type_)
        out.setdefault(k.name, (k, []))[1].append(rest)
    return list(out.values())


def typed_name(kind: str | None, name: str | None, *, command: str) -> tuple[str, str]:
    """One resource as ``KIND NAME`` or ``TYPE/NAME``: (kind, [namespace/]name)."""
    if kind is None:
        raise ValueError(f"{command}: which? give KIND NAME or TYPE/NAME (e.g. app/web)")
    if name is None and "/" not in kind:
        raise ValueError(f"{command} {kind}: which? give [NAMESPACE/]NAME")
    groups = named(kind, [name] if name is not None else [])
    if len(groups) != 1 or len(groups[0][1]) != 1:
        raise ValueError(f"{command}: one resource at a time")
    k, [one] = groups[0]
    return k.name, one


def application(text: str) -> str:
    """An application's ``[NAMESPACE/]NAME``, given also as kubectl's ``TYPE/NAME``
    (``app/web``, ``applications/default/web``): a first segment that spells the
    Application kind is the type, not a namespace (a namespace so named: ``-n``)."""
    type_, sep, rest = text.partition("/")
    if sep and rest and type_.lower() in _spellings("Application"):
        return rest
    return text


def _spellings(name: str) -> set[str]:
    kind = keys.KINDS[name]
    return {kind.name.lower(), kind.plural, kind.plural.removesuffix("s"),
            *(short for short, full in SHORT.items() if full == name)}
