"""The metrics' history from Prometheus, when the console is given one.

The metrics-cache exports each metric's value as ``berth_metric_value{namespace,
metric, provider}``; a Prometheus that scrapes it keeps their history for as long
as it retains data, across the console's restarts. :class:`History` reads the last
``window`` seconds of it with one ``query_range`` (about 240 points a series),
at most once every ``refresh`` seconds (pages refresh often; Prometheus's answer
does not change that fast).

An answer that is not Prometheus's — unreachable, an error, a shape that does not
decode, a value that is not a number — is said on the page (``problem``) and the
console's own history is shown instead: a bad provider never empties the chart.
"""

from __future__ import annotations

import math
import threading
import time

import msgspec
import requests

from berth.store import keys

QUERY = "berth_metric_value"
POINTS = 240  # per series, whatever the window


class _Series(msgspec.Struct):
    metric: dict[str, str]
    values: list[tuple[float, str]]


class _Data(msgspec.Struct):
    result: list[_Series]


class _Answer(msgspec.Struct):
    status: str
    data: _Data | None = None
    error: str = ""


class History:
    def __init__(self, url: str, *, window: float = 6 * 3600.0, refresh: float = 10.0,
                 timeout: float = 5.0) -> None:
        self.url = url.rstrip("/")
        self.window, self.refresh, self.timeout = window, refresh, timeout
        self._session = requests.Session()
        self._lock = threading.Lock()  # guards the cache below
        self._at = -math.inf
        self._kept: dict[str, list[tuple[float, float]]] = {}
        self._problem = ""

    def series(self) -> tuple[dict[str, list[tuple[float, float]]], str]:
        """Points per metric value key, oldest first, and what went wrong ("" nothing)."""
        with self._lock:
            if time.monotonic() - self._at < self.refresh:
                return self._kept, self._problem
            self._at = time.monotonic()
            try:
                self._kept, self._problem = self._query(), ""
            except (requests.RequestException, msgspec.DecodeError, msgspec.ValidationError,
                    ValueError) as exc:
                self._kept = {}
                self._problem = (f"Prometheus at {self.url}: {exc}; showing the console's "
                                 "own history")
            return self._kept, self._problem

    def _query(self) -> dict[str, list[tuple[float, float]]]:
        end = time.time()
        step = max(1.0, self.window / POINTS)
        r = self._session.get(f"{self.url}/api/v1/query_range", timeout=self.timeout, params={
            "query": QUERY, "start": f"{end - self.window:.3f}", "end": f"{end:.3f}",
            "step": f"{step:g}"})
        answer = msgspec.json.decode(r.content, type=_Answer)
        if answer.status != "success" or answer.data is None:
            raise ValueError(f"answered {r.status_code} {answer.status}: {answer.error or '?'}")
        out: dict[str, list[tuple[float, float]]] = {}
        for s in answer.data.result:
            name, ns = s.metric.get("metric", ""), s.metric.get("namespace", "")
            if not name:
                continue
            try:
                key = keys.metric_value_key(name, ns or None)
            except ValueError:
                continue  # not a name berth would store: not one of its metrics
            points = [(float(t), float(v)) for t, v in s.values]
            out.setdefault(key, []).extend(p for p in points if math.isfinite(p[1]))
        for points in out.values():
            points.sort()
        return out


def merged(own: dict[str, list[tuple[float, float]]],
           kept: dict[str, list[tuple[float, float]]]) -> dict[str, list[tuple[float, float]]]:
    """Prometheus's history where it has one, then the console's own newer points."""
    out = dict(own)
    for key, points in kept.items():
        last = points[-1][0] if points else -math.inf
        out[key] = [*points, *(p for p in own.get(key, []) if p[0] > last)]
    return out


__all__ = ["History", "merged"]
