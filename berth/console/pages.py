"""Each page's data, as JSON-ready dicts.

The fleet, the applications list and the metrics are built from a frozen
:class:`~berth.console.fleet.Snapshot`; one application's page reads its
Binding, status, ledger and events from etcd, as ``berth explain``,
``berth history`` and ``berth get events`` do — with the functions both take from
:mod:`berth.actions`, so the console and the CLI never disagree: the explanation
table is ``actions.explain.explanation``'s, the timeline's cells
``actions.history.what/why``'s, the rollout's report and buttons
``actions.rollouts``'s, the what-if ``whatif.what_if``'s.

Nothing here puts a credential in a page: the documents shown are views
without credentials, and what the CLI masks is masked.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import msgspec

from berth.actions import history
from berth.actions.explain import RANKED_HEAD, REJECTED_HEAD, explanation
from berth.actions.resources import age, decided, ready, selected, selector
from berth.actions.rollouts import report
from berth.bootstrap.load import to_document
from berth.console import views as V
from berth.console.fleet import Snapshot
from berth.console.prometheus import History, merged
from berth.controllers.scheduler.whatif import leading_config, what_if
from berth.store import Invalid, Store, StoreError, decode, events, keys, ledger
from berth.store.documents import Application, ApplicationStatus, Binding, BindingState
from berth.store.documents.metrics import normalized
from berth.store.documents.resources import Resources
from berth.store.documents.rollouts import WAITING, RolloutStrategy
from berth.yamlfile import YamlRefused, documents

LIST_LIMIT = 500  # rows the applications page sends at once (the rest: filter, or page on)
MOVES_SHOWN = 500  # the latest moves the metrics page marks


def _iso(ts: float | None) -> str | None:
    return datetime.fromtimestamp(ts, UTC).isoformat() if ts is not None else None


def head(snap: Snapshot) -> dict[str, Any]:
    """What every page says of its data: its version, its time, whether etcd answers."""
    return {"version": snap.version, "as_of": _iso(snap.taken), "synced": snap.synced,
            "etcd_lost_since": _iso(snap.etcd_lost)}


# -- the fleet ---------------------------------------------------------------------------


def _metric_key(use: V.MetricUse, namespace: str | None) -> tuple[str, str]:
    """(definition key, value key) of a metric a cluster uses."""
    if use.namespaced and namespace:
        return (keys.resource_key("Metric", use.name, namespace),
                keys.metric_value_key(use.name, namespace))
    return keys.resource_key("GlobalMetric", use.name), keys.metric_value_key(use.name)


def _amounts(r: Resources) -> dict[str, float]:
    return {"cpu": r.cpu, "memory": r.memory, "pods": r.pods}


def _assumed(snap: Snapshot) -> dict[str, dict[str, float]]:
    """Per cluster (``<ns>/<name>``): what berth placed there that the cluster does not
    report yet (its pods not counted in ``requested``): the scheduler assumes it."""
    demand = {f"{i.obj.meta.namespace}/{i.obj.meta.name}": i.obj.demand for i in snap.apps}
    out: dict[str, dict[str, float]] = {}
    for app, b in snap.bindings.items():
        d = demand.get(app)
        if d is None:
            continue
        for t in b.spec.targets:
            cid = f"{t.namespace or app.split('/')[0]}/{t.name}"
            carried = d.on(t.replicas)
            expected = t.replicas if t.replicas is not None else carried.pods
            st = snap.cluster_status.get(cid)
            cap = st.status.capacity if st is not None else None
            placed = cap.placed.get(app, 0) if cap is not None else 0
            if expected <= 0 or placed >= expected:
                continue
            left = (expected - placed) / expected
            sums = out.setdefault(cid, {"cpu": 0.0, "memory": 0.0, "pods": 0.0})
            for k, v in _amounts(carried).items():
                sums[k] += v * left
    return out


def fleet(snap: Snapshot, group_by: str = "") -> dict[str, Any]:
    """Every cluster: state, labels, taints, capacity (allocatable, requested, assumed),
    its metrics' values and normalized scores; grouped by the label ``group_by``."""
    assumed = _assumed(snap)
    label_keys: set[str] = set()
    groups: dict[str, list[dict[str, Any]]] = {}
    states: Counter[str] = Counter()
    for item in snap.clusters:
        c = item.obj
        ns = c.metadata.namespace
        cid = f"{ns}/{c.metadata.name}"
        st = snap.cluster_status.get(cid)
        state = st.status.state if st is not None and st.status.state else "UNKNOWN"
        states[state] += 1
        label_keys.update(c.metadata.labels)
        cap = st.status.capacity if st is not None else None
        capacity = {}
        if cap is not None:
            mine = assumed.get(cid, {})
            for res in ("cpu", "memory", "pods"):
                if cap.allocatable.get(res):
                    capacity[res] = {"allocatable": cap.allocatable[res],
                                     "requested": cap.requested.get(res, 0),
                                     "assumed": round(mine.get(res, 0.0))}
        metrics = []
        for use in c.spec.metrics:
            def_key, value_key = _metric_key(use, ns)
            value = snap.values.get(value_key)
            definition = snap.metrics.get(def_key)
            raw = value.status.value if value is not None else None
            score = None
            if raw is not None and definition is not None:
                scaled = normalized(raw, definition.spec.min, definition.spec.max)
                score = None if scaled is None else round(scaled[0], 4)
            err = value.status.error if value is not None else None
            metrics.append({
                "name": use.name, "weight": use.weight, "value": raw, "normalized": score,
                "error": (err.reason + (f": {err.message}" if err.message else ""))
                if err is not None else ("no value yet" if value is None else ""),
                "observed": value.status.observed.isoformat()
                if value is not None and value.status.observed else None})
        row = {"namespace": ns, "name": c.metadata.name, "state": state,
               "reason": st.status.reason if st is not None else "no status yet",
               "labels": c.metadata.labels,
               "taints": [f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}"
                          for t in c.spec.taints],
               "nodes": cap.nodes if cap is not None else None,
               "capacity": capacity, "metrics": metrics}
        group = c.metadata.labels.get(group_by, "(none)") if group_by else ""
        groups.setdefault(group, []).append(row)
    for rows in groups.values():
        rows.sort(key=lambda r: (r["state"] == "ONLINE", r["namespace"] or "", r["name"]))
    return {**head(snap), "group_by": group_by, "labels": sorted(label_keys),
            "states": dict(states), "count": len(snap.clusters),
            "groups": [{"group": g, "clusters": groups[g]} for g in sorted(groups)]}


