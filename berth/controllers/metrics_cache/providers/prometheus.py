"""The Prometheus provider: one instant query per metric per poll.

``spec.provider.metric`` is the query: a metric name or a PromQL expression;
it must yield one sample (a scalar, or a vector of one series). A few
queries are in flight at once. Each goes through prometheus-api-client with
a session of our own (explicit TLS, the environment ignored), a timeout, and
retries with backoff (tenacity) on connection errors only: a bad query is
not retried.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
import tenacity
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from berth.controllers.metrics_cache.providers.base import (
    INVALID,
    UNKNOWN_METRIC,
    UNREACHABLE,
    Failure,
    Reading,
    number,
)
from berth.controllers.runtime import http
from berth.store.documents.metrics import PrometheusSpec

log = logging.getLogger(__name__)


_STATUS = re.compile(r"HTTP Status Code (\d+)")
_UNAVAILABLE = {429, 502, 503, 504}


class PrometheusProvider:
    type = "prometheus"

    def __init__(self, spec: PrometheusSpec, *, timeout: float = 5.0, retries: int = 2,
                 concurrency: int = 4) -> None:
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="prometheus")
        self.url = spec.url
        self.timeout = spec.timeout or timeout
        self.session = http.session(pool_size=concurrency)
        # No retries inside the client (its default retries for ~20 s); ours are bounded.
        self.client = PrometheusConnect(url=spec.url, disable_ssl=False, session=self.session,
                                        retry=Retry(total=0))
        self._retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(requests.exceptions.ConnectionError)
            | tenacity.retry_if_exception_type(requests.exceptions.Timeout),
            wait=tenacity.wait_exponential(multiplier=0.2, max=2),
            stop=tenacity.stop_after_attempt(retries + 1),
            reraise=True,
        )

    def fetch(self, metrics: Sequence[str]) -> Mapping[str, Reading]:
        """One instant query per metric, a few in flight at once (Prometheus is concurrent)."""
        if len(metrics) <= 1:
            return {m: self._one(m) for m in metrics}
        results = dict(zip(metrics, self._pool.map(self._one, metrics), strict=True))
        down = next((r for r in results.values()
                     if isinstance(r, Failure) and r.reason == UNREACHABLE), None)
        if down is not None:  # one outage, reported the same for every metric
            return dict.fromkeys(metrics, down)
        return results

    def _one(self, query: str) -> Reading:
        try:
            result = self._retrying(self._query, query)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            return Failure(UNREACHABLE, f"{self.url}: {exc}")
        except PrometheusApiClientException as exc:
            return self.refused(query, exc)
        except (ValueError, requests.RequestException) as exc:
            return Failure(INVALID, f"query {query!r}: {exc}")
        return self._value(query, result)

    def refused(self, query: str, exc: Exception) -> Failure:
        """A non-200 answer: the server unavailable or overloaded (a 503 while it
        starts or its storage is busy, a proxy's 502/504, 429) is UNREACHABLE, like a
        connection refused; anything else is the query's fault (INVALID_METRIC)."""
        found = _STATUS.search(str(exc))
        code = int(found.group(1)) if found else 0
        if code in _UNAVAILABLE:
            return Failure(UNREACHABLE, f"{self.url}: HTTP {code}: Prometheus is unavailable "
                                        "or overloaded")
        return Failure(INVALID, f"query {query!r}: {str(exc)[:300]}")

    def _query(self, query: str) -> Any:
        return self.client.custom_query(
            query, params={"timeout": f"{int(self.timeout * 1000)}ms"}, timeout=self.timeout)

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
