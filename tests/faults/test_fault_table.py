"""The fault table: each fault an operator meets, on one running berth with 2,000
applications, in order; after each, the whole system must converge to the truth
(see ``System.wrong``) with no move back and forth and no decision written twice.

Each test adds its row to the table printed at the end of the run; a fault that
does not hold fails its test and the next faults still run.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest

from berth.store import keys
from tests.faults.system import (
    N_APPS,
    ROWS,
    Row,
    System,
    allowed,
    window,
)

CONVERGE = 180.0  # seconds a fault may take to settle, on a busy 2-core machine

pytestmark = pytest.mark.integration


def fault(system: System, name: str, act: Callable[[], None], *,
          expect_moves: int | None = 0, down: frozenset[str] = frozenset(),
          extra: Callable[[], tuple[bool, str]] | None = None) -> None:
    """Run ``act``, wait for convergence, read the window's writes, add the row."""
    revision = system.db.revision()
    before = system.targets()
    act()
    took, wrong = system.converge(CONVERGE, down)
    time.sleep(2)  # anything written after the truth was reached counts too
    w = window(system.history, revision, before)
    twice = len(w.binding_twice) + len(w.status_twice)
    dead = system.dead()
    more_ok, more = extra() if extra is not None else (True, "")
    held = (not wrong and not w.flaps and not twice and not dead and more_ok
            and (expect_moves is None or w.moves == expect_moves))
    figure = (f"{'converged' if not wrong else 'NOT converged'} in {took:.1f} s; "
              f"moves {w.moves}" + (f" (expected {expect_moves})"
                                    if expect_moves is not None else "")
              + f"; back-and-forth {len(w.flaps)}; written twice {len(w.binding_twice)} "
              f"Bindings, {len(w.status_twice)} statuses" + (f"; {more}" if more else "")
              + (f"; dead: {', '.join(dead)}" if dead else ""))
    ROWS.append(Row(name, figure, held))
    assert not wrong, f"{len(wrong)} wrong, e.g. {wrong[:5]}"
    assert not w.flaps, f"moved back and forth: {w.flaps[:5]}"
    assert not w.binding_twice and not w.status_twice, (w.binding_twice[:5], w.status_twice[:5])
    assert not dead, dead
    assert more_ok, more
    if expect_moves is not None:
        assert w.moves == expect_moves, f"{w.moves} moves, expected {expect_moves}"


def count_bindings(system: System) -> int:
    return system.db.count_prefix(keys.binding_prefix("Application"))


def test_a_burst_with_the_scheduler_leader_killed(system: System) -> None:
    def act() -> None:
        # Created from another thread, so the kill can come while they are bound.
        creating = threading.Thread(target=system.create_apps)
        creating.start()
        deadline = time.monotonic() + 120
        while count_bindings(system) < N_APPS // 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        system.leader("scheduler").kill()
        creating.join()
        partial = count_bindings(system)
        assert partial < N_APPS, "the kill came too late to test anything"
        time.sleep(3)
        system.restart_dead("scheduler")

    fault(system, f"burst of {N_APPS}, scheduler leader kill -9 at 1/4", act)


def test_the_etcd_member_in_use_killed_mid_burst(system: System) -> None:
    """Every process talks to the first member it was given; that member dies while
    all 2,000 applications change at once. Once all converged, it comes back."""
    members = system.etcd_members()
    used = set(members.values())
    assert len(used) == 1 and len(members) == 6, members
    victim = next(m for m in system.etcd.members if m.url in used)
    was_leader = system.etcd.leader() is victim
    before = {p.log.name: len(p.output()) for ps in system.procs.values() for p in ps}

    def act() -> None:
        bumping = threading.Thread(target=system.bump, args=(N_APPS,))
        bumping.start()
        time.sleep(0.5)
        victim.kill()
        bumping.join()

    def then() -> tuple[bool, str]:
        outages = {}
        for ps in system.procs.values():
            for p in ps:
                said = re.findall(r"was without etcd for ([\d.]+) s", p.output()[before[p.log.name]:])
                outages[p.log.name] = max(map(float, said), default=0.0)
        now = system.etcd_members()
        away = len(now) == 6 and all(url != victim.url for url in now.values())
        victim.start()  # back with its data: healthy once it has caught up with the others
        longest = max(outages, key=lambda n: outages[n])
        return away, (
            f"the victim {'led' if was_leader else 'did not lead'} etcd; every process moved "
            f"to another member: {'yes' if away else 'NO ' + str(now)}; without etcd: longest "
            f"{outages[longest]:.2f} s ({longest}), median "
            f"{sorted(outages.values())[len(outages) // 2]:.2f} s; the victim rejoined")

    fault(system, f"etcd member in use kill -9 mid-burst ({N_APPS} changes), restarted",
          act, extra=then)


