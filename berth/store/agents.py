"""What an administrator does for a pull cluster's agent: mint its bootstrap token,
approve its registration (and renewals), revoke it (docs/agents.md).

Every function here manages etcd users and roles, so it runs as a user with etcd's
root role. The agent's role reads its cluster's work prefix, reads and writes its
own agent prefix, reads its registration and writes its requests — nothing else
(:func:`agent_grants`); the bootstrap user may only write a request and read the
answer (:func:`join_grants`), and is deleted once the agent is approved.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import msgspec

from berth.store import auth, certs, keys
from berth.store.auth import Access, Grant
from berth.store.client import Store
from berth.store.codec import encode
from berth.store.documents.decisions import StatusMeta
from berth.store.documents.registration import JoinRequest, Registration
from berth.store.errors import Conflict, Invalid
from berth.store.ops import Delete, Put, b64, prefix_end

log = logging.getLogger(__name__)

RENEW_AT = 0.25  # an agent renews when this share of its credential's life is left


class Refused(Exception):
    """A registration or renewal berth will not approve; the message says why."""


def agent_user(cid: str) -> str:
    """The etcd user (and role) of cluster ``cid``'s agent: ``berth-agent.<ns>.<name>``
    (a namespace has no dot, so the name is unambiguous)."""
    keys.work_prefix(cid)
    return "berth-agent." + cid.replace("/", ".", 1)


def join_user(cid: str) -> str:
    keys.work_prefix(cid)
    return "berth-join." + cid.replace("/", ".", 1)


def agent_grants(cid: str) -> list[Grant]:
    """All an agent may do: read its work, write its own prefix (reports, heartbeat,
    removals), read its registration and ask to renew. ``/berth/v1/`` itself (a key
    that holds nothing) is readable for the store's revision reads."""
    return [Grant(Access.READ, keys.work_prefix(cid), prefix=True),
            Grant(Access.READWRITE, keys.agent_prefix(cid), prefix=True),
            Grant(Access.READ, keys.registration_key(cid)),
            Grant(Access.READWRITE, keys.registration_request_key(cid)),
            Grant(Access.READ, keys.ROOT)]


def join_grants(cid: str) -> list[Grant]:
    """All a bootstrap token may do: ask to join as ``cid``, and read the answer."""
    return [Grant(Access.READWRITE, keys.registration_request_key(cid)),
            Grant(Access.READ, keys.registration_key(cid)),
            Grant(Access.READ, keys.ROOT)]


