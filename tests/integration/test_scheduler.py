"""The real `berth scheduler` process against a real etcd."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from berth.store import Put, Store, decode, encode, keys
from berth.store.documents import Application, Binding, Cluster
from berth_testkit.cli import berth
from berth_testkit.scheduler_env import (
    SchedulerProcess,
    application,
    binding,
    cluster,
    metric,
    picture,
    put,
    record_puts,
    set_state,
    targets,
    value,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer


def scheduled(store: Store, name: str) -> Binding:
    return wait_for(lambda: binding(store, name), lambda b: b.status.state == "Scheduled")


@pytest.fixture
def scheduler(etcd_server: EtcdServer, store: Store, tmp_path: Path) -> Iterator[SchedulerProcess]:
    proc = SchedulerProcess(etcd_server.url, tmp_path).start()
    yield proc
    proc.stop()
    print(proc.output()[-3000:])


def scored_clusters(store: Store, prefix: str, values: dict[str, float]) -> None:
    """A cluster per name, scored by its own metric ``prefix + name`` at the given value
    (metrics and values written before the clusters)."""
    for name, v in values.items():
        metric(store, prefix + name)
        value(store, prefix + name, v)
    for name in values:
        cluster(store, name, metrics={prefix + name: 1.0})


def test_an_application_is_bound_to_the_cluster_that_fits(
    store: Store, scheduler: SchedulerProcess
) -> None:
    cluster(store, "de", labels={"location": "DE"})
    cluster(store, "fr", labels={"location": "FR"})
    application(store, "web", constraints={"cluster": {"labels": ["location is DE"]}})
    b = wait_for(lambda: binding(store, "web"), lambda b: b.status.state == "Scheduled")
    assert targets(b) == ["de"]
    assert b.spec.generation == 1 and b.status.state == "Scheduled"
    assert b.spec.resource.kind == "Application" and b.spec.scheduled is not None
    assert b.status.reason == "1/2 clusters are available: 1 label constraint 'location == DE'"
    import contextlib
    import io

    from berth.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["explain", "application", "default/web", "--etcd", store.config.url]) == 0
    table = out.getvalue()
    assert "Application default/web: Scheduled (generation 1" in table
    assert "; reason as of " in table.splitlines()[0]  # a decision that stands is not rewritten
    assert "targets: Cluster default/de (score 0.0000)" in table
    assert "LabelConstraints         1  label constraint 'location == DE'  (fr)" in table
    rejected = [e for e in b.status.explanation if "rejected_by" in e]
    assert rejected == [{"rejected_by": "LabelConstraints", "count": 1,
                         "reason": "label constraint 'location == DE'",
                         "candidates": ["Cluster/default/fr"]}]


def test_a_better_metric_moves_the_application_and_stickiness_holds_small_changes(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    scored_clusters(store, "heat_", {"a": 0.75, "b": 0.75})
    # Started after the values exist: its first list holds them all (watches
    # of different prefixes may deliver a burst of changes in any order).
    proc = SchedulerProcess(etcd_server.url, tmp_path, name="metrics").start()
    try:
        _moves_and_sticks(store)
        # One line per Binding change, at INFO: the application, from → to, why.
        said = wait_for(lambda: [
            line for line in proc.output().splitlines()
            if " INFO berth.controllers.scheduler.scheduler: Application default/app: " in line],
            lambda lines: len(lines) >= 2)
        assert len(said) == 2, said
        assert " (new) → " in said[0] and ", Scheduled (" in said[0]
        assert said[1].split("Application default/app: ")[1].startswith(
            f"{said[0].split(' → ')[1].split(',')[0]} → ")
    finally:
        proc.stop()


def test_the_last_whole_picture_stands_in_for_a_bounded_time(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    """The metrics-cache dead (its values and picture gone with its lease): decisions go
    on with the last whole picture for metric_picture_grace, then its values are missing,
    as after a provider error, and the explanation says why — not hour-old values for
    ever."""
    scored_clusters(store, "heat_", {"a": 0.2, "b": 0.9})
    proc = SchedulerProcess(etcd_server.url, tmp_path, name="grace",
                            config="metric_picture_grace: 3\n").start()
    try:
        application(store, "first")
        assert targets(scheduled(store, "first")) == ["b"]
        for name in ("a", "b"):
            store.delete(keys.metric_value_key(f"heat_{name}"))
        store.delete(keys.METRIC_PICTURE)  # as the lease's expiry takes them
        application(store, "within")  # decided on the last whole picture: b still best
        within = scheduled(store, "within")
        assert targets(within) == ["b"] and within.spec.targets[0].score == pytest.approx(0.9)
        said = "no whole picture of the metric values for 3 s"
        wait_for(lambda: proc.output(), lambda out: said in out, timeout=10)
        application(store, "after")
        after = scheduled(store, "after")
        ranked = [e for e in after.status.explanation if "score" in e]
        assert len(ranked) == 2 and not any(e.get("with_metrics") for e in ranked), ranked
        chosen = targets(after)[0]
        for entry in ranked:  # the chosen one says why its metrics did not count
            name = entry["candidate"].rsplit("/", 1)[1]
            if name != chosen:
                assert "metrics" not in entry  # the fleet's readings: explain --all
                continue
            reading = entry["metrics"][f"heat_{name}"]
            assert reading["reason"] == "MISSING_METRIC_VALUE" and said in reading["message"]
        value(store, "heat_a", 0.95)  # a picture again: values count at once
        value(store, "heat_b", 0.1)
        application(store, "back")
        assert targets(scheduled(store, "back")) == ["a"]
    finally:
        proc.stop()


def _moves_and_sticks(store: Store) -> None:
    application(store, "app")
    first = scheduled(store, "app")
    here = targets(first)[0]
    there = "b" if here == "a" else "a"
    assert first.spec.targets[0].score == pytest.approx(0.75)
    # Better, but by less than the stickiness: (0.75 + 0.1) / 1.1 = 0.7727 > 0.77.
    value(store, f"heat_{there}", 0.77)
    application(store, "probe")  # placed without stickiness: proves the value was seen
    assert targets(scheduled(store, "probe")) == [there]
    assert targets(binding(store, "app")) == [here]  # type: ignore[arg-type]
    value(store, f"heat_{there}", 0.95)  # better by more than the stickiness
    moved = wait_for(lambda: binding(store, "app"), lambda b: targets(b) == [there], timeout=10)
    assert moved.spec.scheduled is not None and moved.spec.scheduled > first.spec.scheduled  # type: ignore[operator]


def test_nothing_fits_then_a_cluster_comes_online(store: Store,
                                                  scheduler: SchedulerProcess) -> None:
    cluster(store, "late", labels={"tier": "gold"}, online=False)
    cluster(store, "cheap", labels={"tier": "bronze"})
    application(store, "gold-app", constraints={"cluster": {"labels": ["tier in (gold)"]}})
    reason = ("0/2 clusters are available: 1 label constraint 'tier in (gold)', "
              "1 not ONLINE (no status)")
    b = wait_for(lambda: binding(store, "gold-app"), lambda b: b.status.reason == reason)
    assert b.status.state == "Unschedulable" and b.spec.targets == []
    set_state(store, "late", "ONLINE")
    b = wait_for(lambda: binding(store, "gold-app"), lambda b: b.status.state == "Scheduled")
    assert targets(b) == ["late"]


def test_an_application_for_another_scheduler_is_left_alone(
    store: Store, scheduler: SchedulerProcess
) -> None:
    cluster(store, "c")
    application(store, "theirs", schedulerName="someone-else")
    application(store, "ours")
    scheduled(store, "ours")
    assert binding(store, "theirs") is None


def test_a_spec_change_is_decided_for_its_generation(
    store: Store, scheduler: SchedulerProcess
) -> None:
    cluster(store, "c")
    application(store, "app")
    b1 = scheduled(store, "app")
    application(store, "app", generation=2, priority=5)
    b2 = wait_for(lambda: binding(store, "app"), lambda b: b.spec.generation == 2)
    assert b2.spec.scheduled == b1.spec.scheduled  # same cluster: the decision did not change


def test_a_vanished_application_loses_its_binding(store: Store,
                                                  scheduler: SchedulerProcess) -> None:
    cluster(store, "c")
    application(store, "app")
    scheduled(store, "app")
    store.delete(keys.resource_key("Application", "app", "default"))
    wait_for(lambda: binding(store, "app") is None or None, timeout=10)


def test_migration_false_never_moves(etcd_server: EtcdServer, store: Store,
                                     tmp_path: Path) -> None:
    metric(store, "m1")
    metric(store, "m2")
    value(store, "m1", 0.9)
    value(store, "m2", 0.1)
    cluster(store, "one", metrics={"m1": 1})
    cluster(store, "two", metrics={"m2": 1})
    proc = SchedulerProcess(etcd_server.url, tmp_path, name="pinned").start()
    try:
        _pinned_stays(store)
    finally:
        proc.stop()


def _pinned_stays(store: Store) -> None:
    application(store, "pinned", migration=False)
    assert targets(scheduled(store, "pinned")) == ["one"]
    value(store, "m1", 0.0)
    value(store, "m2", 1.0)
    application(store, "probe")  # a later decision proves the scheduler saw the new values
    assert targets(scheduled(store, "probe")) == ["two"]
    assert targets(binding(store, "pinned")) == ["one"]  # type: ignore[arg-type]


def test_a_cluster_without_kubeconfig_is_placed_on_a_cloud(
    store: Store, scheduler: SchedulerProcess
) -> None:
    metric(store, "price")
    value(store, "price", 0.2)
    for name, labels, metrics in (("os-de", {"location": "DE"}, [{"name": "price", "weight": 1}]),
                                  ("os-fr", {"location": "FR"}, [])):
        put(store, keys.resource_key("GlobalCloud", name), encode({
            "api": "infrastructure", "kind": "GlobalCloud",
            "metadata": {"name": name, "labels": labels}, "spec": {"metrics": metrics}}))
    cluster(store, "new-cluster", kubeconfig=False, online=False)
    b = wait_for(lambda: binding(store, "new-cluster", kind="Cluster"),
                 lambda b: b.status.state == "Scheduled")
    assert [(t.kind, t.name) for t in b.spec.targets] == [("GlobalCloud", "os-de")]
    assert binding(store, "de", kind="Cluster") is None


def test_a_burst_of_10000_creates_all_get_bindings(store: Store,
                                                   scheduler: SchedulerProcess) -> None:
    cluster(store, "c1", labels={"zone": "a"})
    cluster(store, "c2", labels={"zone": "b"})
    n = 10_000
    ops = [Put(keys.resource_key("Application", f"burst-{i:05d}", "default"), encode({
        "api": "kubernetes", "kind": "Application",
        "metadata": {"name": f"burst-{i:05d}", "namespace": "default", "generation": 1},
        "spec": {"constraints": {"cluster": {"labels": ["zone in (a, b)"]}}}})) for i in range(n)]
    store.commit_chunks(ops)
    prefix = keys.binding_prefix("Application") + "default/"
    wait_for(lambda: len(store.list_prefix(prefix)[0]) == n or None, timeout=120)
    kvs, _ = store.list_prefix(prefix)
    assert sorted(kv.key.rsplit("/", 1)[1] for kv in kvs) == [f"burst-{i:05d}" for i in range(n)]


GANG_CONFIG = "plugins:\n  permit:\n  - name: Gang\n    args: {timeout: 1.5}\n"


@pytest.fixture
def gang_scheduler(etcd_server: EtcdServer, store: Store,
                   tmp_path: Path) -> Iterator[SchedulerProcess]:
    proc = SchedulerProcess(etcd_server.url, tmp_path, config=GANG_CONFIG).start()
    yield proc
    proc.stop()


def test_a_gang_is_bound_all_together_in_one_transaction(
    store: Store, gang_scheduler: SchedulerProcess
) -> None:
    cluster(store, "c")
    application(store, "probe")  # the scheduler is up and sees the cluster
    scheduled(store, "probe")
    gang = {"name": "trio", "minMember": 3}
    application(store, "m1", gang=gang)
    application(store, "m2", gang=gang)
    application(store, "m3", gang=gang)
    bound = [scheduled(store, f"m{i}") for i in (1, 2, 3)]
    assert all(targets(b) == ["c"] for b in bound)
    revisions = {store.get(keys.binding_key("Application", "default", f"m{i}")).mod_revision  # type: ignore[union-attr]
                 for i in (1, 2, 3)}
    assert len(revisions) == 1, "the gang was not bound in one transaction"


def test_an_incomplete_gang_is_not_bound(store: Store, gang_scheduler: SchedulerProcess) -> None:
    cluster(store, "c")
    gang = {"name": "pair-of-three", "minMember": 3}
    application(store, "g1", gang=gang)
    application(store, "g2", gang=gang)
    b = wait_for(lambda: binding(store, "g1"), lambda b: "gang" in b.status.reason)
    assert b.status.state == "Unschedulable" and b.spec.targets == []
    assert b.status.reason == "gang pair-of-three: not enough members in time"
    assert targets(binding(store, "g2") or b) == []


def test_a_value_kept_after_a_provider_error_still_counts(
    store: Store, scheduler: SchedulerProcess
) -> None:
    """Within ``stale_after`` the metrics-cache keeps the last value next to the error: the
    scheduler decides on it (it used to count it as missing)."""
    metric(store, "heat_k")
    value(store, "heat_k", 0.8, error="UNREACHABLE_METRICS_PROVIDER")
    cluster(store, "k", metrics={"heat_k": 1.0})
    application(store, "warm", constraints={"cluster": {"metrics": ["heat_k > 0.5"]}})
    b = scheduled(store, "warm")
    assert targets(b) == ["k"] and b.spec.targets[0].score == pytest.approx(0.8)
    best = [e for e in b.status.explanation if e.get("candidate") == "Cluster/default/k"]
    assert "last value kept after UNREACHABLE_METRICS_PROVIDER" in str(best)


def test_anti_flap_holds_an_optional_move_back_and_says_why(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    scored_clusters(store, "h_", {"x": 0.5, "y": 0.3})
    config = "anti_flap:\n  hold: 1\n  min_dwell: 4\n"
    proc = SchedulerProcess(etcd_server.url, tmp_path, config=config, name="antiflap").start()
    try:
        application(store, "app")
        first = scheduled(store, "app")
        assert targets(first) == ["x"]
        value(store, "h_y", 0.9)  # y is better now: the move waits 1 s (hold) ...
        held = wait_for(lambda: binding(store, "app"),
                        lambda b: b.status.reason.startswith("Held back"))
        assert targets(held) == ["x"] and held.status.state == "Scheduled"
        assert held.status.reason == "Held back until better for 1s (hold); would move to y"
        assert held.status.explanation[0]["held_back"] == "hold"
        assert held.status.explanation[0]["would_move_to"] == ["Cluster/default/y"]
        # ... and then until 4 s after the application was placed (min_dwell).
        dwell = wait_for(lambda: binding(store, "app"), lambda b: "min_dwell" in b.status.reason)
        assert targets(dwell) == ["x"] and dwell.status.explanation[0]["held_back"] == "min_dwell"
        assert 0 < dwell.status.explanation[0]["retry_in"] < 4
        moved = wait_for(lambda: binding(store, "app"), lambda b: targets(b) == ["y"])
        assert (moved.spec.scheduled - first.spec.scheduled).total_seconds() >= 4  # type: ignore[operator]
        assert not moved.status.reason.startswith("Held back")
        value(store, "h_x", 1.0)  # x much better again: held by both rules, then back
        wait_for(lambda: binding(store, "app"), lambda b: "min_dwell" in b.status.reason)
        back = wait_for(lambda: binding(store, "app"), lambda b: targets(b) == ["x"])
        assert (back.spec.scheduled - moved.spec.scheduled).total_seconds() >= 4  # type: ignore[operator]
    finally:
        proc.stop()




APP_YAML = """\
api: kubernetes
kind: Application
metadata: {{name: {name}, namespace: default, labels: {{team: shop}}}}
spec:
  constraints: {{cluster: {{labels: [{label}]}}}}
  manifest:
  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}}}, data: {{v: '1'}}}}