# -- the applications ---------------------------------------------------------------------


def applications(snap: Snapshot, *, namespace: str = "", labels: str = "", state: str = "",
                 offset: int = 0, limit: int = LIST_LIMIT) -> dict[str, Any]:
    """The kubectl-style list: filtered by namespace, a label selector (``-l``'s syntax:
    ValueError names the term that does not parse) and state (the propagator's or the
    placement's), sorted by namespace and name, ``limit`` rows from ``offset``."""
    terms = selector(labels) if labels else []
    rows = []
    states: Counter[str] = Counter()
    for item in snap.apps:
        m = item.obj.meta
        app = f"{m.namespace}/{m.name}"
        b, st = snap.bindings.get(app), snap.app_status.get(app)
        placement = "Pending" if b is None else (
            f"Pending (gen {m.generation})" if b.spec.generation != m.generation
            else b.status.state or "-")
        shown_state = st.status.state if st is not None and st.status.state else "-"
        states[shown_state] += 1
        if namespace and m.namespace != namespace:
            continue
        if terms and not selected(m.labels, terms):
            continue
        if state and state not in (shown_state, placement):
            continue
        reason = (st.status.reason if st is not None and st.status.reason
                  else b.status.reason if b is not None else "")
        rows.append({"namespace": m.namespace, "name": m.name, "placement": placement,
                     "state": shown_state,
                     "ready": ready(st.status.applied, {
                         f"{t.namespace or m.namespace}/{t.name}" for t in b.spec.targets}
                         if b is not None else set()) if st is not None else "-",
                     "clusters": [t.name for t in b.spec.targets] if b is not None else [],
                     "reason": reason, "age": age(m.created)})
    rows.sort(key=lambda r: (r["namespace"] or "", r["name"]))
    namespaces = sorted({i.obj.meta.namespace or "" for i in snap.apps})
    return {**head(snap), "total": len(snap.apps), "matched": len(rows), "offset": offset,
            "rows": rows[offset:offset + limit], "namespaces": namespaces,
            "states": dict(states)}


