"""The console without a browser: who may read and act, what its pages hold, what it
refuses — over etcd in memory and the real informers."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from starlette.requests import Request

from berth.cli import console_cmd
from berth.console.fleet import Fleet
from berth.console.pages import application, applications, metrics, whatif
from berth.console.pages import fleet as fleet_page
from berth.console.pages.common import head
from berth.console.scope import Scope
from berth.console.server import Access, check_exposure
from berth.store import encode, keys
from berth_testkit.cli import berth
from berth_testkit.memory import MemoryStore
from berth_testkit.scheduler_env import put


def data(page: msgspec.Struct | None) -> Any:
    """A page as the script receives it."""
    return msgspec.json.decode(msgspec.json.encode(page))


def request(authorization: str | None = None) -> Request:
    headers = [(b"authorization", authorization.encode())] if authorization else []
    return Request({"type": "http", "method": "GET", "path": "/api/fleet", "headers": headers,
                    "query_string": b""})


def test_a_token_is_asked_of_every_request_and_compared_whole() -> None:
    access = Access(token="a-token-of-twenty-chars")
    assert access.can_act
    assert access.allowed(request("Bearer a-token-of-twenty-chars"))
    assert access.allowed(request("bearer  a-token-of-twenty-chars"))
    assert not access.allowed(request())
    assert not access.allowed(request("Bearer a-token-of-twenty-char"))
    assert not access.allowed(request("Basic a-token-of-twenty-chars"))
    # without a credential anyone who reaches it reads, and nobody acts
    assert Access().allowed(request()) and not Access().can_act
    # client certificates: the handshake authenticated the connection
    assert Access(client_certs=True).allowed(request()) and Access(client_certs=True).can_act


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3", "::", "console.example"])
def test_it_listens_beyond_loopback_only_with_a_credential(host: str) -> None:
    with pytest.raises(ValueError, match="--token-file"):
        check_exposure(host, Access())
    check_exposure(host, Access(token="x" * 20))
    check_exposure(host, Access(client_certs=True))
    for loop in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_exposure(loop, Access())


def test_a_token_too_short_or_unreadable_is_refused_naming_where(tmp_path: Path,
                                                                 monkeypatch: Any) -> None:
    def token(path: Path | None) -> str:
        return console_cmd._token(argparse.Namespace(token_file=str(path) if path else None))

    short = tmp_path / "short"
    short.write_text("tiny\n")
    with pytest.raises(ValueError, match=f"--token-file {short}: a token of at least 16"):
        token(short)
    with pytest.raises(ValueError, match="cannot read"):
        token(tmp_path / "missing")
    spaced = tmp_path / "spaced"
    spaced.write_text("a token with spaces in it\n")
    with pytest.raises(ValueError, match="without spaces"):
        token(spaced)
    good = tmp_path / "good"
    good.write_text("  0123456789abcdefXYZ\n")
    assert token(good) == "0123456789abcdefXYZ"
    monkeypatch.setenv(console_cmd.TOKEN_ENV, "from-the-environment-1234")
    assert token(None) == "from-the-environment-1234"


def test_the_command_refuses_an_exposed_console_without_a_credential(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = berth("console", "--listen", "0.0.0.0:0", "--etcd", "http://127.0.0.1:1")
    assert code == 2 and "give it --token-file" in capsys.readouterr().err
    code, _ = berth("console", "--tls-client-ca", "ca.crt", "--etcd", "http://127.0.0.1:1")
    assert code == 2 and "needs --tls-cert" in capsys.readouterr().err


# -- the pages, over etcd in memory and the real informers -----------------------------------


def deployment(name: str, replicas: int, cpu: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "containers": [{"name": "c", "image": "x",
                                         "resources": {"requests": {"cpu": cpu}}}]}}}}


def seed(store: MemoryStore) -> None:
    for name, labels, state, placed in (("de", {"zone": "eu"}, "ONLINE", {"team/web": 1}),
                                        ("us", {"zone": "us"}, "OFFLINE", {})):
        put(store, keys.resource_key("Cluster", name, "fleet"), encode({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": name, "namespace": "fleet", "labels": labels},
            "spec": {"metrics": [{"name": "price", "weight": 2.0}],
                     "kubeconfig": {"users": [{"user": {"token": "never-shown-token"}}]}}}))
        put(store, keys.status_key("Cluster", "fleet", name), encode({
            "api": "kubernetes", "kind": "Cluster", "metadata": {"name": name,
                                                                "namespace": "fleet"},
            "status": {"state": state, "reason": "probe failed" if state != "ONLINE" else "",
                       "capacity": {"allocatable": {"cpu": 4000, "pods": 110},
                                    "requested": {"cpu": 1000, "pods": 3},
                                    "placed": placed}}}))
    put(store, keys.resource_key("GlobalMetric", "price"), encode({
        "api": "core", "kind": "GlobalMetric", "metadata": {"name": "price"},
        "spec": {"min": 0, "max": 200, "provider": {"name": "p", "metric": "price"}}}))
    put(store, keys.metric_value_key("price"), encode({
        "api": "core", "kind": "MetricValue", "metadata": {"name": "price"},
        "status": {"value": 50.0, "observed": "2026-11-28T01:00:00Z"}}))
    for ns, name, labels, replicas in (("team", "web", {"tier": "web"}, 3),
                                       ("team", "db", {"tier": "db"}, 1),
                                       ("other", "batch", {"tier": "batch"}, 2)):
        put(store, keys.resource_key("Application", name, ns), encode({
            "api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": ns, "labels": labels, "generation": 1},
            "spec": {"manifest": [deployment(name, replicas, "500m")]}}))
    put(store, keys.binding_key("Application", "team", "web"), encode({
        "api": "scheduling", "kind": "Binding", "metadata": {"name": "web", "namespace": "team"},
        "spec": {"resource": {"kind": "Application", "name": "web", "namespace": "team"},
                 "generation": 1, "targets": [{"kind": "Cluster", "name": "de",
                                               "namespace": "fleet"}]},
        "status": {"state": "Scheduled", "reason": "1/2 clusters are available"}}))
    put(store, keys.status_key("Application", "team", "web"), encode({
        "api": "kubernetes", "kind": "Application", "metadata": {"name": "web",
                                                                 "namespace": "team"},
        "status": {"state": "RUNNING", "applied": {"fleet/de": {
            "generation": 1, "health": "Healthy", "available": 3, "desired": 3}}}}))


@pytest.fixture
def fleet() -> Any:
    store = MemoryStore()
    seed(store)
    f = Fleet(store, probe_every=0.05)
    f.start()
    assert f.wait_synced(10)
    yield f
    f.stop()


def test_the_fleet_page_shows_states_capacity_and_scores(fleet: Fleet) -> None:
    page = data(fleet_page.page(fleet.snapshot(), "zone"))
    assert page["count"] == 2 and page["states"] == {"ONLINE": 1, "OFFLINE": 1}
    assert [g["group"] for g in page["groups"]] == ["eu", "us"]
    de = page["groups"][0]["clusters"][0]
    # web's three replicas of 500m on de, one of them counted in requested: two assumed
    assert de["capacity"]["cpu"] == {"allocatable": 4000, "requested": 1000, "assumed": 1000}
    assert de["metrics"] == [{"name": "price", "weight": 2.0, "value": 50.0,
                              "normalized": 0.25, "error": "",
                              "observed": "2026-11-28T01:00:00+00:00"}]
    us = page["groups"][1]["clusters"][0]
    assert us["state"] == "OFFLINE" and us["reason"] == "probe failed"
    assert "never-shown-token" not in json.dumps(page)


def test_the_applications_list_filters_by_namespace_labels_and_state(fleet: Fleet) -> None:
    snap = fleet.snapshot()
    every = data(applications.page(snap))
    assert [(r["namespace"], r["name"]) for r in every["rows"]] == [
        ("other", "batch"), ("team", "db"), ("team", "web")]
    web = every["rows"][2]
    assert (web["placement"], web["state"], web["ready"], web["clusters"]) == (
        "Scheduled", "RUNNING", "3/3", ["de"])
    assert every["rows"][1]["placement"] == "Pending"
    assert [r["name"] for r in data(applications.page(snap, namespace="team"))["rows"]] == [
        "db", "web"]
    assert [r["name"] for r in data(applications.page(snap, labels="tier!=db"))["rows"]] == [
        "batch", "web"]
    assert [r["name"] for r in data(applications.page(snap, state="RUNNING"))["rows"]] == ["web"]
    one = data(applications.page(snap, offset=1, limit=1))
    assert one["matched"] == 3 and [r["name"] for r in one["rows"]] == ["db"]
    with pytest.raises(ValueError, match="cannot parse"):
        applications.page(snap, labels="tier in (a")


def test_a_value_that_does_not_decode_is_skipped_and_the_rest_shown(fleet: Fleet) -> None:
    fleet.store.create(keys.resource_key("Application", "junk", "team"), b"\xff not json")
    fleet.store.create(keys.binding_key("Application", "team", "db"), b'{"spec": 7}')
    deadline = time.monotonic() + 5
    while fleet.version < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    rows = data(applications.page(fleet.snapshot()))["rows"]
    assert [r["name"] for r in rows] == ["batch", "db", "web"]
    page = data(application.page(fleet.store, "team", "db", head(fleet.snapshot())))
    assert page is not None and page["problems"] and "bindings/applications/team/db" in \
        page["problems"][0]


def test_a_metric_history_is_kept_bounded_and_moves_are_seen(fleet: Fleet) -> None:
    for i, v in enumerate((60.0, 70.0, 80.0)):
        put(fleet.store, keys.metric_value_key("price"), encode({
            "api": "core", "kind": "MetricValue", "metadata": {"name": "price"},
            "status": {"value": v, "observed": f"2026-11-28T01:0{i + 1}:00Z"}}))
    put(fleet.store, keys.binding_key("Application", "team", "web"), encode({
        "api": "scheduling", "kind": "Binding", "metadata": {"name": "web", "namespace": "team"},
        "spec": {"resource": {"kind": "Application", "name": "web", "namespace": "team"},
                 "generation": 1, "decision": "20261128T010300.000000Z",
                 "scheduled": "2026-11-28T01:03:00Z",
                 "targets": [{"kind": "Cluster", "name": "us", "namespace": "fleet"}]}}))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        page = data(metrics.page(fleet.snapshot(history=lambda _k: True)))
        if page["moves"] and len(page["series"][0]["points"]) == 4:
            break
        time.sleep(0.01)
    series = page["series"][0]
    assert series["metric"] == "price" and series["clusters"] == ["de", "us"]
    assert [v for _, v in series["points"]] == [50.0, 60.0, 70.0, 80.0]
    assert page["moves"] == [{"at": page["moves"][0]["at"], "application": "team/web",
                              "from": ["de"], "to": ["us"],
                              "decision": "20261128T010300.000000Z"}]
    small = Fleet(fleet.store, points=2)
    small._value(type("E", (), {"type": None, "key": "k", "obj": fleet.values.get(
        keys.metric_value_key("price"))})())  # one more value than nothing
    assert len(small.snapshot(history=lambda _k: True).history["k"]) == 1


@pytest.mark.parametrize(("text", "said"), [
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
     "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
     "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
     "aliases expanded"),  # an alias bomb
    ("[" * 500 + "]" * 500, "levels deep"),
    ("", "holds no document"),
    ("- just\n- a list\n", "expected a mapping"),
    ("api: kubernetes\nkind: Gadget\nmetadata: {name: g}\n", "Gadget"),
    ("key: [unclosed\n", "the pasted YAML"),
])
def test_what_if_refuses_bad_yaml_naming_why(text: str, said: str) -> None:
    with pytest.raises(whatif.Refused, match=said):
        whatif.page(MemoryStore(), text)


def test_a_deferred_applications_planned_start_is_its_bindings_field(fleet: Fleet) -> None:
    """Read from ``status.deferred_until``, not from the reason's prose."""
    put(fleet.store, keys.binding_key("Application", "team", "db"), encode({
        "api": "scheduling", "kind": "Binding", "metadata": {"name": "db", "namespace": "team"},
        "spec": {"resource": {"kind": "Application", "name": "db", "namespace": "team"},
                 "generation": 1},
        "status": {"state": "Pending", "reason": "deferred until 2026-11-28T03:00:00Z: …",
                   "deferred_until": "2026-11-28T03:00:00Z"}}))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        page = data(metrics.page(fleet.snapshot(history=lambda _k: True)))
        if page["deferred"]:
            break
        time.sleep(0.01)
    assert page["deferred"] == [{"application": "team/db", "start": 1795834800.0,
                                 "reason": "deferred until 2026-11-28T03:00:00Z: …"}]


