"""The KSQL provider: a few pull queries per poll against a ksqlDB table.

Krake calls this provider ``type: kafka`` with ``kafka: {url, table,
comparison_column, value_column}``; ``type: ksql`` with a ``ksql:`` section
is the same. The query is

    SELECT `<comparison_column>`, `<value_column>` FROM `<table>`
    WHERE `<comparison_column>` IN ('<metric>', ...);

for up to ``batch`` metrics at a time (200 by default), sent to ksqlDB's
documented ``POST /query`` endpoint. Identifiers are quoted
with backticks (one containing a backtick is refused) and values are
single-quoted with quotes doubled: metric names come from users and are never
interpolated raw.

Why not the ``ksql`` package: its 0.10.2 release does not import on Python
3.11 (its ``hyper`` dependency imports ``Iterable`` from ``collections``) and
its sdist fails to build in an isolated environment; a pull query is one
HTTP POST, so berth speaks the protocol with requests directly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import requests

from berth.controllers.metrics_cache.providers.base import (
    INVALID,
    UNKNOWN_METRIC,
    UNREACHABLE,
    Failure,
    Reading,
    chunks,
    number,
)
from berth.controllers.runtime import http
from berth.store.documents.metrics import KafkaSpec, KsqlSpec


def identifier(name: str) -> str:
    if not name or "`" in name:
        raise ValueError(f"{name!r} cannot be a ksqlDB identifier")
    return f"`{name}`"


def literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def pull_query(table: str, key_column: str, value_column: str, metrics: Sequence[str]) -> str:
    names = ", ".join(literal(m) for m in metrics)
    return (f"SELECT {identifier(key_column)}, {identifier(value_column)} "
            f"FROM {identifier(table)} WHERE {identifier(key_column)} IN ({names});")


class KsqlProvider:
    type = "ksql"

    def __init__(self, spec: KsqlSpec | KafkaSpec, *, timeout: float = 5.0,
                 batch: int = 200, batch_chars: int = 256 * 1024) -> None:
        self.url = (spec.url or "").rstrip("/")
        self.table = spec.table or ""
        self.key_column = spec.comparison_column or ""
        self.value_column = spec.value_column or ""
        self.timeout = timeout
        self.batch = batch
        self.batch_chars = batch_chars
        self.session = http.session()

    def fetch(self, metrics: Sequence[str]) -> Mapping[str, Reading]:
        found: dict[str, Reading] = {}
        for run in chunks(list(dict.fromkeys(metrics)), self.batch, self.batch_chars, 4):
            found.update(self._pull(run))
        return found

    def _pull(self, metrics: list[str]) -> dict[str, Reading]:
        """One pull query for ``metrics``: each one's reading."""
        try:
            statement = pull_query(self.table, self.key_column, self.value_column, metrics)
        except ValueError as exc:
            return dict.fromkeys(metrics, Failure(INVALID, str(exc)))
        try:
            resp = self.session.post(
                f"{self.url}/query", data=json.dumps({"ksql": statement, "streamsProperties": {}}),
                headers={"Accept": "application/vnd.ksql.v1+json",
                         "Content-Type": "application/vnd.ksql.v1+json"},
                timeout=self.timeout)
        except requests.RequestException as exc:
            return dict.fromkeys(metrics, Failure(UNREACHABLE, f"{self.url}: {exc}"))
        if resp.status_code >= 500:
            failure = Failure(UNREACHABLE, f"{self.url}: HTTP {resp.status_code}")
            return dict.fromkeys(metrics, failure)
        try:
            body: Any = resp.json()
        except ValueError:
            return dict.fromkeys(metrics, Failure(INVALID, f"{self.url}: the answer is not JSON"))
        if resp.status_code != 200 or not isinstance(body, list):
            message = body.get("message") if isinstance(body, dict) else str(body)[:120]
            return dict.fromkeys(metrics, Failure(INVALID, f"{self.url}: {message}"))
        asked = set(metrics)
        found: dict[str, Reading] = {}
        for entry in body:
            row = entry.get("row") if isinstance(entry, dict) else None
            columns = row.get("columns") if isinstance(row, dict) else None
            if not isinstance(columns, list) or len(columns) < 2:
                continue
            name = str(columns[0])
            if name in asked:
                found[name] = number(columns[1], name)
        return {m: found.get(m, Failure(UNKNOWN_METRIC, f"no row for {m!r} in {self.table}"))
                for m in metrics}

    def close(self) -> None:
        self.session.close()
