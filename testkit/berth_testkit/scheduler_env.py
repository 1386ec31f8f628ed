"""Helpers for scheduler tests: documents in etcd, and the real `berth scheduler` process."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, TypeVar

import msgspec

from berth.store import Store, Watch, decode, encode, keys
from berth.store.documents import (
    Binding,
    ClusterStatus,
    MetricError,
    MetricPicture,
    MetricValue,
    MetricValueStatus,
    ProviderInfo,
    Reachability,
)
from berth.store.documents.base import Metadata
from berth_testkit.servers.etcd import ROOT
from berth_testkit.servers.launch import spawn

if TYPE_CHECKING:
    from berth.controllers.runtime.clock import Clock
    from berth.controllers.scheduler.config import SchedulerConfig
    from berth.controllers.scheduler.decisions import Token
    from berth.controllers.scheduler.scheduler import Scheduler

T = TypeVar("T")


def put(store: Store, key: keys.Key, doc: Any) -> int:
    """Create or replace ``key`` (guarded by the revision just read)."""
    data = doc if isinstance(doc, bytes) else encode(doc)
    current = store.get(key)
    if current is None:
        return store.create(key, data)
    return store.update(key, data, current.mod_revision)


def cluster(store: Store, name: str, *, labels: dict[str, str] | None = None,
            metrics: dict[str, float] | None = None, online: bool = True,
            namespace: str = "default", kubeconfig: bool = True, **spec: Any) -> None:
    body: dict[str, Any] = {
        "api": "kubernetes", "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                     "generation": 1},
        "spec": {"metrics": [{"name": m, "weight": w} for m, w in (metrics or {}).items()],
                 **spec},
    }
    if kubeconfig:
        body["spec"]["kubeconfig"] = {"apiVersion": "v1", "kind": "Config"}
    put(store, keys.resource_key("Cluster", name, namespace), msgspec.json.encode(body))
    if online:
        set_state(store, name, "ONLINE", namespace)


def set_state(store: Store, name: str, state: str, namespace: str = "default") -> None:
    raw = (f'{{"api":"kubernetes","kind":"Cluster","metadata":{{"name":"{name}",'
           f'"namespace":"{namespace}"}},"status":{{"state":"{state}"}}}}').encode()
    put(store, keys.status_key("Cluster", namespace, name), raw)


def metric(store: Store, name: str, lo: float = 0.0, hi: float = 1.0) -> None:
    body = {"api": "core", "kind": "GlobalMetric", "metadata": {"name": name},
            "spec": {"min": lo, "max": hi, "provider": {"name": "static", "metric": name}}}
    put(store, keys.resource_key("GlobalMetric", name), msgspec.json.encode(body))


def value(store: Store, name: str, v: float, lo: float = 0.0, hi: float = 1.0, *,
          error: str | None = None, publish: bool = True) -> int:
    """Write a metric value as the metrics-cache would (``error``: a provider error with the
    value kept, as within ``stale_after``), then the picture that makes it count."""
    doc = MetricValue(Metadata(name=name), MetricValueStatus(
        value=v, normalized=min(1.0, max(0.0, (v - lo) / (hi - lo))),
        observed=datetime.now(UTC), provider=ProviderInfo("static", "static"),
        error=MetricError(error, "down") if error else None))
    revision = put(store, keys.metric_value_key(name), doc)
    return picture(store) if publish else revision


def picture(store: Store, *, complete: bool = True) -> int:
    """Publish the metric picture (a new generation), as the metrics-cache does after a poll."""
    kv = store.get(keys.METRIC_PICTURE)
    generation = decode(kv.value, MetricPicture).generation + 1 if kv else 1
    return put(store, keys.METRIC_PICTURE, MetricPicture(complete=complete,
                                                         generation=generation))


def application(store: Store, name: str, *, namespace: str = "default",
                labels: dict[str, str] | None = None, generation: int = 1,
                **spec: Any) -> int:
    body = {"api": "kubernetes", "kind": "Application",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                         "generation": generation},
            "spec": {"manifest": [{"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": name}}], **spec}}
    return put(store, keys.resource_key("Application", name, namespace),
               msgspec.json.encode(body))


def binding(store: Store, name: str, namespace: str = "default",
            kind: str = "Application") -> Binding | None:
    kv = store.get(keys.binding_key(kind, namespace, name))
    return decode(kv.value, Binding, kv.key) if kv else None


def wait_for(get: Callable[[], T | None], check: Callable[[T], bool] = lambda _: True,
             timeout: float = 15.0) -> T:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = get()
        if last is not None and check(last):
            return last
        time.sleep(0.05)
    raise AssertionError(f"not reached within {timeout}s; last: {last!r}")


def record_puts(store: Store, key: keys.Key, type_: type[T]) -> tuple[list[T], Watch]:
    """Every value written at ``key`` from now on, decoded, appended to a list as it
    comes; close the returned watch when done."""
    seen: list[T] = []
    watch = Watch(store, key, store.revision() + 1)

    def record() -> None:
        for batch in watch:
            seen.extend(decode(ev.value, type_) for ev in batch.events if ev.type == "PUT")

    threading.Thread(target=record, daemon=True).start()
    return seen, watch


def targets(b: Binding) -> list[str]:
    return [t.name for t in b.spec.targets]


class BerthProcess:
    """A ``berth`` subcommand in a child process, on the test etcd."""

    command = "scheduler"

    def __init__(self, url: str, workdir: Path, *, config: str = "", name: str = "s",
                 env: dict[str, str] | None = None) -> None:
        self.log = workdir / f"{self.command}-{name}.log"
        self.env = env or {}
        self.args = [sys.executable, "-m", "berth.cli.main", "--log-level", "DEBUG", self.command,
                     "--etcd", url, "--http", "127.0.0.1:0", "--lease-ttl", "2"]
        if config:
            path = workdir / f"{self.command}-{name}.yaml"
            path.write_text(config)
            self.args += ["--config", str(path)]
        self.proc: subprocess.Popen[bytes] | None = None
        self._began = 0  # where this run's lines begin in the log (a restart appends)

    def start(self) -> Self:
        self._began = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            self.proc = spawn(self.args, stdout=out, stderr=subprocess.STDOUT,
                                         cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1",
                                                   **self.env})
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> int:
        self.terminate()
        return self.wait_stopped()

    def terminate(self) -> None:
        """Ask the process to stop (SIGTERM), without waiting."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()

    def wait_stopped(self, timeout: float = 15.0) -> int:
        """Its exit status, once it stopped: killed if it has not within ``timeout``."""
        if self.proc and self.proc.poll() is None:
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode if self.proc else 0

    def output(self, *, since_start: bool = False) -> str:
        """The log (``since_start``: of this run alone; a process writes its lines a
        tenth of a second at a time, so wait for a line rather than expect it)."""
        if not self.log.exists():
            return ""
        with open(self.log, "rb") as f:
            f.seek(self._began if since_start else 0)
            return f.read().decode(errors="replace")

    def base_url(self, timeout: float = 30.0) -> str:
        """Where this run of the process serves health and metrics (from its log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.findall(r"health and metrics on (http://\S+/)",
                               self.output(since_start=True))
            if found:
                return str(found[-1])
            time.sleep(0.1)
        raise AssertionError(f"{self.log.name} never said where it serves health")

    def metrics(self) -> str:
        with urllib.request.urlopen(self.base_url() + "metrics", timeout=5) as resp:
            return str(resp.read().decode())


class SchedulerProcess(BerthProcess):
    command = "scheduler"


class MetricsCacheProcess(BerthProcess):
    command = "metrics-cache"


class PropagatorProcess(BerthProcess):
    command = "propagator"


class ExporterProcess(BerthProcess):
    command = "exporter"


class InventoryProcess(BerthProcess):
    command = "inventory"


# (the probe's and a request's timeouts are the defaults, as the propagator's are in the
# tests that run both modes: with 1 s and 3 s, a loaded API server — 200 Deployments
# applied at once beside another test — made a pull cluster OFFLINE, and its applications
# moved, where the same cluster in Push mode stayed ONLINE)
AGENT_CONFIG = ("probe_interval: 0.5\nretry_base_delay: 0.2\nretry_max_delay: 1\n"
                "resync_interval: 600\ncapacity_interval: 0.2\n")


def reached(mode: str, kubeconfig: dict[str, Any]) -> dict[str, Any]:
    """A Cluster's spec fields for how berth reaches it: ``Push`` (its kubeconfig) or
    ``Pull`` (its agent has it; etcd holds no credential)."""
    return {"mode": "Pull"} if mode == "Pull" else {"kubeconfig": kubeconfig}


class AgentProcess(BerthProcess):
    """``berth agent`` for one pull cluster, reaching it with ``kubeconfig`` (written to a
    file of its own) and etcd as ``env`` says (its own user, in the secure tests)."""

    command = "agent"

    def __init__(self, url: str, workdir: Path, *, cluster: str, kubeconfig: dict[str, Any],
                 config: str = "", name: str = "a", env: dict[str, str] | None = None,
                 lease_ttl: int = 2, credentials: Path | None = None) -> None:
        """``credentials``: as ``berth agent join`` wrote them (then ``cluster`` is the one
        they name, and etcd is reached as they say)."""
        super().__init__(url, workdir, config=config, name=name, env=env)
        path = workdir / f"agent-{name}.kubeconfig"
        path.write_text(json.dumps(kubeconfig))
        self.args += ["--kubeconfig", str(path)]
        self.args += ["--credentials", str(credentials)] if credentials else [
            "--cluster", cluster]
        self.args[self.args.index("--lease-ttl") + 1] = str(lease_ttl)


@contextlib.contextmanager
def in_memory(store: Store, clock: Clock, config: SchedulerConfig | None = None
              ) -> Iterator[Scheduler]:
    """A Scheduler over ``store`` (etcd in memory, :mod:`berth_testkit.memory`) reading
    ``clock``, started and, at the end, stopped."""
    from berth.controllers.scheduler.config import SchedulerConfig as Config
    from berth.controllers.scheduler.scheduler import Scheduler as Running

    s = Running(store, config or Config(), clock=clock)
    s.start(sync_timeout=5.0)
    try:
        yield s
    finally:
        s.stop()



class TokensOnly:
    """What a Binding writer tells of its writes, taken by nobody: a writer tested
    alone (:class:`~berth.controllers.scheduler.binder.BindingWriter`)."""

    def assume(self, key: str, view: object, encoded: bytes | None = None) -> Token:
        from berth.controllers.scheduler.decisions import Token as Made

        return Made(None, encoded)

    def written(self, key: str, token: Token, revision: int) -> None:
        return None

    def retract(self, key: str, token: Token) -> None:
        return None


@contextlib.contextmanager
def started(procs: list[BerthProcess], store: Store, clusters: Iterable[str],
            timeout: float = 30.0) -> Iterator[list[BerthProcess]]:
    """Start ``procs`` and wait until every cluster (in ``default``) is ONLINE with its
    capacity reported, and, with a metrics-cache among them, until its picture of the
    values is whole: else what the test writes first may be placed before all counts, as
    a new fleet's first placement may — at random before the values, away from a
    cluster whose capacity is not reported yet (it scores as full: a Pull test's Job
    went to the greener cluster's rival so). Stop them when the block ends — also when a
    process or the wait failed before it began (else they outlive the test, and the
    module's later tests meet them)."""
    def ready(name: str) -> ClusterStatus | None:
        kv = store.get(keys.status_key("Cluster", "default", name))
        return decode(kv.value, ClusterStatus) if kv is not None else None

    try:
        for p in procs:
            p.start()
        for name in clusters:
            wait_for(partial(ready, name), lambda st: st.status.state == Reachability.ONLINE
                     and st.status.capacity is not None, timeout=timeout)
        if any(isinstance(p, MetricsCacheProcess) for p in procs):
            wait_for(lambda: store.get(keys.METRIC_PICTURE),
                     lambda kv: decode(kv.value, MetricPicture).complete, timeout=timeout)
        yield procs
    finally:
        stop_all(procs)
        for p in procs:
            print(p.output()[-4000:])


def stop_all(procs: Iterable[BerthProcess]) -> None:
    """Stop every process at once: each is asked, then each awaited (one after the
    other, each took most of a second to wind down)."""
    procs = list(procs)
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait_stopped()


def agents_for(mode: str, url: str, workdir: Path, kubeconfigs: Mapping[str, dict[str, Any]],
               config: str = AGENT_CONFIG) -> list[BerthProcess]:
    """In ``Pull`` mode, an agent per cluster (``default/<name>``), each with that cluster's
    kubeconfig alone; none in ``Push`` mode."""
    if mode != "Pull":
        return []
    return [AgentProcess(url, workdir, cluster=f"default/{name}", kubeconfig=kubeconfig,
                         name=name, config=config) for name, kubeconfig in kubeconfigs.items()]


class ConsoleProcess(BerthProcess):
    """``berth console`` on the test etcd, on a free loopback port (``extra``: more
    options, such as ``--token-file``)."""

    command = "console"

    def __init__(self, url: str, workdir: Path, *, extra: list[str] | None = None,
                 name: str = "c", env: dict[str, str] | None = None) -> None:
        super().__init__(url, workdir, name=name, env=env)
        self.args = [sys.executable, "-m", "berth.cli.main", "--log-level", "DEBUG",
                     "console", "--etcd", url, "--listen", "127.0.0.1:0", *(extra or [])]

    def url(self, timeout: float = 30.0) -> str:
        """Where this run serves the console (from its log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.findall(r"berth console: (https?://\S+/)", self.output(since_start=True))
            if found:
                return str(found[-1])
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{self.log.name} never said where it serves:\n"
                             f"{self.output(since_start=True)[-2000:]}")
