"""An agent's reports over etcd in memory (agent/reports.py): read as the newer of the
watch and its own last write, written only when changed and guarded by the revision
read, garbage written by hand replaced once, removed. The same on real servers, where
the propagator reads them: tests/integration/test_agent.py."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from berth.controllers.propagator.agent.reports import Reports
from berth.store import keys
from berth.store.documents.work import Report, ReportState, WorkMeta
from berth_testkit.memory import MemoryStore

CID = "default/a"
KEY = keys.report_key(CID, "default", "web")


def report(work: int, error: str = "") -> Report:
    return Report(WorkMeta("web", "default", CID), ReportState(work=work, error=error))


def until(check: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not reached"
        time.sleep(0.01)


def started(store: MemoryStore) -> Reports:
    reports = Reports(store, CID, idle_timeout=5.0)
    reports.informer.start()
    until(reports.informer.synced.is_set)
    return reports


def test_a_report_is_read_back_at_once_and_written_only_when_it_changed() -> None:
    store = MemoryStore()
    reports = started(store)
    try:
        assert reports.read(KEY) == (None, 0)
        assert reports.write(KEY, report(7))
        got, revision = reports.read(KEY)  # before the watch delivers it: our own write
        assert got == report(7) and revision == store.get(KEY).mod_revision  # type: ignore[union-attr]
        assert reports.write(KEY, report(7))  # unchanged: nothing written
        assert store.get(KEY).mod_revision == revision  # type: ignore[union-attr]
        assert reports.names() == [KEY]
        reports.remove(KEY)
        assert store.get(KEY) is None and reports.names() == []
    finally:
        reports.informer.stop()


def test_a_write_that_lost_a_race_says_so_and_changes_nothing() -> None:
    store = MemoryStore()
    reports = started(store)
    try:
        assert reports.write(KEY, report(1))
        kv = store.get(KEY)
        assert kv is not None
        store.update(KEY, kv.value, kv.mod_revision)  # someone else wrote meanwhile
        assert not reports.write(KEY, report(2))  # guarded by what it read
        until(lambda: reports.informer.item(KEY) is not None
              and reports.informer.item(KEY).mod_revision > kv.mod_revision)  # type: ignore[union-attr]
        assert reports.write(KEY, report(2))  # read again: written
    finally:
        reports.informer.stop()


def test_garbage_written_by_hand_is_replaced_by_the_next_report() -> None:
    store = MemoryStore()
    reports = started(store)
    seen: list[str] = []
    reports.on_garbage.append(seen.append)
    try:
        store.create(KEY, b"not a report")
        until(lambda: reports.garbled(KEY))
        assert seen == [KEY]
        assert reports.write(KEY, report(3))  # the same report would be written: it is
        assert not reports.garbled(KEY)
        until(lambda: reports.informer.get(KEY) == report(3))
    finally:
        reports.informer.stop()


def test_reports_written_at_once_share_transactions_and_each_lands() -> None:
    store = MemoryStore()
    reports = started(store)
    commits: list[int] = []
    alone = store.commit

    def slow(ops: Any, *args: Any, **kwargs: Any) -> int:  # a round trip to etcd
        commits.append(len(ops))
        time.sleep(0.05)
        return alone(ops, *args, **kwargs)

    store.commit = slow  # type: ignore[method-assign]
    names = [keys.report_key(CID, "default", f"web-{i}") for i in range(8)]
    try:
        with ThreadPoolExecutor(8) as pool:
            landed = list(pool.map(lambda k: reports.write(k, report(1)), names))
        assert all(landed) and all(store.get(k) is not None for k in names)
        assert sum(commits) == 8 and len(commits) < 8  # fewer transactions than reports
        assert reports.read(names[0])[1] == store.get(names[0]).mod_revision  # type: ignore[union-attr]
    finally:
        reports.informer.stop()
