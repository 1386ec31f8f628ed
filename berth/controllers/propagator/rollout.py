"""Which generation each target runs now, while a new generation rolls out.

:func:`decide` is pure, like the plan it serves. From the application's
``spec.rollout`` (:mod:`berth.store.documents.rollouts`), the copies on each
target and their health judged now, the rollout state recorded last time and
what the operator said (paused, approvals), it returns a :class:`Wave`: the
generation each target is to run — the new one, or the one it rolls from —
and the rollout state to record.

The rules (docs/rollouts.md):

* the generation rolled from (``stable``) is the last one that reached every
  target; nothing rolls on a first placement (there is nothing to keep);
* a cluster counts as done when its copy of **this** generation is healthy:
  the copy was applied for it, and the health was read from objects that say
  they were applied for it (``berth.dev/generation``) and that their
  controllers observed (``observedGeneration``); a reading taken before it
  was applied never counts;
* a cluster still not healthy ``progressDeadline`` after it was started has
  failed; more than ``maxFailures`` end the rollout: ``Halt`` leaves every
  cluster as it is (those not reached keep the old generation),
  ``Rollback`` gives the old generation back to every target. Either holds
  until a new generation;
* a target with no copy (it joined, or a move brought it) takes its turn like
  any other; while the rollout is ended it gets the generation rolled from;
* a target running a generation neither new nor rolled from (an earlier
  rollout interrupted) keeps it until its turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, assert_never

from berth.controllers.propagator.health import Health
from berth.store.documents import ClusterApplied
from berth.store.documents.durations import seconds
from berth.store.documents.pace import PaceSpec, closed_until
from berth.store.documents.reasons import listed
from berth.store.documents.render import Rendered
from berth.store.documents.rollouts import (
    COMPLETE,
    ENDED,
    HALTED,
    PAUSED,
    PROGRESSING,
    ROLLED_BACK,
    WAITING,
    RolloutControl,
    RolloutPhase,
    RolloutPolicy,
    RolloutState,
    RolloutStrategy,
    Stage,
    count,
    stages,
)

PACE_WINDOW = 60.0  # seconds: ``pace`` counts the clusters started in the last minute
FLEET_RETRY = 1.0  # seconds: a step the fleet's copies in transition hold is tried so soon


@dataclass(frozen=True, slots=True)
class Version:
    """A generation other than the application's current one, ready to apply again:
    its objects (marked for it) and each target's copy as the overrides make it."""

    generation: int
    bodies: tuple[dict[str, Any], ...] = ()
    rendered: Mapping[str, Rendered] = field(default_factory=dict)
    unrendered: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Inputs:
    """What a rollout is decided from, besides the copies and their health."""

    policy: RolloutPolicy | None = None  # None: every target gets the generation at once
    control: RolloutControl | None = None
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # per target
    prior: Version | None = None  # the generation rolled from, if its manifest is kept
    pace: PaceSpec | None = None  # the fleet's, the application's own over it ("One pace")
    transit: int = 0  # copies in transition fleet-wide now

@dataclass(frozen=True, slots=True)
class Wave:
    """Each target's generation now, the state to record (None: no rollout), and when
    to decide again (seconds; None: when something changes)."""

    want: Mapping[str, int]
    state: RolloutState | None = None
    recheck: float | None = None


def rolls(policy: RolloutPolicy | None) -> bool:
    return policy is not None and policy.strategy != RolloutStrategy.ALL


def stable_of(was: RolloutState | None, applied: Mapping[str, ClusterApplied], gen: int
              ) -> int:
    """The generation a rollout of ``gen`` rolls from: the last one that reached every
    target (0: none, nothing to roll from)."""
    if was is not None:
        if was.generation == gen:
            return was.stable
        if was.phase == COMPLETE:
            return was.generation if was.generation < gen else 0
        return was.stable
    older = [a.generation for a in applied.values() if 0 < a.generation < gen]
    return min(older, default=0)


