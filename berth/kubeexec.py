"""A kubeconfig user's exec plugin: the credential a cluster is reached with, from a
program (client-go's credential plugins, KEP-541), as the cloud hubs and a cluster
inventory's access providers give them.

What client-go does, berth does:

* The plugin is run with the kubeconfig's ``command``, ``args`` and ``env`` (over the
  process's own environment), stdin closed, and ``KUBERNETES_EXEC_INFO`` set to an
  ``ExecCredential`` of the configured ``apiVersion`` (``client.authentication.k8s.io/v1``
  or ``v1beta1``; ``v1alpha1`` left Kubernetes in 1.24 and is refused) saying it is
  not interactive, and, with ``provideClusterInfo: true``, which cluster: its server,
  CA, ``tls-server-name``, ``insecure-skip-tls-verify``, ``proxy-url``,
  ``disable-compression``, and as ``config`` the cluster's extension named
  ``client.authentication.k8s.io/exec`` (how a cluster inventory's plugin learns which
  cluster it is asked for).
* Its answer is an ``ExecCredential`` of the same ``apiVersion`` whose ``status``
  holds a ``token`` (and perhaps an ``expirationTimestamp``). The token is kept —
  in memory, never written anywhere — until it expires, or until the cluster refuses
  it (HTTP 401), then the plugin is run again, once for all threads.

Where berth differs, and why:

* **Bounded.** client-go waits for the plugin as long as it takes; a plugin that
  hangs would hold a thread of the propagator for good. berth waits ``timeout``
  seconds (10 by default), then kills the plugin and its children and says so. A
  plugin that failed is not run again for ``retry_after`` seconds (5): the calls
  meanwhile fail at once with its reason, rather than each waiting for it again.
* **Tokens only.** A plugin may answer a client certificate and key instead; berth
  refuses that with a clear reason (its connections take their TLS identity from the
  kubeconfig when they are made).
* **Never interactive.** ``interactiveMode: Always`` needs a terminal, which berth's
  processes never have: refused when the kubeconfig is read, not when a call fails.
* **Relative commands** are looked up in ``PATH`` when they are a bare name, and from
  the process's directory otherwise: a kubeconfig stored in etcd has no directory of
  its own for client-go's rule (relative to the kubeconfig's file) to use.

Every failure is an :class:`ExecError` whose text names the command and what went
wrong — never the token, and of the plugin's own error output only its last line.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2 as httpx

EXEC_INFO = "KUBERNETES_EXEC_INFO"
EXTENSION = "client.authentication.k8s.io/exec"  # the cluster's extension for its plugin
VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
REMOVED = "client.authentication.k8s.io/v1alpha1"
TIMEOUT = 10.0  # seconds a plugin may take (client-go: unbounded)
RETRY_AFTER = 5.0  # seconds a failed plugin is not run again (its failure said meanwhile)
SAID = 200  # characters of the plugin's own last line of error output kept


class ExecError(Exception):
    """The plugin could not be run, or its answer is no credential berth can use."""


@dataclass(frozen=True, slots=True)
class Credential:
    token: str
    expires: float | None  # seconds since the epoch; None: until the cluster refuses it


class ExecPlugin:
    """One kubeconfig user's plugin, and the credential it last gave (thread-safe).

    ``user_exec`` is the user's ``exec`` stanza and ``cluster`` the cluster's (both as
    the kubeconfig has them); :class:`ExecError` when they are unusable."""

    def __init__(self, user_exec: Any, cluster: Any, *, timeout: float = TIMEOUT,
                 retry_after: float = RETRY_AFTER, clock: Callable[[], float] = time.time,
                 ticks: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(user_exec, dict):
            raise ExecError("the user's exec is not a mapping")
        command = user_exec.get("command")
        if not isinstance(command, str) or not command:
            raise ExecError("the user's exec names no command")
        self.command = command
        version = user_exec.get("apiVersion")
        if version == REMOVED:
            raise ExecError(f"exec plugin {command}: apiVersion {REMOVED} was removed in "
                            f"Kubernetes 1.24; use {VERSIONS[0]}")
        if version not in VERSIONS:
            raise ExecError(f"exec plugin {command}: apiVersion {version!r} is none of "
                            f"{', '.join(VERSIONS)}")
        self.version: str = version
        if user_exec.get("interactiveMode") == "Always":
            raise ExecError(f"exec plugin {command}: interactiveMode Always needs a "
                            "terminal, and berth runs unattended")
        args = user_exec.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ExecError(f"exec plugin {command}: args is not a list of strings")
        self.args: list[str] = args
        self.env = dict(os.environ)
        for pair in user_exec.get("env") or []:
            if not (isinstance(pair, dict) and isinstance(pair.get("name"), str)
                    and isinstance(pair.get("value"), str)):
                raise ExecError(f"exec plugin {command}: an env entry is not a name and "
                                "a value")
            self.env[pair["name"]] = pair["value"]
        spec: dict[str, Any] = {"interactive": False}
        if user_exec.get("provideClusterInfo"):
            spec["cluster"] = cluster_info(cluster if isinstance(cluster, dict) else {})
        self.env[EXEC_INFO] = json.dumps(
            {"apiVersion": version, "kind": "ExecCredential", "spec": spec})
        hint = user_exec.get("installHint")
        self.hint = hint.strip() if isinstance(hint, str) else ""
        self.timeout, self.retry_after, self.clock, self.ticks = timeout, retry_after, clock, ticks
        self._lock = threading.Lock()  # one run at a time; guards the two below
        self._held: Credential | None = None
        self._failed: tuple[float, ExecError] | None = None  # when (ticks), and how

    def token(self) -> str:
        """The token to send now: the one held, unless it expired — now past its expiry,
        client-go's rule — (then the plugin is run again)."""
        with self._lock:
            held = self._held
            if held is None or (held.expires is not None and self.clock() > held.expires):
                if self._failed is not None and (
                        self.ticks() - self._failed[0] < self.retry_after):
                    raise self._failed[1]
                try:
                    held = self._held = self._run()
                except ExecError as exc:
                    self._failed = (self.ticks(), exc)
                    raise
                self._failed = None
            return held.token

    def refused(self, token: str) -> None:
        """The cluster answered 401 to ``token``: the next :meth:`token` runs the plugin
        again (unless another thread has done so already)."""
        with self._lock:
            if self._held is not None and self._held.token == token:
                self._held = None

    def _run(self) -> Credential:
        try:
            proc = subprocess.Popen([self.command, *self.args], env=self.env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            hint = f" ({self.hint})" if self.hint else ""
            raise ExecError(f"exec plugin {self.command} could not be run: "
                            f"{exc.strerror or exc}{hint}") from exc
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise ExecError(f"exec plugin {self.command} gave no credential within "
                            f"{self.timeout:g} s: stopped") from None
        if proc.returncode != 0:
            last = err.decode(errors="replace").strip().splitlines()
            said = f": {last[-1][:SAID]}" if last else ""
            raise ExecError(f"exec plugin {self.command} failed with exit code "
                            f"{proc.returncode}{said}")
        return self._credential(out)

    def _credential(self, out: bytes) -> Credential:
        """The plugin's answer, checked as client-go checks it."""
        try:
            answer = json.loads(out)
        except ValueError:
            raise ExecError(f"exec plugin {self.command}: its output is not JSON") from None
        if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
            raise ExecError(f"exec plugin {self.command}: its output is no ExecCredential")
        if answer.get("apiVersion") != self.version:
            raise ExecError(f"exec plugin {self.command} is configured to use API version "
                            f"{self.version}, plugin returned version "
                            f"{answer.get('apiVersion')!r}")
        status = answer.get("status")
        if not isinstance(status, dict):
            raise ExecError(f"exec plugin {self.command} didn't return a status field")
        token = status.get("token")
        if (status.get("clientCertificateData") or status.get("clientKeyData")) and not token:
            raise ExecError(f"exec plugin {self.command} returned a client certificate: "
                                "berth takes tokens from exec plugins only")
        if not isinstance(token, str) or not token:
            raise ExecError(f"exec plugin {self.command} didn't return a token or "
                            "cert/key pair")
        return Credential(token, _expiry(self.command, status.get("expirationTimestamp")))


def plugin_of(kubeconfig: dict[str, Any], context: str, *, timeout: float = TIMEOUT
              ) -> ExecPlugin | None:
    """The exec plugin of ``context``'s user in ``kubeconfig`` (None: its user has
    none); :class:`ExecError` when it has one that cannot be used."""
    def named(section: str, name: Any) -> dict[str, Any]:
        for entry in kubeconfig.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == name:
                inner = entry.get(section[:-1])
                return inner if isinstance(inner, dict) else {}
        return {}

    ctx = named("contexts", context)
    user = named("users", ctx.get("user"))
    if "exec" not in user:
        return None
    return ExecPlugin(user["exec"], named("clusters", ctx.get("cluster")), timeout=timeout)


def cluster_info(cluster: dict[str, Any]) -> dict[str, Any]:
    """The cluster as an ExecCredential's ``spec.cluster`` says it (client-go's
    ``Cluster``): the CA as data (a file named is read), and the cluster's exec
    extension as ``config``."""
    out: dict[str, Any] = {"server": cluster.get("server", "")}
    ca = cluster.get("certificate-authority-data")
    if not ca and isinstance(cluster.get("certificate-authority"), str):
        try:
            ca = base64.b64encode(Path(cluster["certificate-authority"]).read_bytes()).decode()
        except OSError as exc:
            raise ExecError(f"the cluster's certificate-authority cannot be read: "
                            f"{exc.strerror or exc}") from exc
    if ca:
        out["certificate-authority-data"] = ca
    for field in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url",
                  "disable-compression"):
        if cluster.get(field):
            out[field] = cluster[field]
    for named in cluster.get("extensions") or []:
        if isinstance(named, dict) and named.get("name") == EXTENSION:
            out["config"] = named.get("extension")
    return out


