"""The Prometheus provider: one instant query per metric per poll.

``spec.provider.metric`` is the query: a metric name or a PromQL expression;
it must yield one sample (a scalar, or a vector of one series). The query
goes through prometheus-api-client with a session of our own (explicit TLS,
the environment ignored), a timeout, and retries with backoff (tenacity) on
connection errors only: a bad query is not retried.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import requests
import tenacity
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from controllers.metrics_cache.providers.base import (
    INVALID,
    UNKNOWN_METRIC,
    UNREACHABLE,
    Failure,
    Reading,
    number,
)
from store.documents.metrics import PrometheusSpec

log = logging.getLogger(__name__)


class PrometheusProvider:
    type = "prometheus"

    def __init__(self, spec: PrometheusSpec, *, timeout: float = 5.0, retries: int = 2) -> None:
        self.url = spec.url
        self.timeout = spec.timeout or timeout
        self.session = requests.Session()
        self.session.trust_env = False
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
        out: dict[str, Reading] = {}
        for query in metrics:
            try:
                result = self._retrying(self._query, query)
            except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
                failure = Failure(UNREACHABLE, f"{self.url}: {exc}")
                return {m: out.get(m, failure) for m in metrics}  # one outage, not N
            except PrometheusApiClientException as exc:
                out[query] = Failure(INVALID, f"query {query!r}: {exc}")
                continue
            except (ValueError, requests.RequestException) as exc:
                out[query] = Failure(INVALID, f"query {query!r}: {exc}")
                continue
            out[query] = self._value(query, result)
        return out

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
        self.session.close()
