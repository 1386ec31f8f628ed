"""``berth bootstrap`` against a real etcd: all or nothing, --force, --dry-run, scale."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from berth.bootstrap import load, plan, write
from berth.cli.main import main
from berth.store import Conflict, Store, StoreError, decode
from berth.store.documents import Application, GlobalMetric
from berth_testkit.servers.etcd import ROOT, EtcdServer

EXAMPLES = ROOT / "deploy" / "examples"


def berth(etcd: EtcdServer, *args: str) -> int:
    return main(["bootstrap", "--etcd", etcd.url, "--quiet", *args])


def metric(name: str, lo: float = 0, hi: float = 1) -> str:
    return (f"api: core\nkind: GlobalMetric\nmetadata: {{name: {name}}}\n"
            f"spec: {{min: {lo}, max: {hi}, provider: {{name: p, metric: {name}}}}}\n")


def app(name: str, label: str = "location is DE") -> str:
    return (f"api: kubernetes\nkind: Application\nmetadata: {{name: {name}, namespace: default}}\n"
            f"spec:\n  constraints:\n    cluster:\n      labels: [{label!r}]\n")


def test_the_examples_load_and_read_back_at_the_contract_keys(
    etcd_server: EtcdServer, store: Store
) -> None:
    assert berth(etcd_server, str(EXAMPLES)) == 0
    kv = store.get("/berth/v1/globalmetrics/heat_demand_zone_1")
    assert kv is not None
    doc = decode(kv.value, GlobalMetric, kv.key)
    assert doc.spec.max == 5.0 and doc.metadata.generation == 1 and doc.metadata.uid
    assert store.get("/berth/v1/applications/default/web") is not None
    assert store.get("/berth/v1/clusters/default/dresden-1") is not None
    assert store.get("/berth/v1/globalclouds/os-dresden") is not None
    out = etcd_server.etcdctl("get", "--prefix", "/berth/v1/globalmetricsproviders/")
    lines = out.splitlines()
    assert json.loads(lines[lines.index("/berth/v1/globalmetricsproviders/kafka_provider") + 1])[
        "spec"]["kafka"]["table"] == "my_table"


def test_one_bad_document_means_nothing_is_written(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "metrics.yaml").write_text(metric("good1") + "---\n" + metric("good2"))
    (tmp_path / "apps.yaml").write_text(
        app("ok") + "---\n" + app("fine") + "---\n" + app("bad", "location iz DE"))
    assert berth(etcd_server, str(tmp_path)) == 1
    err = capsys.readouterr().err
    assert "apps.yaml#3 spec.constraints.cluster.labels[0]: cannot parse 'location iz DE'" in err
    assert "nothing written" in err
    assert store.list_prefix("/berth/")[0] == []


def test_a_workload_field_of_the_wrong_shape_is_refused_by_its_path(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "app.yaml").write_text(
        "api: kubernetes\nkind: Application\nmetadata: {name: odd, namespace: default}\n"
        "spec:\n  manifest:\n  - apiVersion: apps/v1\n    kind: Deployment\n"
        "    metadata: {name: odd}\n    spec:\n      template:\n        spec:\n"
        "          containers:\n          - {name: c, image: nginx, resources: {requests: [cpu]}}\n")
    assert berth(etcd_server, str(tmp_path)) == 1
    err = capsys.readouterr().err
    assert ("spec.manifest[0].spec.template.spec.containers[0].resources.requests: expected a "
            "mapping, not list") in err, err
    assert store.list_prefix("/berth/")[0] == []


def test_existing_resources_are_refused_unless_forced(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(metric("m", 0, 1))
    assert berth(etcd_server, str(f)) == 0
    first = decode(store.get("/berth/v1/globalmetrics/m").value, GlobalMetric)  # type: ignore[union-attr]
    f.write_text(metric("m", 0, 10) + "---\n" + metric("other"))
    assert berth(etcd_server, str(f)) == 1
    assert "exists and differs (use --force" in capsys.readouterr().err
    assert store.get("/berth/v1/globalmetrics/other") is None
    assert berth(etcd_server, "--force", str(f)) == 0
    second = decode(store.get("/berth/v1/globalmetrics/m").value, GlobalMetric)  # type: ignore[union-attr]
    assert second.spec.max == 10
    assert second.metadata.uid == first.metadata.uid
    assert second.metadata.created == first.metadata.created
    assert second.metadata.generation == first.metadata.generation + 1


def test_the_same_yaml_again_is_unchanged_and_not_written(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "a.yaml"
    f.write_text(app("same") + "---\n" + metric("same"))
    assert berth(etcd_server, str(f)) == 0
    capsys.readouterr()
    revision = store.revision()
    for force in ([], ["--force"], ["--force"]):  # every --force bumped the generation
        assert berth(etcd_server, *force, str(f)) == 0
        assert "0 created, 0 replaced, 2 unchanged" in capsys.readouterr().err
    assert store.revision() == revision  # nothing written: no process woken up
    kv = store.get("/berth/v1/applications/default/same")
    assert kv is not None and decode(kv.value, Application).metadata.generation == 1
    assert berth(etcd_server, "--dry-run", str(f)) == 0
    assert "unchanged /berth/v1/applications/default/same\n" in capsys.readouterr().out
    f.write_text(app("same", "location is FR") + "---\n" + metric("same"))
    assert berth(etcd_server, "--force", str(f)) == 0
    assert "0 created, 1 replaced, 1 unchanged" in capsys.readouterr().err


def test_force_never_brings_back_an_application_being_deleted(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "a.yaml"
    f.write_text(app("going"))
    assert berth(etcd_server, str(f)) == 0
    assert main(["delete", "application", "default/going", "--etcd", etcd_server.url]) == 0
    kv = store.get("/berth/v1/applications/default/going")
    assert kv is not None
    deleted = msgspec.json.decode(kv.value)["metadata"]["deleted"]
    assert deleted.endswith("Z")  # like every other timestamp (it was +00:00)
    capsys.readouterr()
    for text in (app("going"), app("going", "location is FR")):
        f.write_text(text)
        assert berth(etcd_server, "--force", str(f)) == 1
        err = capsys.readouterr().err
        assert (f"a.yaml#1: /berth/v1/applications/default/going is being deleted (since "
                f"{deleted}); apply it again once it is gone") in err
        assert "nothing written" in err
    after = store.get("/berth/v1/applications/default/going")
    assert after is not None and after.mod_revision == kv.mod_revision


def test_dry_run_writes_nothing(
    etcd_server: EtcdServer, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert berth(etcd_server, "--dry-run", str(EXAMPLES / "metrics.yaml")) == 0
    out = capsys.readouterr().out
    assert "create /berth/v1/globalmetrics/heat_demand_zone_1 {" in out
    assert store.list_prefix("/berth/")[0] == []


def test_a_failing_later_chunk_rolls_back_the_earlier_ones(store: Store, tmp_path: Path) -> None:
    f = tmp_path / "many.yaml"
    f.write_text("---\n".join(metric(f"m{i:04d}") for i in range(600)))
    planned = plan(store, load([str(f)]), force=False)
    store.create("/berth/v1/globalmetrics/m0500", b"{}")  # a racing writer, in chunk 4 of 5
    with pytest.raises(StoreError, match="m0500 already exists.*nothing was written") as err:
        write(store, planned)
    assert ("the 384 keys written before it (/berth/v1/globalmetrics/m0000 to "
            "/berth/v1/globalmetrics/m0383) were rolled back") in str(err.value)
    assert isinstance(err.value.__cause__, Conflict)
    kvs, _ = store.list_prefix("/berth/")
    assert [kv.key for kv in kvs] == ["/berth/v1/globalmetrics/m0500"]


def test_stdin_and_ten_thousand_documents_in_one_call(
    etcd_server: EtcdServer, store: Store
) -> None:
    text = "---\n".join(app(f"app-{i:05d}") for i in range(10_000))
    proc = subprocess.run(
        [sys.executable, "-m", "berth.cli.main", "bootstrap", "--etcd", etcd_server.url, "-"],
        input=text, capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "written 10000/10000" in proc.stderr  # progress was shown
    kvs, _ = store.list_prefix("/berth/v1/applications/default/")
    assert len(kvs) == 10_000
    last = msgspec.json.decode(kvs[-1].value, type=Application)
    assert last.metadata.name == "app-09999"


WEB_APP = """api: kubernetes
kind: Application
metadata: {name: web, namespace: default, labels: {tier: web}}
spec:
  manifest:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web}
    spec:
      replicas: 2
      template: {spec: {containers: [{name: c, image: web:1}]}}
