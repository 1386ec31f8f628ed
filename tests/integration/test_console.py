"""``berth console`` in a real browser (Debian's chromium under Selenium), against the
real processes: two kwok clusters, the metrics-cache polling a static provider, the
scheduler, the propagator and the console with a bearer token.

Each page is opened and kept as a screenshot (build/screenshots/); what a page shows is
checked against what the CLI says of the same thing (``berth explain -o json``, the
scheduler's next decision), an approval in the page advances a staged rollout, a
metric change moves an application and the open page follows without a reload, and no
response carries a credential.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from selenium.common.exceptions import StaleElementReferenceException

from berth.store import Store, keys
from berth.store.config import EtcdConfig
from berth_testkit.browser import chromium, screenshot, until
from berth_testkit.cli import berth
from berth_testkit.scheduler_env import (
    ConsoleProcess,
    MetricsCacheProcess,
    PropagatorProcess,
    SchedulerProcess,
    binding,
    targets,
    wait_for,
)
from berth_testkit.servers.etcd import EtcdServer, ServerUnavailable, make_tls
from berth_testkit.servers.kube import CRASH, KubeCluster
from berth_testkit.servers.serving import serving_all

TOKEN = "console-test-token-8c1f0e2d9a"
TEAM_TOKEN = "team-x-console-token-4b7e2c"  # sees namespace team-x alone
NAMES = ("ca", "cb")


def provider(a: float, b: float) -> dict[str, Any]:
    return {"api": "core", "kind": "GlobalMetricsProvider", "metadata": {"name": "energy"},
            "spec": {"type": "static", "static": {"metrics": {"price_ca": a, "price_cb": b}}}}


def deployment(name: str, tag: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {
                         "containers": [{"name": "c", "image": f"example/{name}:{tag}",
                                         "resources": {"requests": {"cpu": "100m"}}}]}}}}


def gated(tag: int) -> dict[str, Any]:
    return {"api": "kubernetes", "kind": "Application",
            "metadata": {"name": "gated", "namespace": "default", "labels": {"tier": "shop"}},
            "spec": {"manifest": [deployment("gated", tag)],
                     "placement": {"policy": "PickFixed", "clusterNames": list(NAMES)},
                     "rollout": {"strategy": "Staged", "stages": [
                         {"name": "canary", "clusters": {"names": ["ca"]}},
                         {"name": "prod", "clusters": {"names": ["cb"]}, "approval": True}]}}}


def documents(kube: dict[str, KubeCluster]) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [provider(0.9, 0.2)]
    for name in NAMES:
        docs.append({"api": "core", "kind": "GlobalMetric", "metadata": {"name": f"price_{name}"},
                     "spec": {"min": 0, "max": 1, "provider": {"name": "energy",
                                                               "metric": f"price_{name}"}}})
        docs.append({"api": "kubernetes", "kind": "Cluster",
                     "metadata": {"name": name, "namespace": "default",
                                  "labels": {"zone": "eu", "site": name}},
                     "spec": {"kubeconfig": kube[name].kubeconfig(),
                              "metrics": [{"name": f"price_{name}", "weight": 1}]}})
    docs.append({"api": "kubernetes", "kind": "Application",
                 "metadata": {"name": "web", "namespace": "default", "labels": {"tier": "web"}},
                 "spec": {"manifest": [deployment("web", 1)]}})
    docs.append(gated(1))
    return docs


def apply(tmp: Path, *docs: dict[str, Any], etcd: str) -> None:
    path = tmp / f"apply-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    code, out = berth("apply", "-f", str(path), "--etcd", etcd)
    assert code == 0, out


class World:
    def __init__(self, etcd: str, store: Store, console: str, kube: dict[str, KubeCluster],
                 tmp: Path, driver: Any) -> None:
        self.etcd, self.store, self.console, self.kube = etcd, store, console, kube
        self.tmp, self.driver = tmp, driver

    def open(self, page: str) -> None:
        self.driver.get(self.console + "#/" + page)
        until(lambda: "loading" not in self.driver.find_element("id", "page").text,
              what=page)

    def text(self, css: str) -> str:
        """The text of the element ``css`` names now. The page redraws itself on every
        change it is told of: an element found just before a redraw is gone when its
        text is read (stale), and is found again."""
        for _ in range(50):
            try:
                return str(self.driver.find_element("css selector", css).text)
            except StaleElementReferenceException:
                time.sleep(0.02)
        raise AssertionError(f"{css}: redrawn under every read for 1 s")

    def status(self, name: str) -> dict[str, Any] | None:
        kv = self.store.get(keys.status_key("Application", "default", name))
        return json.loads(kv.value) if kv is not None else None


@pytest.fixture(scope="module")
def world(etcd_server: EtcdServer, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("console")
    store = Store(EtcdConfig(url=etcd_server.url))
    store.call("kv/deleterange", {"key": "AA==", "range_end": "AA=="}, "wipe")
    (tmp / "token").write_text(TOKEN + "\n")
    (tmp / "team-x-token").write_text(TEAM_TOKEN + "\n")
    with contextmanager(serving_all)(
            lambda n: KubeCluster(f"con-{n}", ready_delay=1.0, nodes=1), NAMES) as kube:
        url = etcd_server.url
        procs = [MetricsCacheProcess(url, tmp, config="poll_interval: 0.5\n"),
                 SchedulerProcess(url, tmp),
                 PropagatorProcess(url, tmp, config="probe_interval: 0.5\n"
                                   "retry_base_delay: 0.2\nretry_max_delay: 1\n")]
        console = ConsoleProcess(url, tmp, extra=["--token-file", str(tmp / "token"),
                                                  "--team-token",
                                                  f"team-x={tmp / 'team-x-token'}"])
        for p in [*procs, console]:
            p.start()
        try:
            apply(tmp, *documents(kube), etcd=url)
            for name in ("web", "gated"):
                wait_for(lambda name=name: json.loads(kv.value) if (kv := store.get(
                    keys.status_key("Application", "default", name))) else None,
                    lambda s: s["status"].get("state") == "RUNNING", timeout=120)
            try:
                with chromium() as driver:
                    driver.get(console.url())
                    driver.execute_script(
                        "sessionStorage.setItem('berth-token', arguments[0])", TOKEN)
                    driver.refresh()  # as after typing it into the page's login form
                    yield World(url, store, console.url(), kube, tmp, driver)
            except ServerUnavailable as exc:
                pytest.fail(str(exc), pytrace=False)
        finally:
            for p in [console, *procs]:
                p.stop()
                print(p.output()[-3000:])
            store.close()


def test_the_fleet_page_shows_every_cluster_with_its_state_and_metrics(world: World) -> None:
    world.open("fleet")
    for name in NAMES:
        row = until(lambda name=name: world.driver.find_element(
            "css selector", f"tr[data-cluster='{name}']"), what="the fleet page")
        until(lambda row=row, name=name: "ONLINE" in row.text and f"price_{name}" in row.text
              and len(row.find_elements("css selector", ".bar")) == 3, what="the cluster's row")
    assert "Fleet: 2 clusters" in world.text("h1")
    screenshot(world.driver, "console-fleet")


def test_the_applications_list_filters_by_label(world: World) -> None:
    world.open("applications")
    until(lambda: world.driver.find_elements("css selector", "tr[data-app='default/web']"))
    assert world.driver.find_elements("css selector", "tr[data-app='default/gated']")
    box = world.driver.find_element("id", "f-labels")
    box.send_keys("tier=web\n")
    until(lambda: not world.driver.find_elements("css selector", "tr[data-app='default/gated']"),
          what="the filtered list")
    assert world.driver.find_elements("css selector", "tr[data-app='default/web']")
    assert "showing 1\N{EN DASH}1 of 1" in world.text("#shown")
    screenshot(world.driver, "console-applications")
    box = world.driver.find_element("id", "f-labels")  # the same box: typing survives refreshes
    box.clear()
    box.send_keys("\n")


def test_the_explanation_table_is_berth_explains(world: World) -> None:
    world.open("application/default/web")
    rows = until(lambda: world.driver.find_elements("css selector", "#explain-ranked tbody tr"))
    shown = [[td.text for td in r.find_elements("css selector", "td")] for r in rows]
    code, out = berth("explain", "application", "default/web", "-o", "json", "--etcd",
                      world.etcd)
    assert code == 0
    ranked = [e for e in json.loads(out)["status"]["explanation"] if "score" in e]
    assert [(r[0], r[1]) for r in shown] == [(e["candidate"], f"{e['score']:.4f}")
                                           for e in ranked]
    assert world.driver.find_elements("css selector", "#ledger li.Placed")
    # its priority as written, as describe says it (nothing given: the default's)
    shown_priority = world.driver.find_element("css selector", "#priority").text
    assert shown_priority.startswith("priority: the default class's, else 0; preemption ")
    screenshot(world.driver, "console-application")


def test_a_metric_change_moves_the_application_and_the_open_page_follows(
        world: World) -> None:
    world.open("application/default/web")
    before = targets(wait_for(lambda: binding(world.store, "web")))
    assert before == ["ca"]
    until(lambda: world.text("#targets") == "ca")
    world.driver.execute_script("window.__same_page = 'yes'")
    changed: list[float] = []

    def watch() -> None:  # when the Binding names the new cluster, as etcd has it
        while not changed:
            b = binding(world.store, "web")
            if b is not None and targets(b) == ["cb"]:
                changed.append(time.monotonic())
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    apply(world.tmp, provider(0.1, 0.95), etcd=world.etcd)
    until(lambda: world.text("#targets") == "cb", timeout=60, every=0.02,
          what="the application page")
    seen = time.monotonic()
    watcher.join(5)
    assert changed, "the Binding never named cb"
    assert world.driver.execute_script("return window.__same_page") == "yes"  # no reload
    lag = seen - changed[0]
    print(f"page updated {lag:.2f} s after the Binding changed")
    assert lag <= 2.0
    until(lambda: world.driver.find_elements("css selector", "#ledger li.Moved"), timeout=10)
    wait_for(lambda: world.status("web"), lambda s: s["status"].get("state") == "RUNNING"
             and [r["name"] for r in s["status"].get("running_on", [])] == ["cb"], timeout=90)
    world.open("metrics")
    until(lambda: world.driver.find_elements("css selector", "#moves tbody tr"))
    assert "default/web" in world.text("#moves")
    until(lambda: world.driver.find_elements("css selector", "#chart canvas"))
    screenshot(world.driver, "console-metrics")


def test_what_the_page_offers_is_what_there_is_to_do(world: World) -> None:
    """No Pause beside a rollout that is not under way ("no rollout recorded", complete);
    the ledger's metric values said as measured (the explanation beside them shows them
    normalized); a page without its token asks for it, and does not say updates are
    lost."""
    world.open("application/default/web")
    until(lambda: world.driver.find_elements("css selector", "#rollout p"), what="rollout")
    said = world.text("#rollout")
    assert not world.driver.find_elements("id", "pause"), said
    assert not world.driver.find_elements("id", "resume"), said
    values = until(lambda: [li.text for li in world.driver.find_elements(
        "css selector", "#ledger li") if "price_" in li.text], what="a record with values")
    assert all("measured then (as the provider gave them, before normalizing): " in v
               for v in values), values
    world.driver.execute_script("sessionStorage.removeItem('berth-token')")
    try:
        world.driver.refresh()
        until(lambda: world.driver.find_element("id", "login").is_displayed(), what="login")
        until(lambda: world.text("#freshness").startswith("waiting for the bearer token"),
              what="the freshness line")
        time.sleep(2.5)  # the stream's retry: still waiting, not "lost"
        assert "updates lost" not in world.text("#freshness")
        assert not world.driver.find_elements("id", "page-error")  # the form says it
        assert "once the token is given" in world.text("#page")
        screenshot(world.driver, "console-login", full=False)
    finally:
        world.driver.execute_script(
            "sessionStorage.setItem('berth-token', arguments[0])", TOKEN)
        world.driver.refresh()
    until(lambda: world.text("#freshness").startswith("live"), what="live again")


def test_the_what_if_answer_is_the_schedulers_next_decision(world: World) -> None:
    doc = {"api": "kubernetes", "kind": "Application",
           "metadata": {"name": "probe", "namespace": "default"},
           "spec": {"manifest": [deployment("probe", 1)],
                    "constraints": {"cluster": {"labels": ["site in (ca, cb)"]}}}}
    text = yaml.safe_dump(doc, sort_keys=False)
    world.driver.get(world.console + "#/what-if")
    area = until(lambda: world.driver.find_element("id", "whatif-yaml"))
    world.driver.execute_script("arguments[0].value = arguments[1]", area, text)
    world.driver.find_element("id", "whatif-run").click()
    until(lambda: "deciding" not in world.text("#whatif-result"), timeout=60)
    print(world.text("#whatif-result"))
    answer = world.driver.find_element("css selector",
                                       ".answer[data-app='default/probe'] .targets")
    said = answer.text
    screenshot(world.driver, "console-what-if")
    apply(world.tmp, doc, etcd=world.etcd)
    b = wait_for(lambda: binding(world.store, "probe"), lambda b: b.status.state == "Scheduled")
    assert said == ", ".join(targets(b))


def test_an_approval_in_the_page_advances_a_staged_rollout(world: World) -> None:
    apply(world.tmp, gated(2), etcd=world.etcd)
    wait_for(lambda: world.status("gated"),
             lambda s: "waits for approval" in (s["status"].get("rollout") or {}).get(
                 "reason", ""), timeout=90)
    world.open("application/default/gated")
    button = until(lambda: world.driver.find_element("id", "approve"), what="the rollout")
    assert button.text == "Approve stage prod"
    screenshot(world.driver, "console-rollout", full=False)
    until(lambda: world.driver.find_element("id", "approve").click() or True,
          what="the button (drawn again while the rollout changes)")
    until(lambda: "approved" in world.text("#act-result"), what="the approval's answer")
    wait_for(lambda: world.status("gated"), lambda s: s["status"].get("state") == "RUNNING"
             and s["status"].get("generation") == 2, timeout=90)
    until(lambda: not world.driver.find_elements("id", "approve"), timeout=10)


def test_no_response_carries_a_credential(world: World) -> None:
    secrets = [TOKEN] + [k.token for k in world.kube.values()]
    s = requests.Session()
    base = world.console
    paths = ["", "static/console.js", "static/console.css", "vocabulary.js", "api/fleet",
             "api/applications",
             "api/applications/default/web", "api/applications/default/gated", "api/metrics"]
    for path in paths:
        r = s.get(base + path, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert r.status_code == 200, (path, r.text)
        seen = r.text + json.dumps(dict(r.headers))
        assert not [x for x in secrets if x in seen], path
    r = s.post(base + "api/what-if", data=yaml.safe_dump(documents(world.kube)[2]),
               headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    assert r.status_code == 200 and not [x for x in secrets if x in r.text]
    # without the token: nothing but the refusal, and no action
    for path in paths[4:]:
        r = s.get(base + path, timeout=10)
        assert r.status_code == 401 and "clusters" not in r.text, path
    r = s.post(base + "api/applications/default/gated/rollout/pause", timeout=10)
    assert r.status_code == 401
    r = s.get(base + "api/fleet", headers={"Authorization": f"Bearer {TOKEN}x"}, timeout=10)
    assert r.status_code == 401 and TOKEN not in r.text
    page = world.driver.page_source
    assert not [x for x in secrets if x in page]


def test_a_teams_token_shows_its_namespace_alone_in_the_page(world: World) -> None:
    """Team x's token (docs/console.md "Teams"): its one application, nowhere to go (no
    cluster in team-x, no policy binding a set), and none of the fleet's clusters nor
    namespace default's applications — in the page as in the API."""
    apply(world.tmp, {"api": "kubernetes", "kind": "Application",
                      "metadata": {"name": "own", "namespace": "team-x"},
                      "spec": {"manifest": [deployment("own", 1)]}}, etcd=world.etcd)
    team = {"Authorization": f"Bearer {TEAM_TOKEN}"}
    listed = wait_for(lambda: requests.get(world.console + "api/applications", headers=team,
                                           timeout=10).json(), lambda d: d["rows"], timeout=30)
    assert [(r["namespace"], r["name"]) for r in listed["rows"]] == [("team-x", "own")]
    fleet = requests.get(world.console + "api/fleet", headers=team, timeout=10).json()
    assert fleet["count"] == 0
    r = requests.get(world.console + "api/applications/default/web", headers=team, timeout=10)
    assert (r.status_code, r.json()) == (404, {"error": "no application default/web"})
    r = requests.post(world.console + "api/applications/default/gated/rollout/pause",
                      headers=team, timeout=10)
    assert r.status_code == 404 and world.status("gated") is not None
    driver = world.driver
    try:
        driver.execute_script("sessionStorage.setItem('berth-token', arguments[0])", TEAM_TOKEN)
        driver.refresh()
        world.open("applications")
        until(lambda: driver.find_elements("css selector", "tr[data-app='team-x/own']"),
              what="team x's application")
        assert not driver.find_elements("css selector", "tr[data-app='default/web']")
        screenshot(driver, "console-team")
        world.open("fleet")
        until(lambda: "Fleet: 0 clusters" in world.text("h1"), what="team x's fleet")
    finally:
        driver.execute_script("sessionStorage.setItem('berth-token', arguments[0])", TOKEN)
        driver.refresh()
        berth("delete", "app", "team-x/own", "--etcd", world.etcd)


