"""deploy/ checked with the real tools: the image's build steps, the Kubernetes
manifests rendered by kustomize and submitted with server-side dry-run to a real
kube-apiserver, the compose file's commands, the systemd units as installed
(``systemd-analyze verify`` and ``security``), the alert rules (``promtool check``
and ``promtool test``) and the Grafana dashboard (a schema and every query parsed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import requests
import yaml

from berth_testkit.servers.etcd import ROOT
from berth_testkit.servers.kube import KubeCluster
from berth_testkit.servers.serving import serving

DEPLOY = ROOT / "deploy"
PROCESSES = ("scheduler", "propagator", "metrics-cache")


def tool(name: str, how: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is needed for this test: {how}", pytrace=False)
    return path


def berth_accepts(args: list[str]) -> None:
    """The arguments parse as berth's own CLI parses them (nothing is started)."""
    if args[0] == "console":  # no configuration to write: its options parsed alone
        code = ("import sys; from berth.cli.main import parser; "
                "parser('console').parse_args(sys.argv[1:])")
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                              text=True, timeout=30)
    else:
        done = subprocess.run([sys.executable, "-m", "berth.cli.main", *args,
                               "--write-config-to", os.devnull], capture_output=True,
                              text=True, env={**os.environ, "BERTH_ETCD": "http://127.0.0.1:1"},
                              timeout=30)
    assert done.returncode == 0, f"berth {' '.join(args)}: {done.stderr}"


# -- the image ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Dockerfile's first stage: berth and its dependencies as wheels, at the
    versions of constraints.txt; and what building berth from its source needs
    (setuptools), for the systemd install that runs offline from these wheels."""
    out = tmp_path_factory.mktemp("wheels")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
                           "--wheel-dir", str(out), "-c", str(ROOT / "constraints.txt"), str(ROOT),
                           "setuptools>=64"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_the_image_is_built_from_wheels_and_runs_as_a_user(wheels: Path, tmp_path: Path) -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    froms = re.findall(r"^FROM (\S+)", text, re.M)
    assert froms and all(":" in f and not f.endswith(":latest") for f in froms), froms
    assert re.search(r"^USER 10001", text, re.M), "the image runs as a numeric non-root user"
    assert 'ENTRYPOINT ["berth"]' in text and "-c constraints.txt" in text
    # The second stage: install from the wheels only, then run the command.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    done = subprocess.run([str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check",
                           "--no-index", "--find-links", str(wheels), "berth"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    version = subprocess.run([str(venv / "bin/berth"), "--version"], capture_output=True,
                             text=True, check=True).stdout
    assert version.startswith("berth 0.1.0"), version
    site = next((venv / "lib").glob("python3*/site-packages"))
    top = {p.name for p in site.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert "berth" in top and not top & {"cli", "store", "controllers", "bootstrap"}, top
    # Every module imports from the installed wheel (the lazily imported ones too).
    imported = subprocess.run([str(venv / "bin/python"), "-c", (
        "import pkgutil, importlib, berth\n"
        "for m in pkgutil.walk_packages(berth.__path__, 'berth.'):\n"
        "    importlib.import_module(m.name)\n")], capture_output=True, text=True, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr[-3000:]


# -- Kubernetes ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def kustomize() -> str:
    done = subprocess.run(["bash", str(ROOT / "scripts/install-kustomize.sh")],
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        pytest.fail(f"kustomize could not be built: {done.stderr[-2000:]} (needs Go and the "
                    "Go module proxy; or set BERTH_CACHE to a directory holding "
                    "kustomize-v5.5.0/kustomize)", pytrace=False)
    return str(Path(done.stdout.strip().splitlines()[-1]) / "kustomize")


def render(kustomize: str, overlay: str) -> list[dict[str, Any]]:
    out = subprocess.run([kustomize, "build", str(DEPLOY / "kubernetes" / overlay)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="module")
def kube() -> Iterator[KubeCluster]:
    yield from serving(lambda: KubeCluster("deploy"))


class Api:
    """Just enough of a Kubernetes client for server-side apply, resolved by discovery."""

    def __init__(self, server: KubeCluster) -> None:
        self.base = server.url
        self.session = requests.Session()
        self.session.trust_env = False
        self.session.verify = str(server.workdir / "certs" / "apiserver.crt")
        self.session.headers["Authorization"] = f"Bearer {server.token}"
        self._found: dict[tuple[str, str], tuple[str, bool]] = {}

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural, namespaced) of ``kind`` in ``api_version``."""
        if (api_version, kind) not in self._found:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            listing = self.session.get(self.base + path, timeout=10)
            listing.raise_for_status()
            for r in listing.json()["resources"]:
                if "/" not in r["name"]:
                    self._found[(api_version, r["kind"])] = (r["name"], r["namespaced"])
        return self._found[(api_version, kind)]

    def apply(self, doc: dict[str, Any], *, dry_run: bool) -> requests.Response:
        plural, namespaced = self.resource(doc["apiVersion"], doc["kind"])
        group = "/api/v1" if doc["apiVersion"] == "v1" else f"/apis/{doc['apiVersion']}"
        where = f"/namespaces/{doc['metadata']['namespace']}" if namespaced else ""
        url = f"{self.base}{group}{where}/{plural}/{doc['metadata']['name']}"
        params = {"fieldManager": "berth-deploy-test", "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        return self.session.patch(url, params=params, data=json.dumps(doc), timeout=30,
                                  headers={"Content-Type": "application/apply-patch+yaml"})


