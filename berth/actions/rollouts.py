"""An application's rollout as an operator sees and steers it: where it stands (the
report ``berth rollout status`` prints and the console shows), and pause, resume and
the approval of a stage — each a compare-and-swap on the application's rollout
controls (``/berth/v1/rollouts/applications/<ns>/<name>``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import msgspec

from berth.bootstrap.stages import clusters
from berth.store import Conflict, Store, decode, encode, keys
from berth.store.documents import Application, ApplicationStatus, HealthState
from berth.store.documents.rollouts import (
    WAITING,
    Approval,
    HistoryMeta,
    RolloutControl,
    RolloutState,
    RolloutStrategy,
    stages,
)


def application(store: Store, namespace: str, name: str) -> Application | None:
    kv = store.get(keys.resource_key("Application", name, namespace))
    return decode(kv.value, Application, kv.key) if kv is not None else None


def status(store: Store, namespace: str, name: str) -> ApplicationStatus | None:
    kv = store.get(keys.status_key("Application", namespace, name))
    return decode(kv.value, ApplicationStatus, kv.key) if kv is not None else None


UNKNOWN = "?"  # the stage of a cluster whose labels could not be read (a team's credential)


def report(store: Store, namespace: str, name: str) -> tuple[str, RolloutState | None]:
    """The rollout of the application as text, and its state (None: none recorded)."""
    app = application(store, namespace, name)
    if app is None:
        raise LookupError(f"application {namespace}/{name} not found")
    st = status(store, namespace, name)
    gen = app.metadata.generation
    policy = app.spec.rollout
    strategy = policy.strategy if policy is not None else RolloutStrategy.ALL
    r = st.status.rollout if st is not None else None
    lines = [f"application {namespace}/{name}: generation {gen}, strategy {strategy}"]
    if st is None:
        return "\n".join([*lines, "  not applied yet"]), None
    if r is None or r.generation != gen:
        said = (st.status.state or "-") + (f" ({st.status.reason})" if st.status.reason
                                           else "")
        return "\n".join([*lines, f"  {said}"]), None
    head = f"  rollout {r.phase or '-'}" + (f" from generation {r.stable}" if r.stable
                                            and r.stable != gen else "")
    lines.append(head + (f": {r.reason}" if r.reason else ""))
    for cid, why in sorted(r.failed.items()):
        lines.append(f"  failed {cid}: {why}")
    stage_of = _stages(store, app, list(st.status.applied))
    unknown = sorted(cid for cid in st.status.applied if stage_of(cid)[1] == UNKNOWN)
    if unknown:
        lines.append(f"  stage {UNKNOWN}: {', '.join(unknown)}: a cluster of another namespace "
                     "this credential may not read (its labels choose its stage), or one gone")
    rows = [("STAGE", "CLUSTER", "GENERATION", "HEALTH", "SINCE")]
    for cid, have in sorted(st.status.applied.items(), key=lambda i: (stage_of(i[0]), i[0])):
        health = have.health or "-"
        if have.reason and have.health != HealthState.HEALTHY:
            health += f" ({have.reason})"
        rows.append((stage_of(cid)[1], cid, str(have.generation), health,
                     f"{have.since:%H:%M:%S}" if have.since else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False))
              + "  " + row[4] for row in rows]
    return "\n".join(lines), r


def _stages(store: Store, app: Application, cids: list[str]
            ) -> Callable[[str], tuple[int, str]]:
    """(order, name) of the stage a cluster rolls in (Staged), else ``-``: the stages
    chosen as the propagator chooses them, from the clusters' labels now
    (:data:`UNKNOWN` where they cannot be read: a team reads its namespace's alone)."""
    policy = app.spec.rollout
    if policy is None or policy.strategy != RolloutStrategy.STAGED:
        return lambda _cid: (0, "-")
    labels = clusters(store, [], [app.metadata.namespace or ""])  # a team: its own alone
    known = [cid for cid in sorted(cids) if cid in labels]
    order = {cid: (i, s.name) for i, (s, members) in enumerate(
        stages(policy, known, labels)) for cid in members}
    return lambda cid: order.get(cid, (len(order), "-" if cid in labels else UNKNOWN))


class Refused(Exception):
    """Why an operator's action on a rollout is not done (the message says it whole)."""


def _control(store: Store, namespace: str, name: str,
             change: Callable[[RolloutControl], RolloutControl | str]) -> None:
    """Change the application's rollout controls with a compare-and-swap (read again on
    a conflict); ``change`` returns the new controls, or why it refuses (Refused)."""
    key = keys.rollout_key(namespace, name)
    for _ in range(5):
        kv = store.get(key)
        now = decode(kv.value, RolloutControl, key) if kv is not None else RolloutControl(
            HistoryMeta(name, namespace))
        new = change(now)
        if isinstance(new, str):
            raise Refused(new)
        try:
            if kv is None:
                store.create(key, encode(new))
            else:
                store.update(key, encode(new), kv.mod_revision)
        except Conflict:
            continue
        return
    raise Refused(f"{key} keeps changing; try again")


def set_paused(store: Store, namespace: str, name: str, paused: bool) -> str:
    """Pause or resume an application's rollout: what was done (Refused: why not).
    ``berth rollout pause/resume`` and the console's buttons."""
    if application(store, namespace, name) is None:
        raise Refused(f"application {namespace}/{name} not found")
    _control(store, namespace, name, lambda c: msgspec.structs.replace(c, paused=paused))
    return f"application/{namespace}/{name} rollout {'paused' if paused else 'resumed'}"


def approve_stage(store: Store, namespace: str, name: str, stage: str, who: str) -> str:
    """Approve the stage the application's rollout waits at: what was done (Refused: why
    not, as when the stage is not the one waiting for approval). ``berth rollout
    approve`` and the console's button."""
    app = application(store, namespace, name)
    if app is None:
        raise Refused(f"application {namespace}/{name} not found")
    gen = app.metadata.generation
    policy = app.spec.rollout
    names = [s.name for s in policy.stages] if policy is not None else []
    if stage not in names:
        raise Refused(f"application {namespace}/{name} has no stage {stage!r} "
                      f"(its stages: {', '.join(names) or 'none'})")
    st = status(store, namespace, name)
    r = st.status.rollout if st is not None else None
    waiting = (r is not None and r.generation == gen and r.phase == WAITING
               and r.stage == stage and "approval" in r.reason)
    if not waiting:
        where = "no rollout recorded" if r is None or r.generation != gen else (
            f"the rollout of generation {gen} is {r.phase}"
            + (f" at stage {r.stage}" if r.stage else "") + (f": {r.reason}" if r.reason
                                                              else ""))
        raise Refused(f"stage {stage!r} is not waiting for approval ({where})")
    said = Approval(gen, stage, who, datetime.now(UTC))
    _control(store, namespace, name, lambda c: msgspec.structs.replace(
        c, approved=[*(a for a in c.approved if a.generation >= gen), said]))
    return f"application/{namespace}/{name} stage {stage} approved (generation {gen})"


__all__ = ["Refused", "application", "approve_stage", "report", "set_paused", "status"]
