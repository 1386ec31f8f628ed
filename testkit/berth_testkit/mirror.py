"""A cluster's objects under one list path, kept current by a watch, for the tests'
samplers: each change is seen as it happens, at the cost of the changes alone.

Polling a list ten times a second cost the API server and the test about a fifth of
a core per three clusters while it ran (20 Deployments each). Two mirrors are two
streams, each a moment behind its server in its own way: a count over several of
them confirms what it finds by reading (docs/development.md, "Samplers").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from berth_testkit.servers.etcd import ServerUnavailable
from berth_testkit.servers.kube import KubeCluster

Objects = Mapping[str, dict[str, Any]]  # name → the object as the API server has it
# Called on the mirror's thread with the cluster's name, the objects now and the names
# that changed (every name it had and has after a list).
OnChange = Callable[[str, Objects, set[str]], None]


class Mirror:
    """The objects under ``path`` on ``kube``, listed and then watched until :meth:`stop`.
    A cluster that cannot be listed (its API stopped) has no objects until it is listed
    again: as a cluster that is down serves nothing."""

    def __init__(self, name: str, kube: KubeCluster, path: str, on_change: OnChange) -> None:
        self.name, self.kube, self.path, self.on_change = name, kube, path, on_change
        self.objects: dict[str, dict[str, Any]] = {}  # owned by the mirror's thread
        self.listed = threading.Event()  # listed once, or found down
        self.error: BaseException | None = None  # what ended the mirror's thread early
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"mirror-{name}")

    def start(self) -> Mirror:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching; what ended the thread early (its callback's error) is raised
        here, in the test, not lost on the thread."""
        self._stop.set()
        self._thread.join(10)
        if self.error is not None:
            raise self.error

    def _tell(self, changed: set[str]) -> None:
        try:
            self.on_change(self.name, self.objects, changed)
        except Exception as exc:  # not a watch that broke: the mirror ends with it
            raise _Failed() from exc

    def _list(self) -> str:
        """List the path again (nothing when the cluster does not answer); its version."""
        try:
            listed = self.kube.request("GET", self.path)
            objects = {o["metadata"]["name"]: o for o in listed.get("items", [])}
            version = str(listed["metadata"]["resourceVersion"])
        except (OSError, ServerUnavailable, KeyError):
            objects, version = {}, ""
        changed = set(self.objects) | set(objects)
        self.objects = objects
        self._tell(changed)
        return version

    def _follow(self, version: str) -> None:
        """Apply the watch's changes from ``version`` until it ends or breaks."""
        try:
            for event in self.kube.watch(self.path, version, timeout=30):
                if self._stop.is_set():
                    return
                if event.get("type") == "BOOKMARK":
                    continue
                obj = event["object"]
                name = obj["metadata"]["name"]
                if event.get("type") == "DELETED":
                    self.objects.pop(name, None)
                else:
                    self.objects[name] = obj
                self._tell({name})
        except (OSError, ServerUnavailable, KeyError, ValueError):
            time.sleep(0.1)  # listed again: what changed meanwhile is in the list

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                version = self._list()
                self.listed.set()
                if version:
                    self._follow(version)
                else:
                    self._stop.wait(0.2)
        except Exception as exc:  # kept for stop() to raise: the callback's, or a bug
            self.error = exc.__cause__ if isinstance(exc, _Failed) else exc
            self.listed.set()


class _Failed(Exception):
    """The callback raised (its error is the cause)."""


def mirrored(mirrors: list[Mirror], timeout: float = 30.0) -> None:
    """Start ``mirrors`` and return once each was listed once (or found down)."""
    for m in mirrors:
        m.start()
    deadline = time.monotonic() + timeout
    for m in mirrors:
        m.listed.wait(max(0.0, deadline - time.monotonic()))
