"""``berth explain overrides APP [--cluster C]``: what each cluster's copy of an
application is, against its own manifest.

For each cluster the application is bound to (or the one named), the copy as
the overrides that select it make it (``berth.store.documents.render``, what
the propagator applies), as a unified diff of the manifest's YAML against the
copy's, then each field that changed with the rule that made it and the rules
whose value it replaced. A copy that cannot be rendered says why, naming the
rule; one on a cluster the credential may not read (a team's, docs/teams.md)
says that. Secrets stored apart stay ``<stored apart>``: nothing here shows them.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import yaml

from berth.actions.resources import Named
from berth.bootstrap.overrides import stored
from berth.store import Store, Unauthorized, decode, keys
from berth.store.documents import Application, Binding
from berth.store.documents.render import (
    Rendered,
    RenderError,
    Where,
    render,
    selects_application,
)


def _clusters(store: Store, namespace: str, name: str, only: str | None) -> list[str]:
    """The clusters to show: the one named, else those the Binding targets."""
    if only:
        return [only if "/" in only else f"{namespace}/{only}"]
    kv = store.get(keys.binding_key("Application", namespace, name))
    if kv is None:
        return []
    binding = decode(kv.value, Binding, kv.key)
    return [f"{t.namespace or namespace}/{t.name}" for t in binding.spec.targets
            if t.kind == "Cluster"]


def explain(store: Store, namespace: str, name: str, cluster: str | None,
            output: str = "table") -> tuple[int, str]:
    """(exit status, the text) of ``berth explain overrides``."""
    kv = store.get(keys.resource_key("Application", name, namespace))
    if kv is None:
        return 1, f"error: no application {namespace}/{name}"
    app = decode(kv.value, Application, kv.key)
    manifest = [o for o in app.spec.manifest if isinstance(o, dict)]
    selecting = [o for o in stored(store, [namespace]) if selects_application(
        o, namespace, name, app.metadata.labels)]
    results: dict[str, Rendered | str] = {}
    for cid in _clusters(store, namespace, name, cluster):
        cns, _, cname = cid.partition("/")
        try:
            ckv = store.get(keys.resource_key("Cluster", cname, cns))
        except Unauthorized:  # a team's credential, a cluster of another namespace's set
            results[cid] = (f"a cluster of namespace {cns}, which this credential may not "
                            "read: the overrides choose by its labels, so its copy is not "
                            "shown here")
            continue
        if ckv is None:
            results[cid] = "no such cluster"
            continue
        meta = decode(ckv.value, Named, ckv.key).metadata
        try:
            results[cid] = render(manifest, selecting, Where(meta.name, meta.namespace,
                                                             meta.labels))
        except RenderError as exc:
            results[cid] = f"cannot be rendered: {exc}"
    if output == "json":
        return 0, json.dumps({cid: _as_json(r) for cid, r in results.items()}, indent=2)
    if not results:
        return 0, (f"application {namespace}/{name} is bound to no cluster: name one with "
                   "--cluster")
    lines = [f"application {namespace}/{name} (generation {app.metadata.generation}): "
             f"{len(selecting)} override(s) select it"]
    for cid, made in results.items():
        lines.append("")
        if isinstance(made, str):
            lines.append(f"cluster {cid}: {made}")
            continue
        if not made.fingerprint:
            lines.append(f"cluster {cid}: the manifest as written (no override changes it)")
            continue
        lines.append(f"cluster {cid}: made by {', '.join(made.by)}")
        lines += _diff(manifest, list(made.bodies), cid)
        lines.append(f"  {'FIELD':<60} RULE")
        for c in made.changes:
            lines.append(f"  {c.obj + ' ' + c.path:<60} {c.rule}"
                         + (f"  (replaced: {'; '.join(c.replaced)})" if c.replaced else ""))
    return 0, "\n".join(lines)


def _diff(own: list[dict[str, Any]], copy: list[dict[str, Any]], cid: str) -> list[str]:
    def text(docs: list[dict[str, Any]]) -> list[str]:
        return yaml.safe_dump_all(docs, sort_keys=False).splitlines()

    return ["  " + line for line in difflib.unified_diff(
        text(own), text(copy), "manifest", f"cluster {cid}", lineterm="", n=2)]


def _as_json(made: Rendered | str) -> Any:
    if isinstance(made, str):
        return {"error": made}
    return {"by": list(made.by), "fingerprint": made.fingerprint,
            "changes": [{"object": c.obj, "path": c.path, "rule": c.rule,
                         "replaced": list(c.replaced)} for c in made.changes],
            "manifest": list(made.bodies)}