def granted(password_hash: str) -> str:
    """What the registration says of the password hash approved: the agent's cue that
    its new password is etcd's now (the hash itself is not repeated)."""
    return hashlib.sha256(password_hash.encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class Token:
    """A bootstrap credential: ``<namespace>.<name>.<secret>`` (a namespace has no dot,
    a secret is hex)."""

    cluster: str
    secret: str

    def __str__(self) -> str:
        namespace, _, name = self.cluster.partition("/")
        return f"{namespace}.{name}.{self.secret}"

    @classmethod
    def parse(cls, text: str) -> Token:
        namespace, _, rest = text.strip().partition(".")
        name, _, secret = rest.rpartition(".")
        cid = f"{namespace}/{name}"
        try:
            keys.work_prefix(cid)
        except ValueError as exc:
            raise ValueError(f"not a bootstrap token (<namespace>.<name>.<secret>): {exc}"
                             ) from None
        if not secret or any(c not in "0123456789abcdef" for c in secret):
            raise ValueError("not a bootstrap token (<namespace>.<name>.<secret>)")
        return cls(cid, secret)

    @property
    def user(self) -> str:
        return join_user(self.cluster)


def read(store: Store, cid: str) -> tuple[Registration | None, int]:
    """The registration of ``cid`` and its revision (None, 0: none)."""
    kv = store.get(keys.registration_key(cid))
    if kv is None:
        return None, 0
    try:
        return msgspec.json.decode(kv.value, type=Registration), kv.mod_revision
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise Invalid(f"{kv.key}: not a registration ({exc})") from exc


def request_of(store: Store, cid: str) -> tuple[JoinRequest | None, int]:
    kv = store.get(keys.registration_request_key(cid))
    if kv is None:
        return None, 0
    try:
        return msgspec.json.decode(kv.value, type=JoinRequest), kv.mod_revision
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, kv.mod_revision  # garbage: refused as no request


def _write(store: Store, cid: str, reg: Registration, revision: int,
           *more: Put | Delete) -> None:
    try:
        store.commit([Put(keys.registration_key(cid), encode(reg), revision), *more])
    except Conflict as exc:
        raise Refused(f"the registration of {cid} changed meanwhile: try again") from exc


def mint(store: Store, cid: str, *, ttl: float, credential_ttl: float, auto: bool,
         now: datetime) -> Token:
    """A new bootstrap token for ``cid`` (the one before it stops working): an etcd user
    that can only ask to join as ``cid``."""
    token = Token(cid, secrets.token_hex(16))
    auth.add_user(store, token.user, auth.hashed(token.secret))
    auth.set_role(store, token.user, join_grants(cid), token.user)
    namespace, _, name = cid.partition("/")
    reg, revision = read(store, cid)
    reg = reg or Registration(StatusMeta(name, namespace))
    reg.spec = msgspec.structs.replace(reg.spec, token_user=token.user,
                                       token_expires=now + timedelta(seconds=ttl),
                                       credential_ttl=credential_ttl, auto=auto)
    reg.status = msgspec.structs.replace(reg.status, refused="", revoked=None)
    _write(store, cid, reg, revision)
    return token


def approve(store: Store, cid: str, *, now: datetime, signer: certs.Signer | None = None
            ) -> str:
    """Approve ``cid``'s request: its agent's etcd user with the password hash it sent,
    its role, the registration, and — given the ``signer`` etcd trusts for client
    certificates — a certificate for the key the request names, for as long as the
    credential lives; the bootstrap user is gone afterwards. Refused (and the refusal
    written for the agent to read) if the token expired or was never minted, the
    cluster asks with another identity than the one that joined, or its signing request
    cannot be signed."""
    reg, revision = read(store, cid)
    req, req_revision = request_of(store, cid)
    if reg is None:
        raise Refused(f"no bootstrap token was minted for cluster {cid} "
                      "(berth cluster token create)")
    if req is None:
        raise Refused(f"cluster {cid} has not asked to join (berth agent join)")
    expires = now + timedelta(seconds=reg.spec.credential_ttl)
    certificate, why = "", _refusal(reg, req, now)
    if not why and req.csr and signer is not None:
        try:
            certificate = certs.sign(req.csr, signer, now=now, until=expires)
        except certs.CertificateError as exc:
            why = f"its certificate signing request: {exc}"
    drop = Delete(keys.registration_request_key(cid), req_revision)
    if why:
        reg.status = msgspec.structs.replace(reg.status, refused=why)
        _write(store, cid, reg, revision, drop)
        raise Refused(why)
    user = agent_user(cid)
    auth.add_user(store, user, req.password_hash)
    auth.set_role(store, user, agent_grants(cid), user)
    if not req.renewal and reg.spec.token_user:  # the bootstrap credential is spent
        auth.delete_user(store, reg.spec.token_user)
        auth.delete_role(store, reg.spec.token_user)
        reg.spec = msgspec.structs.replace(reg.spec, token_user="", token_expires=None)
    reg.status = msgspec.structs.replace(
        reg.status, identity=req.identity, user=user, approved=now, expires=expires,
        granted=granted(req.password_hash), refused="", revoked=None,
        certificate=certificate)
    _write(store, cid, reg, revision, drop)
    cert = ("; a client certificate signed for its key" if certificate else
            "; no client certificate signed (give --signer-cert and --signer-key): it "
            "keeps the one it has" if req.csr else "")
    return (f"cluster {cid}: {'renewed' if req.renewal else 'joined'} as {req.identity}; "
            f"etcd user {user} until {expires:%Y-%m-%d %H:%M:%S} UTC{cert}")


def _refusal(reg: Registration, req: JoinRequest, now: datetime) -> str:
    st = reg.status
    if req.renewal:
        if not st.user:
            return "a renewal from a cluster whose agent holds no credential: join anew"
        if req.identity != st.identity:
            return (f"a renewal as identity {req.identity}, but the cluster joined as "
                    f"{st.identity}")
        return ""
    if not reg.spec.token_user:
        return "no unused bootstrap token: mint one (berth cluster token create)"
    if reg.spec.token_expires is not None and reg.spec.token_expires <= now:
        return f"the bootstrap token expired at {reg.spec.token_expires:%Y-%m-%d %H:%M:%S} UTC"
    if st.identity and st.identity != req.identity:
        return (f"the name is taken: it joined as cluster identity {st.identity}, and a "
                f"second cluster (identity {req.identity}) may not take it over")
    return ""


def revoke(store: Store, cid: str, *, now: datetime) -> list[str]:
    """Remove the agent's user and role (and any bootstrap user), say so in the
    registration, and delete the cluster's work: every new request of the agent is
    refused at once, and nothing is written where a watch it still holds could see it
    (etcd cannot end another client's watch). What was removed."""
    done = []
    for user in (agent_user(cid), join_user(cid)):
        if auth.delete_user(store, user):
            done.append(f"user {user}")
        if auth.delete_role(store, user):
            done.append(f"role {user}")
    reg, revision = read(store, cid)
    namespace, _, name = cid.partition("/")
    reg = reg or Registration(StatusMeta(name, namespace))
    reg.spec = msgspec.structs.replace(reg.spec, token_user="", token_expires=None)
    reg.status = msgspec.structs.replace(reg.status, user="", granted="", revoked=now,
                                         certificate="")
    _write(store, cid, reg, revision)
    prefix = keys.work_prefix(cid)
    reply = store.call("kv/deleterange", {"key": b64(prefix), "range_end": b64(
        prefix_end(prefix))}, f"deleting {prefix}")
    done.append(f"{int(reply.get('deleted', 0))} works")
    return done


def expire(store: Store, *, now: datetime) -> list[str]:
    """Remove the users of agents whose credential expired (they did not renew in
    time): the clusters whose agents were cut off."""
    out = []
    kvs, _ = store.list_prefix(keys.REGISTRATIONS)
    for kv in kvs:
        if kv.key.endswith("/request"):
            continue
        try:
            reg = msgspec.json.decode(kv.value, type=Registration)
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.warning("%s is not a registration: skipped", kv.key)
            continue
        st = reg.status
        if st.user and st.expires is not None and st.expires <= now:
            cid = keys.parse_cluster_key(kv.key).cluster
            auth.delete_user(store, st.user)
            auth.delete_role(store, st.user)
            reg.status = msgspec.structs.replace(
                st, user="", granted="", refused=f"its credential expired at "
                f"{st.expires:%Y-%m-%d %H:%M:%S} UTC")
            try:
                _write(store, cid, reg, kv.mod_revision)
            except Refused:
                continue
            out.append(cid)
    return out


def requests(store: Store) -> list[str]:
    """The clusters that asked to join or renew."""
    kvs, _ = store.list_prefix(keys.REGISTRATIONS)
    return sorted(keys.parse_cluster_key(kv.key).cluster for kv in kvs
                  if kv.key.endswith("/request"))


__all__ = ["RENEW_AT", "Refused", "Token", "agent_grants", "agent_user", "approve", "expire",
           "granted", "join_grants", "join_user", "mint", "read", "request_of", "requests",
           "revoke"]
