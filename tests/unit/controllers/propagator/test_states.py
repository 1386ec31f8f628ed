"""The application state after a reconcile, from what is where and how available it is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from berth.controllers.propagator.health import HEALTHY, PROGRESSING, UNHEALTHY, Copy, Health
from berth.controllers.propagator.plan import App, Facts, Progress, summary
from berth.store.documents import ApplicationState, ClusterApplied, KubeObjectRef

CM = KubeObjectRef("v1", "ConfigMap", "x", "default")
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def on(**generations: int) -> dict[str, ClusterApplied]:
    return {f"default/{c}": ClusterApplied(g, [CM], since=NOW - timedelta(seconds=30))
            for c, g in generations.items()}


def summarize(targets: list[str], applied: dict[str, ClusterApplied], errors: dict[str, str],
              gen: int, health: dict[str, Copy] | None = None) -> ApplicationState:
    judged = {c: Copy(Health(HEALTHY, "", 1, 1)) for c in applied}
    judged |= {f"default/{c}": h for c, h in (health or {}).items()}
    facts = Facts(App(gen), ApplicationState(), gen, tuple(f"default/{t}" for t in targets),
                  health=judged, now=NOW, move_timeout=600.0)
    progress = Progress.start(ApplicationState(applied=applied))
    progress.errors = dict(errors)
    return summary(facts, progress, gen)


def test_running_everywhere() -> None:
    s = summarize(["a", "b"], on(a=2, b=2), {}, 2)
    assert (s.state, s.reason, s.generation) == ("RUNNING", "", 2)
    assert [r.name for r in s.running_on] == ["a", "b"]
    assert s.applied["default/a"].health == HEALTHY
    assert (s.applied["default/a"].available, s.applied["default/a"].desired) == (1, 1)


def test_applied_but_not_available_is_progressing_with_kubernetes_reason() -> None:
    crash = Copy(Health(UNHEALTHY, "0/2 replicas available; pod web-1: CrashLoopBackOff", 0, 2),
                 {"Deployment default/web": "Unhealthy: 0/2 replicas available"})
    s = summarize(["a"], on(a=1), {}, 1, {"a": crash})
    assert s.state == "PROGRESSING"
    assert s.reason == ("cluster default/a: Unhealthy: 0/2 replicas available; pod web-1: "
                        "CrashLoopBackOff")
    have = s.applied["default/a"]
    assert (have.health, have.available, have.desired) == (UNHEALTHY, 0, 2)
    assert have.unhealthy == {"Deployment default/web": "Unhealthy: 0/2 replicas available"}


def test_moving_is_migrating_until_the_old_cluster_is_empty() -> None:
    s = summarize(["b"], on(a=1, b=1), {}, 1)
    assert (s.state, s.reason) == ("MIGRATING", "removing from default/a")
    s = summarize(["b"], on(a=1, b=1), {}, 1, {"b": Copy(Health(PROGRESSING, "1/2", 1, 2))})
    assert (s.state, s.reason) == ("MIGRATING", "cluster default/b: Progressing: 1/2; "
                                   "still running on default/a")
    s = summarize(["b"], on(a=1), {"default/b": "unreachable"}, 1)
    assert s.state == "MIGRATING"
    assert s.reason == "waiting to apply on default/b: default/b: unreachable"


def test_partly_applied_or_an_older_generation_is_degraded() -> None:
    s = summarize(["a", "b"], on(a=2), {"default/b": "HTTP 503"}, 2)
    assert (s.state, s.errors) == ("DEGRADED", {"default/b": "HTTP 503"})
    s = summarize(["a"], on(a=1), {"default/a": "down"}, 2)
    assert (s.state, s.generation) == ("DEGRADED", 1)
    assert s.reason.startswith("generation 2 not applied on default/a")


def test_running_nowhere_because_of_errors_is_failed_and_retried() -> None:
    s = summarize(["a"], {}, {"default/a": "down"}, 1)
    assert s.state == "FAILED" and "retrying" in s.reason and s.running_on == []


def test_a_status_written_before_health_was_judged_still_reads() -> None:
    import msgspec

    from berth.store.documents import ApplicationStatus
    old = (b'{"kind":"Application","api":"kubernetes","metadata":{"name":"web","namespace":'
           b'"default"},"status":{"state":"RUNNING","running_on":[{"kind":"Cluster","name":"a",'
           b'"namespace":"default"}],"generation":3,"applied":{"default/a":{"generation":3,'
           b'"objects":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","namespace":'
           b'"default"}]}}}}')
    doc = msgspec.json.decode(old, type=ApplicationStatus)
    have = doc.status.applied["default/a"]
    assert (doc.status.state, have.generation, have.health, have.since) == ("RUNNING", 3, None,
                                                                            None)
