"""Applications berth places and another tool deploys (``spec.deployedBy``).

Their copy on a cluster is the objects the application names, read there and judged
by berth's rules per kind (``execute.Executor``: read, never written or removed),
and, with Argo CD, the word of the Application its ApplicationSet generated for
that cluster, as the exporter read it (``/berth/v1/exported/applications/...``):
a copy counts available only when both say so, so a move drops the old cluster
from the decisions — and Argo CD deletes what it deployed there — only then.
"""

from __future__ import annotations

from collections.abc import Mapping

from berth.store.documents import DeployedBy, KubeObjectRef
from berth.store.documents.export import ToolVerdict


def observed_refs(by: DeployedBy | None) -> tuple[KubeObjectRef, ...]:
    """The objects a copy is on each cluster (none: berth deploys the application)."""
    if by is None:
        return ()
    return tuple(KubeObjectRef(o.api_version, o.kind, o.name, o.namespace)
                 for o in by.objects)


def unready(by: DeployedBy, said: Mapping[str, ToolVerdict] | None, cid: str) -> str:
    """Why Argo CD does not call the copy on ``cid`` available ("": it does): its
    Application for that cluster Healthy and Synced, at ``by.revision`` if given."""
    verdict = said.get(cid) if said is not None else None
    if verdict is None:
        return (f"Argo CD (ApplicationSet {by.application_set}, export {by.export}) has no "
                f"Application for cluster {cid} yet")
    app = f"Argo CD's Application {verdict.application}"
    if verdict.health != "Healthy":
        return (f"{app} is {verdict.health or 'without health'}"
                + (f": {verdict.message}" if verdict.message else ""))
    if verdict.sync != "Synced":
        return f"{app} is {verdict.sync or 'not synced'}"
    if by.revision and verdict.revision != by.revision:
        return f"{app} is synced at {verdict.revision or 'no revision'}, not {by.revision}"
    return ""
