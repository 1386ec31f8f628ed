"""What the robustness run records while it runs, for the invariants to read after.

* :class:`Recorder`: every write under ``/berth/`` from the run's start revision, kept
  whole (a watch; the faults' compactions never go past what it has read).
* :class:`Sampler`: each cluster's Deployments and Jobs twice a second (available
  replicas and image; a Job's uid and whether it succeeded), and the ConfigMap
  ``foreign`` (its uid, owner and data), with the time.
* :class:`Foreign`: that ConfigMap, made on every cluster by someone other than
  berth (again when a cluster comes back empty), and the uids it had.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from berth.controllers.propagator.kube import OWNER
from berth.store import Store, Watch
from berth_testkit.servers.kube import KubeCluster
from tests.robustness.traffic import FOREIGN


@dataclass(frozen=True, slots=True)
class Event:
    revision: int
    type: str  # PUT or DELETE
    key: str
    value: bytes
    create_revision: int  # 0 for a DELETE
    at: float  # seconds since the run began, when the recorder read it


@dataclass
class Recorder:
    store: Store
    t0: float
    events: list[Event] = field(default_factory=list)
    last: int = 0  # the last revision read
    error: str = ""
    _watch: Watch | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, revision: int) -> None:
        self._watch = Watch(self.store, "/berth/", revision)
        self.last = revision - 1
        threading.Thread(target=self._run, daemon=True, name="history").start()

    def _run(self) -> None:
        assert self._watch is not None
        try:
            for batch in self._watch:
                at = time.monotonic() - self.t0
                with self._lock:
                    self.events.extend(Event(
                        ev.mod_revision, ev.type, ev.key,
                        ev.value if ev.type == "PUT" else b"",
                        ev.create_revision if ev.type == "PUT" else 0, at)
                        for ev in batch.events)
                    if batch.events:
                        self.last = max(self.last, batch.events[-1].mod_revision)
        except Exception as exc:  # the history is no longer whole: the run says so
            self.error = f"{type(exc).__name__}: {exc}"

    def read_up_to(self) -> int:
        with self._lock:
            return self.last

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()

    def snapshot(self) -> list[Event]:
        with self._lock:
            return list(self.events)


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    round: int  # the sampling pass: every cluster once
    cluster: str
    kind: str  # Deployment or Job
    name: str
    image: str
    available: int = 0  # a Deployment's available replicas
    uid: str = ""  # a Job's
    created: str = ""  # a Job's creationTimestamp (RFC 3339, to the second)
    completed: str = ""  # a Job's status.completionTime ("": not complete)
    deleting: bool = False  # a Job's deletionTimestamp is set
    owner: str = ""  # the ConfigMap's berth owner annotation ("": none)
    data: str = ""  # the ConfigMap's data, as JSON


@dataclass
class Sampler:
    clusters: dict[str, KubeCluster]
    t0: float
    samples: list[Sample] = field(default_factory=list)
    unreached: set[int] = field(default_factory=set)  # passes a cluster did not answer in
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def run_time(self, stamp: str) -> float:
        """An RFC 3339 time a cluster wrote (this machine's clock) in seconds since the
        run began."""
        wall = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        return wall - (time.time() - (time.monotonic() - self.t0))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="sampler")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(0.5):
            n += 1
            for name, server in list(self.clusters.items()):
                at = time.monotonic() - self.t0
                try:
                    deps = server.request("GET", "/apis/apps/v1/namespaces/default/deployments")
                    jobs = server.request("GET", "/apis/batch/v1/namespaces/default/jobs")
                    cm = server.request("GET", f"{CONFIGMAPS}/{FOREIGN}", ok=(200, 404))
                except Exception:
                    self.unreached.add(n)
                    continue
                for d in deps.get("items", []):
                    self.samples.append(Sample(
                        at, n, name, "Deployment", d["metadata"]["name"], _image(d),
                        available=int(d.get("status", {}).get("availableReplicas") or 0)))
                if cm.get("kind") == "ConfigMap":
                    meta = cm["metadata"]
                    self.samples.append(Sample(
                        at, n, name, "ConfigMap", meta["name"], "", uid=meta.get("uid", ""),
                        owner=(meta.get("annotations") or {}).get(OWNER, ""),
                        data=json.dumps(cm.get("data") or {}, sort_keys=True)))
                for j in jobs.get("items", []):
                    self.samples.append(Sample(
                        at, n, name, "Job", j["metadata"]["name"], _image(j),
                        uid=j["metadata"].get("uid", ""),
                        created=j["metadata"].get("creationTimestamp", ""),
                        completed=j.get("status", {}).get("completionTime") or "",
                        deleting="deletionTimestamp" in j["metadata"]))


CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
PLANTED = {"owner": "someone else"}  # the foreign ConfigMap's data


@dataclass
class Foreign:
    """The ConfigMap ``foreign`` that someone other than berth made on each cluster: a
    "thief" application names it, and berth must neither take it nor change it."""

    clusters: dict[str, KubeCluster]
    uids: set[str] = field(default_factory=set)  # every one planted
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def plant(self, name: str) -> None:
        """Make it on cluster ``name`` (nothing if one is there: berth may have made one
        for a thief while the cluster was empty — then that one is berth's)."""
        got = self.clusters[name].request("POST", CONFIGMAPS, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": FOREIGN, "namespace": "default"}, "data": PLANTED},
            ok=(200, 201, 409))
        if got.get("kind") == "ConfigMap":
            with self._lock:
                self.uids.add(got["metadata"]["uid"])

    def planted(self) -> set[str]:
        with self._lock:
            return set(self.uids)


def _image(obj: dict[str, Any]) -> str:
    try:
        return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])
    except (KeyError, IndexError, TypeError):
        return ""


__all__ = ["PLANTED", "Event", "Foreign", "Recorder", "Sample", "Sampler"]