def _expiry(command: str, stamp: Any) -> float | None:
    if stamp is None or stamp == "":
        return None
    if not isinstance(stamp, str):
        raise ExecError(f"exec plugin {command}: expirationTimestamp is not a time")
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ExecError(f"exec plugin {command}: expirationTimestamp {stamp[:40]!r} is not "
                        "an RFC 3339 time") from None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """The plugin and whatever it started in its session: gone (what left the session
    and holds its output open is not waited for)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=1.0)


class ExecAuth(httpx.Auth):
    """The plugin's token on an asynchronous httpx client's requests (the watches'), run
    again after a 401; the plugin runs on a worker thread, never on the event loop."""

    def __init__(self, plugin: ExecPlugin) -> None:
        self.plugin = plugin

    def sync_auth_flow(self, request: httpx.Request
                       ) -> Generator[httpx.Request, httpx.Response, None]:
        raise NotImplementedError("an asynchronous client's (a call goes through KubeHttp)")

    async def async_auth_flow(self, request: httpx.Request
                              ) -> AsyncGenerator[httpx.Request, httpx.Response]:
        token = await asyncio.to_thread(self.plugin.token)
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == 401:
            self.plugin.refused(token)
            again = await asyncio.to_thread(self.plugin.token)
            request.headers["Authorization"] = f"Bearer {again}"
            yield request


__all__ = ["Credential", "ExecAuth", "ExecError", "ExecPlugin", "cluster_info", "plugin_of"]
