"""One way for a fixture to hold a test server: made and started, or the test fails
saying how to get the server (never a skip); cleaned up afterwards, also when
starting failed halfway."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
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
    """Several servers, by name, all started or the test fails; all cleaned up. They are
    made, started and cleaned up side by side (a Kubernetes cluster spends most of its
    start waiting: test_rollouts.py's first setup, five clusters and berth, took 33.6 s
    one after the other and 22.5 s so, on two busy workers)."""
    started: dict[str, S] = {}
    lock = threading.Lock()

    def start(name: str) -> None:
        server = make(name)
        with lock:
            started[name] = server
        server.start()

    with ThreadPoolExecutor(len(names) or 1) as pool:
        waits = [pool.submit(start, name) for name in names]
    failed = [exc for w in waits if (exc := w.exception()) is not None]
    if failed:
        _cleanup_all(list(started.values()))
        if all(isinstance(exc, ServerUnavailable) for exc in failed):
            pytest.fail("\n".join(map(str, failed)), pytrace=False)
        raise failed[0]
    try:
        yield {name: started[name] for name in names}
    finally:
        _cleanup_all(list(started.values()))


def _cleanup_all(servers: list[S]) -> None:
    """Each cleaned up, whatever another's cleanup did; the first failure raised after."""
    with ThreadPoolExecutor(len(servers) or 1) as pool:
        waits = [pool.submit(server.cleanup) for server in servers]
    for exc in [w.exception() for w in waits]:
        if exc is not None:
            raise exc


def kube_clients(servers: Mapping[str, KubeCluster]) -> Iterator[dict[str, Client]]:
    """For a fixture: a lightkube client per kube-apiserver, closed afterwards."""
    made = {name: Client(KubeConfig.from_dict(s.kubeconfig()), trust_env=False)
            for name, s in servers.items()}
    try:
        yield made
    finally:
        for client in made.values():
            client.close()