"""


def test_apply_delete_register_and_cordon_with_the_real_command(
    store: Store, scheduler: SchedulerProcess, tmp_path: Path
) -> None:
    """#11 item 9: the write side, against the real scheduler."""
    url = store.config.url
    cluster(store, "de-1", labels={"location": "DE"})
    cluster(store, "de-2", labels={"location": "DE"})
    f = tmp_path / "apps.yaml"
    f.write_text(APP_YAML.format(name="web", label="'location is DE'") + "---\n"
                 + APP_YAML.format(name="api", label="'location is DE'"))
    assert berth("apply", "-f", str(f), "--quiet", "--etcd", url) == (
        0, "application/default/web created\napplication/default/api created\n")
    first = targets(scheduled(store, "web"))
    assert berth("apply", "-f", str(f), "--quiet", "--etcd", url)[1].count(" unchanged") == 2
    f.write_text(APP_YAML.format(name="web", label="'location in (DE, FR)'"))
    code, out = berth("apply", "-f", str(f), "--dry-run", "--etcd", url)
    assert code == 0 and "application/default/web configured (dry run)" in out
    assert "location is DE" in [ln[1:].strip(" -") for ln in out.splitlines()
                                if ln.startswith("-")]
    assert "location in (DE, FR)" in [ln[1:].strip(" -") for ln in out.splitlines()
                                      if ln.startswith("+")]
    kv = store.get(keys.resource_key("Application", "web", "default"))
    assert kv is not None and b"location in (DE, FR)" not in kv.value  # a dry run
    assert berth("apply", "-f", str(f), "--quiet", "--etcd", url) == (
        0, "application/default/web configured\n")
    assert decode(store.get(keys.resource_key("Application", "web", "default")).value,  # type: ignore[union-attr]
                  Application).metadata.generation == 2

    # Cordon: NoSchedule moves what runs there (berth re-decides), uncordon lets it back.
    assert berth("cordon", first[0], "--etcd", url)[1] == f"cluster/default/{first[0]} " \
        "cordoned (NoSchedule)\n"
    other = "de-2" if first == ["de-1"] else "de-1"
    wait_for(lambda: binding(store, "web"), lambda b: targets(b) == [other], timeout=20)
    assert berth("cordon", first[0], "--etcd", url)[1].endswith("unchanged (cordoned "
                                                                  "(NoSchedule) already)\n")
    assert berth("uncordon", first[0], "--etcd", url)[1] == \
        f"cluster/default/{first[0]} uncordoned\n"
    assert berth("cordon", "nowhere", "--etcd", url)[0] == 1

    # Register from a kubeconfig with two contexts: only the chosen one is kept.
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "prod",
        "contexts": [{"name": "prod", "context": {"cluster": "p", "user": "admin"}},
                     {"name": "lab", "context": {"cluster": "l", "user": "tester"}}],
        "clusters": [{"name": "p", "cluster": {"server": "https://prod:6443"}},
                     {"name": "l", "cluster": {"server": "https://lab:6443"}}],
        "users": [{"name": "admin", "user": {"token": "prod-secret"}},
                  {"name": "tester", "user": {"token": "lab-secret"}}]}))
    code, out = berth("cluster", "register", "lab-1", "--kubeconfig", str(kc), "--context",
                      "lab", "--label", "location=DE", "--metric", "heat=2", "--etcd", url)
    assert (code, out) == (0, "cluster/default/lab-1 created\n")
    doc = decode(store.get(keys.resource_key("Cluster", "lab-1", "default")).value,  # type: ignore[union-attr]
                 Cluster)
    assert doc.spec.kubeconfig is not None and doc.spec.kubeconfig["current-context"] == "lab"
    assert b"prod-secret" not in store.get(keys.resource_key(  # type: ignore[union-attr]
        "Cluster", "lab-1", "default")).value
    assert doc.metadata.labels == {"location": "DE"} and doc.spec.metrics[0].weight == 2.0
    assert berth("cluster", "register", "lab-1", "--kubeconfig", str(kc), "--context", "lab",
                 "--label", "location=DE", "--metric", "heat=2", "--etcd", url)[1].endswith(
        "unchanged\n")
    with pytest.raises(ValueError, match="no context 'qa' \\(has: prod, lab\\)"):
        from berth.cli.cluster_cmd import kubeconfig
        kubeconfig(str(kc), "qa")

    # Delete by name (several) and by file.
    code, out = berth("delete", "app", "web", "default/api", "--etcd", url)
    assert code == 0 and out.count("marked /berth/v1/applications/default/") == 2
    assert berth("delete", "-f", str(f), "--etcd", url)[1].startswith(
        "/berth/v1/applications/default/web is already being deleted")
    assert berth("delete", "cluster", "lab-1", "--etcd", url)[1] == \
        "deleted /berth/v1/clusters/default/lab-1\n"
    assert berth("delete", "cluster", "lab-1", "--etcd", url)[0] == 1