def _read(store: Store, key: str, type_: type[Any]) -> Any:
    kv = store.get(key)
    return decode(kv.value, type_, key) if kv is not None else None


def application(store: Store, namespace: str, name: str) -> dict[str, Any] | None:
    """One application: its decision and explanation (``berth explain``'s tables), its
    health per cluster, its rollout, its ledger (oldest first) and its recent events;
    None if there is no such application."""
    app: Application | None = _read(store, keys.resource_key("Application", name, namespace),
                                     Application)
    if app is None:
        return None
    problems: list[str] = []  # what does not decode: named, the rest still shown

    def joined(key: str, type_: type[Any]) -> Any:
        try:
            return _read(store, key, type_)
        except StoreError as exc:
            problems.append(f"skipped: {exc}")
            return None

    b: Binding | None = joined(keys.binding_key("Application", namespace, name), Binding)
    st: ApplicationStatus | None = joined(keys.status_key("Application", namespace, name),
                                          ApplicationStatus)
    out: dict[str, Any] = {"namespace": namespace, "name": name,
                           "generation": app.metadata.generation,
                           "labels": app.metadata.labels, "problems": problems}
    if b is not None:
        ranked, rejected = explanation(b)
        out["decision"] = {
            "state": b.status.state, "reason": b.status.reason,
            "generation": b.spec.generation, "decided": decided(b).lstrip("; "),
            "targets": [{"name": t.name, "namespace": t.namespace, "replicas": t.replicas,
                         "score": t.score} for t in b.spec.targets],
            "ranked": {"head": RANKED_HEAD, "rows": ranked},
            "rejected": {"head": REJECTED_HEAD, "rows": rejected}}
    if st is not None:
        s = st.status
        out["status"] = {"state": s.state, "reason": s.reason,
                         "running_on": [r.name for r in s.running_on]}
        out["health"] = [{"cluster": cid, "generation": c.generation,
                          "health": c.health or "-", "reason": c.reason,
                          "ready": f"{c.available or 0}/{c.desired}"
                          if c.desired is not None else "-",
                          "since": c.since.isoformat() if c.since else None}
                         for cid, c in sorted(s.applied.items())]
    out["rollout"] = _rollout(store, app, st)
    entries, problems = ledger.history(store, "Application", namespace, name)
    out["ledger"] = [{"id": e.id, "by": e.by, "time": r.time.isoformat(), "event": r.event,
                      "what": history.what(r), "why": history.why(r),
                      "values": {c.name.rsplit("/", 1)[-1]: c.metrics
                                 for c in r.candidates if c.metrics}}
                     for e, r in entries]
    out["ledger_problems"] = problems
    found, bad = events.listed(store, events.prefix("Application", namespace, name))
    out["events"] = [{"type": ev.type, "reason": ev.reason, "message": ev.message,
                      "count": ev.count, "source": ev.source,
                      "last": ev.lastTimestamp.isoformat()}
                     for _, ev in sorted(found, key=lambda kv: kv[1].lastTimestamp)][-20:]
    out["events_problems"] = bad
    return out


