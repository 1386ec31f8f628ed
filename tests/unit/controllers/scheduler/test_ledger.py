"""The scheduler's ledger records, written with the Bindings they explain, and the
retention its leader applies — over etcd in memory and a clock the test moves.

(The same records against a real etcd, across a restart and a leader change,
are in tests/integration/test_ledger.py.)"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from berth.controllers.scheduler.antiflap import AntiFlapConfig
from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.trim import LedgerConfig, Trimmer
from berth.store import Delete, Fence, Put, keys, ledger
from berth.store.documents import MovesStarted
from berth.store.documents.ledger import Record
from berth.store.documents.pace import PaceSpec
from berth.store.errors import Deposed
from berth_testkit.memory import FakeClock, MemoryStore
from berth_testkit.scheduler_env import (
    application,
    binding,
    cluster,
    in_memory,
    metric,
    picture,
    put,
    value,
    wait_for,
)
from tests.unit.controllers.scheduler.test_antiflap import B


def records(store: MemoryStore, name: str, n: int) -> list[tuple[ledger.Entry, Record]]:
    """The application's records once there are ``n`` (waiting on writes, not time)."""
    store.memory.wait_until(
        lambda: len(ledger.history(store, "Application", "default", name)[0]) >= n)
    found, problems = ledger.history(store, "Application", "default", name)
    assert problems == []
    return found


def test_a_placement_and_a_move_off_a_tainted_cluster_are_recorded_with_the_binding(
        store: MemoryStore, clock: FakeClock) -> None:
    cluster(store, "de", labels={"location": "DE"})
    cluster(store, "fr", labels={"location": "FR"})
    application(store, "web")
    with in_memory(store, clock):
        [(entry, first)] = records(store, "web", 1)
        b = binding(store, "web")
        assert b is not None
        assert entry.by == "scheduler" and entry.id == b.spec.decision
        assert first.time == clock.now() and first.event == "Placed" and first.trigger == "new"
        assert [t.name for t in first.targets] == [b.spec.targets[0].name]
        assert [c.name for c in first.candidates if c.chosen] == [
            f"Cluster/default/{b.spec.targets[0].name}"]
        there = b.spec.targets[0].name
        other = "fr" if there == "de" else "de"

        clock.advance(5.0)
        cluster(store, there, labels={}, taints=[{"key": "maintenance",
                                                  "effect": "NoSchedule"}])
        _, (entry2, moved) = records(store, "web", 2)
        assert moved.event == "Moved" and moved.trigger == "taint"
        assert moved.detail.startswith(f"Cluster/default/{there}: TaintToleration")
        assert [t.name for t in moved.source] == [there]
        assert [t.name for t in moved.targets] == [other]
        assert moved.time == clock.now() and entry2.id == binding(store, "web").spec.decision
        [was] = [c for c in moved.candidates if c.name == f"Cluster/default/{there}"]
        assert was.rejected.startswith("TaintToleration")


def test_a_new_generation_on_the_same_clusters_keeps_the_decision_once_it_was_seen(
        store: MemoryStore, clock: FakeClock) -> None:
    """The decision's id rides on while the targets stay — also once the scheduler
    holds the Binding as its watch delivered it (compacted for memory), not as it
    wrote it."""
    cluster(store, "de")
    application(store, "web")
    with in_memory(store, clock) as leader:
        [(entry, _)] = records(store, "web", 1)
        store.memory.wait_until(lambda: leader.cache.decisions.assumed() == 0)
        clock.advance(1.0)
        application(store, "web", generation=2)
        b = wait_for(lambda: binding(store, "web"), lambda b: b.spec.generation == 2)
        assert b.spec.decision == entry.id


def test_a_new_leader_counts_its_predecessors_moves_of_the_last_minute_for_the_pace(
        store: MemoryStore, clock: FakeClock) -> None:
    """``perMinute`` counts moves started in the last minute, whoever led then and
    whether or not the application is still there: each move's Binding is written
    with the leader's record of them (``/berth/v1/scheduler/moves``), which a new
    leader starts from (two moves of one application are two; a first placement is
    none; an application deleted since took its Binding, not its moves)."""
    cluster(store, "de")
    cluster(store, "fr")
    application(store, "web")
    taint = [{"key": "maintenance", "effect": "NoSchedule"}]
    with in_memory(store, clock):
        records(store, "web", 1)
        there = binding(store, "web").spec.targets[0].name
        other = "fr" if there == "de" else "de"
        clock.advance(5.0)
        cluster(store, there, taints=taint)
        records(store, "web", 2)  # moved off
        clock.advance(5.0)
        cluster(store, there)
        cluster(store, other, taints=taint)
        records(store, "web", 3)  # and back
        store.commit([Delete(keys.resource_key("Application", "web", "default"))])
        store.memory.wait_until(lambda: binding(store, "web") is None)
    pace = PaceSpec(per_minute=2)
    with in_memory(store, clock) as leader:  # a new leader: both moves count
        held = leader.antiflap.check("x", B, "b", 1.0, None, None, pace, 0)
        assert held is not None and held.rule == "per_minute"
        # the first, 5 s ago (by the end of the second it started in)
        assert held.retry_after is not None and 55.0 <= held.retry_after <= 56.0
        assert leader.antiflap.check("x", B, "b", 1.0, None, None, PaceSpec(per_minute=3),
                                     0) is None
    clock.advance(61.0)
    with in_memory(store, clock) as leader:  # over a minute on, it no longer does
        assert leader.antiflap.check("x", B, "b", 1.0, None, None, pace, 0) is None


