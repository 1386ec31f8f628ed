"""Extenders over real HTTP (a server in the test on loopback)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from berth.controllers.scheduler.config import Extender, SchedulerConfig
from berth.controllers.scheduler.framework import CycleState, Framework
from berth.controllers.scheduler.plugins import REGISTRY
from berth_testkit.fakes.scheduler import FakeSnapshot, app, cluster, evaluate

calls: list[str] = []


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        calls.append(self.path)
        if self.path == "/filter":
            keys = [c["key"] for c in body["candidates"]]
            reply = {"feasible": [k for k in keys if "/ok" in k],
                     "failed": {k: "not ok" for k in keys if "/ok" not in k}}
        elif self.path == "/prioritize":
            reply = {"scores": {c["key"]: 10 if c["name"] == "ok-2" else 0
                                for c in body["candidates"]}}
        elif self.path == "/bind":
            reply = {"error": "" if body["subject"]["name"] != "vetoed" else "no room"}
        else:
            reply = {"garbage": True}
            data = b"this is not json"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


FLEET = FakeSnapshot([cluster("ok-1"), cluster("ok-2"), cluster("bad")])


def config(*extenders: Extender) -> SchedulerConfig:
    return SchedulerConfig(extenders=list(extenders))


def test_an_extender_filters_and_scores_in_one_request_each(url: str) -> None:
    calls.clear()
    ext = Extender(url, filter_verb="filter", prioritize_verb="prioritize", weight=2)
    ev, chosen = evaluate(FLEET, app(), config(ext))
    assert chosen == ["ok-2"]
    assert ev.rejected["Cluster/default/bad"].reason == "not ok"
    assert ev.rejected["Cluster/default/bad"].plugin == "Extender[0]"
    assert ev.ranked[0].scores["Extender[0]"] == pytest.approx(2.0)
    assert calls == ["/filter", "/prioritize"]


def test_an_unreachable_extender_is_skipped_only_when_ignorable() -> None:
    dead = "http://127.0.0.1:9"
    ev, chosen = evaluate(FLEET, app(), config(Extender(dead, filter_verb="f", ignorable=True,
                                                        timeout=1)))
    assert len(ev.ranked) == 3
    ev, chosen = evaluate(FLEET, app(), config(Extender(dead, filter_verb="f", timeout=1)))
    assert chosen == [] and "extender failed" in ev.rejected["Cluster/default/ok-1"].reason


def test_nonsense_from_an_extender_is_a_failure_not_a_crash(url: str) -> None:
    ev, chosen = evaluate(FLEET, app(), config(Extender(url, filter_verb="nonsense")))
    assert chosen == [] and "extender failed" in ev.rejected["Cluster/default/ok-1"].reason


def test_the_bind_verb_can_veto(url: str) -> None:
    fw = Framework(config(Extender(url, bind_verb="bind")), REGISTRY)
    assert fw.bind(CycleState(), app("fine"), []).ok
    status = fw.bind(CycleState(), app("vetoed"), [])
    assert not status.ok and "no room" in status.reason
