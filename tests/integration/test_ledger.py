"""The ledger with the real scheduler process and a real etcd: records written with the
Bindings, kept across a kill -9 and a new leader, whole after etcd's compaction, and read
back by ``berth history`` and ``berth explain --at``."""

from __future__ import annotations

import time
from pathlib import Path

from berth.store import Store, ledger
from berth_testkit.cli import berth
from berth_testkit.scheduler_env import (
    SchedulerProcess,
    application,
    binding,
    cluster,
    metric,
    picture,
    targets,
    value,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer


def price(store: Store, de: float, fr: float) -> None:
    value(store, "p_de", de)
    value(store, "p_fr", fr)
    picture(store)


def scheduler_records(store: Store, n: int) -> list[tuple[ledger.Entry, object]]:
    def enough() -> list[tuple[ledger.Entry, object]] | None:
        found, problems = ledger.history(store, "Application", "default", "web")
        assert problems == []
        mine = [(e, r) for e, r in found if e.by == "scheduler"]
        return mine if len(mine) >= n else None
    return wait_for(enough, timeout=30)


def test_moves_are_recorded_kept_across_a_kill_and_a_new_leader_and_after_compaction(
        etcd_server: EtcdServer, store: Store, tmp_path: Path) -> None:
    for name in ("p_de", "p_fr"):
        metric(store, name)
    price(store, 0.9, 0.1)
    cluster(store, "de", metrics={"p_de": 1.0})
    cluster(store, "fr", metrics={"p_fr": 1.0})
    url = etcd_server.url
    first = SchedulerProcess(url, tmp_path, name="first").start()
    try:
        application(store, "web")
        wait_for(lambda: binding(store, "web"), lambda b: targets(b) == ["de"])
        scheduler_records(store, 1)
        time.sleep(0.05)
        between = time.time()
        time.sleep(0.05)
        price(store, 0.1, 0.9)
        wait_for(lambda: binding(store, "web"), lambda b: targets(b) == ["fr"])
        placed, moved = scheduler_records(store, 2)
        first.kill()  # kill -9: the next leader carries on
    finally:
        first.stop()

    assert placed[1].event == "Placed" and placed[1].trigger == "new"  # type: ignore[attr-defined]
    assert moved[1].event == "Moved" and moved[1].trigger == "metrics"  # type: ignore[attr-defined]
    b = binding(store, "web")
    assert b is not None and b.spec.decision == moved[0].id

    second = SchedulerProcess(url, tmp_path, name="second").start()
    try:
        wait_for(lambda: "leads (term" in second.output() or None, timeout=20)
        time.sleep(2)  # its first pass over everything: nothing changed, nothing recorded
        assert len(scheduler_records(store, 2)) == 2
        price(store, 0.95, 0.1)
        wait_for(lambda: binding(store, "web"), lambda b: targets(b) == ["de"])
        records = scheduler_records(store, 3)
    finally:
        second.stop()
    assert len(records) == 3
    ids = [e.id for e, _ in records]
    assert ids == sorted(ids) and len(set(ids)) == 3

    store.compact(store.revision())  # etcd forgets every earlier revision
    assert [e.id for e, _ in scheduler_records(store, 3)] == ids

    code, out = berth("history", "default/web", "--by", "scheduler", "--etcd", url)
    print(out)
    assert code == 0
    rows = out.splitlines()[1:]
    assert [r.split()[2] for r in rows] == ["Placed", "Moved", "Moved"]
    assert "→ de" in rows[0] and "de → fr" in rows[1] and "fr → de" in rows[2]
    assert "metrics (p_de, p_fr)" in rows[1] or "metrics (p_fr)" in rows[1], rows[1]

    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(between)) + (
        f".{int(between % 1 * 1e6):06d}Z")
    code, out = berth("explain", "application", "default/web", "--at", stamp, "--etcd", url)
    assert code == 0 and "placed on: de (Scheduled)" in out, out
    code, out = berth("explain", "application", "default/web", "--at", "0s", "--etcd", url)
    print(out)
    assert code == 0 and "placed on: de (Scheduled)" in out and "fr → de" not in out
    assert "since:" in out and "moved (metrics" in out
    code, out = berth("explain", "application", "default/web", "--at",
                      "2000-01-01T00:00:00Z", "--etcd", url)
    assert code == 1 and "no record so early" in out