def test_a_copy_waiting_for_its_dependency_is_said_in_the_page(world: World) -> None:
    """An application whose dependency's Pods never become Ready (docs/order.md
    "Dependencies"): WAITING, and its cluster's row says what it waits for."""
    slow = deployment("slow-db", 1)
    slow["spec"]["template"]["metadata"]["annotations"] = {CRASH: "yes"}
    apply(world.tmp, {"api": "kubernetes", "kind": "Application",
                      "metadata": {"name": "slow-db", "namespace": "default"},
                      "spec": {"manifest": [slow], "placement": {
                          "policy": "PickFixed", "clusterNames": ["ca"]}}},
          {"api": "kubernetes", "kind": "Application",
           "metadata": {"name": "needy", "namespace": "default"},
           "spec": {"manifest": [deployment("needy", 1)], "dependsOn": [{"name": "slow-db"}]}},
          etcd=world.etcd)
    try:
        wait_for(lambda: world.status("needy"), lambda s: s["status"].get("state") == "WAITING",
                 timeout=60)
        world.open("application/default/needy")
        row = until(lambda: world.driver.find_elements(
            "css selector", "#health tr[data-cluster='default/ca']"), what="the waiting row")
        assert "Waiting" in row[0].text
        assert "waits for default/slow-db to be available on default/ca" in row[0].text
        assert "WAITING" in world.text("#page")
        screenshot(world.driver, "console-waiting")
    finally:
        berth("delete", "app", "default/needy", "default/slow-db", "--etcd", world.etcd)