"""
REPLICAS = """api: core
kind: Override
metadata: {name: replicas, namespace: default}
spec:
  applications: {matchLabels: {tier: web}}
  clusters: {matchLabels: {zone: eu}}
  rules:
  - patch:
      object: {kind: Deployment, name: web}
      operations:
      - {op: replace, path: PATH, value: 5}
"""


def test_an_override_is_checked_against_the_manifests_it_selects(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A patch path missing in an application the override selects is refused at apply,
    naming the override, the rule, the application and the path — both ways: a new
    override against stored applications, a new application against stored overrides.
    ``berth get overrides`` counts what each selects; one that selects nothing says so."""
    (tmp_path / "web.yaml").write_text(WEB_APP)
    assert berth(etcd_server, str(tmp_path / "web.yaml")) == 0
    (tmp_path / "bad.yaml").write_text(REPLICAS.replace("PATH", "/spec/replicaz/x"))
    assert berth(etcd_server, str(tmp_path / "bad.yaml")) == 1
    err = capsys.readouterr().err
    assert ("bad.yaml#1: Override default/replicas spec.rules[0].patch.operations[0]: "
            "application default/web: Deployment web: path /spec/replicaz does not exist"
            ) in err
    assert store.get("/berth/v1/overrides/default/replicas") is None  # nothing written
    (tmp_path / "good.yaml").write_text(REPLICAS.replace("PATH", "/spec/replicas"))
    assert berth(etcd_server, str(tmp_path / "good.yaml")) == 0
    other = WEB_APP.replace("name: web, namespace", "name: api, namespace").replace(
        "metadata: {name: web}", "metadata: {name: api}")
    (tmp_path / "api.yaml").write_text(other)  # selected by its labels: no Deployment web
    assert berth(etcd_server, str(tmp_path / "api.yaml")) == 1
    assert ("api.yaml#1: Override default/replicas spec.rules[0].patch: application "
            "default/api has no Deployment web") in capsys.readouterr().err
    (tmp_path / "none.yaml").write_text(REPLICAS.replace("PATH", "/spec/replicas").replace(
        "name: replicas", "name: nothing").replace("tier: web", "tier: none"))
    assert berth(etcd_server, str(tmp_path / "none.yaml")) == 0
    assert main(["get", "overrides", "--etcd", etcd_server.url]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert rows["replicas"].split()[1:4] == ["1", "0", "(selects"]  # no cluster has zone=eu
    assert "0 (selects nothing)" in rows["nothing"]


def staged_app(tag: int, *, limit: int = 3, second: str = "[b]") -> str:
    return f"""\
api: kubernetes
kind: Application
metadata: {{name: staged, namespace: default}}
spec:
  manifest:
  - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: c}}, data: {{tag: "{tag}"}}}}
  - {{apiVersion: v1, kind: Secret, metadata: {{name: s}}, stringData: {{password: hunter{tag}}}}}
  rollout:
    strategy: Staged
    historyLimit: {limit}
    stages:
    - {{name: one, clusters: {{names: [a]}}}}
    - {{name: two, clusters: {{names: {second}}}}}
    - {{name: three, clusters: {{matchLabels: {{zone: nowhere}}}}}}
"""


def test_each_generation_keeps_its_manifest_in_a_bounded_history(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture
) -> None:
    """Every new generation adds its manifest (Secrets' data kept apart) to the history,
    in the transaction that writes it; the same YAML again adds nothing; the oldest go
    past ``historyLimit``. A cluster two stages choose is refused, naming both; a stage
    that chooses none is said, not refused."""
    from berth.bootstrap.history import stored

    clusters = "".join(
        f"---\napi: kubernetes\nkind: Cluster\nmetadata: {{name: {c}, namespace: default}}\n"
        "spec: {kubeconfig: {}}\n" for c in "ab")
    f = tmp_path / "staged.yaml"
    for tag in range(1, 6):
        f.write_text(staged_app(tag) + clusters)
        assert berth(etcd_server, "--force", str(f)) == 0
    assert "stage 'three' chooses no cluster now" in caplog.text
    capsys.readouterr()
    assert berth(etcd_server, "--force", str(f)) == 0  # unchanged: no generation 6
    history = stored(store, "default", "staged")
    assert history is not None
    assert [r.generation for r in history.revisions] == [3, 4, 5]
    assert history.revisions[-1].manifest[0]["data"] == {"tag": "5"}
    assert history.revisions[-1].manifest[1]["stringData"] == "<stored apart>"
    f.write_text(staged_app(6, second="[a, b]") + clusters)
    assert berth(etcd_server, "--force", str(f)) == 1
    assert ("spec.rollout.stages: cluster default/a is in stage 'one' and in stage 'two': "
            "a cluster rolls in one stage") in capsys.readouterr().err
    # the last stage with neither names nor labels takes the rest: no cluster is doubled
    f.write_text(staged_app(6, second="[a]").replace(
        "{name: two, clusters: {names: [a]}}", "{name: two, clusters: {}}") + clusters)
    assert berth(etcd_server, "--force", str(f)) == 0, capsys.readouterr().err
    f.write_text(staged_app(7, limit=0) + clusters)
    assert berth(etcd_server, "--force", str(f)) == 1
    assert "spec.rollout.historyLimit: must be >= 1" in capsys.readouterr().err
    assert [r.generation for r in stored(store, "default", "staged").revisions] == [4, 5, 6]


def test_the_pace_is_one_document_and_get_shows_it(
    etcd_server: EtcdServer, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "pace.yaml"
    f.write_text("api: core\nkind: Pace\nmetadata: {name: fleet}\nspec:\n  inTransition: 20\n"
                 "  windows: [{start: '22:00', end: '06:00'}, {start: '00:00', end: '24:00', "
                 "days: [Sat, Sun]}]\n")
    assert berth(etcd_server, str(f)) == 0
    assert main(["get", "pace", "--etcd", etcd_server.url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["NAME", "IN", "TRANSITION", "PER", "MINUTE", "WINDOWS", "AGE"]
    assert out[1].split()[:4] == ["fleet", "20", "-", "22:00-06:00,00:00-24:00(Sat/Sun)"]
    f.write_text("api: core\nkind: Pace\nmetadata: {name: other}\nspec:\n  inTransition: -1\n"
                 "  windows: [{start: '25:00', end: '6'}]\n")
    assert berth(etcd_server, str(f)) == 1
    err = capsys.readouterr().err
    assert "metadata.name: the pace is one document, named 'fleet'" in err
    assert "spec.inTransition: must be >= 0" in err
    assert "spec.windows[0].start: '25:00': not a time of day" in err
    assert "spec.windows[0].end: '6': give a time as HH:MM" in err