def deadline(policy: RolloutPolicy, move_timeout: float) -> float:
    return seconds(policy.progress_deadline) if policy.progress_deadline is not None \
        else move_timeout


def decide(inputs: Inputs, gen: int, targets: tuple[str, ...],
           applied: Mapping[str, ClusterApplied], health: Callable[[str], Health],
           started: Callable[[str], datetime | None], was: RolloutState | None,
           now: datetime | None, move_timeout: float) -> Wave:
    """The generation each target runs now, and the rollout's state. ``started``: when a
    target's copy began its time to become available (None: no time runs there now)."""
    policy = inputs.policy
    if policy is None or not rolls(policy):
        return Wave(dict.fromkeys(targets, gen))
    stable = stable_of(was, applied, gen)
    if stable == 0 or stable >= gen or (
            was is not None and was.generation == gen and was.phase == COMPLETE):
        return Wave(dict.fromkeys(targets, gen), RolloutState(gen, stable, COMPLETE))
    return _Rollout(inputs, policy, gen, stable, targets, applied, health, started,
                    was if was is not None and was.generation == gen else None,
                    now, move_timeout).decide()


class _Rollout:
    """One decision of a rollout in progress (or ended)."""

    def __init__(self, inputs: Inputs, policy: RolloutPolicy, gen: int, stable: int,
                 targets: tuple[str, ...], applied: Mapping[str, ClusterApplied],
                 health: Callable[[str], Health], started: Callable[[str], datetime | None],
                 same: RolloutState | None, now: datetime | None, move_timeout: float
                 ) -> None:
        self.inputs, self.policy, self.gen, self.stable = inputs, policy, gen, stable
        self.targets, self.applied, self.health = targets, applied, health
        self.started = started
        self.same, self.now = same, now
        self.limit = deadline(policy, move_timeout)
        self.prior_kept = inputs.prior is not None and inputs.prior.generation == stable
        self.waits: list[float] = []

    def copy_of(self, cid: str) -> int:
        have = self.applied.get(cid)
        return have.generation if have is not None else 0

    def hold(self, cid: str) -> int:
        """What a cluster not reached runs: what it has, else the generation rolled from
        (when its manifest is kept; else the new one: there is nothing else to give)."""
        have = self.copy_of(cid)
        return have if have > 0 else (self.stable if self.prior_kept else self.gen)

    def decide(self) -> Wave:
        gen, same = self.gen, self.same
        healthy_at = dict(same.healthy) if same is not None else {}
        failed = dict(same.failed) if same is not None else {}
        on_new = [c for c in self.targets if self.copy_of(c) == gen]
        healthy = {c for c in on_new if self.health(c).healthy}
        for cid in on_new:
            if cid in healthy:
                if self.now is not None:
                    healthy_at.setdefault(cid, self.now)
            elif cid not in healthy_at and cid not in failed:
                why = self._late(cid)
                if why:
                    failed[cid] = why
        healthy_at = {c: t for c, t in healthy_at.items() if c in self.targets}
        phase = same.phase if same is not None and same.phase in ENDED else None
        note = ""
        if not phase and len(failed) > self.policy.max_failures:
            rollback = self.policy.on_failure == "Rollback"
            phase = ROLLED_BACK if rollback and self.prior_kept else HALTED
            if rollback and not self.prior_kept:
                note = (f"; generation {self.stable}'s manifest is not kept any more: halted "
                        "instead of rolled back")
        failures = listed((failed[c] for c in sorted(failed)), "; ")
        if phase == ROLLED_BACK:
            return self._wave(dict.fromkeys(self.targets, self.stable), ROLLED_BACK,
                              failures, "", healthy_at, failed)
        if phase == HALTED:
            return self._wave({c: self.hold(c) for c in self.targets}, HALTED,
                              (same.reason if same is not None and same.phase == HALTED
                               else failures + note), "", healthy_at, failed)
        if all(c in healthy for c in self.targets):
            return Wave(dict.fromkeys(self.targets, gen),
                        RolloutState(gen, self.stable, COMPLETE, healthy=healthy_at))
        return self._progress(on_new, healthy, healthy_at, failed)

    def _late(self, cid: str) -> str:
        """Why the new generation failed on ``cid`` ("": it has time left)."""
        start = self.started(cid)
        if start is None or self.now is None:
            return ""
        end = start + timedelta(seconds=self.limit)
        if self.now < end:
            self.waits.append((end - self.now).total_seconds())
            return ""
        h = self.health(cid)
        return (f"cluster {cid}: {h.state}" + (f": {h.reason}" if h.reason else "")
                + f" ({self.limit:g} s after generation {self.gen} was applied)")

    def _order(self) -> list[str]:
        key = self.policy.sort_by
        labels = self.inputs.labels
        return sorted(self.targets, key=lambda c: (
            labels.get(c, {}).get(key, "") if key else "", c))

    def _progress(self, on_new: list[str], healthy: set[str], healthy_at: dict[str, datetime],
                  failed: dict[str, str]) -> Wave:
        gen, policy = self.gen, self.policy
        busy = [c for c in on_new if c not in healthy]
        order = self._order()
        step = strategy(policy.strategy).step(self, order, busy, healthy, healthy_at)
        todo, slots, wait, stage_name = step.todo, step.slots, step.wait, step.stage
        control = self.inputs.control
        paused = control is not None and control.paused
        if paused:
            slots, wait = 0, "paused (berth rollout resume goes on)"
        elif policy.pace and slots > 0:
            slots = min(slots, self._pace_left(on_new))
            if slots <= 0:
                wait = f"pace: {policy.pace} clusters started in the last minute"
        if slots > 0 and self.inputs.pace is not None:
            slots, why = self._fleet(slots)
            wait = why or wait
        starting = set(todo[:max(0, slots)])
        want = {c: gen if self.copy_of(c) == gen or c in starting else self.hold(c)
                for c in self.targets}
        phase = PAUSED if paused else WAITING if wait and not busy and not starting \
            else PROGRESSING
        return self._wave(want, phase, wait, stage_name, healthy_at, failed)

    def stage_of(self, order: list[str], healthy: set[str], healthy_at: dict[str, datetime]
                 ) -> tuple[Stage, list[str], str]:
        """The first stage not yet healthy on the new generation, its targets, and what
        it waits for before more of them start ("": nothing)."""
        staged = [(s, m) for s, m in stages(self.policy, order, self.inputs.labels) if m]
        k = next(i for i, (_, m) in enumerate(staged) if any(c not in healthy for c in m))
        stage, members = staged[k]
        if k > 0:
            before, done = staged[k - 1]
            if before.soak is not None and self.now is not None:
                last = max((healthy_at[c] for c in done if c in healthy_at), default=None)
                end = last + timedelta(seconds=seconds(before.soak)) if last else None
                if end is not None and self.now < end:
                    self.waits.append((end - self.now).total_seconds())
                    return stage, members, (f"stage {before.name} soaking until "
                                            f"{end:%Y-%m-%d %H:%M:%S} UTC")
        control = self.inputs.control
        if stage.approval and not (control is not None and control.approves(self.gen,
                                                                             stage.name)):
            return stage, members, (f"stage {stage.name} waits for approval (berth rollout "
                                    f"approve APP {stage.name})")
        return stage, members, ""

    def _fleet(self, slots: int) -> tuple[int, str]:
        """The pace (the fleet's, the application's own over it): no step starts in a
        window, nor beyond the copies in transition it allows (this application's own
        included)."""
        pace = self.inputs.pace
        assert pace is not None
        if pace.windows and self.now is not None:
            until = closed_until(pace.windows, self.now)
            if until is not None:
                self.waits.append((until - self.now).total_seconds())
                return 0, (f"no optional change starts until {until:%Y-%m-%d %H:%M} UTC "
                           "(pace window)")
        if pace.in_transition:
            left = pace.in_transition - self.inputs.transit
            if left <= 0:
                self.waits.append(FLEET_RETRY)
                return 0, (f"{pace.in_transition} copies in transition fleet-wide, the "
                           "pace's limit (inTransition)")
            return min(slots, left), ""
        return slots, ""

    def _pace_left(self, on_new: list[str]) -> int:
        """How many more clusters may start now under ``pace``."""
        if self.now is None:
            return self.policy.pace
        window = timedelta(seconds=PACE_WINDOW)
        recent = sorted(a.since for c in on_new if (a := self.applied.get(c)) is not None
                        and a.since is not None and self.now - a.since < window)
        left = self.policy.pace - len(recent)
        if left <= 0 and recent:
            self.waits.append((recent[0] + window - self.now).total_seconds())
        return left

    def _wave(self, want: dict[str, int], phase: RolloutPhase, reason: str, stage: str,
              healthy_at: dict[str, datetime], failed: dict[str, str]) -> Wave:
        waits = [w for w in self.waits if w > 0]
        return Wave(want, RolloutState(self.gen, self.stable, phase, reason, stage, healthy_at,
                                       failed), min(waits) if waits else None)


