"""One Export's objects in its API: what is there, and making it what berth decided.

The target keeps what it last saw of every object it owns (listed once when it
starts, then as its own writes answer), by the source it was made from (an
application, a cluster). A sync takes the objects wanted for some sources and
writes only what differs: a new object is created (and its status written, for
the kinds whose status is a subresource), a changed one replaced at the version
last seen, an object its source no longer wants deleted at that version. So an
unchanged decision costs no request, and a change made there since is a conflict,
read again, never overwritten blindly.

Fenced: a write goes out only while this exporter's term surely lasts (its lease's
tenure, the same guard as the propagator's requests to a cluster), and every object
carries the term that wrote it (``berth.io/term``); a conflict on an object a later
term wrote ends this exporter's sync (:class:`Superseded`).
"""

from __future__ import annotations

import collections
import json
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from prometheus_client import Counter, Histogram

from berth.controllers.exporter.api import Api, Conflict, Missing, Refused, crd_documents
from berth.controllers.exporter.shapes import (
    APPLICATION_ANNOTATION,
    CLUSTER_ANNOTATION,
    EXPORT_LABEL,
    MANAGED_BY,
    OCM_VERSION,
    SIG_VERSION,
    TERM_ANNOTATION,
    Ref,
    Wanted,
)
from berth.store.documents.export import ExportSpec, Shape

log = logging.getLogger(__name__)

WRITES = Counter("berth_exporter_writes_total", "Requests the exporter made to write",
                 ["export", "verb"])
LAG = Histogram("berth_exporter_lag_seconds", "From a Binding's change (or the change "
                "the exporter saw) to the object saying it, written", ["export"],
                buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300))

# The kinds each shape writes: (apiVersion, plural, the CRD that defines it)
KINDS: dict[Shape, tuple[str, str, str]] = {
    Shape.CLUSTER_PROFILE: (SIG_VERSION, "clusterprofiles",
                            "clusterprofiles.multicluster.x-k8s.io"),
    Shape.PLACEMENT_DECISION: (SIG_VERSION, "placementdecisions",
                               "placementdecisions.multicluster.x-k8s.io"),
    Shape.OCM_PLACEMENT_DECISION: (OCM_VERSION, "placementdecisions",
                                   "placementdecisions.cluster.open-cluster-management.io"),
}


# What an object is made from: "app:<ns>/<name>", "cluster:<ns>/<name>", or this (the
# ConfigMap for Argo CD).
ARGOCD_SOURCE = "argocd"


class Superseded(Exception):
    """A later term writes here now (or this one's tenure ended): stop writing."""


def _ours(obj: Mapping[str, Any]) -> bytes:
    """What berth sets of an object, canonical: its labels, its annotations but the term,
    and its top-level fields but the status."""
    meta = obj.get("metadata") or {}
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != TERM_ANNOTATION}
    rest = {k: v for k, v in obj.items()
            if k not in ("metadata", "status", "apiVersion", "kind")}
    return json.dumps([meta.get("labels") or {}, notes, rest], sort_keys=True).encode()


def _canonical(status: Any) -> bytes:
    return json.dumps(status, sort_keys=True).encode()


@dataclass(slots=True)
class Seen:
    """An object as this target last saw it."""

    rv: str
    ours: bytes
    status: dict[str, Any] | None
    source: str
    term: int = 0

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> Seen:
        meta = obj.get("metadata") or {}
        notes = meta.get("annotations") or {}
        source = (f"app:{notes[APPLICATION_ANNOTATION]}" if APPLICATION_ANNOTATION in notes
                  else f"cluster:{notes[CLUSTER_ANNOTATION]}" if CLUSTER_ANNOTATION in notes
                  else ARGOCD_SOURCE)
        try:
            term = int(notes.get(TERM_ANNOTATION, 0))
        except ValueError:
            term = 0
        return cls(str(meta.get("resourceVersion", "")), _ours(obj), obj.get("status"),
                   source, term)


@dataclass(slots=True)
class Outcome:
    """What one sync did."""

    written: int = 0
    deleted: int = 0
    retry: set[str] = field(default_factory=set)  # sources to sync again (a conflict)
    refused: dict[str, str] = field(default_factory=dict)  # source → why