WHAT_IF = """\
api: kubernetes
kind: Application
metadata: {{name: {name}, namespace: default}}
spec:
  constraints: {{cluster: {{labels: ['{label}'], metrics: ['{metric}']}}}}
  manifest: [{{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}}}}}]
"""


def test_what_if_answers_what_the_scheduler_then_decides(
    store: Store, scheduler: SchedulerProcess, tmp_path: Path
) -> None:
    """#11 item 10: the scheduler's own decide() on the scheduler's view, nothing written."""
    import json

    url = store.config.url
    for name, heat in (("de-1", 0.4), ("de-2", 0.9), ("fr-1", 1.0), ("de-3", 0.05)):
        metric(store, f"heat_{name}")
        value(store, f"heat_{name}", heat)
    for name in ("de-1", "de-2", "fr-1", "de-3"):
        cluster(store, name, labels={"location": name[:2].upper()},
                metrics={f"heat_{name}": 1.0, "load": 0.0})
    metric(store, "load", 0, 10)
    value(store, "load", 3.0, 0, 10)
    f = tmp_path / "web.yaml"
    f.write_text(WHAT_IF.format(name="web", label="location is DE", metric="load < 5"))
    code, out = berth("explain", "--what-if", str(f), "-o", "json", "--etcd", url)
    assert code == 0, out
    answer = json.loads(out)["answers"][0]
    assert (answer["application"], answer["exists"], answer["state"]) == (
        "default/web", False, "Scheduled")
    verdicts = {v["candidate"].rsplit("/", 1)[1]: v for v in answer["verdicts"]}
    assert verdicts["fr-1"]["verdict"] == "rejected"
    assert verdicts["fr-1"]["rejected_by"] == "LabelConstraints"
    assert verdicts["fr-1"]["actual"] == "location=FR"  # what would have to change
    assert {verdicts[c]["verdict"] for c in ("de-1", "de-2", "de-3")} <= {"chosen", "fits"}
    assert binding(store, "web") is None  # nothing written
    # The scheduler, given the same application, decides the same.
    assert berth("apply", "-f", str(f), "--quiet", "--etcd", url)[0] == 0
    assert targets(scheduled(store, "web")) == answer["targets"] == ["de-2"]
    # The Binding keeps the best few; --all decides the stored application again and
    # lists every candidate.
    code, out = berth("explain", "application", "default/web", "--all", "-o", "json",
                      "--etcd", url)
    assert code == 0, out
    again = json.loads(out)
    assert (again["exists"], again["targets"]) == (True, ["de-2"])
    assert {v["candidate"].rsplit("/", 1)[1]: v["verdict"] for v in again["verdicts"]} == {
        "de-2": "chosen", "de-1": "fits", "de-3": "fits", "fr-1": "rejected"}
    code, out = berth("explain", "application", "default/nothing", "--all", "--etcd", url)
    assert code == 1

    # Nothing fits: exit 1, and each rejection says what the candidate has.
    g = tmp_path / "greedy.yaml"
    g.write_text(WHAT_IF.format(name="greedy", label="location is DE", metric="load < 2"))
    code, out = berth("explain", "--what-if", str(g), "--etcd", url)
    assert code == 1
    assert out.splitlines()[1].startswith("decision: Unschedulable (0/4 clusters are "
                                          "available")
    assert "rejected by MetricConstraints  -      metric constraint 'load < 2'; it has " \
           "load=3" in out
    assert "rejected by LabelConstraints   -      label constraint 'location == DE'; it " \
           "has location=FR" in out
    assert binding(store, "greedy") is None

    # A divided application: how many replicas each cluster would get.
    h = tmp_path / "divided.yaml"
    h.write_text(WHAT_IF.format(name="wide", label="location is DE", metric="load < 5").replace(
        "  manifest:", "  placement: {policy: PickAll, replicaScheduling: {type: Divided, "
        "staticWeights: [{targetCluster: {clusterNames: [de-1]}, weight: 3}, "
        "{targetCluster: {clusterNames: [de-2]}, weight: 1}]}}\n  manifest:").replace(
        "[{apiVersion: v1, kind: ConfigMap, metadata: {name: wide}}]",
        "[{apiVersion: apps/v1, kind: Deployment, metadata: {name: wide}, spec: {replicas: 8}}]"))
    code, out = berth("explain", "--what-if", str(h), "--etcd", url)
    assert code == 0, out
    decision = out.splitlines()[1]
    assert decision.startswith("decision: Scheduled on ") and "de-3" not in decision, out
    assert "de-1 (6 replicas)" in decision and "de-2 (2 replicas)" in decision, out

    # Any file apply takes: de-2 relabelled to FR — web (stored, on de-2) would move, and
    # nothing is written; an application in the same file is decided with it.
    k = tmp_path / "relabel.yaml"
    k.write_text("api: kubernetes\nkind: Cluster\nmetadata: {name: de-2, namespace: default, "
                 "labels: {location: FR}}\nspec: {metrics: [{name: heat_de-2, weight: 1}, "
                 "{name: load, weight: 0}]}\n---\n"
                 + WHAT_IF.format(name="fresh", label="location is DE", metric="load < 5"))
    code, out = berth("explain", "--what-if", str(k), "-o", "json", "--etcd", url)
    assert code == 0, out
    result = json.loads(out)
    assert [a["application"] for a in result["answers"]] == ["default/fresh"]
    assert "de-2" not in result["answers"][0]["targets"]
    moved = {c["application"]: c for c in result["consequences"]}
    assert moved["default/web"]["now"] == ["de-2"] and moved["default/web"]["then"] == ["de-1"]
    assert targets(binding(store, "web")) == ["de-2"]  # type: ignore[arg-type]
    code, out = berth("explain", "--what-if", str(k), "--etcd", url)
    assert "stored applications whose placement would change: 1" in out
    assert "default/web  de-2  de-1" in out