def call(app: Any, method: str, path: str, *, token: str | None = None,
         chunks: tuple[bytes, ...] = (), length: int | None = None
         ) -> tuple[int, dict[str, str], bytes, int]:
    """One request through the ASGI application, in process: (status, headers, body, how
    many body chunks the application asked for)."""
    import asyncio

    headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(),
             "headers": headers, "query_string": b"", "scheme": "http", "http_version": "1.1",
             "server": ("127.0.0.1", 9190), "client": ("127.0.0.1", 1), "root_path": ""}
    sent: list[dict[str, Any]] = []
    given = [0]

    async def receive() -> dict[str, Any]:
        i = given[0]
        given[0] += 1
        if i < len(chunks):
            return {"type": "http.request", "body": chunks[i], "more_body": i + 1 < len(chunks)}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return (start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]},
            body, given[0])


def test_paths_and_methods_nothing_serves_are_said_after_the_token_with_the_headers(
        fleet: Fleet) -> None:
    from berth.console.server import build

    app = build(fleet.store, fleet, Access(token="t0ken-long-enough-for-the-test"))
    for method, path in (("GET", "/api/nothing"), ("GET", "/api/what-if"),
                         ("DELETE", "/api/fleet")):
        status, headers, body, _ = call(app, method, path)
        assert status == 401 and b"bearer token" in body, (method, path)
        assert headers["cache-control"] == "no-store", (method, path)
        assert "default-src 'self'" in headers["content-security-policy"]
    status, headers, body, _ = call(app, "GET", "/api/nothing",
                                    token="t0ken-long-enough-for-the-test")
    assert status == 404 and json.loads(body) == {
        "error": "no such page or action: /api/nothing"}
    assert headers["cache-control"] == "no-store"
    status, headers, body, _ = call(app, "GET", "/api/what-if",
                                    token="t0ken-long-enough-for-the-test")
    assert status == 405 and headers["allow"] == "POST" and b"GET is not what" in body
    status, headers, body, _ = call(app, "GET", "/static/nothing.js")
    assert status == 404 and headers["x-content-type-options"] == "nosniff"


