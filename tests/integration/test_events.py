"""Events with a real etcd and the real scheduler process: a condition that repeats is one
event with a count, what the Bindings say is said, ``berth get events`` and ``describe``
show them, and an event is gone with its lease."""

from __future__ import annotations

import time
from pathlib import Path

from berth.controllers.runtime.events import Recorder
from berth.store import Store
from berth.store.events import NORMAL, InvolvedObject, listed, prefix
from berth_testkit.cli import berth
from berth_testkit.scheduler_env import (
    SchedulerProcess,
    application,
    binding,
    cluster,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer


def test_an_event_is_gone_with_its_lease_after_its_ttl(store: Store) -> None:
    r = Recorder(store, "propagator", ttl=10)
    obj = InvolvedObject("Application", "web", "default")
    r.emit(obj, NORMAL, "Available", "default/de")
    assert r.flush() == 1
    began = time.monotonic()
    assert len(listed(store, prefix("Application", "default", "web"))[0]) == 1
    wait_for(lambda: not listed(store, prefix("Application", "default", "web"))[0] or None,
             timeout=30)
    assert 9 <= time.monotonic() - began <= 25  # a lease of 10 + 10/6 s, from its write


def test_the_scheduler_says_what_it_decided_and_counts_what_repeats(
        etcd_server: EtcdServer, store: Store, tmp_path: Path) -> None:
    url = etcd_server.url
    cluster(store, "de", labels={"location": "FR"})
    proc = SchedulerProcess(url, tmp_path).start()
    try:
        application(store, "web", constraints={"cluster": {"labels": ["location is DE"]}})
        wait_for(lambda: binding(store, "web"), lambda b: b.status.state == "Unschedulable")
        cluster(store, "de", labels={"location": "FR", "touched": "1"})  # tried again: no fit
        under = prefix("Application", "default", "web")

        def failed() -> int | None:
            found = [e for _, e in listed(store, under)[0] if e.reason == "FailedScheduling"]
            return found[0].count if found and found[0].count >= 2 else None

        assert wait_for(failed, timeout=30) >= 2  # one event, counted
        cluster(store, "de", labels={"location": "DE"})
        wait_for(lambda: binding(store, "web"), lambda b: b.status.state == "Scheduled")
        wait_for(lambda: [e for _, e in listed(store, under)[0] if e.reason == "Scheduled"]
                 or None, timeout=30)
    finally:
        proc.stop()
    code, out = berth("get", "events", "--for", "app/web", "--etcd", url)
    assert code == 0
    print(out)
    head, *rows = out.splitlines()
    assert head.split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    by_reason = {reason: r for r in rows for reason in ("FailedScheduling", "Scheduled")
                 if f"   {reason}   " in r}
    assert "Warning" in by_reason["FailedScheduling"] and "(x" in by_reason["FailedScheduling"]
    assert "placed on de (new)" in by_reason["Scheduled"]
    assert "application/web" in by_reason["Scheduled"] and "scheduler" in by_reason["Scheduled"]
    code, out = berth("describe", "app", "web", "--etcd", url)
    events = out.split("\nEvents:\n", 1)[1]
    assert "FailedScheduling" in events and "placed on de (new)" in events
    code, out = berth("get", "events", "-A", "--etcd", url)
    assert out.splitlines()[0].startswith("NAMESPACE")