@pytest.mark.parametrize("command", ["propagator", "metrics-cache"])
def test_the_leader_killed(system: System, command: str) -> None:
    def act() -> None:
        system.bump()
        system.leader(command).kill()
        system.bump()
        time.sleep(5)  # the standby takes over (lease TTL 2 s)
        system.restart_dead(command)

    fault(system, f"{command} leader kill -9 (standby takes over), restart"
          if command != "propagator" else "propagator replica serving cluster a kill -9 "
          "(the other claims its clusters), restart", act)


@pytest.mark.parametrize("command", ["scheduler", "propagator", "metrics-cache"])
def test_every_replica_killed_and_restarted(system: System, command: str) -> None:
    def act() -> None:
        system.bump()
        for p in system.procs[command]:
            p.kill()
        system.bump()
        time.sleep(5)  # longer than the leases: the metrics-cache's values expire too
        system.restart_dead(command)

    fault(system, f"{command}: every replica kill -9, restart", act)


def test_an_etcd_restart(system: System) -> None:
    def act() -> None:
        system.bump()
        system.etcd.restart()
        system.bump()

    fault(system, "etcd restart mid-run", act)


def test_a_compaction_under_live_watches(system: System) -> None:
    def act() -> None:
        system.bump()
        system.db.compact(system.db.revision())
        system.bump()

    fault(system, "etcd compaction under live watches", act)


@pytest.mark.parametrize("provider", ["Prometheus", "Kafka broker"])
def test_a_metrics_provider_stopped_and_restarted(system: System, provider: str) -> None:
    stop, start = ((system.prometheus.stop_prometheus, system.prometheus.start_prometheus)
                   if provider == "Prometheus" else (system.kafka.stop, system.kafka.start))

    def act() -> None:
        stop()
        system.bump()
        time.sleep(10)  # within stale_after: the last values are kept
        start()

    fault(system, f"{provider} stopped 10 s, restarted", act)


GARBAGE = {  # key → what someone writes there by hand
    keys.resource_key("Application", "garbage-app", "default"): b"{not json",
    keys.resource_key("Cluster", "garbage-cluster", "default"): b"[]",
    keys.resource_key("GlobalMetric", "garbage-metric"): b"\x00\xff",
    keys.resource_key("GlobalMetricsProvider", "garbage-provider"): b'{"kind": 5}',
}
OWNED = {  # keys a berth process owns: it must put its own value back
    keys.binding_key("Application", "default", "app-0007"): b"{not a binding",
    keys.status_key("Application", "default", "app-0008"): b"[]",
    keys.metric_value_key("price_a"): b"nonsense",
    keys.METRIC_PICTURE: b'{"complete": "maybe"}',
}


def test_garbage_in_every_kind_of_key(system: System) -> None:
    from tests.integration.scheduler_env import put

    def act() -> None:
        for key, data in {**GARBAGE, **OWNED}.items():
            put(system.db, key, data)

    def repaired() -> tuple[bool, str]:
        deadline = time.monotonic() + 30
        left = dict(OWNED)
        while left and time.monotonic() < deadline:
            for key, data in list(left.items()):
                kv = system.db.get(key)
                if kv is not None and kv.value != data:
                    del left[key]
            time.sleep(0.2)
        lines = sum(system.log_lines(k) for k in (*GARBAGE, *OWNED))
        return (not left and lines <= 6 * len(GARBAGE | OWNED),
                f"own keys put right {len(OWNED) - len(left)}/{len(OWNED)}"
                + (f" (not: {', '.join(left)})" if left else "")
                + f"; {lines} log lines about them")

    try:
        fault(system, "garbage in user, Binding, status and metric keys", act, extra=repaired)
    finally:
        for key in GARBAGE:
            system.db.delete(key)


def _movable(system: System, cluster: str) -> int:
    return sum(1 for name, on in system.targets().items()
               if on == (cluster,) and allowed(name) - {cluster})


@pytest.mark.parametrize(("cluster", "empty"), [("a", False), ("c", True)])
def test_a_cluster_api_stopped_then_back(system: System, cluster: str, empty: bool) -> None:
    expected = _movable(system, cluster)
    back = "back empty (refilled)" if empty else "back (nothing returns)"
    try:
        fault(system, f"cluster {cluster}'s API stopped", lambda: system.cluster_down(cluster),
              expect_moves=expected, down=frozenset(cluster))
    finally:
        fault(system, f"cluster {cluster}'s API {back}",
              lambda: system.cluster_up(cluster, empty=empty), extra=lambda: held_back(system))


def held_back(system: System) -> tuple[bool, str]:
    """Moves the anti-flap policy holds back, by rule (they are not moves yet)."""
    rules: dict[str, int] = {}
    for kv in system.db.list_prefix(keys.binding_prefix("Application"))[0]:
        if b"Held back" in kv.value:
            rule = kv.value.split(b"(", 1)[-1].split(b")", 1)[0].decode(errors="replace")
            rules[rule] = rules.get(rule, 0) + 1
    return True, "held back: " + (", ".join(f"{n} ({r})" for r, n in sorted(rules.items()))
                                  or "none")
