"""A TCP forwarder on loopback that a test can cut: a server "down" for its clients
while it runs for everyone else (a hub whose API berth can no longer reach, say).

``cut()`` closes the listening socket and every connection through it, so a client
meets a refused connection, as with a server that stopped; ``restore()`` listens on
the same port again.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from berth_testkit.servers.etcd import free_port


class Cut:
    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = free_port()
        self._lock = threading.Lock()  # guards _listener and _open
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()

    def __enter__(self) -> Cut:
        self.restore()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cut()

    def restore(self) -> None:
        with self._lock:
            if self._listener is not None:
                return
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", self.port))
            s.listen(64)
            self._listener = s
        threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def cut(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._open = self._open, set()
        for s in [*conns, *([listener] if listener is not None else [])]:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    server.close()
                    return
                self._open.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
