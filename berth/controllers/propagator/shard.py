"""Which propagator replica serves which cluster: one owner per cluster, by etcd leases.

Every replica registers itself under ``/berth/v1/leases/propagator/members/<id>``
on a lease of its own, and serves a cluster only while it holds the cluster's
claim, ``/berth/v1/leases/propagator/clusters/<ns>/<name>``, created (never
overwritten) on the same lease. Who should hold a claim is computed the same
way by every replica: rendezvous hashing of the cluster over the live members,
so a member joining or leaving moves only the clusters it gains or loses.

* **Claim**: a cluster without a claim is claimed by the member it hashes to.
* **Hand-over**: a holder that is no longer the one a cluster hashes to (a
  member joined) first stops serving it — no new request is sent there and
  the ones in flight end — and only then deletes the claim; the new owner
  claims it when it sees the key gone. Nobody serves it in between, so it is
  never served twice; it waits at most one step of the loop, never dropped.
* **A replica that dies**: its lease expires (``ttl``) and takes its member
  key and claims with it; the others claim what hashes to them now.
* **A replica that cannot refresh its lease** for ``ttl · 0.6`` seconds stops
  serving everything before the lease can expire and another may claim. When
  etcd answers again, a lease still alive (an etcd restart keeps leases)
  gives it its claims back; an expired one means joining anew.

:meth:`Shard.serving` is the gate every request to a cluster goes through:
it says whether this replica owns the cluster and keeps the hand-over waiting
until the request is over. Each write to a cluster also asks
:meth:`Shard.holds`: whether the lease surely lives by this replica's own
clock (``runtime/tenure.py``) — a replica paused past its lease, its claims
taken by another meanwhile, sends nothing more when it resumes. ``on_gain``
and ``on_lose`` tell the observer and the applier (called on the shard's
thread; ``on_lose`` after the cluster's requests ended).

Work that belongs to no cluster (an application on none) is one replica's
too, its *home*'s: the member its key hashes to (:meth:`Shard.mine`). A replica
that is not its home drops it, so when the live members change — a replica
joins or leaves, or one's own key goes and comes back as it registers anew —
``on_members`` tells every replica to look at that work again, and its home now
does it (called on the informer's thread).
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import msgspec

from berth.controllers.runtime import Event, Informer
from berth.controllers.runtime.supervise import Loop
from berth.controllers.runtime.tenure import Tenure, margin_for
from berth.store import Conflict, Delete, Fence, Put, Store, StoreError, Unavailable, keys
from berth.store.codec import typed

log = logging.getLogger(__name__)

PREFIX, MEMBERS, CLAIMS = keys.PROPAGATOR_LEASES, keys.PROPAGATOR_MEMBERS, keys.PROPAGATOR_CLAIMS
claim_key = keys.claim_key


class Holder(msgspec.Struct):
    holder: str
    lease: int = 0  # the holder's lease the key is attached to
    since: float = 0.0


def _live(lease: int, holder: Holder) -> bool:
    """Whether a lease key is what a replica writes: attached to the lease it names."""
    return lease != 0 and holder.lease == lease


def owner(cid: str, members: list[str]) -> str | None:
    """The member ``cid`` hashes to (rendezvous hashing); None without members."""
    best: tuple[bytes, str] | None = None
    for m in members:
        h = hashlib.blake2b(f"{m}\0{cid}".encode(), digest_size=8).digest()
        if best is None or (h, m) > best:
            best = (h, m)
    return best[1] if best else None


class Shard:
    def __init__(self, store: Store, identity: str, *, ttl: int,
                 clusters: Callable[[], list[str]],
                 on_gain: Callable[[str], None], on_lose: Callable[[str], None],
                 on_members: Callable[[], None] = lambda: None,
                 idle_timeout: float = 30.0) -> None:
        if ttl < 2:
            raise ValueError("a lease TTL below 2 seconds cannot be kept alive reliably")
        self.store = store
        self.identity = identity
        self.ttl = ttl
        self.clusters = clusters  # the cluster ids there are
        self.on_gain = on_gain
        self.on_lose = on_lose
        self.on_members = on_members
        self.leases: Informer[Holder] = Informer(store, PREFIX, Holder,
                                                 idle_timeout=idle_timeout)
        self._members: list[str] = []  # as last told (the informer's thread's only)
        self.leases.add_handler(self._on_lease)
        self.leases.add_invalid_handler(self._garbage_seen)
        self._garbage: set[str] = set()  # claim keys holding no claim (under _cond)
        self._cond = threading.Condition()
        # clusters served (requests may go there) → the revision of our claim
        self._owned: dict[str, int] = {}
        self._busy: dict[str, int] = {}  # cluster → requests in flight
        self._lease = 0
        self._claims: dict[str, int] = {}  # our claims → their revisions (the loop's only)
        self._last_ok = -math.inf  # when (monotonic) etcd last confirmed the lease: never
        self.tenure = Tenure(margin_for(ttl))  # while the lease surely lives, by our clock
        self._wake = threading.Event()
        self._loop = Loop("shard", self._step, deadline=ttl * 3 + 60.0)

    # -- the gate --------------------------------------------------------------

    def owned(self) -> frozenset[str]:
        with self._cond:
            return frozenset(self._owned)

    def owns(self, cid: str) -> bool:
        with self._cond:
            return cid in self._owned

    def fence(self, cid: str) -> Fence | None:
        """Our claim of ``cid`` as a fence for writes about it (None: not ours): once the
        claim is gone or another's, such a write fails in etcd itself."""
        with self._cond:
            revision = self._owned.get(cid)
        # the claim's mod_revision: a claim overwritten (even by hand) is no longer ours
        return Fence(claim_key(cid), revision, mod=True) if revision else None

    @contextmanager
    def serving(self, cid: str) -> Iterator[bool]:
        """True while this replica owns ``cid``: a hand-over waits for the block to end."""
        with self._cond:
            mine = cid in self._owned
            if mine:
                self._busy[cid] = self._busy.get(cid, 0) + 1
        try:
            yield mine
        finally:
            if mine:
                with self._cond:
                    self._busy[cid] -= 1
                    if not self._busy[cid]:
                        del self._busy[cid]
                        self._cond.notify_all()

    def holds(self, cid: str) -> bool:
        """Whether a write sent to ``cid`` now surely arrives while this replica's claim
        lives: owned, and the lease confirmed recently enough by our own clock."""
        return self.owns(cid) and self.tenure.holds()

    def members(self) -> list[str]:
        """The live members: a member key on the lease its value names, named as its key
        says. Membership comes from live leases, never from a key anyone could write
        (etcd deletes a member's key with its lease; one written by hand has none)."""
        out = []
        for item in self.leases.items():
            if item.key.startswith(MEMBERS) and _live(item.lease, item.obj) and (
                    item.key[len(MEMBERS):] == item.obj.holder):
                out.append(item.obj.holder)
        return sorted(out)

    def mine(self, key: str) -> bool:
        """Whether work that belongs to no cluster (``key``) is this replica's."""
        return owner(key, self.members()) == self.identity

    def _on_lease(self, event: Event[Holder]) -> None:
        """A claim or a member changed: the loop looks now; the live members changed:
        ``on_members``."""
        self._wake.set()
        if event.key.startswith(MEMBERS):
            members = self.members()
            if members != self._members:
                self._members = members
                self.on_members()

    # -- running ---------------------------------------------------------------

    def start(self, sync_timeout: float = 60.0) -> None:
        self.leases.start()
        if not self.leases.wait_synced(sync_timeout):
            raise TimeoutError(f"the propagator did not sync {PREFIX} with etcd")
        self._register()
        self.rebalance()  # claim at once what is free (the loop goes on from there)
        self._loop.start()

    def alive(self) -> bool:
        return self._loop.alive() and self.leases.alive()

    def stop(self) -> None:
        """Stop serving every cluster, then hand them over at once (revoke the lease)."""
        self._loop.halt()
        self._wake.set()
        self._loop.stop(timeout=self.ttl + 5)
        for cid in sorted(self.owned()):
            self._stop_serving(cid)
        if self._lease:
            try:
                self.store.revoke(self._lease)
            except StoreError as exc:
                log.warning("shard: revoking lease: %s", exc)
        self.leases.stop()

    def _register(self) -> None:
        """Join on a new lease. An old one is revoked first: the claims on it go at once,
        before this replica may claim anything again."""
        if self._lease:
            try:
                self.store.revoke(self._lease)
            except Unavailable:
                raise  # not known to be gone: try again later
            except StoreError as exc:  # expired already
                log.debug("shard: revoking the old lease: %s", exc)
            self._lease = 0
            self._claims.clear()  # they went with it
        sent = time.monotonic()
        self.tenure.end()  # the claims on the old lease are gone
        self._lease = self.store.grant(self.ttl)
        self._last_ok = sent
        self.tenure.renewed(sent, self.ttl)
        key = keys.member_key(self.identity)
        body = msgspec.json.encode(Holder(self.identity, self._lease, time.time()))
        try:
            self.store.commit([Put(key, body, 0, self._lease)])
        except Conflict:  # our key from before, on a lease not expired yet
            kv = self.store.get(key)
            self.store.commit([Put(key, body, kv.mod_revision if kv else 0, self._lease)])
        log.info("propagator %s joins (%d members seen)", self.identity,
                 len(set(self.members()) | {self.identity}))

    def _step(self) -> None:
        self._wake.wait(self.ttl / 3)
        self._wake.clear()
        if self._loop.stopping:
            return
        if not self._keep_alive():
            return
        self.rebalance()

    def _keep_alive(self) -> bool:
        """Refresh the lease; after ``ttl · 0.6`` without success serve nothing, and
        register anew once etcd answers."""
        now = time.monotonic()
        if now - self._last_ok >= self.ttl / 3:
            try:
                left = self.store.keep_alive(self._lease)
            except StoreError as exc:
                left = -1
                log.debug("shard: lease refresh failed: %s", exc)
            if left > 0:
                self._last_ok = now
                self.tenure.renewed(now, left)
        if time.monotonic() - self._last_ok < self.ttl * 0.6:
            return True
        if self.owned():
            log.error("propagator %s: lease not refreshed for %.1f s; serving no cluster "
                      "until etcd confirms it", self.identity, time.monotonic() - self._last_ok)
            for cid in sorted(self.owned()):
                self._stop_serving(cid)
        try:
            self._register()
        except StoreError as exc:
            log.debug("shard: registering again failed: %s", exc)
            return False
        return True

    def rebalance(self) -> None:
        """Claim what hashes here and is free; hand over what hashes elsewhere.

        Our own claims are known from our writes (``_claims``: cluster → the revision
        we created it at), not from the watch, which may not have delivered a claim
        just made or a deletion just done: neither may start or stop serving."""
        members = self.members()
        if self.identity not in members:
            members.append(self.identity)  # our own key, not seen by the watch yet
        there = set(self.clusters())
        with self._cond:
            garbage, self._garbage = self._garbage, set()
        for cid in sorted(garbage):  # a claim overwritten by garbage: ours no more
            if cid in self._claims:
                log.warning("propagator %s: the claim of cluster %s was overwritten by "
                            "someone else: not serving it", self.identity, cid)
                del self._claims[cid]
                self._stop_serving(cid)
            self._clear_false_claim(cid)
        for cid in sorted(there | set(self._claims)):
            item = self.leases.item(claim_key(cid))
            wanted = owner(cid, members) if cid in there else None
            ours = self._claims.get(cid)
            if ours is not None:
                gone = (item is None and self.leases.revision > ours) or (
                    item is not None and item.mod_revision > ours)
                if gone:  # expired (or taken after it expired): we may not serve it
                    log.warning("propagator %s: lost the claim of cluster %s", self.identity,
                                cid)
                    del self._claims[cid]
                    self._stop_serving(cid)
                elif wanted != self.identity:
                    self._hand_over(cid, ours, wanted)
                elif cid not in self.owned():  # the lease was in doubt, and is alive
                    log.info("propagator %s serves cluster %s again", self.identity, cid)
                    self._start_serving(cid, ours)
            elif item is None and wanted == self.identity:
                self._claim(cid)
            elif item is not None and not _live(item.lease, item.obj) and (
                    wanted == self.identity):
                self._clear_false_claim(cid)  # e.g. a claim overwritten by hand

    def _claim(self, cid: str) -> None:
        body = msgspec.json.encode(Holder(self.identity, self._lease, time.time()))
        try:
            revision = self.store.commit([Put(claim_key(cid), body, 0, self._lease)])
        except Conflict:
            self._clear_false_claim(cid)  # someone was faster, or a claim that is none
            return
        except StoreError as exc:
            log.debug("shard: claiming %s failed: %s", cid, exc)
            return
        self._claims[cid] = revision
        log.info("propagator %s serves cluster %s", self.identity, cid)
        self._start_serving(cid, revision)

    def _garbage_seen(self, key: str, _revision: int) -> None:
        """A lease key holds something that is no claim (written by hand)."""
        if key.startswith(CLAIMS):
            with self._cond:
                self._garbage.add(key[len(CLAIMS):])
            self._wake.set()

    def _clear_false_claim(self, cid: str) -> None:
        """A claim key that is no claim — not on the lease it names, or not a claim
        document at all (written by hand) — would block its cluster for good: it is
        removed (guarded by its revision), and the cluster claimed at the next step."""
        try:
            kv = self.store.get(claim_key(cid))
        except StoreError:
            return
        if kv is None:
            return
        try:
            holder: Holder | None = typed(kv.value, Holder)
        except (msgspec.DecodeError, msgspec.ValidationError):
            holder = None
        if holder is not None and _live(kv.lease, holder):
            return  # a real claim: the watch tells whose
        try:
            self.store.commit([Delete(kv.key, kv.mod_revision)])
        except StoreError as exc:
            log.info("shard: removing the false claim of %s: %s", cid, exc)
            return
        log.warning("propagator %s: the claim of cluster %s was no claim (%.80r, lease %x): "
                    "removed; claiming it", self.identity, cid, kv.value, kv.lease)
        self._wake.set()

    def _hand_over(self, cid: str, revision: int, to: str | None) -> None:
        """Stop serving ``cid``, say so, then release its claim: said before the release,
        the line comes before the next owner's "serves" in any merged log (said after
        it, the next owner could claim and say so first, though nothing was served
        twice)."""
        self._stop_serving(cid)
        log.info("propagator %s hands cluster %s over%s", self.identity, cid,
                 f" to {to}" if to else "")
        try:
            self.store.commit([Delete(claim_key(cid), revision)])
        except Conflict:
            pass  # not ours any more (it expired): nothing to delete
        except StoreError as exc:  # kept, not served: handed over at the next step
            log.info("shard: releasing %s: %s; it stays unserved until released", cid, exc)
            return
        del self._claims[cid]

    def _start_serving(self, cid: str, revision: int) -> None:
        with self._cond:
            self._owned[cid] = revision
        try:
            self.on_gain(cid)
        except Exception:
            log.exception("shard: starting to serve %s", cid)

    def _stop_serving(self, cid: str) -> None:
        """No new request goes to ``cid``; return once those in flight ended."""
        with self._cond:
            self._owned.pop(cid, None)
            began = said = time.monotonic()
            while self._busy.get(cid):
                self._cond.wait(1.0)
                if self._busy.get(cid) and time.monotonic() - said >= 5.0:
                    said = time.monotonic()
                    log.warning("shard: handing %s over waits for %d requests (%.0f s)", cid,
                                self._busy[cid], said - began)
        try:
            self.on_lose(cid)
        except Exception:
            log.exception("shard: stopping to serve %s", cid)


__all__ = ["CLAIMS", "MEMBERS", "Holder", "Shard", "claim_key", "owner"]
