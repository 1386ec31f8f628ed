"""The exporter process: every Export's objects kept as berth decided.

It watches the Exports (and their credentials, kept apart), the applications, their
Bindings and statuses, the clusters, their statuses and the metric values. Each
Export has a runner: a supervised loop of its own, so an API that is down or slow
delays only that export. A change marks what it concerns dirty in every runner (an
application, or the clusters' profiles); the runner gathers a burst of them, builds
the objects wanted for what is dirty from the informers' current documents, and
writes what differs (:mod:`berth.controllers.exporter.target`); beside it, a reader
of Argo CD's Applications for the applications Argo CD deploys (``verdicts.py``).
Every ``resync``
seconds, and whenever its API was out of reach, a runner compares everything again,
which also removes what belongs to applications, clusters or shapes gone meanwhile.

An export's API failing is retried with backoff (1 s doubling to ``max_backoff``),
and said once as an event and in its status (``/berth/v1/exported/exports/<name>``);
nothing dirty is forgotten meanwhile. An Export deleted has everything it wrote
removed (retried while this process runs; docs/argocd.md says what a restart
meanwhile leaves).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric as MetricFamily

from berth.controllers.exporter.api import Down, Refused
from berth.controllers.exporter.config import ExporterConfig
from berth.controllers.exporter.shapes import (
    SIG_VERSION,
    Ref,
    Wanted,
    argocd_config_map,
    ocm_decisions,
    profile,
    sig_decisions,
)
from berth.controllers.exporter.target import ARGOCD_SOURCE, Outcome, Superseded, Target
from berth.controllers.exporter.verdicts import VerdictReader, deployed
from berth.controllers.exporter.views import (
    AppHead,
    AppStatusView,
    BindingView,
    ClusterStatusView,
    ClusterView,
    ValueView,
    cluster_profile,
    exported_names,
    placement,
)
from berth.controllers.runtime import Event, EventType, Informer
from berth.controllers.runtime.events import Recorder
from berth.controllers.runtime.supervise import Loop
from berth.store import Deposed, Store, StoreError, keys
from berth.store.codec import encode
from berth.store.credentials import STORED, Credentials, merge_users, missing_users
from berth.store.documents import Export, Exported, Shape
from berth.store.documents.export import ExportedMeta, ExportedStatus, ExportState, Verdicts
from berth.store.events import NORMAL, WARNING, InvolvedObject
from berth.store.ops import Delete, Put

log = logging.getLogger(__name__)

EXPORT_SECRETS = keys.secrets_prefix("Export")
REFUSED_SHOWN = 20  # refused items named in an export's status (the count says the rest)


def _app_id(key: str) -> str:
    ref = keys.parse_key(key)
    return f"{ref.namespace}/{ref.name}"


def _place(export: Export, kubeconfig: dict[str, Any]) -> tuple[str, str]:
    """Where an export writes: its API server and namespace."""
    current = kubeconfig.get("current-context")
    context = next((c.get("context") or {} for c in kubeconfig.get("contexts") or []
                    if isinstance(c, dict) and c.get("name") == current), {})
    server = next((c.get("cluster", {}).get("server", "") for c in kubeconfig.get("clusters")
                   or [] if isinstance(c, dict) and c.get("name") == context.get("cluster")),
                  "")
    return str(server), export.spec.namespace


@dataclass(slots=True)
class Dirty:
    """What a runner is to write next: some applications (with when each change was
    made, for the lag), the clusters' profiles, or everything."""

    apps: dict[str, datetime | None] = field(default_factory=dict)
    profiles: bool = False
    everything: bool = False

    def __bool__(self) -> bool:
        return bool(self.apps) or self.profiles or self.everything

    def absorb(self, other: Dirty) -> None:
        for app, at in other.apps.items():
            self.apps.setdefault(app, at)
        self.profiles |= other.profiles
        self.everything |= other.everything


