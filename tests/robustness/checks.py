"""The robustness run's invariants, checked from what was recorded, after the run.

Each violation names the invariant, the application (or process), the time and the
last fault begun before it. What each checks:

* ``binding-regressed``: no Binding goes back to an older generation while its
  application lives.
* ``decision-kept``: a Binding rewritten on the same targets and shares (a new
  generation, a held move) keeps the decision's id it had (docs/ledger.md) — unless
  the new id is a placement's or move's whose record landed by then (a move and a
  move back coalesced into one write: seed 53).
* ``outside-term``: every Binding landed in the scheduler leader's term it carries
  (the election key's create revision in force at the revision it landed at).
* ``outside-claim``: what a status says of a copy on a cluster — an application's
  ``applied`` for it, a ``failed`` or ``refused`` verdict given on it — or the
  cluster's own status changes only in a write by the propagator replica that held
  that cluster's claim at the revision it landed at (``metadata.writer``, against the
  claims' history). A verdict dropped, and ``errors``, are bookkeeping any replica
  does (the application left the cluster, or is deleted).
* ``pace``: no optional move (a Moved record the scheduler wrote for ``metrics`` or
  ``scores``) started in one of the fleet Pace's windows, when ``perMinute`` moves
  (any, forced included) had started in the minute before it, or while
  ``inTransition`` copies were in transition — counted from the Bindings and statuses
  in the history as docs/pace.md defines it (:func:`berth.store.documents.pace.steady`),
  and only if they were in every state of the ``LAG`` seconds before (the scheduler
  decides on what it has seen, a moment behind etcd).
* ``ledger``: every decision a live application's Binding carried has its ledger
  record, and no placement record names a decision no Binding carried — but one
  replaced before it was written, whose record lands with the Binding that
  replaced it.
* ``never-down``: a Deployment placed on one cluster (rollout All, PickOne) that was
  available in full never had fewer available across every cluster, in two sampling
  passes in a row (one pass reads a move's two clusters a moment apart) — unless a
  cluster its Binding named in the ``WINDOW`` before was *cut off*: its API stopped,
  or (the pull cluster) its agents paused or killed, under way or ended less than
  ``GRACE`` seconds before (a forced move off a dead cluster is excepted, as the docs
  say). No other fault excuses a copy down.
* ``copy-up``: a Deployment on every allowed cluster (PickAll, rolled out Rolling or
  Staged) available in full on a cluster stays so while that cluster is its target,
  through every rollout step (a step updates the copy in place, and the cluster's
  Deployment keeps two replicas available meanwhile) — short in two passes in a row
  is a violation, unless that cluster was cut off. Each read is judged at its own time
  (a pass reads the clusters in turn), and a cluster that left the targets since the
  copy was seen up took that copy with it: a new one is promised nothing until it is up.
* ``job-again``: no copy of a Job is made after another copy of it (the same
  application and generation, on any cluster) completed — unless that copy's
  cluster was cut off (its API stopped) less than ``SEEN`` seconds after it
  completed and the new copy was made while it was: berth could not know (a Job
  runs at least once, as on a dead node). Its completion is stamped in whole
  seconds, so it may have happened up to ``STAMP`` after the stamp.
* ``job-twice``: no two copies of a Job (the same application and generation) run
  at once — seen, neither complete nor being deleted, on two clusters in two
  sampling passes in a row — unless one of them was cut off (a Job cut off with its
  cluster runs on there, as on a dead node).
* ``stage-order``: a Staged rollout (stage ``first`` is cluster ``a``, then the
  rest) never brings a new generation to ``b`` or ``c`` before ``a``'s copy of it
  was available — seen with the new image and every replica available by the
  next sampling pass (one pass reads the clusters in turn). A first placement is
  no rollout; a generation whose Binding, then, lacks ``a`` has no first stage.
  Unseen is not unavailable: when ``a`` was cut off and not read in that pass or
  the next, its last pass read must have found the copy there, on its way — or have
  been made before the generation was decided (nothing seen either way).
  The traffic makes now and then a generation that cannot become available on
  ``a``: its rollout halts there (or rolls back), and never reaches ``b`` or ``c``.
* ``rolling`` (and ``pace`` for rollouts): a rollout's step — a target taking the
  generation rolled out, from an older one, in the application's status — never
  starts in a pace window; rolled out ``Rolling``, never while another target is on
  that generation and not yet Healthy (``maxUnavailable`` 1), in the status that
  says so and every state of it in the ``LAG`` seconds before.
* ``untouched``: the ConfigMap ``foreign`` that someone else made on each cluster
  (a "thief" application names it) never gets berth's owner, never changes and
  never goes — unless its cluster came back empty.
* ``one-owner``: one that berth made (a thief's, on a cluster back empty) never
  changes owner while it lives.
* ``final``: after the last fault, within the bound, every live application runs its
  latest generation where its Binding says (as many targets as its policy wants,
  all allowed, RUNNING), its objects are there with that generation (and the
  Override's labels where it selects them, but on a Job: it ran as it was) and
  nowhere else — but a generation that failed on ``a`` and rolls back: its rollout
  says RolledBack and every target runs the generation it rolled from; every deleted
  one is
  gone from etcd and from every cluster.
* ``quota``: the team (namespace ``team-r``, its policy's quota four applications)
  never has more applications placed — Bindings with a target — than its quota, at
  any revision of the history (docs/teams.md: never over, not under a burst, a
  leader change or a scheduler killed mid-burst).
* ``confined``: no Binding of the team's names a cluster outside the set its policy
  binds (a and c), and no status of the team's records a copy — applied, or about to
  be — outside it, or an object of a kind or Kubernetes namespace its policy does
  not allow (the team's ServiceAccounts); at the end (``final``), none of its
  objects is on a cluster outside the set, and none of a kind it may not make is
  anywhere.
* ``crash``: no process died but those the faults killed, and no log holds a
  traceback.

``final`` holds the team too: as many of its applications placed as its quota lets
(``min(quota, live)``), each on one cluster of its set and running its latest
generation there — but one holding a ServiceAccount, held with the policy's reason
and made nowhere; the rest Unschedulable over the quota, made nowhere.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

import msgspec

from berth.controllers.propagator.health import HEALTHY
from berth.store import Store, keys, ledger
from berth.store.documents import (
    ApplicationState,
    ApplicationStatus,
    Binding,
    ClusterApplied,
    ClusterStatus,
)
from berth.store.documents.ledger import HELD, MOVED, Record
from berth.store.documents.pace import PaceSpec, closed_until, steady
from berth.store.documents.rollouts import COMPLETE, ENDED, ROLLED_BACK
from tests.faults.system import PULL, System
from tests.robustness.faults import Happened
from tests.robustness.history import PLANTED, Event, Sample
from tests.robustness.traffic import TEAM, TEAM_CLUSTERS, TEAM_KINDS, TEAM_QUOTA, App, Traffic

T = TypeVar("T")


class Apps(Protocol):
    """What the checks read of the traffic (:class:`Traffic`, or a saved run's)."""

    apps: dict[str, App]
    deleted: dict[str, App]

GRACE = 30.0  # seconds after a fault during which a copy may still be short
WINDOW = 120.0  # seconds back in which the clusters a Binding named count as its
SEEN = 5.0  # seconds within which berth records a Job complete (urgent: concern.py)
STAMP = 1.0  # a Kubernetes time is in whole seconds: what it stamps happened within one after


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str
    subject: str
    at: float  # seconds since the run began (0: at the end)
    what: str
    fault: str = ""  # the last fault begun before ``at``

    def line(self) -> str:
        after = f" (after: {self.fault})" if self.fault else ""
        return f"[{self.at:7.1f} s] {self.invariant}: {self.subject}: {self.what}{after}"


def before(faults: list[Happened], at: float) -> str:
    """The last fault begun before ``at``, with its time."""
    last = [f for f in faults if f.began <= at]
    return f"{last[-1].what} at {last[-1].began:.1f} s" if last else ""


def _name(key: str, prefix: str) -> str | None:
    return key[len(prefix):] if key.startswith(prefix) and "/" not in key[len(prefix):] else None


def bindings(events: list[Event]) -> list[tuple[Event, str, Binding | None]]:
    """Every Binding write of a namespace ``default`` application (None: deleted or not
    a Binding)."""
    prefix = keys.binding_prefix("Application") + "default/"
    out = []
    for ev in events:
        name = _name(ev.key, prefix)
        if name is None:
            continue
        b = None
        if ev.type == "PUT":
            try:
                b = msgspec.json.decode(ev.value, type=Binding)
            except (msgspec.DecodeError, msgspec.ValidationError):
                b = None
        out.append((ev, name, b))
    return out


def check_bindings(events: list[Event], faults: list[Happened], term: int
                   ) -> list[Violation]:
    """``term``: the scheduler leader's when the history began."""
    out: list[Violation] = []
    election = keys.lease_key("scheduler")
    terms = [(0, term)] + [(ev.revision, ev.create_revision) for ev in events
                           if ev.key == election]

    def term_at(revision: int) -> int:
        now = 0
        for rev, term in terms:
            if rev > revision:
                break
            now = term
        return now

    # the scheduler's records of a change of targets, by (application, decision id), and
    # the revision each landed at: a decision whose Binding another superseded before it
    # landed (the writer keeps the latest per key) has its record, not its Binding
    moved = {(name, rid): ev.revision for ev in events
             if (rid := _moved_record(ev)) and (name := _ledger_subject(ev.key))}
    seen: dict[str, int] = {}
    last: dict[str, Binding] = {}
    for ev, name, b in bindings(events):
        if b is None:
            if ev.type == "DELETE":
                seen.pop(name, None)
                last.pop(name, None)
            continue
        was = last.get(name)
        last[name] = b
        if (was is not None and was.spec.decision and b.spec.targets
                and _shares(was) == _shares(b) and b.spec.decision != was.spec.decision
                and not moved.get((name, b.spec.decision), ev.revision + 1) <= ev.revision):
            out.append(Violation("decision-kept", name, ev.at,
                                 f"decision {was.spec.decision!r} → {b.spec.decision!r} on "
                                 f"the same targets at revision {ev.revision}",
                                 before(faults, ev.at)))
        if b.spec.generation < seen.get(name, 0):
            out.append(Violation("binding-regressed", name, ev.at,
                                 f"generation {seen[name]} → {b.spec.generation} at revision "
                                 f"{ev.revision}", before(faults, ev.at)))
        seen[name] = max(seen.get(name, 0), b.spec.generation)
        if b.status.term and b.status.term != term_at(ev.revision):
            out.append(Violation("outside-term", name, ev.at,
                                 f"written in term {b.status.term}, landed at revision "
                                 f"{ev.revision} in term {term_at(ev.revision)}",
                                 before(faults, ev.at)))
    return out


def _ledger_subject(key: str) -> str:
    """The application a ledger key of ``default`` is about ("": another)."""
    head = ledger.LEDGER + "applications/default/"
    return key[len(head):].split("/", 1)[0] if key.startswith(head) else ""


def _moved_record(ev: Event) -> str:
    """The decision id of a scheduler's record of a change of targets (a placement or
    a move) the event wrote ("": none)."""
    if ev.type != "PUT" or ".scheduler." not in ev.key:
        return ""
    rid = ev.key.rsplit("/", 1)[1].split(".scheduler.", 1)[0]
    try:
        event = msgspec.json.decode(ev.value, type=dict[str, Any]).get("event")
    except msgspec.DecodeError:
        return ""
    return rid if event in ("Placed", "Moved") else ""


CLAIMS = keys.LEASES + "propagator/clusters/"


def holder(value: bytes) -> str:
    """Who a claim's value names ("": not a claim, written by hand)."""
    try:
        got = msgspec.json.decode(value, type=dict[str, Any]).get("holder")
    except msgspec.DecodeError:
        return ""
    return got if isinstance(got, str) else ""


def _entries(st: ApplicationState) -> dict[str, tuple[Any, ...]]:
    """What an application's status says its copy on each cluster is: what was applied
    there and judged (``applied``), that it failed there in time (``failed``), that the
    cluster refused it (``refused``) — what only the replica serving that cluster can
    know."""
    cids = set(st.applied) | set(st.failed) | set(st.refused)
    return {c: (st.applied.get(c), st.failed.get(c), st.refused.get(c)) for c in cids}


def _said(was: tuple[Any, ...] | None, now: tuple[Any, ...] | None) -> bool:
    """Whether a write changed what only a cluster's owner knows: its copy (made,
    changed or gone), or a verdict on it given anew. A verdict dropped is bookkeeping
    any replica does (the application left the cluster, or is deleted); ``errors``,
    likewise carried on and dropped by whichever replica writes, is not checked."""
    applied_was, applied_now = (was or (None,))[0], (now or (None,))[0]
    if applied_was != applied_now:
        return True
    return any(n is not None and n != w for w, n in zip((was or (None,) * 3)[1:],
                                                        (now or (None,) * 3)[1:],
                                                        strict=True))


def check_claims(events: list[Event], faults: list[Happened], start: dict[str, str]
                 ) -> list[Violation]:
    """``start``: each cluster's claim holder when the history began."""
    holders = dict(start)
    apps = keys.status_prefix("Application") + "default/"
    clusters = keys.status_prefix("Cluster") + "default/"
    last: dict[str, dict[str, tuple[Any, ...]]] = {}  # status key → entries, last good
    out: list[Violation] = []
    said: set[tuple[str, str, str]] = set()

    def check(subject: str, ev: Event, writer: str, cid: str) -> None:
        now = holders.get(cid, "")
        if writer and now != writer and (subject, writer, cid) not in said:
            said.add((subject, writer, cid))
            out.append(Violation("outside-claim", subject, ev.at,
                                 f"{writer} wrote of {cid} at revision {ev.revision} while "
                                 f"{now or 'nobody'} held its claim", before(faults, ev.at)))

    for ev in events:
        if ev.key.startswith(CLAIMS):
            cid = ev.key[len(CLAIMS):]
            if ev.type == "DELETE":
                holders.pop(cid, None)
            else:
                holders[cid] = holder(ev.value)
        elif (name := _name(ev.key, clusters)) is not None and ev.type == "PUT":
            try:
                cs = msgspec.json.decode(ev.value, type=ClusterStatus)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # garbage, written by hand
            check(f"cluster {name}", ev, cs.metadata.writer, f"default/{name}")
        elif (name := _name(ev.key, apps)) is not None:
            if ev.type == "DELETE":
                last.pop(ev.key, None)
                continue
            try:
                st = msgspec.json.decode(ev.value, type=ApplicationStatus)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue  # garbage: the next write is compared with the last good one
            was, now = last.get(ev.key, {}), _entries(st.status)
            last[ev.key] = now
            for cid in sorted(set(was) | set(now)):
                if _said(was.get(cid), now.get(cid)):
                    check(name, ev, st.metadata.writer, cid)
    return out


LAG = 2.0  # seconds the scheduler's view may be behind etcd when it decides
OPTIONAL = ("metrics", "scores")  # the triggers of an optional move (ledger.TRIGGERS)


def _record(ev: Event) -> Record | None:
    """The scheduler's ledger record an event wrote (None: another key, or not one)."""
    if ev.type != "PUT" or not ev.key.startswith(ledger.LEDGER) or ".scheduler." not in ev.key:
        return None
    try:
        return msgspec.json.decode(ev.value, type=Record)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def check_pace(events: list[Event], faults: list[Happened], pace: PaceSpec
               ) -> tuple[list[Violation], dict[str, int]]:
    """Also what was counted: optional moves checked, and the moves the pace held back."""
    bprefix = keys.binding_prefix("Application") + "default/"
    sprefix = keys.status_prefix("Application") + "default/"
    targets: dict[str, frozenset[str]] = {}
    ok: dict[str, frozenset[str]] = {}  # only applications that run somewhere
    # (revision, time, copies in transition once its events were read), as they changed
    counts: list[tuple[int, float, int]] = [(0, 0.0, 0)]

    def total() -> int:
        return sum(len(t - ok[n]) for n, t in targets.items() if n in ok)

    started: list[datetime] = []  # every move's record time
    out: list[Violation] = []
    seen = {"optional moves": 0, "held by the pace": 0}
    changed = False
    for ev in events:
        if changed and ev.revision != counts[-1][0]:  # the revision before is whole
            counts[-1] = (counts[-1][0], counts[-1][1], total())
            changed = False
        if (name := _name(ev.key, bprefix)) is not None:
            b = _decoded(ev, Binding)
            if b is None:
                targets.pop(name, None)
            else:
                targets[name] = frozenset(f"{t.namespace or ''}/{t.name}" for t in b.spec.targets)
        elif (name := _name(ev.key, sprefix)) is not None:
            st = _decoded(ev, ApplicationStatus)
            r = st.status.rollout if st is not None else None
            now = steady(st.status.applied, r.generation if r else 0,
                         r.phase if r else "") if st is not None else None
            if now is None:
                ok.pop(name, None)
            else:
                ok[name] = frozenset(now)
        elif (rec := _record(ev)) is not None:
            app = ev.key[len(ledger.LEDGER):].split("/")[-2]
            if rec.event == HELD and rec.rule in ("window", "in_transition",
                                                        "per_minute"):
                seen["held by the pace"] += 1
            if rec.event != MOVED:
                continue
            t = rec.time
            if rec.trigger in OPTIONAL:
                seen["optional moves"] += 1
                why = []
                if pace.windows and closed_until(pace.windows, t) is not None:
                    why.append(f"in a window ({t:%H:%M:%S} UTC)")
                # decided before it (one decided later may land first, in the same
                # transaction: a write retried after etcd did not answer goes last)
                last = [s for s in started if 0.0 <= (t - s).total_seconds() < 59.0]
                if pace.per_minute and len(last) >= pace.per_minute:
                    why.append(f"{len(last)} moves started in the minute before "
                               f"(perMinute {pace.per_minute})")
                # the count before this revision, in every state of the last LAG seconds
                before_it = [c for rev, at, c in counts if rev < ev.revision
                             and at >= ev.at - LAG] or [
                    next(c for rev, _, c in reversed(counts) if rev < ev.revision)]
                if pace.in_transition and min(before_it) >= pace.in_transition:
                    why.append(f"{min(before_it)} copies in transition "
                               f"(inTransition {pace.in_transition})")
                if why:
                    out.append(Violation("pace", app, ev.at, "optional move to "
                                         + ",".join(t.name for t in rec.targets) + " started "
                                         + "; ".join(why), before(faults, ev.at)))
            started.append(t)
            continue
        else:
            continue
        if counts[-1][0] != ev.revision:
            counts.append((ev.revision, ev.at, -1))  # its count once it is whole
        changed = True
    return out, seen


def _decoded(ev: Event, kind: type[T]) -> T | None:
    """The document a PUT wrote (None: a delete, or garbage written by hand)."""
    if ev.type != "PUT":
        return None
    try:
        return msgspec.json.decode(ev.value, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _shares(b: Binding) -> dict[tuple[str, str | None], int | None]:
    return {(t.name, t.namespace): t.replicas for t in b.spec.targets}


def ledger_now(db: Store, live: Iterable[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """The scheduler's placement records of the live applications in ``db``'s ledger now,
    as (application, record id), and the records that could not be read."""
    recorded: list[tuple[str, str]] = []
    problems: list[str] = []
    for name in sorted(set(live)):
        found, bad = ledger.history(db, "Application", "default", name)
        problems += [f"{name}: {p}" for p in bad]
        recorded += [(name, e.id) for e, _ in found if e.by == "scheduler"]
    return recorded, problems


def check_ledger(events: list[Event], live: Iterable[str], recorded: set[tuple[str, str]],
                 problems: list[str]) -> list[Violation]:
    """Every decision a live application's Binding carried has the scheduler's record
    (``recorded`` in the ledger at the end, by :func:`ledger_now`, or written in the
    history), and every record names one."""
    alive = set(live)
    carried = {(name, b.spec.decision) for _, name, b in bindings(events)
               if b is not None and b.spec.decision and name in alive}
    out = [Violation("ledger", p.split(":", 1)[0], 0.0,
                     f"unreadable record: {p.split(': ', 1)[-1]}") for p in problems]
    # ... or had one, which retention has removed since (the newest ``keep`` of each
    # application's stay): the history saw it written
    written = {(e.resource.rsplit("/", 2)[-2], e.id) for ev in events
               if _record(ev) is not None for e in [ledger.parse(ev.key)]}  # the scheduler's
    out += [Violation("ledger", n, 0.0, f"decision {d} has no record")
            for n, d in sorted(carried - recorded - written)]
    # a decision replaced before it was written has its record in the transaction of
    # the one that replaced it (docs/ledger.md): made, not carried
    prefix = keys.binding_prefix("Application") + "default/"
    landed = {(ev.key[len(prefix):], ev.revision) for ev in events
              if ev.key.startswith(prefix)}
    with_binding = {(n, ev.key.rsplit("/", 1)[-1].rsplit(".scheduler.", 1)[0]) for ev in events
                    for n in [ev.key.split("/")[-2]] if "/ledger/" in ev.key
                    and ".scheduler." in ev.key and (n, ev.revision) in landed}
    out += [Violation("ledger", n, 0.0, f"record {d} names a decision no Binding carried")
            for n, d in sorted(recorded - carried - with_binding)]
    return out


def check_never_down(samples: list[Sample], unreached: set[int], events: list[Event],
                     traffic: Apps, faults: list[Happened], deleted_at: dict[str, float]
                     ) -> list[Violation]:
    """PickOne Deployments with rollout All: the sum of available replicas over every
    cluster, in each sampling pass every cluster answered, once it first reached 2 —
    short in two passes in a row: one pass reads the clusters in turn, so a move
    between them (the new copy read a moment before it was available, the old one
    just after it went) reads short once."""
    watched = {n for n, a in list(traffic.apps.items()) + list(traffic.deleted.items())
               if a.shape == "deploy" and a.strategy == "All"}
    passes: dict[int, dict[str, int]] = defaultdict(dict)  # pass → app → available
    began: dict[int, float] = {}
    for s in samples:
        began.setdefault(s.round, s.at)
        if s.kind == "Deployment" and s.name in watched and s.round not in unreached:
            passes[s.round][s.name] = passes[s.round].get(s.name, 0) + s.available

    placed = _placements(events, watched)
    full: set[str] = set()
    short: dict[str, int] = {}  # app → the pass it was last read short in
    out: list[Violation] = []
    for n in sorted(passes):
        at = began[n]
        for name in watched:
            have = passes[n].get(name, 0)
            if have >= 2:
                full.add(name)
            elif (name in full and at < deleted_at.get(name, 1e9)
                  and not _cut_off(faults, _named(placed[name], at - WINDOW, at), at)):
                if short.get(name) == n - 1:
                    out.append(Violation("never-down", name, at, f"{have}/2 available",
                                         before(faults, at)))
                    full.discard(name)  # once per outage
                short[name] = n
    return out


def check_jobs(samples: list[Sample], faults: list[Happened],
               run_time: Callable[[str], float]) -> list[Violation]:
    """A Job made (its creationTimestamp, by the API servers' clocks: one machine here)
    after another copy of it — the same application and generation, on any cluster —
    had completed. ``run_time``: such a time in seconds since the run began."""

    def cut_off(cluster: str, completed: str, made: str) -> bool:
        # it completed within STAMP after its stamp: up to SEEN after that, unseen
        done, new = run_time(completed), run_time(made)
        return any(f.what.startswith(f"cluster {cluster}'s API stopped")
                   and done <= f.began <= done + STAMP + SEEN
                   and f.began <= new <= (f.ended or 1e9) for f in faults)

    copies: dict[tuple[str, str], dict[str, Sample]] = defaultdict(dict)  # uid → last
    for s in samples:
        if s.kind == "Job":
            copies[(s.name, s.image)][s.uid] = s
    out: list[Violation] = []
    for (name, image), by_uid in sorted(copies.items()):
        done = [c for c in by_uid.values() if c.completed]
        if not done:
            continue
        first = min(done, key=lambda c: c.completed)
        said: set[tuple[str, str]] = set()
        for c in by_uid.values():
            if c.created > first.completed and not cut_off(first.cluster, first.completed,
                                                           c.created) and (
                    (c.cluster, c.created) not in said):  # RFC 3339 UTC: ordered as text
                said.add((c.cluster, c.created))
                out.append(Violation("job-again", name, c.at,
                                     f"made on {c.cluster} at {c.created} ({image}), after its "
                                     f"copy on {first.cluster} completed at {first.completed}",
                                     before(faults, c.at)))
    return out


def check_copies_up(samples: list[Sample], unreached: set[int], events: list[Event],
                    traffic: Apps, faults: list[Happened], deleted_at: dict[str, float]
                    ) -> list[Violation]:
    """PickAll Deployments rolled out Rolling or Staged, each copy on its own: once
    available in full (2) on a cluster that is its target, short there in two passes
    in a row."""
    watched = {n for n, a in list(traffic.apps.items()) + list(traffic.deleted.items())
               if a.shape == "deploy" and a.strategy != "All"}
    placed = _placements(events, watched)
    passes: dict[int, dict[tuple[str, str], int]] = defaultdict(dict)
    began: dict[int, float] = {}
    read_at: dict[tuple[int, str], float] = {}  # when a pass read a cluster
    for s in samples:
        began.setdefault(s.round, s.at)
        read_at.setdefault((s.round, s.cluster), s.at)
        if s.kind == "Deployment" and s.name in watched and s.round not in unreached:
            passes[s.round][(s.name, s.cluster)] = s.available
    full: dict[tuple[str, str], float] = {}  # copy → when last seen available in full
    short: dict[tuple[str, str], int] = {}
    out: list[Violation] = []
    for n in sorted(passes):
        for copy in set(full) | set(passes[n]):
            name, cluster = copy
            at = read_at.get((n, cluster), began[n])  # a pass reads the clusters in turn
            if (cluster not in _throughout(placed[name], full.get(copy, at), at)
                    or at >= deleted_at.get(name, 1e9)):
                # not its target (yet, or any more), or it left the targets since the copy
                # was seen up (that copy went with it): nothing promised
                full.pop(copy, None)
                continue
            if passes[n].get(copy, 0) >= 2:
                full[copy] = at
            elif copy in full and not _cut_off(faults, {cluster}, at):
                if short.get(copy) == n - 1:
                    out.append(Violation("copy-up", name, at, f"{passes[n].get(copy, 0)}/2 "
                                         f"available on {cluster}", before(faults, at)))
                    full.pop(copy)  # once per outage
                short[copy] = n
    return out


def _placements(events: list[Event], names: set[str]) -> dict[str, list[tuple[float, set[str]]]]:
    """For each of ``names``, the clusters its Binding named from each time on."""
    out: dict[str, list[tuple[float, set[str]]]] = defaultdict(list)
    for ev, name, b in bindings(events):
        if name in names and (b is not None or ev.type == "DELETE"):
            out[name].append((ev.at, {t.name for t in b.spec.targets} if b else set()))
    return out


def _named(placed: list[tuple[float, set[str]]], since: float, until: float) -> set[str]:
    """The clusters a Binding named at any time from ``since`` to ``until``."""
    out: set[str] = set()
    for i, (at, on) in enumerate(placed):
        ends = placed[i + 1][0] if i + 1 < len(placed) else 1e18
        if at <= until and ends >= since:
            out |= on
    return out


def _throughout(placed: list[tuple[float, set[str]]], since: float, until: float
                ) -> set[str]:
    """The clusters a Binding named all the time from ``since`` to ``until``."""
    out: set[str] | None = None
    for i, (at, on) in enumerate(placed):
        ends = placed[i + 1][0] if i + 1 < len(placed) else 1e18
        if at <= until and ends > since:
            out = set(on) if out is None else out & on
    return out or set()


def _cut_off(faults: list[Happened], clusters: set[str], at: float) -> bool:
    """Whether one of ``clusters`` was cut off at ``at``, or less than ``GRACE`` before:
    its API stopped, or — the pull cluster, reached by its agents alone — its agents
    paused or killed."""
    return any(f.began - 1.0 <= at <= (f.ended or 1e9) + GRACE and _reaches(f.what) & clusters
               for f in faults)


def cut_off_seconds(faults: list[Happened], until: float) -> dict[str, int]:
    """For each cluster, the seconds of the run (to ``until``) in which it counted as
    cut off: what the availability checks forgave there, and only there."""
    out: dict[str, int] = {}
    for cluster in sorted({c for f in faults for c in _reaches(f.what)}):
        out[cluster] = sum(1 for t in range(int(until)) if _cut_off(faults, {cluster}, t))
    return out


def _reaches(what: str) -> set[str]:
    """The clusters a fault cuts off (none: it leaves every cluster as it was)."""
    m = re.match(r"cluster (\w+)'s API", what)
    if m:
        return {m.group(1)}
    return {PULL} if " agent " in f" {what} " else set()


DEPENDS_SKEW = 1.0  # seconds the recorder may read a status after a sampler saw its effect


def check_depends_first(samples: list[Sample], events: list[Event], traffic: Apps
                        ) -> list[Violation]:
    """A web tier's Deployment appears on a cluster only where its dependency's copy was
    available before (docs/order.md "Dependencies"): for each first sight of it on a
    cluster, a status of the dependency recorded no later than then (give or take
    ``DEPENDS_SKEW``) said its copy there Healthy."""
    webs = {n: a.depends_on for n, a in [*traffic.apps.items(), *traffic.deleted.items()]
            if a.depends_on}
    if not webs:
        return []
    prefix = keys.status_prefix("Application") + "default/"
    ready: dict[tuple[str, str], float] = {}  # (dependency, cluster) → first seen available
    for ev in events:
        name = _name(ev.key, prefix)
        if name is None or name not in webs.values() or ev.type != "PUT":
            continue
        try:
            st = msgspec.json.decode(ev.value, type=ApplicationStatus).status
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        for cid, have in st.applied.items():
            if have.health == "Healthy" and not have.waiting:
                ready.setdefault((name, cid.partition("/")[2]), ev.at)
    out: list[Violation] = []
    seen: set[tuple[str, str]] = set()  # (web, cluster)
    for s in samples:
        if s.kind != "Deployment" or s.name not in webs or (s.name, s.cluster) in seen:
            continue
        seen.add((s.name, s.cluster))  # first seen there
        dep = webs[s.name]
        at = ready.get((dep, s.cluster))
        if at is None or at > s.at + DEPENDS_SKEW:
            out.append(Violation("depends-first", s.name, s.at, f"on {s.cluster} before "
                                 f"{dep} was seen available there" + (
                                     f" ({at - s.at:.1f} s later)" if at else "")))
    return out


def check_jobs_twice(samples: list[Sample], faults: list[Happened]) -> list[Violation]:
    passes: dict[int, dict[tuple[str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    began: dict[int, float] = {}
    for s in samples:
        began.setdefault(s.round, s.at)
        if s.kind == "Job" and not s.completed and not s.deleting:
            passes[s.round][(s.name, s.image)].add(s.cluster)
    out: list[Violation] = []
    said: set[tuple[str, str]] = set()
    for n in sorted(passes):
        for job, on in passes[n].items():
            if (len(on) > 1 and len(passes.get(n - 1, {}).get(job, ())) > 1
                    and job not in said and not _cut_off(faults, on, began[n])):
                said.add(job)
                out.append(Violation("job-twice", job[0], began[n],
                                     f"{job[1]} running on {', '.join(sorted(on))} at once",
                                     before(faults, began[n])))
    return out


def check_stages(samples: list[Sample], events: list[Event], traffic: Apps,
                 faults: list[Happened]) -> list[Violation]:
    staged = {n for n, a in list(traffic.apps.items()) + list(traffic.deleted.items())
              if a.shape == "deploy" and a.strategy == "Staged"}
    decided: dict[str, list[tuple[float, int, set[str]]]] = defaultdict(list)
    for ev, name, b in bindings(events):
        if name in staged and b is not None:
            decided[name].append((ev.at, b.spec.generation, {t.name for t in b.spec.targets}))

    def a_first(name: str, gen: int, at: float) -> bool:
        """Whether ``gen``'s Binding had ``a`` (its first stage) all through the ``LAG``
        seconds around ``at``: the history is read a moment behind the clusters (seed
        53: ``a`` left the targets, so the rollout went on to ``b`` and ``c`` at once,
        and a sample saw ``b``'s copy before the recorder had read the Binding)."""
        seen = [(t, on) for t, g, on in decided[name] if g == gen and t <= at + LAG]
        ons = [on for t, on in seen if t <= at - LAG][-1:] + [
            on for t, on in seen if t > at - LAG]
        return bool(ons) and all("a" in on for on in ons)

    ready_on_a: dict[tuple[str, str], int] = {}  # (app, image) → first pass available on a
    on_a: dict[tuple[str, str], set[int]] = defaultdict(set)  # passes a had it, available or not
    read_a: set[int] = set()  # the passes that read cluster a
    a_read_at: dict[int, float] = {}  # ... and when
    later: dict[tuple[str, str], tuple[int, float, str]] = {}  # first pass on b or c
    for s in samples:
        if s.cluster == "a":
            read_a.add(s.round)
            a_read_at.setdefault(s.round, s.at)
        if s.kind != "Deployment" or s.name not in staged or not s.image.startswith("x:"):
            continue
        key = (s.name, s.image)
        if s.cluster == "a":
            on_a[key].add(s.round)
            if s.available >= 2:
                ready_on_a.setdefault(key, s.round)
        else:
            later.setdefault(key, (s.round, s.at, s.cluster))

    def unseen(key: tuple[str, str], n: int, at: float) -> bool:
        """Whether ``a`` may have had the copy available unseen: cut off then, it was not
        read in pass ``n`` or the next, and the last pass that read it found the copy
        there, becoming available (seed 29: a's API stopped a moment after berth saw
        its copy available and before the sampler came back to a; a cut-off cluster's
        last state is berth's to have seen, not the sampler's) — or read it before the
        generation was decided at all (seed 29 on a loaded machine: the sampler did not
        come back to ``a`` for seven seconds, in which the generation was decided, rolled
        out there and went on, and then ``a`` was cut off: nothing was seen either way)."""
        if {n, n + 1} <= read_a or not _cut_off(faults, {"a"}, at):
            return False
        last = max((r for r in read_a if r <= n + 1), default=None)
        if last is None:
            return False
        name, image = key
        gen = int(image[2:])
        decided_at = min((t for t, g, on in decided[name] if g == gen and "a" in on),
                         default=None)
        return last in on_a[key] or (decided_at is not None
                                     and a_read_at[last] < decided_at)

    out: list[Violation] = []
    for (name, image), (n, at, cluster) in sorted(later.items()):
        if image == "x:1" or not a_first(name, int(image[2:]), at):
            continue  # a first placement; or no first stage (a is no target)
        if ready_on_a.get((name, image), 1 << 30) > n + 1 and not unseen((name, image), n, at):
            out.append(Violation("stage-order", name, at,
                                 f"{image} on {cluster} before cluster a had it available",
                                 before(faults, at)))
    return out


def check_rollout_steps(events: list[Event], traffic: Apps, pace: PaceSpec,
                        faults: list[Happened]) -> list[Violation]:
    """A rollout's step — a target taking the generation rolled out, from an older one,
    as the application's status says it — never starts in a pace window (by when it was
    applied there), nor, rolled out ``Rolling``, while another target is on that
    generation and not yet Healthy (``maxUnavailable`` 1) in the status that says so
    and in every state of it in the ``LAG`` seconds before: a replica decides on what
    it has seen.

    Steps that one status write shows together were taken one after another, its
    writes between them not landed (an etcd member lost, a status changed meanwhile)
    or not needed (a copy the cluster showed Healthy at once, its Deployment
    unchanged, needs no wait): a copy Healthy there went first and finished, so the
    others of that write are not what it started beside; two of them not Healthy
    are (seed 53, ``r-deploy-0536``: ``a`` Healthy at the instant it was applied,
    then ``c`` in the same reconcile, one write for both)."""
    apps = list(traffic.apps.items()) + list(traffic.deleted.items())
    stepped = {n: a.strategy for n, a in apps
               if a.shape == "deploy" and a.strategy in ("Rolling", "Staged")}
    prefix = keys.status_prefix("Application") + "default/"
    bound = keys.binding_prefix("Application") + "default/"
    states: dict[str, list[tuple[float, ApplicationState]]] = defaultdict(list)
    targets: dict[str, set[str]] = {}  # what the Binding names now ("<ns>/<cluster>")
    out: list[Violation] = []
    for ev in events:
        if (bname := _name(ev.key, bound)) in stepped:
            b = _decoded(ev, Binding)
            if b is not None:
                targets[bname] = {f"{t.namespace or ''}/{t.name}" for t in b.spec.targets}
            continue
        name = _name(ev.key, prefix)
        if name not in stepped:
            continue
        doc = _decoded(ev, ApplicationStatus)
        if doc is None:
            if ev.type == "DELETE":
                states.pop(name, None)
            continue
        now, seen = doc.status, states[name]
        r = now.rollout
        if seen and r is not None and 0 < r.stable < r.generation and (
                r.phase not in (*ENDED, COMPLETE)):
            # what the writer may have decided on: the states of the LAG before, and its own
            before_it = [st for at, st in seen if at >= ev.at - LAG] + [now]
            prev = seen[-1][1]
            on = targets.get(name, set())  # a cluster left behind is no step's
            steps = {cid: a for cid, a in now.applied.items()
                     if _stepped(cid, a.generation, prev.applied.get(cid), r.generation, on)}
            for cid, a in sorted(steps.items()):
                since = a.since
                if since is not None and pace.windows and all(
                        closed_until(pace.windows, t) is not None
                        for t in (since, since - timedelta(seconds=LAG))):
                    out.append(Violation("pace", name, ev.at, f"rollout step of generation "
                                         f"{r.generation} on {cid} started in a window "
                                         f"({since:%H:%M:%S} UTC)", before(faults, ev.at)))
                # in this write, a step that finished (Healthy) went before the others
                after = set(steps) if a.health == HEALTHY else set()
                busy = [sorted(c for c, b in st.applied.items() if c != cid and c in on
                               and b.generation == r.generation and b.health != HEALTHY
                               and not (st is now and c in after))
                        for st in before_it]
                if stepped[name] == "Rolling" and all(busy):
                    out.append(Violation("rolling", name, ev.at, f"generation {r.generation} "
                                         f"started on {cid} while {', '.join(busy[-1])} was "
                                         "not yet healthy on it (maxUnavailable 1)",
                                         before(faults, ev.at)))
        seen.append((ev.at, now))
        del seen[:-64]  # enough for the LAG seconds before
    return out


def _stepped(cid: str, generation: int, was: ClusterApplied | None, rolled: int,
             on: set[str]) -> bool:
    """Whether a copy on ``cid`` took the generation rolled out from an older one there: a
    step (not a copy's first — a move's, a placement's — nor one left behind)."""
    return (generation == rolled and was is not None and 0 < was.generation < generation
            and cid in on)


def check_foreign(samples: list[Sample], unreached: set[int], planted: set[str],
                  faults: list[Happened]) -> list[Violation]:
    out: list[Violation] = []
    wanted = json.dumps(PLANTED, sort_keys=True)
    owners: dict[str, str] = {}  # a uid berth made → its first owner
    seen: dict[str, dict[int, set[str]]] = defaultdict(lambda: defaultdict(set))
    said: set[tuple[str, str]] = set()

    def say(invariant: str, s: Sample, what: str) -> None:
        if (invariant, s.uid) not in said:
            said.add((invariant, s.uid))
            out.append(Violation(invariant, f"{s.cluster}/{s.name}", s.at, what,
                                 before(faults, s.at)))

    began: dict[int, float] = {}
    for s in samples:
        began.setdefault(s.round, s.at)
        if s.kind != "ConfigMap":
            continue
        seen[s.cluster][s.round].add(s.uid)
        if s.uid in planted:
            if s.owner or s.data != wanted:
                say("untouched", s, f"someone else's, now owner {s.owner!r}, data {s.data}")
        elif s.owner:
            first = owners.setdefault(s.uid, s.owner)
            if s.owner != first:
                say("one-owner", s, f"made for {first}, now {s.owner}")
    for cluster, rounds in seen.items():
        emptied = [f.began for f in faults
                   if f.what.startswith(f"cluster {cluster}'s") and "back empty" in f.what]
        had: dict[str, float] = {}  # a planted uid → when last seen
        for n in sorted(set(began) - unreached):
            now = rounds.get(n, set())
            for uid in list(had):
                if uid not in now and not any(had[uid] - 1 <= t <= began[n] for t in emptied):
                    out.append(Violation("untouched", f"{cluster}/foreign", began[n],
                                         "someone else's ConfigMap is gone",
                                         before(faults, began[n])))
                if uid not in now:
                    del had[uid]
            for uid in now & planted:
                had[uid] = began[n]
    return out


def check_team(events: list[Event], faults: list[Happened]) -> list[Violation]:
    """``quota`` and ``confined``, from the history."""
    out: list[Violation] = []
    bound = keys.binding_prefix("Application") + TEAM + "/"
    stated = keys.status_prefix("Application") + TEAM + "/"
    allowed = {f"default/{c}" for c in TEAM_CLUSTERS}
    placed: set[str] = set()
    over = False
    said: set[tuple[str, str]] = set()

    def confined(name: str, ev: Event, what: str) -> None:
        if (name, what) not in said:
            said.add((name, what))
            out.append(Violation("confined", f"{TEAM}/{name}", ev.at,
                                 f"{what} (revision {ev.revision})", before(faults, ev.at)))

    for i, ev in enumerate(events):
        if (name := _name(ev.key, bound)) is not None:
            b = _decoded(ev, Binding)
            if b is None or not b.spec.targets:
                placed.discard(name)
            else:
                placed.add(name)
                outside = sorted(c for t in b.spec.targets
                                 if (c := f"{t.namespace or TEAM}/{t.name}") not in allowed)
                if outside:
                    confined(name, ev, f"its Binding names {', '.join(outside)}")
        elif (name := _name(ev.key, stated)) is not None:
            st = _decoded(ev, ApplicationStatus)
            for cid, have in (st.status.applied.items() if st is not None else ()):
                if cid not in allowed:
                    confined(name, ev, f"its status records a copy on {cid}")
                for ref in have.objects:
                    if ref.kind not in TEAM_KINDS or ref.namespace != "default":
                        confined(name, ev, f"its status records {ref} on {cid}")
        if i + 1 < len(events) and events[i + 1].revision == ev.revision:
            continue  # one transaction: counted once it is whole (seed 14: a placement and
            # the deletion that made room for it, in one write)
        if len(placed) > TEAM_QUOTA and not over:
            out.append(Violation("quota", TEAM, ev.at,
                                 f"{len(placed)} applications placed, over its quota of "
                                 f"{TEAM_QUOTA}, at revision {ev.revision}: "
                                 f"{', '.join(sorted(placed))}", before(faults, ev.at)))
        over = len(placed) > TEAM_QUOTA
    return out


def final_team(db: Store, traffic: Traffic,
               objects: dict[str, dict[tuple[str, str], dict[str, Any]]]) -> list[str]:
    """How the team's applications differ from what its policy and quota make of them."""
    out: list[str] = []
    where = {name: {c for c, found in objects.items() if any(
        (kind, name) in found for kind in ("ConfigMap", "ServiceAccount"))}
        for name in [*traffic.team, *traffic.team_deleted]}
    placed = 0
    for name, app in sorted(traffic.team.items()):
        kv = db.get(keys.binding_key("Application", TEAM, name))
        if kv is None:
            out.append(f"{TEAM}/{name}: no Binding")
            continue
        b = msgspec.json.decode(kv.value, type=Binding)
        on = {t.name for t in b.spec.targets}
        skv = db.get(keys.status_key("Application", TEAM, name))
        st = msgspec.json.decode(skv.value, type=ApplicationStatus).status if skv else None
        reason = st.reason if st is not None else ""
        if not on:
            if "over the quota of namespace team-r" not in b.status.reason:
                out.append(f"{TEAM}/{name}: placed nowhere: {b.status.reason}")
            if where[name]:
                out.append(f"{TEAM}/{name}: not placed, yet on {sorted(where[name])}")
            continue
        placed += 1
        if len(on) != 1 or not on <= TEAM_CLUSTERS:
            out.append(f"{TEAM}/{name}: bound to {sorted(on)}, want one of "
                       f"{sorted(TEAM_CLUSTERS)}")
        if app.shape == "grab":  # a kind its policy forbids: held, made nowhere
            if "not allowed by the policy of namespace team-r: ServiceAccount" not in reason:
                out.append(f"{TEAM}/{name}: a ServiceAccount, yet {reason!r}")
            if where[name]:
                out.append(f"{TEAM}/{name}: forbidden, yet on {sorted(where[name])}")
            continue
        if st is None or st.state != "RUNNING" or st.generation != app.generation:
            out.append(f"{TEAM}/{name}: status {st.state if st else None} generation "
                       f"{st.generation if st else None}: {reason}")
        if where[name] != on:
            out.append(f"{TEAM}/{name}: on {sorted(where[name])}, bound to {sorted(on)}")
        for cname in on & where[name]:
            have = objects[cname][("ConfigMap", name)].get("data", {}).get("generation")
            if have != str(app.generation):
                out.append(f"{TEAM}/{name}: on {cname} {have}, not {app.generation}")
    want = min(TEAM_QUOTA, len(traffic.team))
    if placed != want:
        out.append(f"{TEAM}: {placed} applications placed, want {want} (a quota of "
                   f"{TEAM_QUOTA}, {len(traffic.team)} live)")
    for name in sorted(traffic.team_deleted):
        if db.get(keys.resource_key("Application", name, TEAM)) is not None:
            out.append(f"{TEAM}/{name} (deleted): its application is not removed"
                       + _standing(db, TEAM, name))
        if where[name]:
            out.append(f"{TEAM}/{name} (deleted): left on {sorted(where[name])}")
    return out


def _standing(db: Store, namespace: str, name: str) -> str:
    """What an application's status and Binding say now, for a violation: `` (status
    DELETING: …; bound to …)``, or that there are none."""
    skv = db.get(keys.status_key("Application", namespace, name))
    st = msgspec.json.decode(skv.value, type=ApplicationStatus).status if skv else None
    bkv = db.get(keys.binding_key("Application", namespace, name))
    b = msgspec.json.decode(bkv.value, type=Binding) if bkv else None
    return (f" (status {f'{st.state}: {st.reason}' if st else 'none'}; "
            + (f"bound to {sorted(t.name for t in b.spec.targets)}" if b else "no Binding")
            + ")")


def final(system: System, traffic: Traffic) -> list[str]:
    """Every way etcd and the clusters differ from the model now (empty: converged)."""
    db = system.db
    out: list[str] = []
    objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for cname, server in system.clusters.items():
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for path, kind in (("/api/v1/namespaces/default/configmaps", "ConfigMap"),
                           ("/apis/apps/v1/namespaces/default/deployments", "Deployment"),
                           ("/apis/batch/v1/namespaces/default/jobs", "Job"),
                           ("/api/v1/namespaces/default/serviceaccounts", "ServiceAccount")):
            try:
                listed = server.request("GET", path + "?labelSelector=app.kubernetes.io%2F"
                                        "managed-by%3Dberth")
            except Exception as exc:
                out.append(f"cluster {cname}: {exc}")
                continue
            for o in listed.get("items", []):
                found[(kind, o["metadata"]["name"])] = o
        objects[cname] = found
    labels = traffic.labels
    for name, app in sorted(traffic.apps.items()):
        if app.shape == "thief":
            continue  # refused where the foreign ConfigMap is ("untouched" checks it)
        if app.bad:  # halted at its first stage ("stage-order" checks it), or rolled back
            if app.rollback:
                out += rolled_back(db, name, app, objects)
            continue
        kv = db.get(keys.binding_key("Application", "default", name))
        if kv is None:
            out.append(f"{name}: no Binding")
            continue
        b = msgspec.json.decode(kv.value, type=Binding)
        on = {t.name for t in b.spec.targets}
        skv = db.get(keys.status_key("Application", "default", name))
        st = msgspec.json.decode(skv.value, type=ApplicationStatus) if skv else None
        count, allowed = app.expected(labels)
        if app.depends_on:  # with its dependency, wherever that is
            dkv = db.get(keys.binding_key("Application", "default", app.depends_on))
            allowed = ({t.name for t in msgspec.json.decode(dkv.value, type=Binding).spec.targets}
                       if dkv else set())
            count = min(1, len(allowed))
        if st is not None and st.status.finished == app.generation:
            allowed = set(labels)  # done: not moved, not for a changed label (the docs)
        if len(on) != count or not on <= allowed:
            out.append(f"{name}: bound to {sorted(on)}, want {count} of {sorted(allowed)}")
        if b.spec.generation != app.generation:
            out.append(f"{name}: Binding of generation {b.spec.generation}, not "
                       f"{app.generation}")
        if st is None or st.status.state != "RUNNING" or st.status.generation != app.generation:
            out.append(f"{name}: status {st.status.state if st else None} generation "
                       f"{st.status.generation if st else None}: "
                       f"{st.status.reason if st else ''}")
        kind = app.kind
        for cname, found in objects.items():
            obj = found.get((kind, name))
            if cname not in on:
                if obj is not None:
                    out.append(f"{name}: left behind on {cname}")
                continue
            if obj is None:
                if kind != "Job":  # a Job may be gone with its TTL: 600 s, not within a run
                    out.append(f"{name}: missing on {cname}")
                continue
            have = (obj.get("data", {}).get("generation") if kind == "ConfigMap"
                    else obj["spec"]["template"]["spec"]["containers"][0]["image"])
            want = str(app.generation) if kind == "ConfigMap" else f"x:{app.generation}"
            if have != want:
                out.append(f"{name}: on {cname} {have}, not {want}")
            if app.overridden and traffic.override_rev and kind != "Job":  # a Job ran as it was
                got = obj["metadata"].get("labels", {})
                if (got.get("robust-rev") != str(traffic.override_rev)
                        or got.get("robust-cluster") != cname):
                    out.append(f"{name}: on {cname} the Override's labels are "
                               f"{got.get('robust-rev')}/{got.get('robust-cluster')}, not "
                               f"{traffic.override_rev}/{cname}")
    for name, app in sorted(traffic.deleted.items()):
        if db.get(keys.binding_key("Application", "default", name)) is not None:
            out.append(f"{name} (deleted): its Binding is left")
        if db.get(keys.resource_key("Application", name, "default")) is not None:
            out.append(f"{name} (deleted): its application is not removed"
                       + _standing(db, "default", name))
        kind = app.kind
        out += [f"{name} (deleted): left on {c}" for c, found in objects.items()
                if (kind, name) in found]
    return out + final_team(db, traffic, objects)


def rolled_back(db: Store, name: str, app: App,
                objects: dict[str, dict[tuple[str, str], dict[str, Any]]]) -> list[str]:
    """A generation that failed on ``a`` rolled back (docs/rollouts.md): the status says
    so, and every target runs the generation it rolled from again."""
    kv = db.get(keys.binding_key("Application", "default", name))
    skv = db.get(keys.status_key("Application", "default", name))
    if kv is None or skv is None:
        return [f"{name}: rolled back, but {'no Binding' if kv is None else 'no status'}"]
    on = {t.name for t in msgspec.json.decode(kv.value, type=Binding).spec.targets}
    if "a" not in on:
        return []  # not placed on a (it failed there, or a was away): nothing failed
    r = msgspec.json.decode(skv.value, type=ApplicationStatus).status.rollout
    if r is None or r.generation != app.generation or r.phase != ROLLED_BACK:
        return [f"{name}: generation {app.generation} failed on a, and its rollout is "
                + (f"{r.phase} of generation {r.generation}" if r else "none")
                + ", not rolled back"]
    want = f"x:{r.stable}"
    return [f"{name}: rolled back to {r.stable}, but on {c} "
            + (f"image {have}" if (have := _image_on(objects[c], name)) else "nothing")
            for c in sorted(on) if c in objects and _image_on(objects[c], name) != want]


def _image_on(found: dict[tuple[str, str], dict[str, Any]], name: str) -> str:
    obj = found.get(("Deployment", name))
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"]) if obj else ""


TRACEBACK = re.compile(r"^Traceback \(most recent call last\)", re.M)


def check_processes(system: System, crashed: list[str]) -> list[Violation]:
    out = [Violation("crash", name, 0.0, "died without being killed") for name in crashed]
    for procs in system.procs.values():
        for p in procs:
            text = p.output()
            for m in TRACEBACK.finditer(text):
                out.append(Violation("crash", p.log.name, 0.0,
                                     "a traceback: " + text[m.start():m.start() + 600]
                                     .replace("\n", " | ")))
    return out


__all__ = ["GRACE", "Violation", "check_bindings", "check_claims", "check_copies_up",
           "check_foreign", "check_jobs", "check_jobs_twice", "check_ledger",
           "check_never_down", "check_pace", "check_processes", "check_rollout_steps",
           "check_stages", "cut_off_seconds", "final"]