KRAKE_MAGNUM = """\
api: openstack
kind: Project
metadata: {name: os-dresden, namespace: default, labels: {location: DE}}
spec:
  url: https://keystone.dresden.example:5000/v3
  template: 4a1e6ef5-0f8b-4c52-b4a4-3b7d4a0b9d70
  auth:
    type: password
    password:
      user: {id: 1c2d3e4f, password: very-secret}
      project: {id: 9f8e7d6c}
  metrics:
  - {name: heat_os-dresden, weight: 1.0}
---
api: openstack
kind: Project
metadata: {name: os-paris, namespace: default, labels: {location: FR}}
spec:
  url: https://keystone.paris.example:5000/v3
  template: 0b0e0f43-5a59-4f55-9d93-6c7c6a2f3a11
  auth:
    type: application_credential
    application_credential: {id: 77aa, secret: also-secret}
  metrics:
  - {name: heat_os-paris, weight: 1.0}
---
api: openstack
kind: Project
metadata: {name: os-leipzig, namespace: default, labels: {location: DE}}
spec:
  url: https://keystone.leipzig.example:5000/v3
  template: 1d3c1a2e-6c7b-4f0a-8d59-5d8e5c8b6a22
  auth: {type: password, password: {user: {id: u2, password: p2}, project: {id: p2}}}
  metrics:
  - {name: heat_os-leipzig, weight: 1.0}
---
api: openstack
kind: MagnumCluster
metadata: {name: k8s-1, namespace: default}
spec:
  master_count: 1
  node_count: 3
  constraints:
    project:
      labels: ["location is DE"]
"""


