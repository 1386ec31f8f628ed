"""One application (``GET /api/applications/NS/NAME``): its decision and explanation
(``berth explain``'s tables), its health per cluster, its rollout and what an operator
may do about it, its ledger (oldest first) and its recent events — read from etcd, as
``berth explain``, ``berth history``, ``berth rollout status`` and ``berth get events``
read them, with the functions they take from :mod:`berth.actions`.

And the operator's actions on its rollout (``POST …/rollout/approve|pause|resume``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from berth.actions import history
from berth.actions.explain import RANKED_HEAD, REJECTED_HEAD, explanation
from berth.actions.resources import decided, priority, room
from berth.actions.rollouts import Refused, approve_stage, report, set_paused
from berth.console.pages.common import Head, answer, console, error, head, scope, snapshot
from berth.store import Store, StoreError, decode, events, keys, ledger
from berth.store.documents import Application, ApplicationStatus, Binding
from berth.store.documents.rollouts import WAITING, RolloutStrategy

log = logging.getLogger(__name__)

EVENTS_SHOWN = 20  # the latest


class TargetCell(msgspec.Struct):
    name: str
    namespace: str | None
    replicas: int | None
    score: float | None


class Table(msgspec.Struct):
    head: list[str]
    rows: list[list[str]]


class Decision(msgspec.Struct):
    state: str | None
    reason: str
    generation: int
    decided: str  # when, by which decision, and what it followed
    targets: list[TargetCell]
    ranked: Table  # berth explain's candidates
    rejected: Table  # and the filters' verdicts
    priority: str  # as written, and what it gives up for room
    room: list[str]  # a plan making room for it, or whom it made room for


class Status(msgspec.Struct):
    state: str | None
    reason: str
    running_on: list[str]


class HealthRow(msgspec.Struct):
    cluster: str
    generation: int
    health: str
    reason: str
    ready: str  # "available/desired" ("-": not counted)
    since: str | None


class Rollout(msgspec.Struct):
    strategy: str
    stages: list[str]
    phase: str | None  # "" when none is recorded
    stage: str
    reason: str
    paused: bool
    awaiting_approval: str  # the stage an operator is to approve ("" none)
    report: str  # as ``berth rollout status`` prints it


class LedgerRow(msgspec.Struct):
    id: str
    by: str
    time: str
    event: str
    what: str
    why: str
    values: dict[str, dict[str, float]]  # per candidate, its metrics as measured then


class EventRow(msgspec.Struct):
    type: str
    reason: str
    message: str
    count: int
    source: str
    last: str


class ApplicationPage(Head, kw_only=True):
    namespace: str
    name: str
    generation: int
    labels: dict[str, str]
    problems: list[str]  # what did not decode: named, the rest still shown
    decision: Decision | None = None  # None: not scheduled yet
    status: Status | None = None  # None: not applied yet
    health: list[HealthRow] = []
    rollout: Rollout
    ledger: list[LedgerRow]
    ledger_problems: list[str]
    events: list[EventRow]
    events_problems: list[str]


class Done(msgspec.Struct):
    """What an operator's action did."""

    done: str


def _read(store: Store, key: keys.Key, type_: type[Any]) -> Any:
    kv = store.get(key)
    return decode(kv.value, type_, key) if kv is not None else None