class Runner:
    """One Export: its target and its loop. ``mark`` may be called from any thread."""

    def __init__(self, exporter: Exporter, name: str, export: Export,
                 kubeconfig: dict[str, Any], failing: str = "") -> None:
        self.exporter = exporter
        self.name = name
        self.export = export
        self.kubeconfig = kubeconfig
        self.config = exporter.config
        store = exporter.store
        self.target = Target(name, export.spec, kubeconfig,
                             term=store.fence.term if store.fence is not None else 0,
                             holds=store.holds or (lambda: True),
                             timeout=self.config.timeout, workers=self.config.workers)
        self._lock = threading.Lock()  # guards _dirty
        self._dirty = Dirty(everything=True)
        self._wake = threading.Event()
        self._wake.set()  # everything is dirty to begin with
        self._stopping = threading.Event()
        self.retiring = False  # the Export is gone: remove everything, then end
        self.done = threading.Event()  # retired
        self._backoff = 0.0
        self._resync_at = time.monotonic() + self.config.resync
        # ``failing``: said of this Export before this runner (its Recovered is this one's)
        self.state = ExportState.FAILING if failing else ExportState.PENDING
        self.reason = failing or "starting"
        self.refused: dict[str, str] = {}  # source → why: said until it is exported whole
        self.names: dict[str, str] = {}  # the clusters' exported names its last sync used
        self.synced: datetime | None = None
        self._loop = Loop(f"export {name}", self._step,
                          deadline=self.config.timeout * 20 + self.config.max_backoff + 120)
        # Argo CD's word on the copies it deploys, for the applications naming this export
        self.verdicts = VerdictReader(name, self.target.api, store,
                                      lambda: deployed(exporter.apps.items()),
                                      exporter.verdicts, lambda: self.names,
                                      self.config.verdicts)
        self._verdicts = Loop(f"verdicts {name}", self.verdicts.step,
                              deadline=self.config.timeout * 3 + self.config.verdicts + 60)

    def start(self) -> None:
        self._loop.start()
        self._verdicts.start()

    def stop(self) -> None:
        self._stopping.set()
        self.verdicts.stopping.set()
        self._loop.halt()
        self._verdicts.halt()
        self._wake.set()
        self._loop.stop(timeout=self.config.timeout + 5)
        self._verdicts.stop(timeout=self.config.timeout + 5)
        self.target.close()

    def alive(self) -> bool:
        return self._loop.alive() and self._verdicts.alive()

    def mark(self, app: str | None = None, at: datetime | None = None, *,
             profiles: bool = False, everything: bool = False) -> None:
        with self._lock:
            if app is not None:
                self._dirty.apps.setdefault(app, at)
            self._dirty.profiles |= profiles
            self._dirty.everything |= everything
        self._wake.set()

    def retire(self) -> None:
        self.retiring = True
        self.mark(everything=True)

    def _take(self) -> Dirty:
        with self._lock:
            taken, self._dirty = self._dirty, Dirty()
            self._wake.clear()
        return taken

    def _step(self) -> None:
        if self._backoff:
            self._stopping.wait(self._backoff)  # a failing API: wait, whatever changes
        self._wake.wait(min(5.0, max(0.0, self._resync_at - time.monotonic())))
        if self._stopping.is_set():
            return
        if time.monotonic() >= self._resync_at:
            self.mark(everything=True)
        time.sleep(self.config.settle)  # gather a burst
        dirty = self._take()
        if not dirty:
            return
        try:
            outcome = self._sync(dirty)
        except Exception as exc:  # nothing dirty is forgotten, whatever failed
            with self._lock:
                dirty.absorb(self._dirty)
                self._dirty = dirty
            self._wake.set()  # tried again as soon as the backoff is over
            if not isinstance(exc, Down | Refused | Superseded):
                raise  # a bug: the loop says it, with its trace, and backs off
            if isinstance(exc, Down | Refused):  # a Refused here is the CRDs' or namespace's
                self.target.prepared = False
            self._failing(str(exc), superseded=isinstance(exc, Superseded))
            return
        self._backoff = 0.0
        for source in outcome.retry:
            if source.startswith("app:"):
                self.mark(source[4:])
            else:
                self.mark(profiles=True)
        if dirty.everything:
            self.refused = dict(outcome.refused)
            self._resync_at = time.monotonic() + self.config.resync
        else:
            for source in list(self.refused):
                if (source.startswith("app:") and source[4:] in dirty.apps) or (
                        dirty.profiles and source.startswith("cluster:")):
                    self.refused.pop(source, None)
            self.refused.update(outcome.refused)
        if self.retiring:
            if not outcome.retry and not self.target.sources():
                self.done.set()
                self._loop.halt()
            return
        was = self.state
        self.state = ExportState.SYNCED if not outcome.retry else ExportState.PENDING
        self.reason = (f"{len(self.refused)} item(s) not exported (refused: by berth, or by "
                       "the API)" if self.refused else "")
        if self.state is ExportState.SYNCED and was is not ExportState.SYNCED:
            self.synced = datetime.now(UTC).replace(microsecond=0)
            if was is ExportState.FAILING:
                log.warning("export %s: its API takes berth's writes again", self.name)
                self.exporter.say(self.name, NORMAL, "ExportRecovered",
                                  "its API takes berth's writes again")
        self.exporter.publish(self)

    def _sync(self, dirty: Dirty) -> Outcome:
        if not self.target.prepared:
            self.target.prepare()
            dirty.everything = True
        wanted, refused = self.exporter.wanted(self, dirty)
        outcome = self.target.sync(wanted)
        for source, why in refused.items():  # what berth itself could not export
            outcome.refused.setdefault(source, why)
        return outcome

    def _failing(self, reason: str, *, superseded: bool) -> None:
        self._backoff = 1.0 if superseded else min(
            self.config.max_backoff, max(1.0, self._backoff * 2))
        if superseded:
            log.warning("export %s: %s", self.name, reason)
            return
        said = self.state is ExportState.FAILING and self.reason == reason
        self.state, self.reason = ExportState.FAILING, reason
        if not said:
            log.warning("export %s: %s; retrying in %g s", self.name, reason, self._backoff)
            self.exporter.say(self.name, WARNING, "ExportFailing", reason)
        if not self.retiring:
            self.exporter.publish(self)


