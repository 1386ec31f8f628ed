"""How to reach etcd: its members' URLs, TLS material and credentials.

``url`` names one member or several, comma-separated (``--etcd``,
``BERTH_ETCD``): every member of one etcd cluster serves the same data, and
the :class:`~store.client.Store` moves to the next one when the member it
talks to stops answering.

Explicit settings always win over the environment. On these machines
``REQUESTS_CA_BUNDLE`` is set and a plain ``requests.Session`` would silently
use it instead of the CA we were given, so sessions are built with
``trust_env=False`` and every TLS option set explicitly.

With etcd auth enabled, the gateway rejects client certificates that carry a
Common Name (etcd would take the CN as the user name and skip the password):
use client certificates without a CN, or no client certificate, with
``--etcd-user``/``--etcd-password``.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.utils import DEFAULT_CA_BUNDLE_PATH

DEFAULT_URL = "http://127.0.0.1:2379"


@dataclass(frozen=True, slots=True)
class EtcdConfig:
    """Connection settings for one etcd cluster (one or more member URLs, comma-separated)."""

    url: str = DEFAULT_URL
    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    user: str | None = None
    password: str | None = None
    timeout: float = 10.0
    # etcd's --max-txn-ops (128 by default): the operations one transaction may carry.
    # An etcd started with a higher limit lets berth carry more writes in one (a Binding
    # and its ledger record are two).
    max_txn_ops: int = 128

    def __post_init__(self) -> None:
        if not 2 <= self.max_txn_ops <= 100_000:
            raise ValueError(f"--etcd-max-txn-ops {self.max_txn_ops}: expected 2 to 100000, "
                             "at most etcd's own --max-txn-ops")
        endpoints = self.endpoints
        if not endpoints:
            raise ValueError(f"--etcd {self.url!r}: expected http(s)://host:port[,...]")
        for endpoint in endpoints:
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                which = f" ({endpoint!r} is not)" if len(endpoints) > 1 else ""
                raise ValueError(f"--etcd {self.url!r}: expected http(s)://host:port{which}")
            if parts.path.strip("/") or parts.query:
                raise ValueError(f"--etcd {self.url!r}: {endpoint!r} has a path; give the "
                                 "member's http(s)://host:port only")
        if len({urlsplit(e).scheme for e in endpoints}) > 1:
            raise ValueError(f"--etcd {self.url!r}: mixes http and https members")
        if (self.cert is None) != (self.key is None):
            raise ValueError("--etcd-cert and --etcd-key go together")
        if (self.user is None) != (self.password is None):
            raise ValueError("--etcd-user and --etcd-password go together")

    @classmethod
    def from_env(cls, **overrides: str | float | int | None) -> EtcdConfig:
        """Settings from ``BERTH_ETCD*`` variables, overridden by non-None arguments."""
        env: dict[str, str | float | int | None] = {
            "url": os.environ.get("BERTH_ETCD", DEFAULT_URL),
            "ca": os.environ.get("BERTH_ETCD_CA"),
            "cert": os.environ.get("BERTH_ETCD_CERT"),
            "key": os.environ.get("BERTH_ETCD_KEY"),
            "user": os.environ.get("BERTH_ETCD_USER"),
            "password": os.environ.get("BERTH_ETCD_PASSWORD"),
        }
        ops = os.environ.get("BERTH_ETCD_MAX_TXN_OPS")
        if ops:
            try:
                env["max_txn_ops"] = int(ops)
            except ValueError:
                raise ValueError(f"$BERTH_ETCD_MAX_TXN_OPS {ops!r}: expected a number of "
                                 "operations") from None
        env.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**env)  # type: ignore[arg-type]

    @property
    def endpoints(self) -> tuple[str, ...]:
        """The members' base URLs, in the order given (without a trailing slash)."""
        return tuple(e.strip().rstrip("/") for e in self.url.split(",") if e.strip())

    def session(self) -> requests.Session:
        """A requests session with exactly these TLS settings, immune to the environment."""
        s = requests.Session()
        s.trust_env = False  # REQUESTS_CA_BUNDLE, proxies and .netrc must not apply
        s.verify = self.ca if self.ca else True
        if self.cert and self.key:
            s.cert = (self.cert, self.key)
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=64)
        s.mount("http://", adapter)
        s.mount("https://", adapter)
        return s

    def tls(self) -> ssl.SSLContext:
        """The same TLS settings for the unary calls' own client (``berth/http.py``). The
        CA bundle without ``ca`` is requests' own, as :meth:`session`."""
        context = ssl.create_default_context(cafile=self.ca or DEFAULT_CA_BUNDLE_PATH)
        if self.cert and self.key:
            context.load_cert_chain(self.cert, self.key)
        return context
