"""The unary calls' HTTP/1.1 client against a peer on loopback that answers exactly the
bytes each case gives: bodies by length, by chunks and to the end; kept connections,
and one the peer closed; what is not HTTP."""

from __future__ import annotations

import os
import resource
import socket
import ssl
import threading
import time

import pytest

from berth.http import Member, NotConnected, NotHttp

CLOSE = b"close after: "


class Peer:
    """Accepts connections; answers each request read on one with the next of
    ``answers`` (None: close the connection instead; CLOSE + bytes: close it after
    answering, without saying so)."""

    def __init__(self, answers: list[bytes | None]) -> None:
        self.answers = answers
        self.requests: list[bytes] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            buf = b""
            while self.answers:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lowered = head.lower()
                size = int(lowered.split(b"content-length: ")[1].split(b"\r\n")[0]) \
                    if b"content-length: " in lowered else 0
                while len(buf) < size:
                    buf += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + buf[:size])
                buf = buf[size:]
                answer = self.answers.pop(0)
                if answer is None:
                    return
                conn.sendall(answer.removeprefix(CLOSE))
                if answer.startswith(CLOSE):
                    return


def _member(peer: Peer) -> Member:
    return Member(peer.url, ssl.create_default_context)


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


def test_a_body_by_length_and_the_connection_kept() -> None:
    peer = Peer([OK, OK])
    m = _member(peer)
    a = m.post("/v3/kv/range", b'{"key":"eA=="}', {"Content-Type": "application/json"}, 5)
    b = m.post("/v3/kv/range", b"{}", {"Authorization": "t0ken"}, 5)
    assert (a.status, a.reason, a.body, a.headers["content-type"]) == (
        200, "OK", b"{}", "application/json")
    assert b.body == b"{}" and peer.connections == 1  # one connection, kept
    assert peer.requests[0].startswith(b"POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1:")
    assert peer.requests[0].endswith(b'\r\n\r\n{"key":"eA=="}')
    assert b"Authorization: t0ken\r\n" in peer.requests[1]
    m.close()


def test_a_chunked_body_and_one_to_the_end() -> None:
    chunked = (b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n")
    peer = Peer([chunked, b"HTTP/1.0 404 Not Found\r\n\r\n<html>nginx</html>"])
    m = _member(peer)
    a = m.post("/v3/kv/put", b"{}", {}, 5)
    assert (a.status, a.body) == (503, b"hello world")
    b = m.post("/v3/kv/put", b"{}", {}, 5)
    assert (b.status, b.body) == (404, b"<html>nginx</html>")
    assert peer.connections == 1  # HTTP/1.0: that connection is not kept
    m.close()


def test_a_kept_connection_the_peer_closed_is_not_used_again() -> None:
    peer = Peer([OK, None, OK])  # the first connection ends after one answer
    m = _member(peer)
    assert m.post("/v3/a", b"{}", {}, 5).body == b"{}"
    with pytest.raises(NotHttp, match="closed connection without response"):
        m.post("/v3/b", b"{}", {}, 5)  # sent on the kept connection: it may have arrived
    assert m.post("/v3/c", b"{}", {}, 5).body == b"{}"  # a new connection
    assert peer.connections == 2
    m.close()


def test_a_kept_connection_closed_while_idle_is_dropped_before_use() -> None:
    peer = Peer([CLOSE + OK, OK])
    m = _member(peer)
    assert m.post("/v3/a", b"{}", {}, 5).body == b"{}"
    time.sleep(0.2)  # the peer's close arrives
    assert m.post("/v3/b", b"{}", {}, 5).body == b"{}"  # on a new connection, not lost
    assert peer.connections == 2
    m.close()


def test_connection_close_is_honoured() -> None:
    peer = Peer([b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", OK])
    m = _member(peer)
    m.post("/v3/a", b"{}", {}, 5)
    m.post("/v3/a", b"{}", {}, 5)
    assert peer.connections == 2
    m.close()


@pytest.mark.parametrize("answer, said", [
    (b"SSH-2.0-OpenSSH_9.2\r\n", "not an HTTP response"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", "ended after 2 of 10 bytes"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\n{}", "Content-Length 'many'"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "a chunk's size"),
])
def test_what_is_not_http_is_said(answer: bytes, said: str) -> None:
    peer = Peer([answer])
    m = _member(peer)
    with pytest.raises(NotHttp, match=said):
        m.post("/v3/a", b"{}", {}, 5)
    m.close()


def test_no_connection_and_bad_tls_settings_never_sent_anything() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(NotConnected, match="refused"):
        Member(f"http://127.0.0.1:{port}", ssl.create_default_context).post("/", b"", {}, 2)

    def unreadable() -> ssl.SSLContext:
        return ssl.create_default_context(cafile="/nonexistent/ca.pem")
    with pytest.raises(NotConnected, match="the TLS settings"):
        Member(f"https://127.0.0.1:{port}", unreadable).post("/", b"", {}, 2)


def test_tls_to_a_peer_that_does_not_speak_it_never_sent_anything() -> None:
    peer = Peer([OK])
    m = Member(peer.url.replace("http://", "https://"), ssl.create_default_context)
    with pytest.raises(NotConnected):
        m.post("/v3/a", b"{}", {}, 2)


def test_a_kept_connection_is_reused_in_a_process_with_many_files_open() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= 1200, f"this test opens 1,100 files: raise the open files limit ({hard})"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]  # fds beyond 1024
    try:
        peer = Peer([OK, OK])
        m = _member(peer)
        m.post("/v3/a", b"{}", {}, 5)
        m.post("/v3/a", b"{}", {}, 5)
        assert peer.connections == 1
        m.close()
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_any_method_a_get_without_a_length_and_a_delete_with_its_body() -> None:
    peer = Peer([OK, b"HTTP/1.1 204 No Content\r\n\r\n", OK])
    m = _member(peer)
    assert m.request("GET", "/api/v1?limit=1", b"", {"Accept": "application/json"},
                     5).body == b"{}"
    gone = m.request("DELETE", "/api/v1/namespaces/default/configmaps/x", b'{"k":1}',
                     {"Content-Type": "application/json"}, 5)
    assert (gone.status, gone.body) == (204, b"")  # no body, whatever follows
    assert m.request("PATCH", "/x", b"{}", {}, 5).status == 200
    get, delete, patch = peer.requests
    assert get.startswith(b"GET /api/v1?limit=1 HTTP/1.1\r\n")
    assert b"content-length" not in get.lower() and b"Accept: application/json" in get
    assert delete.startswith(b"DELETE ") and delete.endswith(b'\r\n\r\n{"k":1}')
    assert b"Content-Length: 2\r\n" in patch
    assert peer.connections == 1  # a 204 without a length still keeps the connection
