"""Argo CD's word on the copies it deploys for berth (docs/argocd.md, section 7).

An application berth places and Argo CD deploys (``spec.deployedBy.tool: argocd``)
names the Export whose API holds Argo CD's Applications and the ApplicationSet that
generates one per decided cluster. Each Export named so has a :class:`VerdictReader`:
every ``interval`` seconds it lists the Applications in the Export's namespace, takes
those the ApplicationSet owns (``metadata.ownerReferences``), matches each to a berth
cluster by the cluster's exported name, which the generator handed to the
ApplicationSet's template — in the label ``berth.io/cluster``, else in
``spec.destination.name`` — and writes what each says
(health, sync status, revision) to ``/berth/v1/exported/applications/<ns>/<name>``
when it changed. The propagator reads it there as the second condition on a copy's
availability; the exporter alone writes it, fenced by its term like everything else
it writes to etcd.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from berth.controllers.exporter.api import Api, Down, Missing, Refused
from berth.controllers.exporter.views import AppHead
from berth.controllers.runtime import Informer, Item
from berth.store import Deposed, Store, StoreError, keys
from berth.store.codec import encode
from berth.store.documents import DeployedBy
from berth.store.documents.export import ToolVerdict, Verdicts, VerdictsMeta, VerdictsStatus
from berth.store.ops import Delete, Put

log = logging.getLogger(__name__)

ARGOCD_VERSION = "argoproj.io/v1alpha1"
MESSAGE = 300  # characters of Argo CD's message kept
# An Application's cluster, where its template says it (``'{{clusterName}}'``): its
# destination may name the server rather than the cluster.
CLUSTER_LABEL = "berth.io/cluster"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def owned_by(app: Mapping[str, Any], application_set: str) -> bool:
    """Whether the ApplicationSet ``application_set`` owns the Argo CD Application."""
    refs = _dict(app.get("metadata")).get("ownerReferences")
    return any(isinstance(r, dict) and r.get("kind") == "ApplicationSet"
               and r.get("name") == application_set
               and _text(r.get("apiVersion")).startswith("argoproj.io/")
               for r in (refs if isinstance(refs, list) else []))


def verdict_of(app: Mapping[str, Any]) -> ToolVerdict:
    """What one Argo CD Application says of the copy it deploys."""
    status = _dict(app.get("status"))
    health, sync = _dict(status.get("health")), _dict(status.get("sync"))
    operation = _dict(status.get("operationState"))
    message = _text(health.get("message")) or (
        _text(operation.get("message")) if operation.get("phase") in ("Failed", "Error")
        else "")
    return ToolVerdict(_text(_dict(app.get("metadata")).get("name")),
                       _text(health.get("status")), _text(sync.get("status")),
                       _text(sync.get("revision")), message[:MESSAGE])


def verdicts(applications: Iterable[Mapping[str, Any]], application_set: str,
             clusters: Mapping[str, str]) -> dict[str, ToolVerdict]:
    """Per berth cluster, what the Application ``application_set`` generated for it says;
    ``clusters`` maps an exported cluster name to berth's "<namespace>/<name>". An
    Application whose destination names no cluster berth exported is left out."""
    out: dict[str, ToolVerdict] = {}
    for app in applications:
        if not owned_by(app, application_set):
            continue
        labels = _dict(_dict(app.get("metadata")).get("labels"))
        dest = _dict(_dict(app.get("spec")).get("destination"))
        cid = clusters.get(_text(labels.get(CLUSTER_LABEL)) or _text(dest.get("name")))
        if cid is not None:
            out[cid] = verdict_of(app)
    return out


def deployed_by(raw: Any) -> DeployedBy | None:
    """An application's ``spec.deployedBy`` as the exporter reads it: None when absent or
    misshapen (the propagator says what is wrong with it; its decisions go out as any)."""
    if raw is None:
        return None
    try:
        return msgspec.convert(raw, DeployedBy)
    except msgspec.ValidationError:
        return None


def deployed(apps: Iterable[Item[AppHead]]) -> dict[str, DeployedBy]:
    """Of the applications, those another tool deploys, by "<namespace>/<name>"."""
    return {f"{i.obj.metadata.namespace}/{i.obj.metadata.name}": by
            for i in apps if (by := deployed_by(i.obj.spec.deployedBy))}


class VerdictReader:
    """One Export's reader of Argo CD's Applications into the verdicts of the
    applications that name it; :meth:`step` is one pass (its runner's loop calls it)."""

    def __init__(self, export: str, api: Api, store: Store,
                 deployed: Callable[[], dict[str, DeployedBy]],
                 written: Informer[Verdicts], names: Callable[[], dict[str, str]],
                 interval: float) -> None:
        self.export = export
        self.api = api
        self.store = store
        self.deployed = deployed  # "<ns>/<name>" → its deployedBy, of every application
        self.written = written  # the verdicts in etcd now
        self.names = names  # cluster "<ns>/<name>" → its exported name
        self.interval = interval
        self.stopping = threading.Event()
        self.problem = ""  # why the Applications could not be read ("": they could)

    def step(self) -> None:
        self.stopping.wait(self.interval)
        if self.stopping.is_set():
            return
        mine = {app: by for app, by in self.deployed().items()
                if by.argocd and by.export == self.export}
        listed: list[dict[str, Any]] = []
        if mine:
            try:
                listed = self.api.list(ARGOCD_VERSION, "applications", "")
            except (Down, Missing, Refused) as exc:  # said; every verdict kept as it was
                if str(exc) != self.problem:
                    log.warning("export %s: Argo CD's Applications cannot be read: %s",
                                self.export, exc)
                self.problem = str(exc)
                return
            self.problem = ""
        clusters = {name: cid for cid, name in self.names().items()}
        for app, by in sorted(mine.items()):
            namespace, _, name = app.partition("/")
            self._write(namespace, name, verdicts(listed, by.application_set, clusters))
        for item in self.written.items():
            doc = item.obj
            if doc.status.export == self.export and (
                    f"{doc.metadata.namespace}/{doc.metadata.name}" not in mine):
                self._commit(Delete(item.key), item.key)

    def _write(self, namespace: str, name: str, said: dict[str, ToolVerdict]) -> None:
        key = keys.verdicts_key(namespace, name)
        have = self.written.get(key)
        if have is not None and have.status.export == self.export and (
                have.status.clusters == said):
            return
        fence = self.store.fence
        doc = Verdicts(VerdictsMeta(name, namespace),
                       VerdictsStatus(self.export, said, fence.term if fence else 0))
        self._commit(Put(key, encode(doc), None), key)

    def _commit(self, op: Put | Delete, key: str) -> None:
        try:
            self.store.commit([op])
        except Deposed:
            return
        except StoreError as exc:
            log.warning("export %s: %s not written: %s", self.export, key, exc)
