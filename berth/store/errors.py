"""The one error tree every berth process sees from the store.

    StoreError
    ├── Conflict       a compare-and-swap lost: re-read, re-decide, retry
    ├── Deposed        a leader's fenced write after its term ended: never retry it
    ├── NotFound       the key does not exist
    ├── Unavailable    etcd could not be reached or did not answer in time
    ├── Compacted      a watch asked for a revision etcd no longer keeps: relist
    ├── Unauthorized   authentication failed or permission was denied
    ├── NoSpace        etcd is out of space (its quota alarm): no write lands, deletes do
    └── Invalid        etcd refused the request, or a value does not decode

What one gateway call raises before translation (:class:`Unreached`,
:class:`Answered`, requests' errors for the watches) is translated here and only
here, so that callers never see it.
"""

from __future__ import annotations

import json
from typing import Any

import requests


class StoreError(Exception):
    """Base of every error raised by :mod:`store`."""


class Conflict(StoreError):
    """A guarded write found another revision than the one it expected."""

    def __init__(self, key: str, message: str = "") -> None:
        super().__init__(message or f"{key}: changed since it was read")
        self.key = key


class Deposed(StoreError):
    """A fenced write failed because the writer's term is over: the election key it
    won no longer exists at that create revision (another replica leads, or nobody
    does). Whatever the writer had queued is no longer its to write."""

    def __init__(self, key: str, term: int, now: int) -> None:
        if term <= 0:  # refused before sending: no term was ever held
            super().__init__(f"{key}: a write fenced with no term (term {term}) is "
                             "refused: its writer does not lead")
        else:
            held = f"was created anew at revision {now}" if now else "is gone"
            super().__init__(f"{key} {held}: the term that began at revision {term} "
                             "is over")
        self.key, self.term, self.now = key, term, now


class NotFound(StoreError):
    """The key does not exist."""

    def __init__(self, key: str) -> None:
        super().__init__(f"{key}: not found")
        self.key = key


class Unavailable(StoreError):
    """etcd could not be reached, or did not answer in time. Temporary."""


class Compacted(StoreError):
    """A watch start revision was compacted away; the caller must relist."""

    def __init__(self, revision: int, compact_revision: int) -> None:
        super().__init__(
            f"revision {revision} is compacted (oldest kept: {compact_revision}); relist"
        )
        self.revision = revision
        self.compact_revision = compact_revision


class Unauthorized(StoreError):
    """Authentication failed, the token expired, or permission was denied."""


class NoSpace(StoreError):
    """etcd's database is at its quota (its NOSPACE alarm is raised): it refuses every
    write that adds data, until an operator compacts, defragments and disarms it;
    reads and deletes still work."""


class Invalid(StoreError):
    """etcd rejected the request as malformed, or a stored value does not decode."""


# gRPC status codes as the gateway reports them (google.golang.org/grpc/codes).
_GRPC_UNAVAILABLE = {1, 4, 14}  # canceled, deadline exceeded, unavailable
_GRPC_UNAUTHORIZED = {7, 16}  # permission denied, unauthenticated
_GRPC_INVALID = {3, 9, 11}  # invalid argument, failed precondition, out of range
# etcd reports some auth failures as invalid argument ("user name is empty").
_AUTH_WORDS = ("auth", "permission denied", "user name is empty", "token")


def _gateway_error(text: str | None) -> tuple[int | None, str]:
    """Pull the gRPC code and message out of a gateway error body."""
    if not text:
        return None, ""
    try:
        body: Any = json.loads(text)
    except ValueError:
        return None, text.strip()
    if not isinstance(body, dict):
        return None, text.strip()
    err = body.get("error", body)
    if isinstance(err, dict):
        code = err.get("grpc_code", err.get("code"))
        message = str(err.get("message", ""))
    else:
        code, message = body.get("code"), str(err)
    return (int(code) if isinstance(code, int | str) and str(code).isdigit() else None), message


def classify(code: int | None, message: str, context: str) -> StoreError:
    """Map a gRPC code and message from etcd to the store error tree."""
    text = f"{context}: {message}" if message else context
    lowered = message.lower()
    if code in _GRPC_UNAUTHORIZED or any(w in lowered for w in _AUTH_WORDS):
        return Unauthorized(text)
    if code in _GRPC_UNAVAILABLE or "leader" in lowered or "timed out" in lowered:
        return Unavailable(text)
    if "database space exceeded" in lowered:
        return NoSpace(text)
    if code in _GRPC_INVALID:
        return Invalid(text)
    return StoreError(text)


# What long socket, TLS and urllib3 messages boil down to, in the words an operator
# searches for.
_CAUSES = (("connection refused", "connection refused"),
           ("timed out", "timed out"), ("timeout", "timed out"),
           ("name or service not known", "unknown host"),
           ("nodename nor servname", "unknown host"),
           ("temporary failure in name resolution", "unknown host"),
           ("no route to host", "no route to host"),
           ("network is unreachable", "network unreachable"),
           ("connection reset", "connection reset"),
           ("remote end closed connection", "connection closed by the server"),
           ("certificate verify failed", "TLS certificate not trusted"),
           ("wrong version number", "TLS to a server that does not speak it"),
           ("unavailable", "etcd answered 503 (no leader, or starting)"))


def why(exc: object) -> str:
    """A connection failure in a few words, not a library's internals."""
    text = str(exc)
    lowered = text.lower()
    for needle, said in _CAUSES:
        if needle in lowered:
            return said
    return text.split("\n", 1)[0][:160]


class Unreached(Exception):
    """A gateway call that got no answer from etcd: no connection, a reset, a timeout,
    or the gateway's own 503, 408 or 504. Becomes :class:`Unavailable`."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class Answered(Exception):
    """etcd's gateway answered a call with an error: ``body`` (its JSON, with the gRPC
    code and message) and the HTTP ``status``. Becomes what :func:`classify` says."""

    def __init__(self, body: str, status: int) -> None:
        super().__init__(body)
        self.body, self.status = body, status


def translate(exc: BaseException, context: str) -> StoreError:
    """Translate what a gateway call raised into a :class:`StoreError`.

    ``context`` names what was being done (usually the key), so the message
    tells an operator where to look.
    """
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, Unreached):
        return Unavailable(f"{context}: etcd unreachable: {why(exc.detail)}")
    if isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout):
        return Unavailable(f"{context}: etcd unreachable: {why(exc)}")
    if isinstance(exc, Answered):
        code, message = _gateway_error(exc.body)
        return classify(code, message or f"HTTP {exc.status}", context)
    if isinstance(exc, requests.exceptions.RequestException):
        return Unavailable(f"{context}: {exc}")
    if isinstance(exc, ValueError):  # a body that is not JSON: a proxy, not etcd
        return Invalid(f"{context}: unexpected answer from etcd: {exc}")
    return StoreError(f"{context}: {exc}")
