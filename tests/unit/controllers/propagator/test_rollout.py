"""Rollouts, decided as values (docs/rollouts.md): which generation each target runs
while a new one rolls out, from the copies, their health now and what was recorded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from berth.controllers.propagator.health import HEALTHY, PROGRESSING, UNHEALTHY, Copy, Health
from berth.controllers.propagator.plan import App, Apply, Facts, Finish, Progress, plan, state
from berth.controllers.propagator.rollout import Inputs, Version, Wave, decide, stable_of
from berth.store.documents import ClusterApplied, KubeObjectRef
from berth.store.documents.rollouts import (
    COMPLETE,
    HALTED,
    PAUSED,
    REST,
    ROLLED_BACK,
    WAITING,
    Approval,
    HistoryMeta,
    RolloutControl,
    RolloutPolicy,
    RolloutState,
    Stage,
)
from berth.store.documents.rollouts import (
    PROGRESSING as ROLLING,
)
from berth.store.documents.selection import ClusterChoice

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
CM = KubeObjectRef("v1", "ConfigMap", "x", "default")
FINE = Health(HEALTHY, "", 2, 2)
SLOW = Health(PROGRESSING, "0/2 replicas available", 0, 2)
CRASH = Health(UNHEALTHY, "pod x: CrashLoopBackOff", 0, 2)
PRIOR = Version(1, ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "old"}},))


def copies(**gens: int | tuple[int, float]) -> dict[str, ClusterApplied]:
    """Per cluster: its generation, or (generation, seconds since it was applied)."""
    out = {}
    for c, g in gens.items():
        gen, ago = g if isinstance(g, tuple) else (g, 5.0)
        out[f"default/{c}"] = ClusterApplied(gen, [CM], since=NOW - timedelta(seconds=ago))
    return out


def rolling(**kw: Any) -> RolloutPolicy:
    return RolloutPolicy(strategy="Rolling", **kw)


def staged(*stages: Stage, **kw: Any) -> RolloutPolicy:
    return RolloutPolicy(strategy="Staged", stages=list(stages), **kw)


def stage(name: str, *names: str, **kw: Any) -> Stage:
    return Stage(name=name, clusters=ClusterChoice(names=list(names)), **kw)


def run(policy: RolloutPolicy | None, applied: dict[str, ClusterApplied],
        health: dict[str, Health] | None = None, *, gen: int = 2,
        targets: str = "abc", was: RolloutState | None = None,
        control: RolloutControl | None = None, prior: Version | None = PRIOR,
        labels: dict[str, dict[str, str]] | None = None, unseen: str = "") -> Wave:
    """One decision; the clusters named in ``unseen`` are not seen ONLINE."""
    judged = {f"default/{c}": h for c, h in (health or {}).items()}
    return decide(Inputs(policy, control, labels or {}, prior), gen,
                  tuple(f"default/{t}" for t in targets), applied,
                  lambda c: judged.get(c, FINE), lambda c: since(applied, c, unseen),
                  was, NOW, 600.0)


def since(applied: dict[str, ClusterApplied], cid: str, unseen: str = "") -> datetime | None:
    have = applied.get(cid)
    return None if have is None or cid.partition("/")[2] in unseen else have.since


def want(wave: Wave) -> str:
    """The generations in target order: "211" is a on 2, b and c on 1."""
    return "".join(str(wave.want[c]) for c in sorted(wave.want))


def test_all_and_no_policy_give_every_target_the_generation_at_once() -> None:
    for policy in (None, RolloutPolicy()):
        wave = run(policy, copies(a=1, b=1, c=1))
        assert want(wave) == "222" and wave.state is None


def test_a_first_placement_has_nothing_to_roll_from() -> None:
    wave = run(rolling(), {})
    assert want(wave) == "222"
    assert wave.state is not None and wave.state.phase == COMPLETE


def test_rolling_keeps_at_most_max_unavailable_clusters_not_yet_healthy() -> None:
    wave = run(rolling(), copies(a=1, b=1, c=1))
    assert want(wave) == "211"  # one started, in name order
    assert wave.state is not None and wave.state.stable == 1 and wave.state.phase == ROLLING
    # a is on 2 and not yet healthy: nothing else starts, and it says why
    wave = run(rolling(), copies(a=2, b=1, c=1), {"a": SLOW})
    assert want(wave) == "211"
    assert wave.state is not None and "1 of at most 1 clusters not yet healthy" in (
        wave.state.reason)
    # healthy: the next one starts, and a is remembered healthy since now
    wave = run(rolling(), copies(a=2, b=1, c=1))
    assert want(wave) == "221"
    assert wave.state is not None and wave.state.healthy == {"default/a": NOW}
    wave = run(rolling(max_unavailable="100%"), copies(a=1, b=1, c=1))
    assert want(wave) == "222"


def test_every_target_healthy_on_it_completes_the_rollout() -> None:
    wave = run(rolling(), copies(a=2, b=2, c=2))
    assert want(wave) == "222" and wave.state is not None and wave.state.phase == COMPLETE
    # complete stays complete: a copy unhealthy later is not the rollout's
    wave = run(rolling(), copies(a=2, b=2, c=2), {"a": CRASH}, was=wave.state)
    assert want(wave) == "222" and wave.state is not None and wave.state.phase == COMPLETE
    assert stable_of(wave.state, {}, 3) == 2  # the next one rolls from it


def test_a_stage_waits_for_the_one_before_its_soak_and_its_approval() -> None:
    policy = staged(stage("canary", "a", soak="60s"), stage("prod", "b", "c", approval=True))
    assert want(run(policy, copies(a=1, b=1, c=1))) == "211"
    # a healthy 30 s ago: prod waits for the soak, and asks to be woken at its end
    was = RolloutState(2, 1, ROLLING, healthy={"default/a": NOW - timedelta(seconds=30)})
    wave = run(policy, copies(a=2, b=1, c=1), was=was)
    assert want(wave) == "211" and wave.state is not None
    assert "stage canary soaking until" in wave.state.reason and wave.state.phase == WAITING
    assert wave.recheck == 30.0
    # soaked: prod waits for its approval, and names the command
    was = RolloutState(2, 1, ROLLING, healthy={"default/a": NOW - timedelta(seconds=90)})
    wave = run(policy, copies(a=2, b=1, c=1), was=was)
    assert want(wave) == "211" and wave.state is not None
    assert wave.state.stage == "prod" and "waits for approval" in wave.state.reason
    # approved for another generation: still waiting; for this one: both start
    other = RolloutControl(HistoryMeta("web", "default"), approved=[Approval(1, "prod")])
    assert want(run(policy, copies(a=2, b=1, c=1), was=was, control=other)) == "211"
    ok = RolloutControl(HistoryMeta("web", "default"), approved=[Approval(2, "prod")])
    assert want(run(policy, copies(a=2, b=1, c=1), was=was, control=ok)) == "222"


def test_max_concurrency_and_the_rest_stage() -> None:
    policy = staged(stage("first", "a", "b", max_concurrency=1))
    wave = run(policy, copies(a=1, b=1, c=1))
    assert want(wave) == "211"
    wave = run(policy, copies(a=2, b=2, c=1))
    assert want(wave) == "222"  # c, in no stage, rolls last in "(rest)"
    assert wave.state is not None and wave.state.stage == REST


def test_sort_by_orders_the_clusters_within_a_stage() -> None:
    labels = {"default/a": {"wave": "2"}, "default/b": {"wave": "1"}, "default/c": {"wave": "3"}}
    assert want(run(rolling(sort_by="wave"), copies(a=1, b=1, c=1), labels=labels)) == "121"


def test_a_cluster_past_its_deadline_halts_the_rollout_where_it_is() -> None:
    policy = rolling(progress_deadline="60s")
    wave = run(policy, copies(a=(2, 30), b=1, c=1), {"a": CRASH})
    assert want(wave) == "211" and wave.recheck == 30.0  # woken at the deadline
    wave = run(policy, copies(a=(2, 61), b=1, c=1), {"a": CRASH})
    assert want(wave) == "211"
    assert wave.state is not None and wave.state.phase == HALTED
    assert "cluster default/a: Unhealthy: pod x: CrashLoopBackOff" in wave.state.failed[
        "default/a"]
    # halted stays halted, even once a is healthy; a cluster that joins gets generation 1
    wave = run(policy, copies(a=2, b=1, c=1), was=wave.state, targets="abcd")
    assert want(wave) == "2111" and wave.state is not None and wave.state.phase == HALTED


def test_a_cluster_not_seen_or_just_back_has_not_failed_the_rollout() -> None:
    policy = rolling(progress_deadline="60s")
    applied = copies(a=(2, 61), b=1, c=1)
    wave = run(policy, applied, {"a": CRASH}, unseen="a")  # OFFLINE: nothing to judge
    assert want(wave) == "211" and wave.state is not None and wave.state.phase == ROLLING
    assert not wave.state.failed
    # its time counts from when it came back ONLINE (10 s ago: 50 s left)
    wave = decide(Inputs(policy, None, {}, PRIOR), 2, ("default/a", "default/b", "default/c"),
                  applied, lambda c: CRASH, lambda c: NOW - timedelta(seconds=10), None, NOW,
                  600.0)
    assert wave.state is not None and wave.state.phase == ROLLING and wave.recheck == 50.0


def test_max_failures_lets_that_many_fail() -> None:
    policy = rolling(progress_deadline="60s", max_failures=1, max_unavailable=2)
    wave = run(policy, copies(a=(2, 61), b=1, c=1), {"a": CRASH})
    assert wave.state is not None and wave.state.phase == ROLLING and want(wave) == "221"


def test_rollback_gives_every_target_the_generation_rolled_from() -> None:
    policy = rolling(progress_deadline="60s", on_failure="Rollback", max_unavailable=2)
    wave = run(policy, copies(a=2, b=(2, 61), c=1), {"b": CRASH})
    assert want(wave) == "111"
    assert wave.state is not None and wave.state.phase == ROLLED_BACK
    # without the old manifest it halts instead, and says so
    wave = run(policy, copies(a=2, b=(2, 61), c=1), {"b": CRASH}, prior=None)
    assert want(wave) == "221" and wave.state is not None and wave.state.phase == HALTED
    assert "manifest is not kept any more" in wave.state.reason


def test_paused_and_pace_start_nothing_more() -> None:
    paused = RolloutControl(HistoryMeta("web", "default"), paused=True)
    wave = run(rolling(max_unavailable=3), copies(a=1, b=1, c=1), control=paused)
    assert want(wave) == "111" and wave.state is not None and wave.state.phase == PAUSED
    wave = run(rolling(max_unavailable=3, pace=1), copies(a=(2, 10), b=1, c=1), {"a": SLOW})
    assert want(wave) == "211" and wave.recheck == 50.0
    assert wave.state is not None and "pace: 1 clusters started" in wave.state.reason


def test_the_plan_applies_the_generation_rolled_from_with_its_own_bodies() -> None:
    bodies = ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}},)
    applied = copies(a=2, b=(2, 61), c=1)
    was = state("PROGRESSING", "", applied, 1, {},
                rollout=RolloutState(2, 1, ROLLING))
    facts = Facts(App(2, bodies=bodies), was, 2, ("default/a", "default/b", "default/c"),
                  health={"default/a": Copy(FINE), "default/b": Copy(CRASH),
                          "default/c": Copy(FINE)},
                  now=NOW, stale=frozenset({"default/c"}),
                  rollout=Inputs(rolling(progress_deadline="60s", on_failure="Rollback"),
                                 prior=PRIOR))
    progress = Progress.start(was)
    step = plan(facts, progress)
    assert isinstance(step, Apply) and step.cluster == "default/a" and step.generation == 1
    assert step.bodies == PRIOR.bodies
    progress.tried |= {"default/a", "default/b", "default/c"}
    progress.rollout = step.rollout  # as run() records it
    progress.applied = copies(a=1, b=1, c=1)
    end = plan(facts, progress)
    assert isinstance(end, Finish) and end.state is not None
    assert end.state.state == "DEGRADED"
    assert end.state.reason.startswith("generation 2 rolled back to 1: 0 of 3 clusters on it")
    assert end.state.rollout is not None and end.state.rollout.phase == ROLLED_BACK
    assert msgspec.json.decode(msgspec.json.encode(end.state.rollout),
                               type=RolloutState) == end.state.rollout


def test_a_step_keeps_the_fleets_pace() -> None:
    from berth.store.documents.pace import PaceSpec, PaceWindow

    def paced(pace: PaceSpec, transit: int) -> Wave:
        return decide(Inputs(rolling(max_unavailable=3), pace=pace, transit=transit, prior=PRIOR),
                      2, ("default/a", "default/b", "default/c"), copies(a=1, b=1, c=1),
                      lambda c: FINE, lambda c: None, None, NOW, 600.0)

    full = paced(PaceSpec(in_transition=5), 5)
    assert want(full) == "111" and full.recheck == 1.0
    assert full.state is not None and "5 copies in transition fleet-wide" in full.state.reason
    assert want(paced(PaceSpec(in_transition=5), 3)) == "221"  # two slots left
    night = paced(PaceSpec(windows=[PaceWindow(start="11:00", end="13:00")]), 0)
    assert want(night) == "111" and night.recheck == 3600.0  # NOW is 12:00
    assert night.state is not None and "until 2026-11-27 13:00 UTC" in night.state.reason
