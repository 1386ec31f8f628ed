"""A small HTTP/1.1 client for unary calls: one request, one answer, on kept
connections. It serves etcd's gateway (the store's calls but its watches) and the
Kubernetes API servers (the propagator's applies, reads, deletes and probes; its
watches stream through httpx).

Every such call is a small request answered by a small JSON body. Through urllib3,
whose responses http.client parses with the e-mail package's header parser, an etcd
call cost the calling process about ten times the CPU that the socket's own work
does; through httpx, a Kubernetes call spent more in building its URL and request
than in the exchange. This client sends what it is given and reads what a server
(and a proxy in front of it) answers and nothing more: a status line, headers, and
a body by Content-Length, by chunks, or to the connection's end.

A connection is used by one thread at a time and kept for the next call unless the
answer closes it. A kept connection that the server has closed, or that holds
unread bytes, is dropped before use. A failure before the request could be sent
(no connection, TLS refused) is :class:`NotConnected`: the caller may repeat the
request elsewhere, it cannot have been applied. Any later failure may have reached
the server.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_LINE = 65536  # a status line or header longer than this is not an API server's
MAX_HEADERS = 100


class NotConnected(OSError):
    """No connection could be made: the request never left."""


class NotHttp(OSError):
    """The peer answered something that is not an HTTP/1.x response."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str
    headers: dict[str, str]  # names lower-cased; a repeated header's last value
    body: bytes


class _Connection:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rfile = sock.makefile("rb")

    def close(self) -> None:
        self.rfile.close()
        self.sock.close()

    def dropped(self) -> bool:
        """Whether the server closed it, or it holds bytes nobody asked for."""
        if isinstance(self.sock, ssl.SSLSocket) and self.sock.pending():
            return True
        poller = select.poll()  # not select(): a busy process has fds beyond 1024
        poller.register(self.sock, select.POLLIN)
        try:
            return bool(poller.poll(0))
        except OSError:
            return True

    def exchange(self, request: bytes, timeout: float) -> tuple[Answer, bool]:
        """Send ``request``; the answer, and whether the connection may be kept."""
        self.sock.settimeout(timeout)
        self.sock.sendall(request)
        line = self.rfile.readline(MAX_LINE + 1)
        if not line:
            raise NotHttp("remote end closed connection without response")
        version, _, rest = line.decode("latin-1").rstrip("\r\n").partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise NotHttp(f"not an HTTP response: {line[:80]!r}")
        headers: dict[str, str] = {}
        while True:
            h = self.rfile.readline(MAX_LINE + 1)
            if h in (b"\r\n", b"\n"):
                break
            if not h or len(h) > MAX_LINE or len(headers) >= MAX_HEADERS:
                raise NotHttp("the response's headers end early or never")
            name, _, value = h.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if int(code) in (204, 304) or 100 <= int(code) < 200:
            body = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            body = self._chunks()
        elif "content-length" in headers:
            try:
                size = int(headers["content-length"])
            except ValueError:
                raise NotHttp(f"Content-Length {headers['content-length']!r}") from None
            body = self.rfile.read(size)
            if len(body) != size:
                raise NotHttp(f"the response ended after {len(body)} of {size} bytes")
        else:  # the body runs to the connection's end
            body, keep = self.rfile.read(), False
        return Answer(int(code), reason, headers, body), keep

    def _chunks(self) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self.rfile.readline(MAX_LINE + 1)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise NotHttp(f"a chunk's size {line[:40]!r}") from None
            if size == 0:
                while self.rfile.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            chunk = self.rfile.read(size + 2)
            if len(chunk) != size + 2:
                raise NotHttp("the response ended inside a chunk")
            parts.append(chunk[:size])


class Member:
    """The kept connections to one member, ``http(s)://host:port`` (thread-safe).

    ``tls`` makes the TLS settings of an https member, at its first connection (a
    certificate file that cannot be read fails that call, and the next, as a
    connection that could not be made)."""

    def __init__(self, url: str, tls: Callable[[], ssl.SSLContext], *,
                 keep: int = 64) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or ""
        self.https = parts.scheme == "https"
        self.port = parts.port or (443 if self.https else 80)
        self._make_tls = tls
        self._tls: ssl.SSLContext | None = None
        self.keep = keep
        self._authority = parts.netloc.encode("latin-1")
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def post(self, path: str, body: bytes, headers: dict[str, str],
             timeout: float) -> Answer:
        """POST ``body`` to ``path``; the answer. NotConnected, or another OSError."""
        return self.request("POST", path, body, headers, timeout)

    def request(self, method: str, path: str, body: bytes, headers: dict[str, str],
                timeout: float, more: tuple[tuple[str, str], ...] = ()) -> Answer:
        """``method`` ``path`` (with its query) with ``body`` (not HEAD: its answer has no
        body whatever its headers say); the answer. ``more``: headers a name may repeat
        in. NotConnected, or another OSError."""
        head = [method.encode("latin-1"), b" ", path.encode("latin-1"),
                b" HTTP/1.1\r\nHost: ", self._authority, b"\r\n"]
        if body or method != "GET":
            head += [b"Content-Length: ", str(len(body)).encode(), b"\r\n"]
        for name, value in (*headers.items(), *more):
            head += [name.encode("latin-1"), b": ", value.encode("latin-1"), b"\r\n"]
        request = b"".join([*head, b"\r\n", body])
        conn = self._take() or self._connect(timeout)
        try:
            answer, keep = conn.exchange(request, timeout)
        except BaseException:
            conn.close()
            raise
        if keep:
            with self._lock:
                if len(self._idle) < self.keep:
                    self._idle.append(conn)
                    return answer
        conn.close()
        return answer

    def _take(self) -> _Connection | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            if not conn.dropped():
                return conn
            conn.close()

    def _context(self) -> ssl.SSLContext:
        with self._lock:
            if self._tls is None:
                try:
                    self._tls = self._make_tls()
                except (OSError, ValueError) as exc:
                    raise NotConnected(f"the TLS settings: {exc}") from exc
            return self._tls

    def forget_tls(self) -> None:
        """Make the TLS settings again at the next connection (their files changed)."""
        with self._lock:
            self._tls = None

    def _connect(self, timeout: float) -> _Connection:
        tls = self._context() if self.https else None
        try:
            sock = socket.create_connection((self.host, self.port), timeout)
        except OSError as exc:
            raise NotConnected(f"{self.host}:{self.port}: {exc}") from exc
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if tls is not None:
                sock = tls.wrap_socket(sock, server_hostname=self.host)
        except OSError as exc:
            sock.close()
            raise NotConnected(f"{self.host}:{self.port}: {exc}") from exc
        return _Connection(sock)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def __del__(self) -> None:  # a session dropped without close: its connections go too
        for conn in self._idle:
            conn.close()
