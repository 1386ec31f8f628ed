"""Kinds as people type them: ``Application``, ``applications``, ``application``,
``app``, in any case (kubectl's manner)."""

from __future__ import annotations

from berth.store import keys

SHORT = {
    "app": "Application", "apps": "Application",
    "cl": "Cluster",
    "cloud": "Cloud", "gcl": "GlobalCloud", "gcloud": "GlobalCloud",
    "m": "Metric", "gm": "GlobalMetric",
    "mp": "MetricsProvider", "gmp": "GlobalMetricsProvider",
    "proj": "Project", "mc": "MagnumCluster", "magnum": "MagnumCluster",
    "ov": "Override", "gov": "GlobalOverride",
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