# -- the strategies (docs/rollouts.md): one Protocol, made by one factory ---------------


@dataclass(frozen=True, slots=True)
class Step:
    """What a strategy lets start now: the targets still to take the new generation, in
    the order they take it, how many may start, what the rollout waits for ("":
    nothing), and the stage reached ("": no stages)."""

    todo: list[str]
    slots: int
    wait: str = ""
    stage: str = ""


class Strategy(Protocol):
    """How a new generation reaches the targets, one decision at a time."""

    def step(self, roll: _Rollout, order: list[str], busy: list[str], healthy: set[str],
             healthy_at: dict[str, datetime]) -> Step:
        """``order``: the targets in ``sortBy`` order; ``busy``: those on the new
        generation and not yet healthy on it; ``healthy_at``: when each became so."""
        ...


class Rolling:
    """At most ``maxUnavailable`` targets on the new generation and not yet healthy."""

    def step(self, roll: _Rollout, order: list[str], busy: list[str], healthy: set[str],
             healthy_at: dict[str, datetime]) -> Step:
        limit = count(roll.policy.max_unavailable, len(roll.targets))
        todo = [c for c in order if roll.copy_of(c) != roll.gen]
        slots = limit - len(busy)
        wait = (f"{len(busy)} of at most {limit} clusters not yet healthy on it: "
                + listed(busy)) if slots <= 0 else ""
        return Step(todo, slots, wait)


class Staged:
    """Stage by stage: each starts once the earlier ones are healthy on the new
    generation, soaked and approved; at most ``maxConcurrency`` of a stage at once."""

    def step(self, roll: _Rollout, order: list[str], busy: list[str], healthy: set[str],
             healthy_at: dict[str, datetime]) -> Step:
        stage, members, wait = roll.stage_of(order, healthy, healthy_at)
        limit = count(stage.max_concurrency, len(members))
        todo = [c for c in members if roll.copy_of(c) != roll.gen]
        slots = 0 if wait else limit - len([c for c in members if c in busy])
        if slots <= 0 and not wait:
            wait = f"stage {stage.name}: {limit} of at most {limit} clusters not yet healthy on it"
        return Step(todo, slots, wait, stage.name)


def strategy(kind: RolloutStrategy) -> Strategy:
    """The strategy of ``kind`` (Karmada's strategy factory): a new kind is a type error
    here until it has one."""
    match kind:
        case RolloutStrategy.ROLLING:
            return Rolling()
        case RolloutStrategy.STAGED:
            return Staged()
        case RolloutStrategy.ALL:  # every target at once: no rollout (``rolls``)
            raise ValueError("strategy All does not roll out")
        case _:
            assert_never(kind)