def test_a_record_of_moves_that_is_none_is_said_and_written_again_with_the_next_move(
        store: MemoryStore, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    cluster(store, "de")
    cluster(store, "fr")
    application(store, "web")
    put(store, keys.SCHEDULER_MOVES, b'{"kind": "MovesStarted", "started": "soon"}')
    taint = [{"key": "maintenance", "effect": "NoSchedule"}]
    with in_memory(store, clock) as leader:
        records(store, "web", 1)
        assert leader.antiflap.check("x", B, "b", 1.0, None, None, PaceSpec(per_minute=1),
                                     0) is None  # counted as none
        there = wait_for(lambda: binding(store, "web")).spec.targets[0].name
        cluster(store, there, taints=taint)
        records(store, "web", 2)  # moved off: the record is written again, whole
        kv = store.get(keys.SCHEDULER_MOVES)
        assert kv is not None
        moves = msgspec.json.decode(kv.value, type=MovesStarted)
        assert moves.started == [(math.ceil(clock.now().timestamp()), 1)]
    assert f"{keys.SCHEDULER_MOVES} holds no record of moves" in caplog.text


def test_leaving_a_cluster_that_fits_again_is_optional_though_the_binding_said_unschedulable(
        store: MemoryStore, clock: FakeClock) -> None:
    """An application kept Unschedulable on its cluster, which fits again as a better one
    appears: it may stay, so leaving is an optional move and waits for the pace (the
    robustness run, seed 29: such moves started in a window)."""
    for name in ("price_de", "price_fr"):
        metric(store, name)
    value(store, "price_de", 0.9)
    value(store, "price_fr", 0.1)
    picture(store)
    cluster(store, "de", labels={"zone": "z1"}, metrics={"price_de": 1.0})
    cluster(store, "fr", labels={"zone": "z3"}, metrics={"price_fr": 1.0})
    application(store, "web", constraints={"cluster": {"labels": ["zone is z1"]}})
    with in_memory(store, clock) as scheduler:
        records(store, "web", 1)
        cluster(store, "de", labels={"zone": "z2"}, metrics={"price_de": 1.0})
        wait_for(lambda: binding(store, "web"), lambda b: b.status.state == "Unschedulable"
                 and [t.name for t in b.spec.targets] == ["de"])
        put(store, keys.resource_key("Pace", "fleet"), msgspec.json.encode({
            "api": "core", "kind": "Pace", "metadata": {"name": "fleet"},
            "spec": {"windows": [{"start": "00:00", "end": "24:00"}]}}))
        # Each prefix has its own watch: the clusters' change below may otherwise reach
        # the scheduler before the pace does (CI saw the move start then).
        wait_for(scheduler.cache.pace, lambda pace: pace is not None and bool(pace.windows))
        value(store, "price_de", 0.1)
        value(store, "price_fr", 0.9)
        picture(store)
        store.commit([Put(keys.resource_key("Cluster", c, "default"), msgspec.json.encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": c, "namespace": "default", "labels": {"zone": "z1"},
                         "generation": 2},
            "spec": {"metrics": [{"name": f"price_{c}", "weight": 1.0}],
                     "kubeconfig": {"apiVersion": "v1", "kind": "Config"}}}), None)
            for c in ("de", "fr")])  # both fit at once: de again, fr better
        b = wait_for(lambda: binding(store, "web"), lambda b: b.status.state == "Scheduled")
        assert [t.name for t in b.spec.targets] == ["de"]
        assert "pace window" in b.status.reason
        assert [r.event for _, r in ledger.history(store, "Application", "default", "web")[0]
                ][-1] == "Held"