def dry_run_all(kube: KubeCluster, docs: list[dict[str, Any]]) -> Api:
    """Every object submitted with server-side dry-run (its namespace made for real:
    dry-run objects need it to exist), each accepted."""
    api = Api(kube)
    for doc in docs:
        if doc["kind"] == "Namespace":
            assert api.apply(doc, dry_run=False).status_code in (200, 201)
    for doc in docs:
        reply = api.apply(doc, dry_run=True)
        assert reply.status_code in (200, 201), (doc["kind"], doc["metadata"]["name"],
                                                 reply.text[:1000])
    return api


@pytest.mark.parametrize("overlay", ["base", "overlays/production", "overlays/small"])
def test_manifests_pass_server_side_dry_run(kustomize: str, kube: KubeCluster,
                                            overlay: str) -> None:
    docs = render(kustomize, overlay)
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("Deployment") == 4 and "NetworkPolicy" in kinds, kinds
    api = dry_run_all(kube, docs)
    # The check has teeth: a wrong field or type is refused by the same call.
    broken = json.loads(json.dumps(next(d for d in docs if d["kind"] == "Deployment")))
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGet"]["prot"] = 1
    assert api.apply(broken, dry_run=True).status_code >= 400
    for d in (d for d in docs if d["kind"] == "Deployment"):
        spec = d["spec"]["template"]["spec"]
        c = spec["containers"][0]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        console = c["args"][0] == "console"
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert c["readinessProbe"]["httpGet"]["path"] == ("/healthz" if console else "/readyz")
        assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
        env = {e["name"]: e for e in c["env"]}
        assert env["BERTH_ETCD"]["valueFrom"]["secretKeyRef"]["name"] == "berth-etcd"
        assert "secretKeyRef" in env["BERTH_ETCD_PASSWORD"]["valueFrom"]
        assert d["spec"]["replicas"] == (1 if overlay.endswith("small") or console else 2)
        berth_accepts(c["args"])
    # the console reads no secret: its etcd user is its own, and no Secret but its token
    # and etcd's is mounted
    console = next(d for d in docs if d["kind"] == "Deployment"
                   and d["metadata"]["name"] == "berth-console")
    spec = console["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
    assert env["BERTH_ETCD_USER"] == "berth-console"
    assert sorted(v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v) == [
        "berth-console-token", "berth-etcd-tls"]


def test_the_agents_manifests_pass_server_side_dry_run_and_confine_it(
    kustomize: str, kube: KubeCluster
) -> None:
    """deploy/kubernetes/agent, for a pull cluster: its Deployment runs `berth agent` with
    the cluster's own service account and its credential's Secret (which it alone may
    update), and its NetworkPolicy lets in nothing but scrapes and out nothing but DNS,
    the API server and etcd. The join Job's arguments parse too."""
    docs = render(kustomize, "agent")
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    api = dry_run_all(kube, docs)
    agent = by[("Deployment", "berth-agent")]
    spec = agent["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert spec["serviceAccountName"] == "berth-agent" and agent["spec"]["replicas"] == 2
    assert c["args"][:3] == ["agent", "--credentials-secret", "berth-agent/berth-agent"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    done = subprocess.run([sys.executable, "-c", "import sys; from berth.cli.main import "
                           "parser; parser('agent').parse_args(sys.argv[1:])", *c["args"]],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    own = by[("Role", "berth-agent-credential")]["rules"]
    assert own == [{"apiGroups": [""], "resources": ["secrets"],
                    "resourceNames": ["berth-agent"], "verbs": ["get", "update", "patch"]}]
    policy = by[("NetworkPolicy", "berth-agent")]["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert sorted(p["port"] for rule in policy["egress"] for p in rule["ports"]) == [
        53, 53, 443, 2379, 6443]
    job = yaml.safe_load((DEPLOY / "kubernetes" / "agent" / "join-job.yaml").read_text())
    args = [a.replace("$(TOKEN)", "default.edge.00ff") for a in
            job["spec"]["template"]["spec"]["containers"][0]["args"]]
    done = subprocess.run([sys.executable, "-c", "import sys; from berth.cli.main import "
                           "parser; parser('agent').parse_args(sys.argv[1:])", *args],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    reply = api.apply(job, dry_run=True)
    assert reply.status_code in (200, 201), reply.text[:1000]


def test_the_exporters_manifests_pass_server_side_dry_run(kustomize: str,
                                                          kube: KubeCluster) -> None:
    """deploy/kubernetes/exporter: two replicas of `berth exporter` as the etcd user
    berth-exporter, hardened as the base's processes, with a disruption budget."""
    docs = render(kustomize, "exporter")
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
    dry_run_all(kube, docs)
    exporter = by[("Deployment", "berth-exporter")]
    spec = exporter["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert exporter["metadata"]["namespace"] == "berth" and exporter["spec"]["replicas"] == 2
    assert c["args"][0] == "exporter" and c["securityContext"]["readOnlyRootFilesystem"]
    env = {e["name"]: e for e in c["env"]}
    assert env["BERTH_ETCD_USER"]["value"] == "berth-exporter"
    assert env["BERTH_ETCD_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == (
        "berth-etcd-exporter")
    assert by[("PodDisruptionBudget", "berth-exporter")]["spec"]["minAvailable"] == 1
    berth_accepts(c["args"])


# -- compose ---------------------------------------------------------------------------


def test_the_compose_file_runs_three_etcd_members_and_two_replicas_each() -> None:
    doc = yaml.safe_load((DEPLOY / "compose" / "compose.yaml").read_text())
    services = doc["services"]
    members = {n for n in services if n.startswith("etcd-")}
    assert len(members) == 3
    initial = services["etcd-1"]["environment"]["ETCD_INITIAL_CLUSTER"]
    for n in members:
        env = services[n]["environment"]
        assert env["ETCD_INITIAL_CLUSTER"] == initial
        assert f"{env['ETCD_NAME']}=http://{n}:2380" in initial
    for process in PROCESSES:
        s = services[process]
        assert s["deploy"]["replicas"] == 2 and s["read_only"] is True
        assert s["environment"]["BERTH_ETCD"] == ",".join(
            f"http://{n}:2379" for n in sorted(members))
        # berth puts as many operations in a transaction as the members allow
        assert {services[n]["environment"]["ETCD_MAX_TXN_OPS"] for n in members} == {
            s["environment"]["BERTH_ETCD_MAX_TXN_OPS"]}
        berth_accepts(s["command"])
    console = services["console"]
    assert console["ports"] == ["127.0.0.1:9190:9190"] and console["read_only"] is True
    assert "--token-file" in console["command"] and doc["secrets"]["console-token"]
    berth_accepts(console["command"])


# -- systemd -------------------------------------------------------------------------------


def test_the_systemd_units_install_verify_and_are_hardened(wheels: Path,
                                                           tmp_path: Path) -> None:
    analyze = tool("systemd-analyze", "install systemd (Debian: apt-get install systemd)")
    units = tmp_path / "units"
    units.mkdir()
    env = {**os.environ, "PREFIX": str(tmp_path / "opt"), "ETC": str(tmp_path / "etc"),
           "UNITDIR": str(units), "SYSTEMCTL": "0", "PYTHON": sys.executable,
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}  # offline: the wheels above
    done = subprocess.run(["bash", str(DEPLOY / "systemd" / "install.sh")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert oct((tmp_path / "etc" / "console-token").stat().st_mode)[-3:] == "600"
    assert len((tmp_path / "etc" / "console-token").read_text().strip()) >= 16
    for process in (*PROCESSES, "exporter", "console"):
        if process != "console":
            assert (tmp_path / "etc" / f"{process}.yaml").exists()
        assert oct((tmp_path / "etc" / f"etcd-{process}.env").stat().st_mode)[-3:] == "600"
        unit = units / f"berth-{process}.service"
        verify = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                                timeout=60)
        # The credentials and environment files are the operator's to fill in; anything
        # else systemd objects to is an error.
        problems = [line for line in verify.stderr.splitlines() if line.strip()]
        assert not problems, problems
        security = subprocess.run([analyze, "security", "--offline=yes", str(unit)],
                                  capture_output=True, text=True, timeout=60)
        level = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", security.stdout)
        assert level is not None, security.stdout[-500:] + security.stderr
        assert float(level.group(1)) <= 2.0, level.group(0)
        print(f"\n{level.group(0)}")


# -- alerts and dashboard ----------------------------------------------------------------


def promtool() -> str:
    return tool("promtool", "scripts/install-prometheus.sh (Debian's prometheus package)")


def test_the_alert_rules_check_and_their_unit_tests_pass() -> None:
    rules = DEPLOY / "prometheus"
    check = subprocess.run([promtool(), "check", "rules", str(rules / "berth-alerts.yaml")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    tests = subprocess.run([promtool(), "test", "rules", "berth-alerts-test.yaml"],
                           capture_output=True, text=True, cwd=rules)
    assert tests.returncode == 0, tests.stdout + tests.stderr


class Target(msgspec.Struct):
    refId: str
    expr: str


class GridPos(msgspec.Struct):
    x: int
    y: int
    w: int
    h: int


class Panel(msgspec.Struct):
    id: int
    type: str
    title: str
    gridPos: GridPos
    targets: list[Target]
    datasource: dict[str, str]


class Dashboard(msgspec.Struct):
    uid: str
    title: str
    schemaVersion: int
    panels: list[Panel]
    templating: dict[str, list[dict[str, Any]]]


PANEL_TYPES = {"stat", "table", "timeseries", "gauge", "bargauge", "text", "heatmap"}


def test_the_dashboard_is_a_valid_grafana_dashboard_of_berths_metrics(tmp_path: Path) -> None:
    raw = (DEPLOY / "grafana" / "berth-dashboard.json").read_bytes()
    dash = msgspec.json.decode(raw, type=Dashboard)
    assert dash.schemaVersion >= 36 and re.fullmatch(r"[a-z0-9-]{1,40}", dash.uid)
    assert len({p.id for p in dash.panels}) == len(dash.panels)
    for p in dash.panels:
        assert p.type in PANEL_TYPES, p.type
        assert p.gridPos.x >= 0 and p.gridPos.x + p.gridPos.w <= 24 and p.gridPos.h > 0
        assert p.targets and len({t.refId for t in p.targets}) == len(p.targets)
        assert p.datasource["uid"] == "${datasource}"
    assert any(v["name"] == "datasource" for v in dash.templating["list"])
    # Every query parses as PromQL: promtool checks them as recording rules.
    exprs = [t.expr for p in dash.panels for t in p.targets]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"berth:panel_{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    (tmp_path / "queries.yaml").write_text(yaml.safe_dump(rules))
    check = subprocess.run([promtool(), "check", "rules", str(tmp_path / "queries.yaml")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    # ... and names only metrics berth exports (so a renamed metric breaks this test).
    alerts = (DEPLOY / "prometheus" / "berth-alerts.yaml").read_text()
    used = set(re.findall(r"\bberth_[a-z_]+", " ".join(exprs) + alerts))
    source = " ".join(p.read_text() for p in (ROOT / "berth").rglob("*.py"))
    exported = set(re.findall(r'"(berth_[a-z_]+)"', source))
    missing = {n for n in used if not ({n, re.sub(r"_(bucket|count|sum|info)$", "", n)}
                                       & exported)}
    assert not missing, f"not exported by berth: {sorted(missing)}"