def test_a_what_if_body_over_the_limit_is_refused_before_it_is_read_whole(
        fleet: Fleet) -> None:
    from berth.console.pages.whatif import MAX_WHATIF
    from berth.console.server import build

    app = build(fleet.store, fleet, Access(token="t0ken-long-enough-for-the-test"))
    token = "t0ken-long-enough-for-the-test"
    status, _, body, asked = call(app, "POST", "/api/what-if", token=token,
                                  length=MAX_WHATIF + 1, chunks=(b"x",))
    assert status == 413 and asked == 0  # said by its length: nothing read
    chunk = b"#" * (256 << 10)
    status, _, body, asked = call(app, "POST", "/api/what-if", token=token,
                                  chunks=(chunk,) * 40)  # 10 MiB, no length given
    assert status == 413 and b"larger than 1 MiB" in body
    assert asked == 5  # read until past the limit, no further


# -- a team's credential (docs/console.md "Teams") -----------------------------------


ADMIN, TEAM = "t0ken-long-enough-for-the-test", "team-t0ken-long-enough"


def test_a_teams_token_sees_and_acts_on_its_namespaces_alone(fleet: Fleet) -> None:
    """Team "team" may use the clusters of a set holding "de" (of namespace fleet); "us" is
    nobody's it may use. Its token sees its applications alone, the clusters its policy
    admits — with no other namespace's application in what a cluster reports — and acts
    on its own; another's application is as if there were none; the what-if, which
    decides over the whole fleet, is refused. The console's own token sees everything."""
    from berth.console.server import build

    store = fleet.store
    put(store, keys.resource_key("ClusterSet", "shared"), encode({
        "api": "core", "kind": "ClusterSet", "metadata": {"name": "shared"},
        "spec": {"namespaces": ["fleet"], "clusters": {"names": ["de"]}}}))
    put(store, keys.resource_key("NamespacePolicy", "team"), encode({
        "api": "core", "kind": "NamespacePolicy", "metadata": {"name": "team"},
        "spec": {"clusterSets": ["shared"]}}))
    put(store, keys.status_key("Cluster", "fleet", "de"), encode({
        "api": "kubernetes", "kind": "Cluster", "metadata": {"name": "de", "namespace": "fleet"},
        "status": {"state": "ONLINE", "capacity": {
            "allocatable": {"cpu": 4000, "pods": 110}, "requested": {"cpu": 1500, "pods": 4},
            "placed": {"team/web": 3, "other/batch": 1}}}}))
    deadline = time.monotonic() + 10
    while fleet.tenancy.policy("team") is None or "other/batch" not in str(
            fleet.snapshot().cluster_status["fleet/de"]):
        assert time.monotonic() < deadline, "the informers never saw the policy"
        time.sleep(0.02)
    app = build(store, fleet, Access(token=ADMIN, teams={TEAM: frozenset({"team"})}))

    def get(path: str, token: str) -> tuple[int, Any]:
        status, _, body, _ = call(app, "GET", path, token=token)
        return status, json.loads(body)

    status, listed = get("/api/applications", TEAM)
    assert status == 200 and [(r["namespace"], r["name"]) for r in listed["rows"]] == [
        ("team", "db"), ("team", "web")] and listed["namespaces"] == ["team"]
    status, page = get("/api/fleet", TEAM)
    assert page["count"] == 1
    (de,) = [c for g in page["groups"] for c in g["clusters"]]
    assert de["name"] == "de"
    snap = fleet.snapshot()
    narrowed = Scope(frozenset({"team"}), can_act=True).narrow(snap, fleet.admits)
    capacity = narrowed.cluster_status["fleet/de"].status.capacity
    assert capacity is not None and capacity.placed == {"team/web": 3}
    assert get("/api/applications/team/web", TEAM)[0] == 200
    assert get("/api/applications/other/batch", TEAM) == (
        404, {"error": "no application other/batch"})
    status, _, body, _ = call(app, "POST", "/api/applications/other/batch/rollout/pause",
                              token=TEAM)
    assert (status, json.loads(body)) == (404, {"error": "no application other/batch"})
    status, _, _, _ = call(app, "POST", "/api/applications/team/web/rollout/pause", token=TEAM)
    assert status == 200
    status, _, body, _ = call(app, "POST", "/api/what-if", token=TEAM, chunks=(b"x",))
    assert status == 403 and b"not with a team's credential" in body
    # the console's own token: everything; another token: nothing
    status, listed = get("/api/applications", ADMIN)
    assert len(listed["rows"]) == 3 and get("/api/fleet", ADMIN)[1]["count"] == 2
    assert get("/api/fleet", "not-a-token-of-this-console")[0] == 401
    assert get("/api/fleet", "")[0] == 401


