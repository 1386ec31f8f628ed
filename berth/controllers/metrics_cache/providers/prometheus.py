"""The Prometheus provider: a provider's metrics asked for in a few queries per poll.

``spec.provider.metric`` is the query: a metric name or any PromQL expression;
it must yield one sample (a scalar, or a vector of one series). A poll unions
the expressions in chunks: each one tagged with its place in the chunk,

    label_replace((<expr 0>), "berth_q", "0", "", "") or label_replace((<expr 1>), ...)

and the answer is split by the tag, so one instant query answers hundreds of
metrics. The tag is a number, never a user's string: nothing needs quoting.
An expression that yields no sample or several is that metric's error
(UNKNOWN_METRIC / INVALID_METRIC) and spoils nothing else. A chunk Prometheus
refuses (a parse or type error — a scalar expression cannot be tagged — or an
execution error) is asked again as two halves, down to single expressions,
which are asked untagged, as they are written; one a chunk cannot carry (refused on
its own too, or not an instant vector) is asked alone from then on, while it is
asked for. A few chunks are in flight at
once. Requests are POSTs (a chunk does not fit in a URL) through a session of
our own (explicit TLS, the environment ignored), with a timeout and bounded
retries with backoff on connection errors only: a bad query is not retried.

With ``forecast`` in the spec, each metric also gets a forecast by
persistence: a range query of the same tagged chunks over the period one
``period`` ago, its points moved forward by the period. It is asked once per
``step`` (the points only change then); a chunk whose range query fails
leaves its metrics without a forecast, not without a value.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import msgspec
import requests
import tenacity
from prometheus_client import Counter

from berth.controllers.metrics_cache.providers.base import (
    INVALID,
    UNKNOWN_METRIC,
    UNREACHABLE,
    Failure,
    Forecasted,
    Reading,
    chunks,
    number,
)
from berth.controllers.runtime import http
from berth.store.codec import typed
from berth.store.documents.durations import seconds
from berth.store.documents.metrics import PrometheusSpec

log = logging.getLogger(__name__)

TAG = "berth_q"  # the label that carries an expression's place in its chunk
_UNAVAILABLE = {429, 502, 503, 504}
_QUERY_FAULT = {400, 422}  # bad_data (parse, type) and execution errors: split the chunk
QUERIES = Counter("berth_metrics_cache_prometheus_queries",
                  "Instant queries sent to Prometheus providers (a chunk of metrics each)")


class _Refused(Exception):
    """Prometheus answered with an error status (the query's fault, or it is unavailable)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Answer(msgspec.Struct):
    status: str
    data: Any = None
    error: str = ""


def tagged(expressions: Sequence[str]) -> str:
    """One query answering every expression, each series tagged with its expression's
    index. The unions nest as a balanced tree: Prometheus evaluates ``a or b`` against
    everything on its left, so a chain of n costs n² and a tree n log n. The newline
    before each closing parenthesis ends a ``#`` comment there."""
    parts = [f'label_replace(({e}\n), "{TAG}", "{i}", "", "")' for i, e in enumerate(expressions)]
    while len(parts) > 1:
        pairs = [f"({parts[i]} or {parts[i + 1]})" for i in range(0, len(parts) - 1, 2)]
        parts = pairs + parts[len(parts) - len(parts) % 2:]
    return parts[0]


_TAGGING = len(tagged([""])) + 16  # what tagging adds to an expression: index, " or ", ()


class PrometheusProvider:
    type = "prometheus"

    def __init__(self, spec: PrometheusSpec, *, timeout: float = 5.0, retries: int = 2,
                 concurrency: int = 4, batch: int = 200,
                 batch_chars: int = 256 * 1024) -> None:
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="prometheus")
        self.url = spec.url
        self.endpoint = spec.url.rstrip("/") + "/api/v1/query"
        self.range_endpoint = self.endpoint + "_range"
        f = spec.forecast
        self.forecast = None if f is None else (seconds(f.period), seconds(f.horizon),
                                                seconds(f.step))
        # Forecast points per expression, for the step they were asked in.
        self._forecasts: dict[str, tuple[tuple[float, float], ...]] = {}
        self._forecast_slot = -1
        self.timeout = spec.timeout or timeout
        self.batch = batch  # expressions per query at most; 1: one query per metric
        self.batch_chars = batch_chars  # and about this many characters
        self.session = http.session(pool_size=concurrency)
        self._retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(requests.exceptions.ConnectionError)
            | tenacity.retry_if_exception_type(requests.exceptions.Timeout),
            wait=tenacity.wait_exponential(multiplier=0.2, max=2),
            stop=tenacity.stop_after_attempt(retries + 1),
            reraise=True,
        )
        self._alone: set[str] = set()  # expressions a chunk could not carry
        self._alone_lock = threading.Lock()

    def fetch(self, metrics: Sequence[str]) -> Mapping[str, Reading]:
        """Every expression's reading, from a few tagged queries in flight at once."""
        asked = list(dict.fromkeys(metrics))
        with self._alone_lock:
            self._alone &= set(asked)
            alone = [m for m in asked if m in self._alone]
        together = [m for m in asked if m not in alone]
        runs = [*chunks(together, self.batch, self.batch_chars, _TAGGING),
                *([m] for m in alone)]
        results: dict[str, Reading] = {}
        if len(runs) == 1:
            results.update(self._chunk(runs[0]))
        else:
            for part in self._pool.map(self._chunk, runs):
                results.update(part)
        down = next((r for r in results.values()
                     if isinstance(r, Failure) and r.reason == UNREACHABLE), None)
        if down is not None:  # one outage, reported the same for every metric
            return dict.fromkeys(asked, down)
        if self.forecast is not None:
            with self._alone_lock:  # what a chunk cannot carry has no forecast either
                carried = [e for e in together if e not in self._alone]
            ahead = self._forecast([e for e in carried if isinstance(results.get(e), float)])
            for e, points in ahead.items():
                value = results[e]
                if points and isinstance(value, float):
                    results[e] = Forecasted(value, points)
        return results

    def _forecast(self, expressions: list[str]) -> dict[str, tuple[tuple[float, float], ...]]:
        """Each expression's values one period ago, moved forward by the period: asked
        once per step, in tagged chunks as the values are."""
        assert self.forecast is not None
        period, horizon, step = self.forecast
        slot = int(time.time() // step)
        if slot != self._forecast_slot:
            self._forecasts, self._forecast_slot = {}, slot
        missing = [e for e in expressions if e not in self._forecasts]
        if missing:
            start = (slot + 1) * step - period  # the first point lands on the next step
            end = start + horizon - step
            runs = list(chunks(missing, self.batch, self.batch_chars, _TAGGING))
            for part in self._pool.map(lambda run: self._range(run, start, end, step), runs):
                self._forecasts.update(part)
        return {e: self._forecasts.get(e, ()) for e in expressions}

    def _range(self, expressions: list[str], start: float, end: float, step: float
               ) -> dict[str, tuple[tuple[float, float], ...]]:
        """One chunk's range data, shifted to the future; nothing for an expression
        yielding several series or none, and for a chunk Prometheus refuses."""
        period = self.forecast[0] if self.forecast is not None else 0.0
        empty: dict[str, tuple[tuple[float, float], ...]] = dict.fromkeys(expressions, ())
        try:
            data = self._retrying(self._post, tagged(expressions), self.range_endpoint,
                                  {"start": f"{start:.3f}", "end": f"{end:.3f}",
                                   "step": f"{step:g}"})
        except (_Refused, ValueError, requests.RequestException) as exc:
            log.warning("%s: no forecast for %d metrics (range query: %s)", self.url,
                        len(expressions), exc)
            return empty
        found: dict[int, list[Any]] = {}
        for s in data.get("result") or []:
            labels = s.get("metric") if isinstance(s, dict) else None
            place = labels.get(TAG) if isinstance(labels, dict) else None
            if isinstance(place, str) and place.isdigit() and int(place) < len(expressions):
                found.setdefault(int(place), []).append(s.get("values"))
        for i, runs in found.items():
            if len(runs) != 1 or not isinstance(runs[0], list):
                continue  # several series: no one forecast
            points = []
            for sample in runs[0]:
                value = number(sample[1], expressions[i]) if isinstance(sample, list) and len(
                    sample) == 2 else None
                if isinstance(value, float) and isinstance(sample[0], int | float) and (
                        math.isfinite(value)):
                    points.append((float(sample[0]) + period, value))
            empty[expressions[i]] = tuple(points)
        return empty

    def _chunk(self, expressions: list[str], split: bool = False) -> dict[str, Reading]:
        """Readings of one chunk; a refused chunk is asked again in halves. ``split``:
        this chunk is a half of a refused one."""
        if len(expressions) == 1:
            reading, untaggable = self._single(expressions[0])
            if split and untaggable:
                with self._alone_lock:
                    self._alone.add(expressions[0])
            return {expressions[0]: reading}
        try:
            result = self._ask(tagged(expressions)).get("result")
        except _Refused as exc:
            if exc.code in _UNAVAILABLE:
                return dict.fromkeys(expressions, self._unavailable(exc.code))
            if exc.code not in _QUERY_FAULT:  # not one expression's fault: no splitting
                return dict.fromkeys(expressions, Failure(INVALID, f"{self.url}: {exc}"))
            half = len(expressions) // 2
            return {**self._chunk(expressions[:half], True),
                    **self._chunk(expressions[half:], True)}
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            return dict.fromkeys(expressions, Failure(UNREACHABLE, f"{self.url}: {exc}"))
        except (ValueError, requests.RequestException) as exc:
            return dict.fromkeys(expressions, Failure(INVALID, f"{self.url}: {exc}"))
        return self._split(expressions, result)

    def _split(self, expressions: list[str], result: Any) -> dict[str, Reading]:
        """A tagged answer as each expression's own answer would have been."""
        series: list[list[Any]] = [[] for _ in expressions]
        if isinstance(result, list):
            for s in result:
                labels = s.get("metric") if isinstance(s, dict) else None
                place = labels.pop(TAG, None) if isinstance(labels, dict) else None
                if isinstance(place, str) and place.isdigit() and int(place) < len(series):
                    series[int(place)].append(s)
        return {e: self._value(e, found) for e, found in zip(expressions, series, strict=True)}

    def _single(self, query: str) -> tuple[Reading, bool]:
        """One expression asked as written, and whether a tagged chunk cannot carry it:
        Prometheus refuses it, or its answer is not an instant vector (a scalar, a range)."""
        try:
            data = self._ask(query)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            return Failure(UNREACHABLE, f"{self.url}: {exc}"), False
        except _Refused as exc:
            if exc.code in _UNAVAILABLE:
                return self._unavailable(exc.code), False
            return Failure(INVALID, f"query {query!r}: {str(exc)[:300]}"), \
                exc.code in _QUERY_FAULT
        except (ValueError, requests.RequestException) as exc:
            return Failure(INVALID, f"query {query!r}: {exc}"), False
        return self._value(query, data.get("result")), data.get("resultType") != "vector"

    def _unavailable(self, code: int) -> Failure:
        """The server unavailable or overloaded (a 503 while it starts or its storage is
        busy, a proxy's 502/504, 429) is UNREACHABLE, like a connection refused."""
        return Failure(UNREACHABLE, f"{self.url}: HTTP {code}: Prometheus is unavailable "
                                    "or overloaded")

    def _ask(self, query: str) -> dict[str, Any]:
        """``data`` of an instant query (``resultType``, ``result``); raises _Refused on
        an error status."""
        data: dict[str, Any] = self._retrying(self._post, query)
        return data

    def _post(self, query: str, endpoint: str | None = None,
              extra: dict[str, str] | None = None) -> dict[str, Any]:
        QUERIES.inc()
        r = self.session.post(endpoint or self.endpoint, timeout=self.timeout, data={
            "query": query, "timeout": f"{int(self.timeout * 1000)}ms", **(extra or {})})
        try:
            answer: _Answer | None = typed(r.content, _Answer)
        except msgspec.DecodeError:
            answer = None
        if r.status_code != 200:
            said = answer.error if answer is not None and answer.error else r.text[:200]
            raise _Refused(r.status_code, f"HTTP {r.status_code}: {said}")
        if answer is None or answer.status != "success" or not isinstance(answer.data, dict):
            raise ValueError(f"not an answer of Prometheus's query API: {r.text[:80]!r}")
        return answer.data

    @staticmethod
    def _value(query: str, result: Any) -> Reading:
        if isinstance(result, list) and len(result) == 2 and not isinstance(result[0], dict):
            return number(result[1], query)  # a scalar: [time, "value"]
        if not isinstance(result, list):
            return Failure(INVALID, f"query {query!r}: unexpected answer {str(result)[:80]!r}")
        if not result:
            return Failure(UNKNOWN_METRIC, f"query {query!r} returned no series")
        if len(result) > 1:
            return Failure(INVALID, f"query {query!r} returned {len(result)} series; "
                                    "it must return one")
        sample = result[0].get("value") if isinstance(result[0], dict) else None
        if not isinstance(sample, list) or len(sample) != 2:
            return Failure(INVALID, f"query {query!r}: no instant value in {str(result)[:80]!r}")
        return number(sample[1], query)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.session.close()