def test_a_magnum_cluster_is_placed_on_the_best_project_that_fits(
    store: Store, scheduler: SchedulerProcess, tmp_path: Path
) -> None:
    """#11 item 7: Krake's Magnum cluster handler, as data in the one pipeline."""
    url = store.config.url
    for name, heat in (("os-dresden", 0.3), ("os-paris", 0.99), ("os-leipzig", 0.8)):
        metric(store, f"heat_{name}")
        value(store, f"heat_{name}", heat)
    f = tmp_path / "magnum.yaml"
    f.write_text(KRAKE_MAGNUM)  # Krake's shapes, loaded unchanged
    assert berth("apply", "-f", str(f), "--quiet", "--etcd", url)[0] == 0
    b = wait_for(lambda: binding(store, "k8s-1", kind="MagnumCluster"),
                 lambda b: b.status.state == "Scheduled", timeout=20)
    assert [(t.kind, t.name) for t in b.spec.targets] == [("Project", "os-leipzig")]
    assert b.status.reason == "2/3 projects are available: 1 label constraint 'location == DE'"
    code, out = berth("get", "magnum", "--etcd", url)
    assert out.splitlines()[1].split()[:3] == ["k8s-1", "Scheduled", "os-leipzig"]
    code, out = berth("get", "projects", "-o", "yaml", "--etcd", url)
    assert "very-secret" not in out and "also-secret" not in out and "<masked>" in out
    code, out = berth("describe", "project", "os-paris", "--etcd", url)
    assert code == 0 and "also-secret" not in out
    assert "application_credential: <masked>" in out
    code, out = berth("describe", "magnum", "k8s-1", "--etcd", url)
    assert "Placement:   Scheduled (generation 1" in out
    assert "  Targets:   os-leipzig (score 0.8000)" in out