def test_a_console_that_loses_etcd_says_so_and_keeps_its_last_view(tmp_path: Path) -> None:
    try:
        etcd = EtcdServer().start()
    except ServerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    console = ConsoleProcess(etcd.url, tmp_path).start()
    try:
        store = Store(EtcdConfig(url=etcd.url))
        store.create(keys.resource_key("Cluster", "lonely", "default"), json.dumps({
            "api": "kubernetes", "kind": "Cluster",
            "metadata": {"name": "lonely", "namespace": "default"},
            "spec": {"metrics": []}}).encode())
        url = console.url()
        with chromium() as driver:
            driver.get(url + "#/fleet")
            until(lambda: driver.find_elements("css selector", "tr[data-cluster='lonely']"))
            etcd.stop()
            banner = until(lambda: (b := driver.find_element("id", "banner")).is_displayed()
                           and b, timeout=30, what="the banner")
            assert "etcd does not answer" in banner.text
            assert driver.find_elements("css selector", "tr[data-cluster='lonely']")
            data = requests.get(url + "api/fleet", timeout=10).json()
            assert data["etcd_lost_since"] and data["count"] == 1
            screenshot(driver, "console-etcd-lost")
            r = requests.post(url + "api/applications/default/x/rollout/pause", timeout=10)
            assert r.status_code == 403 and "only reads" in r.json()["error"]
    except ServerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    finally:
        console.stop()
        etcd.cleanup()


