"""One way for a fixture to hold a test server: made and started, or the test fails
saying how to get the server (never a skip); cleaned up afterwards, also when
starting failed halfway."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Protocol, TypeVar

import pytest
from lightkube import Client, KubeConfig

from berth_testkit.servers.etcd import ServerUnavailable
from berth_testkit.servers.kube import KubeCluster


class Server(Protocol):
    def start(self) -> object: ...

    def cleanup(self) -> None: ...


S = TypeVar("S", bound=Server)


def serving(make: Callable[[], S]) -> Iterator[S]:
    """For a fixture: ``yield from serving(lambda: KubeCluster("name"))``."""
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


def serving_all(make: Callable[[str], S], names: tuple[str, ...]) -> Iterator[dict[str, S]]:
    """Several servers, by name, all started or the test fails; all cleaned up."""
    started: dict[str, S] = {}
    try:
        for name in names:
            server = make(name)
            started[name] = server
            server.start()
    except ServerUnavailable as exc:
        for server in started.values():
            server.cleanup()
        pytest.fail(str(exc), pytrace=False)
    try:
        yield started
    finally:
        for server in started.values():
            server.cleanup()


def kube_clients(servers: Mapping[str, KubeCluster]) -> Iterator[dict[str, Client]]:
    """For a fixture: a lightkube client per kube-apiserver, closed afterwards."""
    made = {name: Client(KubeConfig.from_dict(s.kubeconfig()), trust_env=False)
            for name, s in servers.items()}
    try:
        yield made
    finally:
        for client in made.values():
            client.close()