def test_a_document_at_another_key_than_its_name_is_never_placed(
    store: Store, scheduler: SchedulerProcess, tmp_path: Path
) -> None:
    """The key is the name: a MagnumCluster named k8s-1 written by hand at
    ``.../magnumclusters/default/alias`` (and an Application likewise) is refused, named
    once in the log, and no Binding is written for ``alias``; the real ones are placed."""
    url = store.config.url
    for name, heat in (("os-dresden", 0.3), ("os-paris", 0.99), ("os-leipzig", 0.8)):
        metric(store, f"heat_{name}")
        value(store, f"heat_{name}", heat)
    f = tmp_path / "magnum.yaml"
    f.write_text(KRAKE_MAGNUM)
    assert berth("apply", "-f", str(f), "--quiet", "--etcd", url)[0] == 0
    real = store.get(keys.resource_key("MagnumCluster", "k8s-1", "default"))
    assert real is not None
    store.create(keys.resource_key("MagnumCluster", "alias", "default"), real.value)
    cluster(store, "de")
    application(store, "web")
    web = store.get(keys.resource_key("Application", "web", "default"))
    assert web is not None
    store.create(keys.resource_key("Application", "web-alias", "default"), web.value)
    wait_for(lambda: binding(store, "k8s-1", kind="MagnumCluster"),
             lambda b: b.status.state == "Scheduled", timeout=20)
    wait_for(lambda: binding(store, "web"), lambda b: b.status.state == "Scheduled")
    time.sleep(2)  # a sweep or two
    assert binding(store, "alias", kind="MagnumCluster") is None
    assert binding(store, "web-alias") is None
    out = scheduler.output()
    said = [line for line in out.splitlines() if "magnumclusters/default/alias" in line]
    assert len(said) == 1 and "metadata.name 'k8s-1' is not the key's name 'alias'" in said[0]
    assert sum("applications/default/web-alias" in line for line in out.splitlines()) == 1
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code, listed = berth("get", "magnum", "--etcd", url)
    assert code == 0
    assert "k8s-1" in [line.split()[0] for line in listed.splitlines()[1:]]
    assert ("magnumclusters/default/alias: metadata.name 'k8s-1' is not the key's name "
            "'alias': ignored by every berth process") in err.getvalue()


