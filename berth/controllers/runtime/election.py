"""Leader election on an etcd lease: one active replica per process type.

A candidate grants itself a lease and creates ``/berth/v1/leases/<process>``
attached to it (a create: it fails if somebody holds the key). The holder
keeps the lease alive every ``ttl / 3`` seconds. If the holder dies, etcd
deletes the key when the lease expires, at most ``ttl`` seconds later; the
others watch the key and campaign as soon as it is gone. A holder that cannot
refresh its lease for ``ttl`` seconds (etcd unreachable) steps down on its own,
because by then its lease may have expired and another replica may lead.
Resigning revokes the lease, so a clean shutdown hands over at once.

Stepping down on time is not enough: a replica paused (SIGSTOP, a long GC, a
stalled VM) resumes believing it leads, with writes queued. So leadership is
a fence, not a hope: the leader's **term** is the create revision of the key
it created when it won (etcd's own election uses the same), and
:meth:`LeaderElection.fence` gives it to the controller, whose store compares
it in every write transaction (``Store.fenced``). Once the key is gone or
made anew by another replica, every write of the old term fails in etcd
itself (``Deposed``), whatever it had queued. Between two leaders there is
no term: ``fence`` gives none, a controller is started only with one, and
the store refuses a fence of term 0 (etcd's compare with 0 would pass on the
absent key). What etcd cannot fence — a request to a cluster's API — goes out
only while the leader's :attr:`LeaderElection.tenure` holds: the lease surely
lives by this process's own clock (``tenure.py``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import tenacity
from prometheus_client import Gauge

from berth.controllers.runtime.tenure import Tenure, margin_for
from berth.store import Conflict, Fence, Store, StoreError, Unavailable, Watch, keys

log = logging.getLogger(__name__)

IS_LEADER = Gauge("berth_leader", "1 while this replica leads", ["process"])


def default_identity() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class LeaderElection:
    def __init__(
        self,
        store: Store,
        process: str,
        *,
        identity: str | None = None,
        ttl: int = 10,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
        about: Mapping[str, Any] | None = None,
        key: keys.Key | None = None,
        body: Callable[[str, float], bytes] | None = None,
    ) -> None:
        """``about``: more for the lease key's value, next to the holder (what the leader
        runs with: the scheduler's configuration, which what-if decides with). ``key``:
        the election key, if not ``/berth/v1/leases/<process>``; ``body(identity,
        since)``: its value, if not ``{"holder": ..., "since": ..., **about}`` (an
        agent's election key is its heartbeat, a document of its own)."""
        if ttl < 2:
            raise ValueError("a lease TTL below 2 seconds cannot be kept alive reliably")
        self.store = store
        self.process = process
        self.key = key or keys.lease_key(process)
        self.body = body
        self.identity = identity or default_identity()
        self.ttl = ttl
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.about = dict(about or {})
        self.leading = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()  # _lease and the decision to stop, together
        self._lease = 0
        self._term = 0  # the election key's create revision while this replica leads
        self.tenure = Tenure(margin_for(ttl))  # while the lease surely lives, by our clock
        self._watch: Watch | None = None
        self._thread: threading.Thread | None = None
        IS_LEADER.labels(process).set(0)  # a sample from the start, leading or not
        self._seen_leader = ""

    @property
    def is_leader(self) -> bool:
        return self.leading.is_set()

    def fence(self) -> Fence | None:
        """This leader's term, for its controller's writes; None when not leading (there
        is no term then, and a fence of term 0 would pass etcd's compare on the absent
        key: the store refuses one)."""
        with self._lock:
            return Fence(self.key, self._term) if self._term > 0 else None

    def start(self) -> threading.Thread:
        self._thread = threading.Thread(
            target=self.run, name=f"election {self.process}", daemon=True
        )
        self._thread.start()
        return self._thread

    def run(self) -> None:
        """Campaign, lead or wait, again and again; failures are retried with an
        exponential backoff (1 s doubling to 30 s, jittered) that a round which ends
        normally resets. etcd unreachable is said once, by the store's link."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda _exc: not self._stop.is_set()),
            wait=tenacity.wait_exponential_jitter(initial=1, max=30),
            sleep=self._sleep,
            before_sleep=self._failed,
            reraise=True,
        )
        while not self._stop.is_set():
            try:
                retrying(self._round)
            except Exception:  # raised only once stopping
                return

    def _sleep(self, seconds: float) -> None:
        self._stop.wait(seconds)  # resigning ends the wait

    def _round(self) -> None:
        if self._campaign():
            self._lead()
        else:
            self._wait_for_vacancy()

    def _failed(self, state: tenacity.RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        delay = state.upcoming_sleep
        if isinstance(exc, Unavailable):
            log.debug("election %s: %s; again in %.1f s", self.process, exc, delay)
        elif isinstance(exc, StoreError):
            log.log(logging.WARNING if state.attempt_number == 1 else logging.DEBUG,
                    "election %s: %s; again in %.1f s", self.process, exc, delay)
        else:  # a bug must not end the campaign silently
            log.error("election %s failed; campaigning again in %.1f s", self.process, delay,
                      exc_info=exc if state.attempt_number == 1 else None)

    def alive(self) -> bool:
        """The campaigning thread runs (or was never started, or resigned)."""
        return self._thread is None or self._thread.is_alive() or self._stop.is_set()

    def resign(self) -> None:
        """Stop campaigning; if leading, revoke the lease so another takes over now."""
        with self._lock:  # a campaign that wins from now on revokes its own lease
            self._stop.set()
            lease, self._lease = self._lease, 0
        if self._watch is not None:
            self._watch.close()
        if lease:
            try:
                self.store.revoke(lease)
            except StoreError as exc:
                log.warning("election %s: revoking lease: %s", self.process, exc)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.ttl)
        self._set_leading(False)

    def _campaign(self) -> bool:
        sent = time.monotonic()
        lease = self.store.grant(self.ttl)
        since = time.time()
        body = self.body(self.identity, since) if self.body is not None else json.dumps(
            {**self.about, "holder": self.identity, "since": since}).encode()
        try:
            term = self.store.create(self.key, body, lease=lease)
        except Conflict:
            self.store.revoke(lease)
            return False
        with self._lock:
            resigned = self._stop.is_set()
            if not resigned:
                self._lease, self._term = lease, term
                self.tenure.renewed(sent, self.ttl)
        if resigned:  # resign() ran meanwhile: hand the key over at once, not after a TTL
            self.store.revoke(lease)
            return False
        log.info("election %s: %s leads (term %d)", self.process, self.identity, term)
        return True

    def _lead(self) -> None:
        self._set_leading(True)
        last_ok = time.monotonic()
        try:
            while not self._stop.wait(self.ttl / 3):
                try:
                    sent = time.monotonic()
                    left = self.store.keep_alive(self._lease)
                    if left <= 0:
                        log.error("election %s: lease expired; stepping down", self.process)
                        return
                    self.tenure.renewed(sent, left)
                    last_ok = time.monotonic()
                except StoreError as exc:
                    if time.monotonic() - last_ok >= self.ttl * 2 / 3:
                        log.error(
                            "election %s: cannot refresh lease (%s); stepping down",
                            self.process,
                            exc,
                        )
                        return
                    log.log(logging.DEBUG if isinstance(exc, Unavailable) else logging.WARNING,
                            "election %s: lease refresh failed: %s", self.process, exc)
        finally:
            self._set_leading(False)

    def _wait_for_vacancy(self) -> None:
        current = self.store.get(self.key)
        if current is None:
            return
        holder = _holder(current.value)
        if holder != self._seen_leader:  # a standby says who leads, once per leader
            self._seen_leader = holder
            log.info("election %s: %s leads; %s stands by", self.process, holder,
                     self.identity)
        self._watch = self.store.watch(self.key, current.mod_revision + 1, idle_timeout=self.ttl)
        try:
            for batch in self._watch:
                if any(ev.key == self.key and ev.type == "DELETE" for ev in batch.events):
                    return
                if not batch.events and self.store.get(self.key) is None:
                    return
        finally:
            self._watch.close()
            self._watch = None

    def _set_leading(self, leading: bool) -> None:
        if not leading:
            with self._lock:
                self._term = 0
                self.tenure.end()
        if leading == self.leading.is_set():
            return
        IS_LEADER.labels(self.process).set(1 if leading else 0)
        callback = self.on_started_leading if leading else self.on_stopped_leading
        if leading:
            self.leading.set()
        else:
            self.leading.clear()
        if callback is not None:
            try:
                callback()
            except Exception:
                log.exception("election %s: leadership callback failed", self.process)


def _holder(value: bytes) -> str:
    """Who holds the lease key, from its value (``{"holder": ...}``, or a heartbeat's
    ``{"status": {"agent": ...}}``)."""
    try:
        doc = json.loads(value)
    except ValueError:
        return "?"
    if not isinstance(doc, dict):
        return "?"
    status = doc.get("status")
    if "holder" not in doc and isinstance(status, dict):
        return str(status.get("agent", "?"))
    return str(doc.get("holder", "?"))
