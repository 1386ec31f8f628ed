"""How one process counts an outage of etcd: one line when it begins, one when it ends."""

from __future__ import annotations

import logging
import time

import pytest

from berth.store.errors import Conflict, Unavailable
from berth.store.link import Link


def test_an_answer_to_a_request_sent_before_the_outage_does_not_end_it(
        caplog: pytest.LogCaptureFixture) -> None:
    link = Link(("http://a:2379",))
    caplog.set_level(logging.INFO, logger="berth.store.link")
    in_flight = time.monotonic()  # sent while etcd still answered
    link.failed(Unavailable("connection refused"), "http://a:2379", op="kv/range")
    assert not link.up() and link.reason == "connection refused"

    link.answered("kv/put", in_flight, "http://a:2379")  # its answer lands late
    link.failed(Unavailable("connection refused"), "http://a:2379", op="kv/range")
    assert not link.up()

    link.ok("http://a:2379", time.monotonic())  # a request sent since: etcd is back
    assert link.up() and link.reason == ""
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(" (")[0] for line in lines] == [
        "etcd at http://a:2379 is unreachable", "etcd answers again at http://a:2379"]
    assert link.last_outage >= 0


def test_only_an_unreachable_etcd_is_an_outage() -> None:
    link = Link(("http://a:2379",))
    link.failed(Conflict("revision moved"), "http://a:2379", op="kv/txn")
    assert link.up()