def test_a_reaction_moves_an_anti_affine_application_once(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    """A sweep decides an application whose place depends on where others run after
    the others: decided first, ``a`` would move to z1 while ``b`` is still in z2, ``b``
    would then move into z1, and the next sweep would move ``a`` back (the diverse
    benchmark's c00120 → c00110 → c00120)."""
    zones = {"c1": "z1", "c2": "z2", "c3": "z3"}
    for name, v in {"c1": 0.1, "c2": 0.2, "c3": 0.9}.items():
        metric(store, "m_" + name)
        value(store, "m_" + name, v)
    for name, zone in zones.items():
        cluster(store, name, labels={"zone": zone}, metrics={"m_" + name: 1.0})
    proc = SchedulerProcess(etcd_server.url, tmp_path, config="reschedule_after: 1\n",
                            name="anti").start()
    try:
        application(store, "a", affinity={"workloadAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{
                "labelSelector": {"matchLabels": {"group": "g"}}, "topologyKey": "zone"}]}})
        assert targets(scheduled(store, "a")) == ["c3"]
        application(store, "b", labels={"group": "g"},
                    constraints={"cluster": {"labels": ["zone in (z1, z2)"]}})
        assert targets(scheduled(store, "b")) == ["c2"]
        seen, watch = record_puts(store, keys.binding_key("Application", "default", "a"),
                                  Binding)
        for name, v in {"c1": 0.9, "c2": 0.1, "c3": 0.5}.items():  # one poll: z1 is best now
            value(store, "m_" + name, v, publish=False)
        picture(store)
        wait_for(lambda: binding(store, "b"), lambda b: targets(b) == ["c1"])
        time.sleep(3.5)  # three periodic sweeps with nothing changing
        watch.close()
        assert [targets(b) for b in seen if targets(b) != ["c3"]] == []
        final = binding(store, "a")
        assert final is not None and targets(final) == ["c3"]
    finally:
        proc.stop()


