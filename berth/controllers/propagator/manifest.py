"""An application's manifest as the objects to apply, checked and marked as berth's.

Every object gets the label ``app.kubernetes.io/managed-by: berth`` (what the
drift watches select on), the annotation ``berth.dev/application:
<namespace>/<name>`` (which application a changed object belongs to) and the
annotation ``berth.dev/generation``: the application's generation it was
applied for, so that a health reading is only counted for the generation it
was taken of (docs/rollouts.md); and ``berth.dev/decision``: the id of the
scheduler's decision that placed it, its ledger record's, so that someone who
finds the object on a cluster can ask berth why it is there (``berth history``).
A workload's pod template gets the owner annotation too (not the generation
nor the decision: a new generation that leaves the template as it was, or a
move, restarts no Pod), so that the cluster observer can count the
application's pods.
The objects are put in apply order (``order.py``: what others need, then the
workloads, then what uses them; waves within each), so a manifest may bring the
namespace, the CRD or the ConfigMap its other objects need.
"""

from __future__ import annotations

from typing import Any

from berth.controllers.propagator import order
from berth.controllers.propagator.kube import (
    DECISION,
    FIELD_MANAGER,
    GENERATION,
    MANAGED_BY,
    OWNER,
)


class ManifestError(ValueError):
    """The manifest cannot be applied as written; the message names the field."""


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _mark_pods(obj: dict[str, Any], owner: str) -> dict[str, Any]:
    """A workload whose pod template gets the owner annotation too: the observer counts
    its pods' requests towards the application (the scheduler's capacity accounting)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    template = spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("metadata") or {}, dict):
        return obj
    tmeta = template.get("metadata") or {}
    annotations = tmeta.get("annotations") or {}
    if not isinstance(annotations, dict):
        return obj
    tmeta = {**tmeta, "annotations": {**annotations, OWNER: owner}}
    return {**obj, "spec": {**spec, "template": {**template, "metadata": tmeta}}}


def _mark(obj: dict[str, Any], owner: str, generation: int, decision: str) -> dict[str, Any]:
    """``obj`` with berth's label, owner, generation and decision annotations (and its pod
    template's owner annotation)."""
    meta = _mapping(obj.get("metadata"))
    ours = {OWNER: owner, GENERATION: str(generation)}
    if decision:
        ours[DECISION] = decision
    marked = {**meta, "labels": {**_mapping(meta.get("labels")), MANAGED_BY: FIELD_MANAGER},
              "annotations": {**_mapping(meta.get("annotations")), **ours}}
    return _mark_pods({**obj, "metadata": marked}, owner)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def remark(bodies: tuple[dict[str, Any], ...], namespace: str, name: str, generation: int,
           decision: str = "") -> tuple[dict[str, Any], ...]:
    """Bodies an override changed, marked as berth's again (no rule takes away what the
    drift watches, the owner check and the health of a generation rely on) and put in
    apply order again (a rule may change a wave); ManifestError if a wave is not one."""
    try:
        return tuple(order.ordered(_mark(b, f"{namespace}/{name}", generation, decision)
                                   for b in bodies))
    except order.WaveError as exc:
        raise ManifestError(str(exc)) from None


def objects(manifest: list[Any], namespace: str, name: str, generation: int,
            decision: str = "") -> list[dict[str, Any]]:
    """The manifest's objects, marked, in apply order; ManifestError if malformed."""
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str | None, str]] = set()
    for i, obj in enumerate(manifest):
        where = f"spec.manifest[{i}]"
        if not isinstance(obj, dict):
            raise ManifestError(f"{where}: not an object")
        for field in ("apiVersion", "kind"):
            if not _text(obj.get(field)):
                raise ManifestError(f"{where}.{field}: missing")
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not _text(meta.get("name")):
            raise ManifestError(f"{where}.metadata.name: missing")
        for field in ("labels", "annotations"):
            if not isinstance(meta.get(field) or {}, dict):
                raise ManifestError(f"{where}.metadata.{field}: not a mapping")
        ident = (obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        if ident in seen:
            raise ManifestError(f"{where}: {obj['kind']} {meta['name']} appears twice")
        seen.add(ident)
        try:
            order.step_of(obj)
        except order.WaveError as exc:
            raise ManifestError(f"{where}.{exc}") from None
        out.append(_mark(obj, f"{namespace}/{name}", generation, decision))
    return order.ordered(out)

