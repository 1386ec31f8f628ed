"""The scheduler process under failure: kill -9, two replicas, an etcd restart."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from store import Put, Store, Watch, encode, keys
from store.documents import Binding
from tests.integration.scheduler_env import (
    SchedulerProcess,
    application,
    binding,
    cluster,
    targets,
    wait_for,
)
from tests.servers.etcd import EtcdServer

PREFIX = keys.binding_prefix("Application") + "default/"


def apps(store: Store, names: list[str]) -> None:
    store.commit_chunks([Put(keys.resource_key("Application", n, "default"), encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": n, "namespace": "default", "generation": 1}, "spec": {}}))
        for n in names])


def count_bindings(store: Store) -> int:
    return len(store.list_prefix(PREFIX)[0])


def test_kill_9_and_restart_lose_no_decision_and_write_none_twice(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    cluster(store, "x")
    cluster(store, "y")  # equal clusters: only stickiness keeps a decision after a restart
    writes: Counter[str] = Counter()
    watch = Watch(store, PREFIX, store.revision() + 1)

    def record() -> None:
        for batch in watch:
            writes.update(ev.key for ev in batch.events if ev.type == "PUT")

    threading.Thread(target=record, daemon=True).start()
    n = 2000
    first = SchedulerProcess(etcd_server.url, tmp_path, name="first").start()
    apps(store, [f"k-{i:04d}" for i in range(n)])
    wait_for(lambda: count_bindings(store) >= n // 4 or None, timeout=60)
    first.kill()  # kill -9 in the middle of the burst
    partial = count_bindings(store)
    second = SchedulerProcess(etcd_server.url, tmp_path, name="second").start()
    try:
        wait_for(lambda: count_bindings(store) == n or None, timeout=90)
        time.sleep(2)  # a rescheduling pass over everything, with nothing to change
        settled = dict(writes)
    finally:
        second.stop()
        watch.close()
    assert partial < n, "the kill came too late to test anything"
    assert len(settled) == n
    twice = {k: c for k, c in settled.items() if c != 1}
    assert twice == {}, f"Bindings written more than once: {list(twice.items())[:5]}"


def test_two_replicas_one_leads_and_the_other_takes_over(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    cluster(store, "c")
    a = SchedulerProcess(etcd_server.url, tmp_path, name="a").start()
    wait_for(lambda: store.get(keys.lease_key("scheduler")))
    b = SchedulerProcess(etcd_server.url, tmp_path, name="b").start()
    try:
        application(store, "one")
        assert targets(wait_for(lambda: binding(store, "one"),
                                lambda x: x.status.state == "Scheduled")) == ["c"]
        holder = store.get(keys.lease_key("scheduler"))
        a.kill()
        killed = time.monotonic()
        wait_for(lambda: ((kv := store.get(keys.lease_key("scheduler"))) is not None
                 and kv.value != holder.value) or None, timeout=10)  # type: ignore[union-attr]
        application(store, "two")
        wait_for(lambda: binding(store, "two"), lambda x: x.status.state == "Scheduled",
                 timeout=10)
        assert time.monotonic() - killed < 2 + 8  # lease TTL (2 s) plus slack
        assert "leads" in b.output()
    finally:
        b.stop()
        a.stop()


def test_an_etcd_restart_mid_run_is_survived(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    cluster(store, "c")
    proc = SchedulerProcess(etcd_server.url, tmp_path, name="r").start()
    try:
        application(store, "before")
        wait_for(lambda: binding(store, "before"), lambda x: x.status.state == "Scheduled")
        etcd_server.restart()
        application(store, "after")
        b = wait_for(lambda: binding(store, "after"), lambda x: x.status.state == "Scheduled",
                     timeout=30)
        assert targets(b) == ["c"]
        assert proc.proc is not None and proc.proc.poll() is None, proc.output()[-2000:]
    finally:
        proc.stop()


def test_garbage_written_where_a_binding_lives_is_replaced_once_and_quietly(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    from store import Invalid

    def readable(name: str) -> Binding | None:
        try:
            return binding(store, name)
        except Invalid:
            return None

    cluster(store, "x")
    # garbage at the key before its application exists ...
    store.create(keys.binding_key("Application", "default", "early"), b"{not a binding")
    proc = SchedulerProcess(etcd_server.url, tmp_path).start()
    try:
        application(store, "early")
        application(store, "web")
        for name in ("early", "web"):
            wait_for(lambda n=name: readable(n), lambda b: targets(b) == ["x"])  # type: ignore[misc]
        # ... and over a Binding the scheduler wrote
        key = keys.binding_key("Application", "default", "web")
        kv = store.get(key)
        assert kv is not None
        store.update(key, b"garbage", kv.mod_revision)
        wait_for(lambda: readable("web"), lambda b: targets(b) == ["x"])
        time.sleep(2.0)  # nothing goes on about it afterwards
        log = proc.output()
        assert log.count("binding-writer") + log.count("conflict") <= 2, log[-2000:]
        assert log.count("skipping undecodable value") == 2  # once each, where it was found
        assert readable("early") is not None and readable("web") is not None
    finally:
        proc.stop()