def test_a_sweep_decides_first_the_applications_whose_cluster_was_overtaken_most(
    etcd_server: EtcdServer, store: Store, tmp_path: Path
) -> None:
    """After the metric values change, a sweep decides first the applications on the
    clusters that the most others overtook in the fleet's order by metric values, not
    in the cache's order (by key): their moves are written first. ``b1`` falls from
    the best to the worst, overtaken by three, and loses its applications
    (``on-b-*``); ``a1`` keeps its place, second, overtaken by one, and loses its own
    (``on-a-*``, first by key) to ``a2``, which rose past it."""
    ns = "sweep-order"
    before = {"b1": 0.9, "a1": 0.8, "a2": 0.5, "b2": 0.4}
    for name, v in before.items():
        metric(store, "order_" + name)
        value(store, "order_" + name, v)
    for name in before:
        cluster(store, name, namespace=ns, labels={"site": name[0]},
                metrics={"order_" + name: 1.0})
    proc = SchedulerProcess(etcd_server.url, tmp_path, name="order").start()
    try:
        names = {f"on-{site}-{i:02d}": site for site in "ab" for i in range(20)}
        for name, site in names.items():
            application(store, name, namespace=ns,
                        constraints={"cluster": {"labels": [f"site == {site}"]}})
        for name, site in names.items():
            assert targets(wait_for(lambda n=name: binding(store, n, ns))) == [f"{site}1"]
        seen, watch = record_puts(store, keys.binding_prefix("Application") + ns + "/", Binding)
        for name, v in {"b1": 0.1, "b2": 0.45, "a2": 0.85}.items():  # one poll
            value(store, "order_" + name, v, publish=False)
        picture(store)
        for name, site in names.items():
            wait_for(lambda n=name: binding(store, n, ns), lambda b, s=site: targets(b) == [f"{s}2"])
        watch.close()
        moved = [b.spec.resource.name for b in seen if targets(b)[0].endswith("2")]
        assert sorted(moved) == sorted(names), moved
        # One decided in the cache's order while the rest is ordered, then b1's first.
        last_b = max(i for i, name in enumerate(moved) if names[name] == "b")
        assert sum(names[name] == "a" for name in moved[:last_b]) <= 1, moved
    finally:
        proc.stop()