def test_a_move_for_metrics_is_recorded_with_their_values_and_a_held_one_with_its_rule(
        store: MemoryStore, clock: FakeClock) -> None:
    for name in ("price_de", "price_fr"):
        metric(store, name)
    value(store, "price_de", 0.9)
    value(store, "price_fr", 0.1)
    picture(store)
    cluster(store, "de", metrics={"price_de": 1.0})
    cluster(store, "fr", metrics={"price_fr": 1.0})
    application(store, "web")
    config = SchedulerConfig(anti_flap=AntiFlapConfig(min_dwell=600.0))
    with in_memory(store, clock, config):
        [(_, placed)] = records(store, "web", 1)
        assert [t.name for t in placed.targets] == ["de"]
        [chosen] = [c for c in placed.candidates if c.chosen]
        assert chosen.metrics == {"price_de": 0.9}

        value(store, "price_de", 0.1)
        value(store, "price_fr", 0.9)
        picture(store)  # better elsewhere, but it moved less than 600 s ago
        _, (_, held) = records(store, "web", 2)
        assert held.event == "Held" and held.rule == "min_dwell"
        assert held.trigger == "metrics" and held.detail == ""  # the names: candidates'
        assert [t.name for t in held.targets] == ["de"]

        clock.advance(601.0)
        value(store, "price_fr", 0.95)
        picture(store)
        _, _, (_, moved) = records(store, "web", 3)
        assert moved.event == "Moved" and moved.trigger == "metrics"
        assert [t.name for t in moved.targets] == ["fr"]
        [chosen] = [c for c in moved.candidates if c.chosen]
        assert chosen.metrics == {"price_fr": 0.95}


def test_no_record_is_written_when_the_ledger_is_off(store: MemoryStore,
                                                       clock: FakeClock) -> None:
    cluster(store, "de")
    application(store, "web")
    with in_memory(store, clock, SchedulerConfig(ledger=LedgerConfig(enabled=False))):
        store.memory.wait_until(lambda: binding(store, "web") is not None)
        assert store.count_prefix(ledger.LEDGER) == 0
        assert binding(store, "web").spec.decision  # the decision still has its id


# -- retention -----------------------------------------------------------------------

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def write(store: MemoryStore, name: str, at: datetime, by: str = "scheduler",
          reason: str = "") -> str:
    op = ledger.put("Application", "default", name, by,
                    Record(time=at, event="Placed", reason=reason))
    store.commit([op])
    return op.key


def left(store: MemoryStore) -> list[str]:
    return [k for page in store.keys_under(ledger.LEDGER) for k in page]


def test_retention_keeps_the_newest_per_resource_and_writer_and_none_too_old(
        store: MemoryStore) -> None:
    web = [write(store, "web", NOW - timedelta(hours=i)) for i in range(5)]
    health = [write(store, "web", NOW - timedelta(hours=i, minutes=1), "propagator")
              for i in range(2)]
    old = write(store, "db", NOW - timedelta(days=31))
    db = write(store, "db", NOW - timedelta(days=29))
    trimmer = Trimmer(store, ledger.Retention(keep=3, days=30), clock=FakeClock(NOW))
    assert trimmer.trim() == 3
    assert sorted(left(store)) == sorted([*web[:3], *health, db])
    assert old not in left(store)
    assert trimmer.trim() == 0


def test_over_the_total_the_oldest_go_first_whoever_wrote_them(store: MemoryStore) -> None:
    newest = [write(store, f"app-{i}", NOW - timedelta(hours=i), reason="x" * 200)
              for i in range(6)]
    size = ledger.parse(newest[0]).size
    trimmer = Trimmer(store, ledger.Retention(max_bytes=3 * size + 10), clock=FakeClock(NOW))
    assert trimmer.trim() == 3
    assert sorted(left(store)) == sorted(newest[:3])


def test_over_the_total_a_byte_costs_at_most_a_minute_of_records(store: MemoryStore) -> None:
    """The total is weighed by the minute, not the hour: one byte over removes the oldest
    minute's records, not the hour's (the records of a busy hour are many)."""
    same_hour = [write(store, f"app-{i}", NOW - timedelta(minutes=i), reason="x" * 200)
                 for i in range(6)]
    size = ledger.parse(same_hour[0]).size
    trimmer = Trimmer(store, ledger.Retention(max_bytes=6 * size - 1), clock=FakeClock(NOW))
    assert trimmer.trim() == 1
    assert sorted(left(store)) == sorted(same_hour[:5])


def test_a_key_whose_resource_part_is_not_berths_is_named_itself() -> None:
    """The ledger's own key, not the resource key made from it."""
    bad = ledger.LEDGER + "nonsense/x/" + "20261128T010000.000000Z.scheduler.7"
    with pytest.raises(ValueError) as info:
        ledger.parse(bad)
    said = str(info.value)
    assert said.startswith(f"{bad!r}: not <kind>/[<namespace>/]<name>/<record> under ")
    assert "unknown kind segment 'nonsense'" in said and "'/berth/v1/'" not in said