def _rollout(store: Store, app: Application, st: ApplicationStatus | None
             ) -> dict[str, Any]:
    """The rollout as ``berth rollout status`` prints it, and what an operator may do."""
    ns, name = app.metadata.namespace or "default", app.metadata.name
    policy = app.spec.rollout
    try:
        text, r = report(store, ns, name)
    except LookupError:
        text, r = "", None
    control = store.get(keys.rollout_key(ns, name))
    paused = False
    if control is not None:
        try:
            paused = bool(msgspec.json.decode(control.value).get("paused", False))
        except (msgspec.DecodeError, AttributeError):
            paused = False
    waiting = (r.stage if r is not None and r.phase == WAITING and "approval" in r.reason
               else "")
    return {"strategy": policy.strategy if policy is not None else RolloutStrategy.ALL,
            "stages": [s.name for s in policy.stages] if policy is not None else [],
            "phase": r.phase if r is not None else "", "stage": r.stage if r is not None
            else "", "reason": r.reason if r is not None else "", "paused": paused,
            "awaiting_approval": waiting, "report": text}


# -- metrics over time --------------------------------------------------------------------


def metric_series(snap: Snapshot, prometheus: History | None = None) -> dict[str, Any]:
    """Each metric's values across time (Prometheus's history when the console has one,
    then the console's own since it started), the clusters that use it, its forecast,
    the moves seen, and the applications deferred (their Binding Pending, with its
    planned start)."""
    history, source, problem = snap.history, "the console, since it started", ""
    if prometheus is not None:
        kept, problem = prometheus.series()
        if kept:
            history = merged(snap.history, kept)
            source = f"Prometheus ({prometheus.url}), then the console"
    users: dict[str, list[str]] = {}
    for item in snap.clusters:
        c = item.obj
        for use in c.spec.metrics:
            users.setdefault(_metric_key(use, c.metadata.namespace)[1], []).append(
                c.metadata.name)
    series = []
    for key in sorted(set(history) | set(snap.values)):
        value = snap.values.get(key)
        forecast = [[p.at.timestamp(), p.value] for p in value.status.forecast] \
            if value is not None else []
        series.append({"key": key, "metric": _metric_name(key),
                       "clusters": sorted(users.get(key, [])),
                       "points": history.get(key, []), "forecast": forecast})
    deferred = [{"application": app, "reason": b.status.reason,
                 "start": until.timestamp() if (until := b.status.deferred_until) else None}
                for app, b in sorted(snap.bindings.items())
                if b.status.state == BindingState.PENDING]
    return {**head(snap), "series": series, "source": source, "problem": problem,
            "moves": [{"at": m.at, "application": m.application, "from": list(m.source),
                       "to": list(m.targets), "decision": m.decision}
                      for m in snap.moves[-MOVES_SHOWN:]],
            "deferred": deferred}


def _metric_name(value_key: str) -> str:
    """``price-de`` (a GlobalMetric) or ``ns/price`` (a Metric) of a value's key."""
    ref = value_key.removeprefix(keys.METRIC_VALUES).split("/", 1)
    return ref[1] if len(ref) == 2 and ref[0] == "globalmetrics" else ref[-1]


# -- what-if ------------------------------------------------------------------------------


class Refused(ValueError):
    """Input the console cannot decide on; the message names the document and field."""


def whatif(store: Store, text: str) -> dict[str, Any]:
    """``berth explain --what-if``'s answer for YAML text: the applications in it decided
    as the leading scheduler would, and the stored ones that would move."""
    loaded: list[tuple[str, dict[str, Any]]] = []
    problems: list[str] = []
    try:
        for where, data in documents(text, "the pasted YAML"):
            try:
                item = to_document(where, data)
            except Invalid as exc:
                problems += str(exc).splitlines()
                continue
            loaded.append((item.key, msgspec.to_builtins(item.doc)))
    except YamlRefused as exc:
        raise Refused(str(exc)) from None
    if problems:
        raise Refused("\n".join(problems))
    if not loaded:
        raise Refused("the pasted YAML holds no document")
    config, whose = leading_config(store)
    started = time.monotonic()
    try:
        result = what_if(store, config, loaded)
    except (StoreError, TimeoutError) as exc:
        raise Refused(f"cannot decide now: {exc}") from None
    return {"config": whose, "seconds": round(time.monotonic() - started, 3),
            **result.to_dict()}
