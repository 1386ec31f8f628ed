"""One way for a fixture to hold a test server: made and started, or the test fails
saying how to get the server (never a skip); cleaned up afterwards, also when
starting failed halfway."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import pytest

from tests.servers.etcd import ServerUnavailable


class Server(Protocol):
    def start(self) -> object: ...

    def cleanup(self) -> None: ...


S = TypeVar("S", bound=Server)


def serving(make: Callable[[], S]) -> Iterator[S]:
    """For a fixture: ``yield from serving(lambda: KubeApiServer("name"))``."""
    server: S | None = None
    try:
        server = make()
        server.start()
    except ServerUnavailable as exc:
        if server is not None:
            server.cleanup()
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.cleanup()