def test_team_tokens_are_read_checked_and_never_shared(tmp_path: Path) -> None:
    def teams(*given: str, own: str = "") -> dict[str, frozenset[str]]:
        return console_cmd._teams(argparse.Namespace(team_token=list(given)), own)

    (tmp_path / "a").write_text("team-a-token-0123456789\n")
    (tmp_path / "b").write_text("team-b-token-0123456789\n")
    assert teams(f"team-a,team-a-ci={tmp_path / 'a'}", f"team-b={tmp_path / 'b'}") == {
        "team-a-token-0123456789": frozenset({"team-a", "team-a-ci"}),
        "team-b-token-0123456789": frozenset({"team-b"})}
    for given, said in ((f"{tmp_path / 'a'}", "NAMESPACES=FILE"),
                        (f"Team_A={tmp_path / 'a'}", "Team_A"),
                        (f"team-a={tmp_path / 'missing'}", "cannot read")):
        with pytest.raises(ValueError, match=said):
            teams(given)
    with pytest.raises(ValueError, match="the same token as another"):
        teams(f"team-a={tmp_path / 'a'}", f"team-b={tmp_path / 'a'}")
    with pytest.raises(ValueError, match="the same token as another"):
        teams(f"team-a={tmp_path / 'a'}", own="team-a-token-0123456789")
