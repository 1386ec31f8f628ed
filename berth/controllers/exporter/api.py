"""The Kubernetes API an Export writes to: the few calls the exporter makes, through
berth's own HTTP client (``berth/kubehttp.py``), authenticated as the kubeconfig says.

Every write asks for strict field validation, so a field the installed CRD does not
know is an error (named, never silently pruned), and names berth's field manager.
Answers are sorted into what the caller does next: :class:`Down` (not reached, or
the server failing: retried with backoff), :class:`Conflict` (the object changed or
exists: read again) and :class:`Refused` (the server will not take it: said, and
not retried until something changes).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import json
import time
from typing import Any

import yaml
from lightkube import KubeConfig

from berth.controllers.exporter.shapes import Ref
from berth.http import Answer
from berth.kubeexec import plugin_of
from berth.kubehttp import KubeHttp

MANAGER = "berth-exporter"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PAGE = 500


class Down(Exception):
    """The API could not be reached, or failed (5xx, 429): retried with backoff."""


class Conflict(Exception):
    """409: the object changed since it was read, or exists already."""


class Refused(Exception):
    """The API will not take the request (4xx): it says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Missing(Refused):
    """The API lacks what an export needs, and berth may not add it."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.status = 404


def _message(answer: Answer) -> str:
    try:
        body = json.loads(answer.body)
        return str(body.get("message") or body)[:500]
    except (ValueError, AttributeError):
        return answer.body[:200].decode("utf-8", "replace")


def _check(answer: Answer, what: str) -> Answer:
    if answer.status < 300:
        return answer
    if answer.status == 409:
        raise Conflict(f"{what}: {_message(answer)}")
    if answer.status >= 500 or answer.status == 429:
        raise Down(f"{what}: HTTP {answer.status}: {_message(answer)}")
    raise Refused(answer.status, f"{what}: {_message(answer)}")


def _base(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


def crd_documents() -> dict[str, dict[str, Any]]:
    """The vendored CRDs (``crds/``), by ``<plural>.<group>``."""
    out = {}
    for entry in importlib.resources.files(__package__).joinpath("crds").iterdir():
        if entry.name.endswith(".yaml"):
            doc = yaml.safe_load(entry.read_text())
            out[doc["metadata"]["name"]] = doc
    return out


class Api:
    """One Export's API server, in one namespace (thread-safe: calls share a pool)."""

    def __init__(self, kubeconfig: dict[str, Any], namespace: str, timeout: float) -> None:
        single = KubeConfig.from_dict(kubeconfig).get()
        if single is None:
            raise ValueError("the kubeconfig names no current context")
        self.http = KubeHttp(single, timeout, plugin_of(kubeconfig, single.context_name))
        self.namespace = namespace

    def _call(self, method: str, path: str, what: str, *, body: Any = None,
              params: dict[str, str] | None = None) -> Answer:
        data = json.dumps(body, separators=(",", ":")).encode() if body is not None else b""
        try:
            answer = self.http.request(method, path, params=params, body=data,
                                       content_type="application/json" if data else "")
        except Exception as exc:
            raise Down(f"{what}: {type(exc).__name__}: {exc}") from exc
        return _check(answer, what)

    def path(self, ref: Ref, sub: str = "") -> str:
        tail = f"/{ref.name}" if ref.name else ""
        return (f"{_base(ref.api_version)}/namespaces/{self.namespace}/{ref.plural}{tail}"
                + (f"/{sub}" if sub else ""))

    # -- what the API serves -----------------------------------------------------

    def served(self, api_version: str, plural: str) -> bool:
        try:
            answer = self._call("GET", _base(api_version), f"discovery of {api_version}")
        except Refused as exc:
            if exc.status == 404:
                return False
            raise
        return any(r.get("name") == plural for r in json.loads(answer.body).get("resources")
                   or [])

    def install(self, crd: dict[str, Any], wait: float = 30.0) -> None:
        """Create a CRD (unless it exists) and wait until it is established."""
        name = crd["metadata"]["name"]
        with contextlib.suppress(Conflict):  # installed meanwhile
            self._call("POST", CRDS, f"installing CRD {name}", body=crd,
                       params={"fieldManager": MANAGER})
        deadline = time.monotonic() + wait
        while True:
            got = json.loads(self._call("GET", f"{CRDS}/{name}", f"CRD {name}").body)
            conditions = (got.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in conditions):
                return
            if time.monotonic() > deadline:
                raise Down(f"CRD {name} is not established after {wait:g} s")
            time.sleep(0.2)

    def ensure_namespace(self) -> None:
        try:
            self._call("GET", f"/api/v1/namespaces/{self.namespace}",
                       f"reading namespace {self.namespace}")
        except Refused as exc:
            if exc.status != 404:
                raise
            with contextlib.suppress(Conflict):  # created meanwhile
                self._call("POST", "/api/v1/namespaces", f"creating namespace {self.namespace}",
                           body={"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": self.namespace}})

    # -- objects ---------------------------------------------------------------

    def list(self, api_version: str, plural: str, selector: str) -> list[dict[str, Any]]:
        """Every object of a kind in the namespace that ``selector`` selects (paged)."""
        out: list[dict[str, Any]] = []
        params = {"labelSelector": selector, "limit": str(PAGE)}
        ref = Ref(api_version, plural, "")
        while True:
            page = json.loads(self._call("GET", self.path(ref), f"listing {plural}",
                                         params=params).body)
            out += page.get("items") or []
            more = (page.get("metadata") or {}).get("continue")
            if not more:
                return out
            params = {**params, "continue": more}

    def get(self, ref: Ref) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self._call("GET", self.path(ref), f"{ref.name}").body))
        except Refused as exc:
            if exc.status == 404:
                return None
            raise

    def create(self, ref: Ref, body: dict[str, Any]) -> dict[str, Any]:
        return dict(json.loads(self._call(
            "POST", self.path(Ref(ref.api_version, ref.plural, "")), f"creating {ref.name}",
            body=body, params={"fieldManager": MANAGER, "fieldValidation": "Strict"}).body))

    def replace(self, ref: Ref, body: dict[str, Any], status: bool = False
                ) -> dict[str, Any]:
        """PUT the object (or its status): ``body`` carries the resourceVersion it was
        read at, so a change made since is a Conflict, not overwritten."""
        return dict(json.loads(self._call(
            "PUT", self.path(ref, "status" if status else ""),
            f"{'status of ' if status else ''}{ref.name}", body=body,
            params={"fieldManager": MANAGER, "fieldValidation": "Strict"}).body))

    def delete(self, ref: Ref, resource_version: str) -> None:
        """Delete the object if it is still at ``resource_version`` (gone: done)."""
        try:
            self._call("DELETE", self.path(ref), f"deleting {ref.name}", body={
                "apiVersion": "v1", "kind": "DeleteOptions",
                "preconditions": {"resourceVersion": resource_version}})
        except Refused as exc:
            if exc.status != 404:
                raise

    def close(self) -> None:
        self.http.close()


__all__ = ["Api", "Conflict", "Down", "Missing", "Refused", "crd_documents"]
