"""The robustness run's faults, chosen by the seed, one at a time or overlapping.

Each fault is begun and ended by the injector's thread of its own, and recorded
with its times (seconds since the run began) and etcd's revision when it began,
so an invariant's violation can name the fault before it. Limits keep the system
within what berth promises to survive: at most one etcd member away at once (a
three-member cluster keeps its quorum), one cluster API away at once.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from berth.store import Put, keys
from tests.faults.system import PULL, System

COMMANDS = ["scheduler", "propagator", "metrics-cache", "agent"]
LEADS = ["scheduler", "metrics-cache", "agent"]  # what elects one leader
PAUSE = 5.0  # seconds a paused leader sleeps: past its 2 s lease, and then some


@dataclass
class Happened:
    """One fault, as it happened."""

    kind: str
    what: str
    began: float  # seconds since the run began
    ended: float = 0.0  # 0: still under way
    revision: int = 0  # etcd's revision when it began (0: etcd did not answer)


KINDS = ("kill", "pause", "etcd", "cluster", "compact", "garbage")  # every fault's kind
WEIGHTED = ["kill", *KINDS]  # as the seed draws them: a process killed twice as often


@dataclass
class Injector:
    """Begins a fault every few seconds (``gap``), each in a thread of its own."""

    system: System
    rng: random.Random
    t0: float
    gap: tuple[float, float] = (4.0, 12.0)
    log: Callable[[str], None] = print
    happened: list[Happened] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)  # faults that could not be done
    compact_below: Callable[[], int] = lambda: 0  # the history's last revision
    back_empty: Callable[[str], None] = lambda _: None  # the world puts back its own
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _busy: set[str] = field(default_factory=set)  # "etcd", "cluster": one at a time
    _threads: list[threading.Thread] = field(default_factory=list)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def run(self, stop: threading.Event) -> None:
        """Until ``stop``: wait a seeded gap, begin a seeded fault."""
        while not stop.wait(self.rng.uniform(*self.gap)):
            kind = self.rng.choice(WEIGHTED)
            # every random number is drawn here, in this thread, in order: a replay
            # makes the same choices whatever the faults' threads do meanwhile
            plan = self._plan(kind)
            if plan is None:
                continue
            what, act = plan
            t = threading.Thread(target=self._do, args=(kind, what, act), daemon=True,
                                 name=f"fault {what}")
            self._threads.append(t)
            t.start()

    def heal(self) -> list[str]:
        """Wait for every fault under way to end; then restart whatever is not running.
        The processes that were not (none was being killed then: they died by
        themselves)."""
        for t in self._threads:
            t.join(timeout=120)
        crashed = self.system.dead()
        for command in COMMANDS:
            self.system.restart_dead(command)
        for member in self.system.etcd.members:
            if member.proc is None or member.proc.poll() is not None:
                member.start()
        return crashed

    def _do(self, kind: str, what: str, act: Callable[[], None]) -> None:
        try:
            revision = self.system.db.revision()
        except Exception:
            revision = 0
        h = Happened(kind, what, self.now(), revision=revision)
        with self._lock:
            self.happened.append(h)
            self.kinds[kind] += 1
        self.log(f"[{h.began:7.1f} s] fault begins: {what}")
        try:
            act()
        except Exception as exc:  # the harness's own failure: reported, not a dead thread
            with self._lock:
                self.errors.append(f"{what}: {type(exc).__name__}: {exc}")
        finally:
            h.ended = self.now()
            self.log(f"[{h.ended:7.1f} s] fault ends: {what}")

    def _claim(self, resource: str) -> bool:
        with self._lock:
            if resource in self._busy:
                return False
            self._busy.add(resource)
            return True

    def _release(self, resource: str) -> None:
        with self._lock:
            self._busy.discard(resource)

    def _plan(self, kind: str) -> tuple[str, Callable[[], None]] | None:
        s, rng = self.system, self.rng
        if kind == "kill":
            command = rng.choice(COMMANDS)
            which = rng.randrange(len(s.procs[command]))
            down = rng.uniform(0.5, 6.0)

            def kill() -> None:
                s.procs[command][which].kill()
                time.sleep(down)
                s.restart_dead(command)

            return f"kill -9 {command} replica {which}, restarted after {down:.1f} s", kill
        if kind == "pause":
            command = rng.choice(LEADS)

            def pause() -> None:
                try:
                    p = s.leader(command)
                except AssertionError:
                    return  # nobody leads now (another fault): nothing to pause
                assert p.proc is not None
                p.proc.send_signal(signal.SIGSTOP)
                time.sleep(PAUSE)
                p.proc.send_signal(signal.SIGCONT)

            return f"SIGSTOP the {command} leader for {PAUSE:g} s", pause
        if kind == "etcd":
            which = rng.randrange(len(s.etcd.members))
            down = rng.uniform(2.0, 10.0)
            if not self._claim("etcd"):
                return None

            def member() -> None:
                try:
                    s.etcd.members[which].kill()
                    time.sleep(down)
                    s.etcd.members[which].start()
                finally:
                    self._release("etcd")

            return f"etcd member {which} kill -9, back after {down:.1f} s", member
        if kind == "cluster":
            name = rng.choice(sorted(s.clusters))
            down = rng.uniform(3.0, 15.0)
            empty = rng.random() < 0.25
            if not self._claim("cluster"):
                return None

            def api() -> None:
                try:
                    s.clusters[name].stop()
                    time.sleep(down)
                    s.cluster_up(name, empty=empty)
                    if empty:
                        self.back_empty(name)
                finally:
                    self._release("cluster")

            return (f"cluster {name}'s API stopped {down:.1f} s"
                    f"{', back empty' if empty else ''}"), api
        if kind == "compact":
            def compact() -> None:
                # never past what the history has read: it must stay whole
                below = min(s.db.revision(), self.compact_below())
                if below > 1:
                    s.db.compact(below)

            return "etcd compaction", compact
        if kind == "garbage":
            key = rng.choice(garbage_keys())
            value = rng.choice([b"{not json", b"\x00\xff", b"[]", b'{"kind": 5}'])

            def garbage() -> None:
                s._commit([Put(key, value, None)])

            return f"garbage at {key}", garbage
        raise AssertionError(kind)


def garbage_keys() -> list[str]:
    """Keys of every berth prefix a fault may write garbage at: an application and a
    cluster of nobody's, a Binding, status and work of applications that do not exist,
    a metric value, an agent's report."""
    cid = f"default/{PULL}"
    return [
        keys.resource_key("Application", "garbage-app", "default"),
        keys.binding_key("Application", "default", "garbage-binding"),
        keys.status_key("Application", "default", "garbage-status"),
        keys.resource_key("Cluster", "garbage-cluster", "default"),
        keys.metric_value_key("garbage_metric"),
        keys.work_key(cid, "default", "garbage-work"),
        keys.report_key(cid, "default", "garbage-report"),
    ]


__all__ = ["COMMANDS", "KINDS", "Happened", "Injector", "garbage_keys"]