def test_a_key_that_is_no_record_is_named_once_and_left_alone(
        store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    bad = ledger.LEDGER + "applications/default/web/yesterday"
    store.create(bad, b"garbage")
    store.create(ledger.prefix("Application", "default", "web")
                 + "20261128T010000.000000Z.scheduler.7", b"\xff\xfe not json")
    write(store, "web", NOW)
    trimmer = Trimmer(store, ledger.Retention(), clock=FakeClock(NOW))
    trimmer.trim()
    trimmer.trim()
    assert [r.message for r in caplog.records].count(
        f"ledger: {bad!r}: expected <id>.<scheduler|propagator>.<bytes>; left alone "
        "(berth writes no such key)") == 1
    assert bad in left(store)
    found, problems = ledger.history(store, "Application", "default", "web")
    assert len(found) == 1 and len(problems) == 2
    assert all("skipped" in p for p in problems)


def test_a_deposed_leaders_trimmer_deletes_nothing(store: MemoryStore) -> None:
    write(store, "web", NOW - timedelta(days=40))
    store.create("/berth/v1/leases/scheduler", b"leader")
    term = store.get("/berth/v1/leases/scheduler")
    assert term is not None
    fenced = store.fenced(Fence("/berth/v1/leases/scheduler", term.create_revision))
    store.delete("/berth/v1/leases/scheduler")  # the term is over
    with pytest.raises(Deposed):
        Trimmer(fenced, ledger.Retention(), clock=FakeClock(NOW)).trim()
    assert len(left(store)) == 1


def test_a_deposed_replicas_trim_says_so_in_one_line(
        store: MemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    """A replica whose term ended while it trimmed (paused past its lease, say) deletes
    nothing and says so in a line: no traceback from the scheduler's supervised loop,
    which runs it (the robustness run, seed 41)."""
    write(store, "web", NOW - timedelta(days=40))
    store.create("/berth/v1/leases/scheduler", b"leader")
    term = store.get("/berth/v1/leases/scheduler")
    assert term is not None
    fenced = store.fenced(Fence("/berth/v1/leases/scheduler", term.create_revision))
    store.delete("/berth/v1/leases/scheduler")
    with caplog.at_level("INFO"):
        Trimmer(fenced, ledger.Retention(), clock=FakeClock(NOW)).run()  # raises nothing
    assert "this replica no longer leads" in caplog.text
    assert len(left(store)) == 1


# -- etcd out of space: history goes first ----------------------------------------------


def test_near_etcd_quota_the_trimmer_gives_up_the_oldest_half(store: MemoryStore) -> None:
    keys_ = [write(store, f"app-{i}", NOW - timedelta(hours=i), reason="x" * 300)
             for i in range(8)]
    store.memory.quota = int(store.memory.in_use() / 0.85)  # 85 % in use: over 80 %
    trimmer = Trimmer(store, ledger.Retention(), clock=FakeClock(NOW))
    assert trimmer.trim() == 4 and trimmer.pressed
    assert sorted(left(store)) == sorted(keys_[:4])  # the newest half stays
    store.memory.quota = 0
    assert trimmer.trim() == 0 and not trimmer.pressed


def test_with_etcd_full_bindings_are_retried_without_their_records_and_said_once(
        store: MemoryStore, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    cluster(store, "de")
    application(store, "one")
    scratch = MemoryStore()
    application(scratch, "two")  # its size: what etcd has room for, and not a byte more
    with in_memory(store, clock) as s:
        records(store, "one", 1)
        store.memory.quota = store.memory.in_use() + scratch.memory.in_use()
        application(store, "two")  # fills etcd: its Binding is refused (NOSPACE)
        store.memory.wait_until(lambda w=s.writer: w.out_of_space)  # woken by each refusal
        assert binding(store, "two") is None
        store.memory.quota = 0  # an operator made room
        store.memory.wait_until(lambda: binding(store, "two") is not None)
        assert store.count_prefix(ledger.prefix("Application", "default", "two")) == 0
        application(store, "three")
        records(store, "three", 1)  # written with their records again
    said = [m for m in caplog.messages if "etcd is out of space" in m]
    assert len(said) == 1 and any("etcd takes writes again" in m for m in caplog.messages)


def test_a_batch_of_one_binding_writes_it_without_its_record(
        store: MemoryStore, clock: FakeClock) -> None:
    """``bind_batch: 1`` leaves no room for a record in the transaction: the Binding is
    written all the same (it never waits for room that cannot come)."""
    cluster(store, "de")
    application(store, "web")
    with in_memory(store, clock, SchedulerConfig(bind_batch=1)):
        store.memory.wait_until(lambda: binding(store, "web") is not None)
        assert store.count_prefix(ledger.LEDGER) == 0