class Exporter:
    def __init__(self, store: Store, config: ExporterConfig) -> None:
        self.store = store
        self.config = config

        def informer(prefix: keys.Prefix, type_: Any) -> Informer[Any]:
            return Informer(store, prefix, type_, idle_timeout=config.watch_idle_timeout)

        self.exports: Informer[Export] = informer(keys.resource_prefix("Export"), Export)
        self.secrets: Informer[Credentials] = informer(EXPORT_SECRETS, STORED)
        self.apps: Informer[AppHead] = informer(keys.resource_prefix("Application"), AppHead)
        self.bindings: Informer[BindingView] = informer(keys.binding_prefix("Application"),
                                                        BindingView)
        self.statuses: Informer[AppStatusView] = informer(keys.status_prefix("Application"),
                                                          AppStatusView)
        self.clusters: Informer[ClusterView] = informer(keys.resource_prefix("Cluster"),
                                                        ClusterView)
        self.cluster_statuses: Informer[ClusterStatusView] = informer(
            keys.status_prefix("Cluster"), ClusterStatusView)
        self.values: Informer[ValueView] = informer(keys.METRIC_VALUES, ValueView)
        self.verdicts: Informer[Verdicts] = informer(keys.verdicts_prefix(), Verdicts)
        self.informers: list[Informer[Any]] = [
            self.exports, self.secrets, self.apps, self.bindings, self.statuses,
            self.clusters, self.cluster_statuses, self.values, self.verdicts]
        self.events = Recorder(store, "exporter", ttl=config.event_ttl) if config.events \
            else None
        self._lock = threading.Lock()  # guards runners (the plan loop changes it)
        self.runners: dict[str, Runner] = {}
        self._built: dict[str, bytes] = {}  # export name → the spec and secret it runs with
        self._retired: list[Runner] = []
        self._status_lock = threading.Lock()  # guards _published (runners publish)
        self._published: dict[str, bytes] = {}  # export name → its status as last written
        # export name → a Failing said of it with no runner to say its Recovered (the plan
        # loop's alone): the next runner for it starts Failing, and says it
        self._failing: dict[str, str] = {}
        self._waiting = False  # an Export read before its credentials: plan again soon
        self._changed = threading.Event()
        self._plan = Loop("plan", self._plan_step, deadline=120.0)
        self.exports.add_handler(lambda _e: self._changed.set())
        self.secrets.add_handler(lambda _e: self._changed.set())
        self.apps.add_handler(lambda e: self._each(lambda r: r.mark(_app_id(e.key))))
        self.statuses.add_handler(lambda e: self._each(lambda r: r.mark(_app_id(e.key))))
        self.bindings.add_handler(self._on_binding)
        for inf in (self.clusters, self.cluster_statuses, self.values):
            inf.add_handler(lambda _e: self._each(lambda r: r.mark(profiles=True)))

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, sync_timeout: float = 60.0) -> None:
        for inf in self.informers:
            inf.start()
        if not all(inf.wait_synced(sync_timeout) for inf in self.informers):
            raise TimeoutError("the exporter did not sync with etcd")
        if self.events is not None:
            self.events.start()
        self._changed.set()
        self._plan.start()

    def stop(self) -> None:
        self._plan.halt()
        self._changed.set()
        self._plan.stop()
        with self._lock:
            runners = [*self.runners.values(), *self._retired]
            self.runners.clear()
            self._retired.clear()
        for runner in runners:
            runner.stop()
        for inf in self.informers:
            inf.stop(wait=False)
        for inf in self.informers:
            inf.join()
        if self.events is not None:
            self.events.stop()

    def ready(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers)

    def alive(self) -> bool:
        with self._lock:
            runners = [*self.runners.values(), *self._retired]
        return (self._plan.alive() and all(r.alive() or r.done.is_set() for r in runners)
                and all(inf.alive() for inf in self.informers))

    def collect(self) -> Iterator[MetricFamily]:
        """Each export's objects by shape, and whether it is synced."""
        objects = GaugeMetricFamily("berth_exporter_objects", "Objects an export holds "
                                    "in its API, by shape", labels=["export", "shape"])
        synced = GaugeMetricFamily("berth_exporter_synced", "1 when everything an export "
                                   "wrote is as berth decided", labels=["export"])
        with self._lock:
            runners = list(self.runners.values())
        for runner in runners:
            for shape, n in runner.target.counts().items():
                objects.add_metric([runner.name, shape], n)
            synced.add_metric([runner.name], float(runner.state is ExportState.SYNCED))
        yield objects
        yield synced

    # -- which exports run -------------------------------------------------------------

    def _each(self, act: Any) -> None:
        with self._lock:
            runners = list(self.runners.values())
        for runner in runners:
            act(runner)

    def _on_binding(self, event: Event[BindingView]) -> None:
        """A Binding whose targets changed: the lag counts from when they did."""
        app = _app_id(event.key)
        at = None
        if event.type is not EventType.DELETED and (
                event.old is None or event.old.spec.targets != event.obj.spec.targets):
            at = event.obj.spec.scheduled or datetime.now(UTC)
        self._each(lambda r: r.mark(app, at))

    def _plan_step(self) -> None:
        with self._lock:
            for runner in [r for r in self._retired if r.done.is_set()]:
                self._retired.remove(runner)
                runner.stop()
                self._unpublish(runner.name)
        changed = self._changed.wait(0.5 if self._waiting else 5.0)
        if self._plan.stopping or not (changed or self._waiting):
            return
        self._changed.clear()
        self._waiting = False
        with self._lock:
            current = dict(self.runners)
        wanted: dict[str, tuple[Export, dict[str, Any], bytes]] = {}
        kept: set[str] = set()  # Exports whose credentials are not at hand: as they run
        for item in self.exports.items():
            export = item.obj
            name = export.metadata.name
            skey = keys.secrets_key("Export", name)
            secret = self.secrets.get(skey)
            users = secret.users if secret is not None else []
            missing = missing_users(export.spec.kubeconfig, users)
            if missing:
                kept.add(name)
                if self.secrets.revision < item.mod_revision:
                    # written in one transaction with it, not delivered yet: wait for it
                    self._waiting = True
                elif name not in current:
                    self._fail(name, f"its credentials are missing (user {', '.join(missing)}"
                               f", stored apart at {skey}): apply the Export again")
                continue
            kubeconfig = merge_users(export.spec.kubeconfig, users)
            identity = msgspec.json.encode([export.spec, kubeconfig])
            wanted[name] = (export, kubeconfig, identity)
        for name in set(self._failing) - set(wanted) - kept:
            self._failing.pop(name)  # deleted: nothing left to recover
        for name, runner in current.items():
            if name in kept:
                continue
            if name not in wanted or wanted[name][2] != self._built.get(name):
                # Gone, or written elsewhere now: what it wrote goes. Else (credentials,
                # shapes, selection changed) the next runner's first sync sets it right.
                moved = name in wanted and _place(wanted[name][0], wanted[name][1]) != (
                    _place(runner.export, runner.kubeconfig))
                self._end(name, runner, retire=name not in wanted or moved)
        for name, (export, kubeconfig, identity) in wanted.items():
            with self._lock:
                if name in self.runners:
                    continue
                # An Export written again, to the same place, while its old one still
                # removes what it wrote there (its API down): the new one's first sync
                # owns those objects now.
                here = _place(export, kubeconfig)
                stale = [r for r in self._retired
                         if r.name == name and _place(r.export, r.kubeconfig) == here]
                for r in stale:
                    self._retired.remove(r)
            for r in stale:
                log.info("export %s was written again: its removal stops", name)
                r.stop()
            try:
                runner = Runner(self, name, export, kubeconfig, self._failing.get(name, ""))
            except Exception as exc:  # an unusable kubeconfig: said, the others go on
                self._fail(name, f"unusable kubeconfig: {exc}")
                continue
            self._failing.pop(name, None)
            with self._lock:
                self.runners[name] = runner
                self._built[name] = identity
            runner.start()

    def _fail(self, name: str, reason: str) -> None:
        """An Export no runner can take: said once (event and status), and recovered by
        the runner that takes it next."""
        if self._failing.get(name) == reason:
            return
        self._failing[name] = reason
        log.warning("export %s: %s", name, reason)
        self.say(name, WARNING, "ExportFailing", reason)
        self._publish_doc(name, ExportedStatus(ExportState.FAILING, reason[:500]))

    def _end(self, name: str, runner: Runner, *, retire: bool) -> None:
        """Stop a runner whose Export changed (a new one starts) or went (it removes
        what it wrote first). A runner ended Failing hands that on: its successor says
        the Recovered."""
        if not retire and runner.state is ExportState.FAILING:
            self._failing[name] = runner.reason
        with self._lock:
            self.runners.pop(name, None)
            self._built.pop(name, None)
            if retire:
                self._retired.append(runner)
        if retire:
            log.info("export %s was deleted: removing what it wrote", name)
            runner.retire()
        else:
            runner.stop()

    # -- what to write ---------------------------------------------------------------

    def wanted(self, runner: Runner, dirty: Dirty) -> tuple[dict[str, list[Wanted]],
                                                            dict[str, str]]:
        """The objects wanted for what is dirty, by source (an empty list: remove what
        that source had); and what of it cannot be exported, by source, with why (kept
        in the Export's status until that source is exported whole)."""
        spec = runner.export.spec
        out: dict[str, list[Wanted]] = {}
        refused: dict[str, str] = {}
        names, clashes = exported_names(
            item.obj for item in sorted(self.clusters.items(), key=lambda i: i.key))
        if runner.retiring:
            return {source: [] for source in runner.target.sources()}, refused
        if names != runner.names:  # a cluster's name came or went: every decision may name it
            dirty.everything = True
            runner.names = names
        if Shape.CLUSTER_PROFILE in spec.shapes and (dirty.profiles or dirty.everything):
            values = {item.key: item.obj for item in self.values.items()}
            for item in self.clusters.items():
                meta = item.obj.metadata
                cid = f"{meta.namespace or 'default'}/{meta.name}"
                if cid in clashes:
                    refused[f"cluster:{cid}"] = clashes[cid]
                    out[f"cluster:{cid}"] = []
                    continue
                status = self.cluster_statuses.get(keys.status_key(
                    "Cluster", meta.namespace or "", meta.name))
                p = cluster_profile(cid, names[cid], item.obj, status, values,
                                    spec.access_provider)
                out[f"cluster:{cid}"] = [self._profile(runner, spec.cluster_manager, p)]
        apps: dict[str, datetime | None] = dict(dirty.apps)
        if dirty.everything:
            for i in self.apps.items():
                apps.setdefault(f"{i.obj.metadata.namespace}/{i.obj.metadata.name}", None)
        for app, at in apps.items():
            out[f"app:{app}"], left_out = self._placement(runner, app, at, names)
            if left_out:
                refused[f"app:{app}"] = (
                    "its decisions leave out " + ", ".join(
                        f"{c} ({clashes.get(c, 'not a cluster berth knows')})"
                        for c in left_out))
        if spec.argocd is not None:
            out[ARGOCD_SOURCE] = [argocd_config_map(runner.name, spec.argocd.config_map)]
        if dirty.everything:
            for source in runner.target.sources() - set(out):
                out[source] = []  # an application, cluster or shape gone meanwhile
        return out, refused

    def _profile(self, runner: Runner, manager: str, p: Any) -> Wanted:
        before = runner.target.transition(Ref(SIG_VERSION, "clusterprofiles", p.name))
        at = datetime.now(UTC)
        if before is not None and before[0] == p.healthy:
            with contextlib.suppress(ValueError):  # written by hand: counts from now
                at = datetime.fromisoformat(before[1])
        return profile(runner.name, manager, p, at)

    def _placement(self, runner: Runner, app: str, at: datetime | None,
                   names: dict[str, str]) -> tuple[list[Wanted], tuple[str, ...]]:
        """An application's objects, and the clusters its decisions had to leave out."""
        spec = runner.export.spec
        ns, _, name = app.partition("/")
        head = self.apps.get(keys.resource_key("Application", name, ns))
        if head is None or (spec.applications is not None
                            and not spec.applications.selects(app, head.metadata.labels)):
            return [], ()
        binding = self.bindings.get(keys.binding_key("Application", ns, name))
        status = self.statuses.get(keys.status_key("Application", ns, name))
        decided = placement(app, binding, status, names)
        out: list[Wanted] = []
        if Shape.PLACEMENT_DECISION in spec.shapes:
            out += sig_decisions(runner.name, spec.namespace, decided)
        if Shape.OCM_PLACEMENT_DECISION in spec.shapes:
            out += ocm_decisions(runner.name, decided)
        for w in out:
            w.lag_from = at
        return out, decided.unexported

    # -- what it says -------------------------------------------------------------------

    def say(self, name: str, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events.emit(InvolvedObject("Export", name), type_, reason, message[:1000])

    def publish(self, runner: Runner) -> None:
        refused = dict(sorted(runner.refused.items())[:REFUSED_SHOWN])
        self._publish_doc(runner.name, ExportedStatus(
            runner.state, runner.reason[:1000], runner.target.counts(), refused,
            runner.synced))

    def _publish_doc(self, name: str, status: ExportedStatus) -> None:
        fence = self.store.fence
        status.term = fence.term if fence is not None else 0
        body = encode(Exported(ExportedMeta(name), status))
        with self._status_lock:  # one export's statuses reach etcd in order
            if self._published.get(name) == body:
                return
            try:
                self.store.commit([Put(keys.exported_key(name), body, None)])
            except Deposed:
                return
            except StoreError as exc:
                log.warning("export %s: its status not written: %s", name, exc)
                return
            self._published[name] = body

    def _unpublish(self, name: str) -> None:
        with self._status_lock:
            try:
                self.store.commit([Delete(keys.exported_key(name))])
            except StoreError as exc:
                log.warning("export %s: its status not removed: %s", name, exc)
            self._published.pop(name, None)


__all__ = ["Exporter", "Runner"]