def page(store: Store, namespace: str, name: str, head_of: dict[str, Any]
         ) -> ApplicationPage | None:
    """The page (None: no such application); ``head_of``: the fleet's head."""
    app: Application | None = _read(store, keys.resource_key("Application", name, namespace),
                                     Application)
    if app is None:
        return None
    problems: list[str] = []

    def joined(key: keys.Key, type_: type[Any]) -> Any:
        try:
            return _read(store, key, type_)
        except StoreError as exc:
            problems.append(f"skipped: {exc}")
            return None

    b: Binding | None = joined(keys.binding_key("Application", namespace, name), Binding)
    st: ApplicationStatus | None = joined(keys.status_key("Application", namespace, name),
                                          ApplicationStatus)
    decision = status = None
    health: list[HealthRow] = []
    if b is not None:
        ranked, rejected = explanation(b)
        decision = Decision(
            b.status.state, b.status.reason, b.spec.generation, decided(b).lstrip("; "),
            [TargetCell(t.name, t.namespace, t.replicas, t.score) for t in b.spec.targets],
            Table(list(RANKED_HEAD), [list(r) for r in ranked]),
            Table(list(REJECTED_HEAD), [list(r) for r in rejected]),
            priority(app.spec), room(b))
    if st is not None:
        s = st.status
        status = Status(s.state, s.reason, [r.name for r in s.running_on])
        health = [HealthRow(cid, c.generation, c.health or "-", c.reason,
                            f"{c.available or 0}/{c.desired}" if c.desired is not None else "-",
                            c.since.isoformat() if c.since else None)
                  for cid, c in sorted(s.applied.items())]
        health += [HealthRow(cid, 0, "Waiting", why, "-", None)  # for its dependencies
                   for cid, why in sorted(s.waits_for.items()) if cid not in s.applied]
    entries, ledger_problems = ledger.history(store, "Application", namespace, name)
    found, bad = events.listed(store, events.prefix("Application", namespace, name))
    return ApplicationPage(
        **head_of, namespace=namespace, name=name, generation=app.metadata.generation,
        labels=app.metadata.labels, problems=problems, decision=decision, status=status,
        health=health, rollout=_rollout(store, app),
        ledger=[LedgerRow(e.id, e.by, r.time.isoformat(), r.event, history.what(r),
                          history.why(r), {c.name.rsplit("/", 1)[-1]: c.metrics
                                           for c in r.candidates if c.metrics})
                for e, r in entries],
        ledger_problems=ledger_problems,
        events=[EventRow(ev.type, ev.reason, ev.message, ev.count, ev.source,
                         ev.lastTimestamp.isoformat())
                for _, ev in sorted(found, key=lambda kv: kv[1].lastTimestamp)][-EVENTS_SHOWN:],
        events_problems=bad)


def _rollout(store: Store, app: Application) -> Rollout:
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
    return Rollout(policy.strategy if policy is not None else RolloutStrategy.ALL,
                   [s.name for s in policy.stages] if policy is not None else [],
                   r.phase if r is not None else "", r.stage if r is not None else "",
                   r.reason if r is not None else "", paused, waiting, text)


async def endpoint(request: Request) -> Response:
    c = console(request)
    ns, name = request.path_params["namespace"], request.path_params["name"]
    if not scope(request).sees(ns):  # another team's: as if there were none
        return error(f"no application {ns}/{name}", 404)
    data = await asyncio.to_thread(lambda: page(c.store, ns, name, head(snapshot(request))))
    if data is None:
        return error(f"no application {ns}/{name}", 404)
    return answer(data)


async def act(request: Request) -> Response:
    """Approve a stage, pause or resume the application's rollout."""
    c = console(request)
    if not scope(request).can_act:
        return error("this console was started without a credential (--token-file or "
                     "--tls-client-ca): it only reads", 403)
    ns, name = request.path_params["namespace"], request.path_params["name"]
    if not scope(request).sees(ns):
        return error(f"no application {ns}/{name}", 404)
    action = request.path_params["action"]
    try:
        if action == "approve":
            try:
                body = await request.json()
            except (json.JSONDecodeError, UnicodeDecodeError):
                return error('approve takes {"stage": NAME}', 400)
            stage = body.get("stage") if isinstance(body, dict) else None
            if not isinstance(stage, str) or not stage:
                return error('approve takes {"stage": NAME}', 400)
            said = await asyncio.to_thread(approve_stage, c.store, ns, name, stage, "console")
        elif action in ("pause", "resume"):
            said = await asyncio.to_thread(set_paused, c.store, ns, name, action == "pause")
        else:
            return error(f"no action {action!r} (approve, pause, resume)", 404)
    except Refused as exc:
        return error(str(exc), 409)
    log.info("console: %s", said)
    return answer(Done(said))
