"""A cluster's unary API calls (discovery, apply, get, delete, the probe) through berth's
own HTTP/1.1 client (``berth/http.py``), authenticated as lightkube reads the
kubeconfig.

Through httpx a call cost the propagator more CPU in building its URL and request,
and in httpcore's and h11's bookkeeping, than in the exchange: measured in
``propagator_scale_bench.py`` (py-spy, GIL holders), httpx's ``Client.request`` held
55 % of the propagator's samples while it applied 5,000 applications.

What lightkube gives: the TLS settings (the cluster's CA, a client certificate,
``insecure-skip-tls-verify``; read when the connection is made, so a file that
cannot be read makes the kubeconfig unusable at once) and the user's
authentication (a token, a token file, an exec plugin, a user name and password).
The authentication is lightkube's own flow, driven here once for the header it
sets, which is then kept and sent with every call; an answer 401 drives the flow
on, as httpx would, so that a token file is read again, and the call is made once
more with what it gives. That is when lightkube itself renews them. An exec plugin
is berth's own (``berth/kubeexec.py``: bounded in time, its token kept until it
expires), asked for the token of every call and told of a 401.
"""

from __future__ import annotations

import base64
import ssl
import threading
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import httpx2 as httpx
from lightkube.config.client_adapter import user_auth, verify_cluster
from lightkube.config.kubeconfig import SingleConfig

from berth.http import Answer, Member
from berth.kubeexec import ExecError, ExecPlugin

AUTHORIZATION = "Authorization"


class CredentialError(OSError):
    """No credential to send: a token file gone, an exec plugin failing (its reason)."""


def _ca(config: SingleConfig) -> str:
    """The cluster's CA as the kubeconfig holds it, as data (a file named is read; one
    that cannot be, "": the connection says why it is unusable when it is made)."""
    cluster = config.cluster
    if cluster.certificate_auth_data or not cluster.certificate_auth:
        return cluster.certificate_auth_data or ""
    try:
        return base64.b64encode(Path(config.abs_file(cluster.certificate_auth)).read_bytes()
                                ).decode()
    except Exception:  # unreadable, or relative to no file
        return ""


class KubeHttp:
    """One cluster's API server, as the user its kubeconfig names (thread-safe)."""

    def __init__(self, config: SingleConfig, timeout: float,
                 plugin: ExecPlugin | None = None) -> None:
        server = config.cluster.server
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the cluster's server is not an http(s) URL: {server!r}")
        self._prefix = parts.path.rstrip("/")
        self.server = server
        self.ca = _ca(config)  # where it is, said without a credential (base64 PEM)
        self.timeout = timeout
        if config.user is None:
            raise ValueError("the kubeconfig's context names no user")
        tls = verify_cluster(config.cluster, config.user, config.abs_file, trust_env=False) \
            if parts.scheme == "https" else None
        self._member = Member(f"{parts.scheme}://{parts.netloc}",
                              lambda: tls or ssl.create_default_context())
        self._plugin = plugin  # the user's exec plugin: lightkube's flow is not used
        self._auth = user_auth(config.user) if plugin is None else None
        self._lock = threading.Lock()  # renewing the authentication, once at a time
        self._said: dict[str, str] | None = None  # the header the flow set, until a 401

    def request(self, method: str, path: str, *, params: dict[str, str] | None = None,
                body: bytes = b"", content_type: str = "", timeout: float | None = None,
                accept: str = "application/json",
                acting: tuple[tuple[str, str], ...] = ()) -> Answer:
        """One call; its answer (any status). ``acting``: the impersonation headers of
        the identity it is made as (none: the kubeconfig's user). OSError when it could
        not be made."""
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        headers = {"Accept": accept, "User-Agent": "berth"}
        if content_type:
            headers["Content-Type"] = content_type
        if self._plugin is not None:
            return self._by_plugin(self._plugin, method, target, body, headers,
                                   timeout or self.timeout, acting)
        said = self._said if self._said is not None else self._renew(None)
        answer = self._member.request(method, target, body, {**headers, **said},
                                      timeout or self.timeout, acting)
        if answer.status == 401 and self._auth is not None:
            again = self._renew(said)
            if again != said:
                answer = self._member.request(method, target, body, {**headers, **again},
                                              timeout or self.timeout, acting)
        return answer

    def _by_plugin(self, plugin: ExecPlugin, method: str, target: str, body: bytes,
                   headers: dict[str, str], timeout: float,
                   acting: tuple[tuple[str, str], ...]) -> Answer:
        """A call with the plugin's token; after a 401, once more with the one it gives
        then (if another)."""
        token = self._token(plugin)
        answer = self._member.request(method, target, body,
                                      {**headers, AUTHORIZATION: f"Bearer {token}"},
                                      timeout, acting)
        if answer.status == 401:
            plugin.refused(token)
            again = self._token(plugin)
            if again != token:
                answer = self._member.request(method, target, body,
                                              {**headers, AUTHORIZATION: f"Bearer {again}"},
                                              timeout, acting)
        return answer

    @staticmethod
    def _token(plugin: ExecPlugin) -> str:
        try:
            return plugin.token()
        except ExecError as exc:
            raise CredentialError(f"authenticating: {exc}") from exc

    def _renew(self, refused: dict[str, str] | None) -> dict[str, str]:
        """The header to authenticate with: the flow's first (``refused`` None), or what
        it offers after ``refused`` was answered 401 (the same again when it offers
        nothing new)."""
        with self._lock:
            if self._said is not None and self._said != refused:
                return self._said  # another thread renewed it meanwhile
            if self._auth is None:
                self._said = {}
                return self._said
            flow = self._auth.sync_auth_flow(httpx.Request("GET", "http://berth.invalid/"))
            try:
                sent = next(flow)
                if refused is not None:
                    sent = flow.send(httpx.Response(401, request=sent))
            except StopIteration:
                return refused or {}
            except Exception as exc:  # a token file gone
                raise CredentialError(f"authenticating: {type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:200] if str(exc) else ''}") from exc
            value = sent.headers.get(AUTHORIZATION)
            self._said = {AUTHORIZATION: value} if value else {}
            return self._said

    def close(self) -> None:
        self._member.close()


__all__ = ["CredentialError", "KubeHttp"]
