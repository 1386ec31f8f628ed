"""An agent's heartbeat: what it says of its cluster, on its leader's lease.

The heartbeat key is the agent replicas' election key (``berth agent`` campaigns
with :func:`heartbeat_body`), so it lives exactly as long as the leader's lease.
Every ``probe_interval`` (and when the cluster's capacity changed, at most every
``capacity_interval``) the agent probes its API server and rewrites the
heartbeat when what it says changed — on the lease it was created on (etcd's
``ignore_lease``), guarded by its revision and fenced by the leader's term. The
key is watched: one written over by hand is written again at once. The agent's
credential is looked at here too, every ``renew_check_interval``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from berth.controllers.propagator.agent.config import AgentConfig
from berth.controllers.propagator.agent.join import Renewal
from berth.controllers.propagator.kube import Probe
from berth.controllers.runtime import Informer
from berth.controllers.runtime.supervise import Loop
from berth.store import Conflict, Put, Store, StoreError, encode, keys
from berth.store.documents import Capacity, Reachability, StatusMeta
from berth.store.documents.work import AgentState, Heartbeat

log = logging.getLogger(__name__)

VERSION = "berth-agent/1"


def heartbeat_body(cid: str, identity: str, since: float) -> bytes:
    """The heartbeat a replica campaigns with (nothing probed yet)."""
    namespace, _, name = cid.partition("/")
    return encode(Heartbeat(StatusMeta(name, namespace), AgentState(
        identity, since=datetime.fromtimestamp(since, UTC), version=VERSION)))


class Beat:
    def __init__(self, store: Store, config: AgentConfig, cid: str, identity: str, *,
                 probe: Callable[[], Probe], capacity: Callable[[float], Capacity | None],
                 held: Callable[[], str], renewal: Renewal) -> None:
        self.store = store
        self.config = config
        self.cid = cid
        self.identity = identity
        self.probe = probe
        self.capacity = capacity  # the summary, waiting up to so many seconds for a first
        self.held = held
        self.renewal = renewal
        self.informer: Informer[Heartbeat] = Informer(
            store, keys.heartbeat_key(cid), Heartbeat, idle_timeout=config.watch_idle_timeout,
            layout=keys.cluster_key_problem)
        self.informer.add_invalid_handler(self._garbage)
        self.wake = threading.Event()  # a change to say: capacity, held removals, garbage
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the two below: the loop's and the informer's
        self._revision = 0
        self._said: AgentState | None = None
        self._since = datetime.now(UTC)
        self._renew_checked = -math.inf
        self._loop = Loop("heartbeat", self._step, deadline=config.probe_interval + 60.0)

    def start(self) -> None:
        self._loop.start()

    def alive(self) -> bool:
        return self._loop.alive()

    def stop(self) -> None:
        self._stop.set()
        self._loop.halt()
        self.wake.set()
        self._loop.stop()

    def _garbage(self, _key: str, _revision: int) -> None:
        """The heartbeat was written over by hand: say what it says again, at once."""
        log.error("the heartbeat of cluster %s held a value that is not a heartbeat: "
                  "writing it again", self.cid)
        with self._lock:
            self._revision = 0
            self._said = None
        self.wake.set()

    def _step(self) -> None:
        """Probe the cluster and say what was found (when it changed), then wait for the
        interval or a change (at most every ``capacity_interval``)."""
        if time.monotonic() - self._renew_checked >= self.config.renew_check_interval:
            self._renew_checked = time.monotonic()
            self.renewal.step(datetime.now(UTC))
        probe = self.probe()
        capacity = None
        if probe.state == Reachability.ONLINE:
            with self._lock:
                was = self._said
            # turning ONLINE, it says what the cluster holds with it (Tracker.first)
            turning = was is None or was.state != Reachability.ONLINE
            capacity = self.capacity(self.config.probe_timeout if turning else 0.0)
        state = AgentState(self.identity, probe.state, probe.reason,
                           list(probe.custom_resources), capacity, self._since,
                           expires=self.renewal.expires, held=self.held(), version=VERSION,
                           kubernetes=probe.version)
        with self._lock:
            said = self._said
        if state != said:
            self._write(state)
        if self.wake.wait(self.config.probe_interval) and not self._stop.is_set():
            self.wake.clear()
            self._stop.wait(self.config.capacity_interval)

    def _write(self, state: AgentState) -> None:
        """Rewrite the heartbeat (on the lease it was created on, guarded by its
        revision; the store fences it with this agent's term)."""
        key = keys.heartbeat_key(self.cid)
        namespace, _, name = self.cid.partition("/")
        body = encode(Heartbeat(StatusMeta(name, namespace), state))
        for _ in range(2):
            with self._lock:
                revision = self._revision
            if not revision:
                try:
                    kv = self.store.get(key)
                except StoreError as exc:
                    log.info("heartbeat not read: %s", exc)
                    return
                if kv is None:
                    return  # not leading any more: the process stops this agent
                revision = kv.mod_revision
            try:
                revision = self.store.commit([Put(key, body, revision, keep_lease=True)])
            except Conflict:
                with self._lock:
                    self._revision = 0
                continue
            except StoreError as exc:
                log.info("heartbeat not written: %s", exc)
                return
            with self._lock:
                said, self._said, self._revision = self._said, state, revision
            if said is None or said.state != state.state:
                log.info("cluster %s is %s%s", self.cid, state.state,
                         f" ({state.reason})" if state.reason else "")
            return


__all__ = ["VERSION", "Beat", "heartbeat_body"]