def test_client_certificates_guard_the_console_and_let_an_operator_act(
        etcd_server: EtcdServer, tmp_path: Path) -> None:
    tls = make_tls(tmp_path)
    console = ConsoleProcess(etcd_server.url, tmp_path, extra=[
        "--tls-cert", tls.server_cert, "--tls-key", tls.server_key,
        "--tls-client-ca", tls.ca]).start()
    try:
        url = console.url()
        assert url.startswith("https://")
        mine = (tls.client_cert, tls.client_key)
        r = requests.get(url + "api/fleet", cert=mine, verify=tls.ca, timeout=10)
        assert r.status_code == 200 and "count" in r.json()
        with pytest.raises(requests.exceptions.RequestException):
            requests.get(url + "api/fleet", verify=tls.ca, timeout=10)  # no certificate
        # an action is allowed (and refused for what it asks: no such application)
        r = requests.post(url + "api/applications/default/none/rollout/pause", cert=mine,
                          verify=tls.ca, timeout=10)
        assert r.status_code == 409 and "not found" in r.json()["error"]
    finally:
        console.stop()


def test_the_charts_read_prometheus_history_and_say_when_it_fails(
        etcd_server: EtcdServer, tmp_path: Path) -> None:
    """The metrics-cache's gauge, as Prometheus kept it, is the chart's history; a
    Prometheus that does not answer is said, and the console's own history shown."""
    from berth_testkit.servers.prometheus import PrometheusServer

    try:
        prom = PrometheusServer().start()
    except ServerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    store = Store(EtcdConfig(url=etcd_server.url))
    store.call("kv/deleterange", {"key": "AA==", "range_end": "AA=="}, "wipe")
    consoles = []
    try:
        for v in (0.25, 0.75):
            body = f'berth_metric_value{{namespace="",metric="price_p",provider="p"}} {v}\n'
            requests.put(f"{prom.gateway}/metrics/job/berth", data=body, timeout=5
                         ).raise_for_status()
            prom.wait_value('berth_metric_value{metric="price_p"}', v)
        store.create(keys.metric_value_key("price_p"), json.dumps({
            "api": "core", "kind": "MetricValue", "metadata": {"name": "price_p"},
            "status": {"value": 0.75, "observed": "2026-11-28T04:00:00Z"}}).encode())
        good = ConsoleProcess(etcd_server.url, tmp_path, name="good",
                              extra=["--prometheus", prom.url,
                                     "--prometheus-window", "0.02"]).start()
        bad = ConsoleProcess(etcd_server.url, tmp_path, name="bad",
                             extra=["--prometheus", "http://127.0.0.1:9"]).start()
        consoles += [good, bad]
        page = wait_for(lambda: requests.get(good.url() + "api/metrics", timeout=10).json(),
                        lambda d: d["series"] and len(d["series"][0]["points"]) >= 2,
                        timeout=30)
        assert page["problem"] == "" and page["source"].startswith("Prometheus")
        values = [v for _, v in page["series"][0]["points"]]
        assert 0.25 in values and values[-1] == 0.75, values
        page = wait_for(lambda: requests.get(bad.url() + "api/metrics", timeout=10).json(),
                        lambda d: d["series"], timeout=30)
        assert "Prometheus at http://127.0.0.1:9" in page["problem"]
        assert "own history" in page["problem"]
        assert [v for _, v in page["series"][0]["points"]] == [0.75]  # its own, as etcd had it
    finally:
        for c in consoles:
            c.stop()
        store.close()
        prom.cleanup()