class Target:
    """One Export's API and the objects it owns there."""

    def __init__(self, name: str, spec: ExportSpec, kubeconfig: dict[str, Any], *,
                 term: int, holds: Callable[[], bool], timeout: float, workers: int) -> None:
        self.name = name
        self.spec = spec
        self.term = term
        self.holds = holds
        self.api = Api(kubeconfig, spec.namespace, timeout)
        self.workers = workers
        self.selector = f"{MANAGED_BY}=berth,{EXPORT_LABEL}={name}"
        self._lock = threading.Lock()  # guards seen, by_source and held (writers share them)
        self.seen: dict[Ref, Seen] = {}
        self.by_source: dict[str, set[Ref]] = {}
        # the objects seen, by kind (apiVersion, plural)
        self.held: collections.Counter[tuple[str, str]] = collections.Counter()
        self.prepared = False
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"export-{name}")

    # -- starting --------------------------------------------------------------------


    def prepare(self) -> None:
        """The namespace and the shapes' CRDs (installed when absent and allowed), then
        everything this export owns there, listed."""
        self.api.ensure_namespace()
        absent = [KINDS[s][2] for s in self.spec.shapes if not self.api.served(*KINDS[s][:2])]
        if absent and not self.spec.install_crds:
            raise Missing(f"the API lacks the CRDs {', '.join(absent)} and spec.installCRDs "
                          "is false: install them (berth's copies are in "
                          "berth/controllers/exporter/crds/)")
        crds = crd_documents()
        for crd in absent:
            log.info("export %s: installing CRD %s", self.name, crd)
            self.api.install(crds[crd])
        seen: dict[Ref, Seen] = {}
        kinds = [KINDS[s][:2] for s in Shape]  # a shape no longer named: its objects go
        for api_version, plural in [*kinds, ("v1", "configmaps")]:
            if api_version != "v1" and not self.api.served(api_version, plural):
                continue
            for obj in self.api.list(api_version, plural, self.selector):
                seen[Ref(api_version, plural, obj["metadata"]["name"])] = Seen.of(obj)
        with self._lock:
            self.seen = seen
            self.by_source = {}
            self.held = collections.Counter((r.api_version, r.plural) for r in seen)
            for ref, s in seen.items():
                self.by_source.setdefault(s.source, set()).add(ref)
        self.prepared = True

    def sources(self) -> set[str]:
        with self._lock:
            return set(self.by_source)

    def transition(self, ref: Ref) -> tuple[str, str] | None:
        """A ClusterProfile's health condition as last written: (status, time)."""
        with self._lock:
            s = self.seen.get(ref)
        for c in ((s.status or {}).get("conditions") or []) if s is not None else []:
            if c.get("type") == "ControlPlaneHealthy":
                return str(c.get("status")), str(c.get("lastTransitionTime"))
        return None

    def counts(self) -> dict[str, int]:
        """Objects held now, by shape."""
        with self._lock:
            return {shape.value: self.held[KINDS[shape][:2]] for shape in self.spec.shapes}

    # -- syncing ----------------------------------------------------------------------

    def sync(self, wanted: Mapping[str, list[Wanted]]) -> Outcome:
        """Make each source's objects exactly ``wanted[source]`` (an empty list: none).
        Sources are written in parallel, each one's objects in order. An object one
        source no longer wants and another does (a name handed from one cluster to
        another) changes hands: the one that wants it writes it, nobody deletes it."""
        outcome = Outcome()
        lock = threading.Lock()
        items = list(wanted.items())
        claimed = frozenset(w.ref for _, objs in items for w in objs)
        if len(items) <= 1 or self.workers <= 1:
            for source, objs in items:
                self._source(source, objs, outcome, lock, claimed)
            return outcome
        for f in [self._pool.submit(self._source, s, o, outcome, lock, claimed)
                  for s, o in items]:
            f.result()  # the first failure (Down, Superseded) is the sync's
        return outcome

    def _source(self, source: str, objs: list[Wanted], outcome: Outcome,
                lock: threading.Lock, claimed: frozenset[Ref] = frozenset()) -> None:
        with self._lock:
            before = set(self.by_source.get(source, ()))
        try:
            for w in objs:
                if self._write(w):
                    with lock:
                        outcome.written += 1
            for ref in sorted(before - claimed):
                if self._delete(ref):
                    with lock:
                        outcome.deleted += 1
        except Conflict as exc:
            log.info("export %s: %s; reading it again", self.name, exc)
            with lock:
                outcome.retry.add(source)
        except Refused as exc:
            log.warning("export %s: %s refused: %s", self.name, source or "the ConfigMap", exc)
            with lock:
                outcome.refused[source] = str(exc)

    def _guard(self) -> None:
        if not self.holds():
            raise Superseded("this exporter's term may have ended: no write until it leads")

    def _body(self, w: Wanted, rv: str = "") -> dict[str, Any]:
        meta = dict(w.body["metadata"])
        meta["namespace"] = self.spec.namespace
        meta["annotations"] = {**meta.get("annotations", {}), TERM_ANNOTATION: str(self.term)}
        if rv:
            meta["resourceVersion"] = rv
        return {"apiVersion": w.ref.api_version, "kind": w.kind, **w.body, "metadata": meta}

    def _write(self, w: Wanted) -> bool:
        """Make one object as wanted; whether a request was made."""
        with self._lock:
            seen = self.seen.get(w.ref)
        ours = _ours(w.body)
        if seen is not None and seen.ours == ours and (
                w.status is None or _canonical(seen.status) == _canonical(w.status)):
            return False
        self._guard()
        try:
            if seen is None:
                obj = self.api.create(w.ref, self._body(w))
                WRITES.labels(self.name, "create").inc()
            elif seen.ours != ours:
                obj = self.api.replace(w.ref, self._body(w, seen.rv))
                WRITES.labels(self.name, "replace").inc()
            else:
                obj = None
            if w.status is not None:
                rv = str(obj["metadata"]["resourceVersion"]) if obj is not None else (
                    seen.rv if seen is not None else "")
                if obj is None or _canonical(obj.get("status")) != _canonical(w.status):
                    self._guard()
                    obj = self.api.replace(w.ref, {**self._body(w, rv), "status": w.status},
                                           status=True)
                    WRITES.labels(self.name, "status").inc()
        except Conflict:
            self._reread(w.ref)
            raise
        except Refused as exc:
            if exc.status != 404 or seen is None or isinstance(exc, Missing):
                raise
            self._reread(w.ref)
            with self._lock:
                gone = w.ref not in self.seen
            if not gone:
                raise
            # deleted meanwhile, by someone: made again at the next sync, not refused
            raise Conflict(f"{w.ref.plural}/{w.ref.name} is gone: {exc}") from exc
        self._saw(w.ref, Seen.of(obj) if obj is not None else None, w.source)
        if w.lag_from is not None:
            LAG.labels(self.name).observe(max(0.0, (datetime.now(UTC) - w.lag_from)
                                              .total_seconds()))
        return True

    def _delete(self, ref: Ref) -> bool:
        with self._lock:
            seen = self.seen.get(ref)
        if seen is None:
            return False
        self._guard()
        try:
            self.api.delete(ref, seen.rv)
        except Conflict:
            self._reread(ref)
            raise
        WRITES.labels(self.name, "delete").inc()
        self._saw(ref, None, seen.source)
        return True

    def _reread(self, ref: Ref) -> None:
        """After a conflict: what is there now (a later term's object ends this sync)."""
        obj = self.api.get(ref)
        now = Seen.of(obj) if obj is not None else None
        with self._lock:
            was = self.seen.get(ref)
        if now is not None and now.term > self.term:
            raise Superseded(f"{ref.plural}/{ref.name} was written by term {now.term}, "
                             f"after this exporter's {self.term}")
        self._saw(ref, now, now.source if now is not None else (was.source if was else ""))

    def _saw(self, ref: Ref, now: Seen | None, source: str) -> None:
        with self._lock:
            was = self.seen.pop(ref, None)
            if was is not None:
                self.held[ref.api_version, ref.plural] -= 1
                refs = self.by_source.get(was.source)
                if refs is not None:
                    refs.discard(ref)
                    if not refs:
                        del self.by_source[was.source]
            if now is not None:
                now.source = now.source or source
                self.seen[ref] = now
                self.held[ref.api_version, ref.plural] += 1
                self.by_source.setdefault(now.source, set()).add(ref)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.api.close()


__all__ = ["KINDS", "Outcome", "Seen", "Superseded", "Target"]
