"""What an administrator does for a pull cluster's agent: mint its bootstrap token,
approve its join (and its renewals), revoke it (docs/agents.md).

Every function here manages etcd users and roles, so it runs as a user with etcd's
root role. The agent's role reads its cluster's work prefix, reads and writes its
own agent prefix, reads its registration and writes its renewal — nothing else
(:func:`agent_grants`); the bootstrap user may only write a join request and read
the answer (:func:`join_grants`), and is deleted once the agent is approved, or
once its token is found expired.

Who asked is proven by where the request is, not by what it says: a join is read
from ``registrations/<cluster>/request`` (a bootstrap token's user writes it), a
renewal from ``renewals/<cluster>`` (the agent's own user alone may write it). A join
hands the cluster to whoever holds the token, so it is refused while the cluster's
agent holds a live credential (unless the operator says ``replace``) and for a
cluster registered in Push mode (:func:`refusal`).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

import msgspec

from berth.store import auth, certs, keys
from berth.store.auth import Access, Grant
from berth.store.client import Store
from berth.store.codec import encode
from berth.store.documents.decisions import StatusMeta
from berth.store.documents.infrastructure import ClusterMode
from berth.store.documents.registration import JoinRequest, Registration
from berth.store.errors import Conflict, Invalid
from berth.store.ops import Delete, Put, b64, prefix_end

log = logging.getLogger(__name__)

RENEW_AT = 0.25  # an agent renews when this share of its credential's life is left


class Refused(Exception):
    """A join or renewal berth will not approve; the message says why."""


class Ask(StrEnum):
    """What a request asks, told by where it is (never by what it says)."""

    JOIN = "join"  # registrations/<cluster>/request: written with a bootstrap token
    RENEWAL = "renewal"  # renewals/<cluster>: written by the cluster's agent itself

    def key(self, cid: str) -> keys.Key:
        return (keys.registration_request_key(cid) if self is Ask.JOIN
                else keys.renewal_key(cid))


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
    removals), read its registration and ask to renew (its renewal key: no bootstrap
    token may write there). ``/berth/v1/`` itself (a key that holds nothing) is
    readable for the store's revision reads."""
    return [Grant(Access.READ, keys.work_prefix(cid), prefix=True),
            Grant(Access.READWRITE, keys.agent_prefix(cid), prefix=True),
            Grant(Access.READ, keys.registration_key(cid)),
            Grant(Access.READWRITE, keys.renewal_key(cid)),
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


def request_of(store: Store, cid: str, ask: Ask = Ask.JOIN) -> tuple[JoinRequest | None, int]:
    """The request of that kind for ``cid`` and its revision (None, 0: none; None and a
    revision: garbage, refused as no request)."""
    kv = store.get(ask.key(cid))
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


def cluster_mode(store: Store, cid: str) -> ClusterMode | None:
    """The mode of the Cluster named ``cid`` (None: there is none; Push when it says
    none). Invalid if it cannot be read."""
    namespace, _, name = cid.partition("/")
    kv = store.get(keys.resource_key("Cluster", name, namespace))
    if kv is None:
        return None
    try:
        doc = msgspec.json.decode(kv.value)
        return ClusterMode((doc.get("spec") or {}).get("mode") or ClusterMode.PUSH)
    except (msgspec.DecodeError, AttributeError, ValueError) as exc:
        raise Invalid(f"{kv.key}: not a Cluster ({exc})") from None


def asked(store: Store, cid: str) -> Ask:
    """What ``cid`` asks: a join if one waits, else a renewal if one does (else a join,
    which approve says was never asked)."""
    if store.get(keys.registration_request_key(cid)) is None and \
            store.get(keys.renewal_key(cid)) is not None:
        return Ask.RENEWAL
    return Ask.JOIN


def approve(store: Store, cid: str, *, now: datetime, signer: certs.Signer | None = None,
            ask: Ask | None = None, replace: bool = False) -> str:
    """Approve ``cid``'s request — ``ask``, or its join if it asked to join, else its
    renewal: its agent's etcd user with the password hash it sent, its role, the
    registration, and — given the ``signer`` etcd trusts for client certificates — a
    certificate for the key the request names, for as long as the credential lives; a
    join spends the bootstrap token (its user is gone). Refused, and the refusal
    written for the asking side to read, as :func:`refusal` says; a join refused for
    an expired token also removes the token's user. ``replace``: the operator hands
    the cluster to the joining side although its agent holds a live credential."""
    try:
        reg, revision = read(store, cid)
    except Invalid as exc:
        raise Refused(str(exc)) from None
    ask = ask or asked(store, cid)
    req, req_revision = request_of(store, cid, ask)
    if reg is None:
        raise Refused(f"no bootstrap token was minted for cluster {cid} "
                      "(berth cluster token create)")
    if req is None:
        raise Refused(f"cluster {cid} has not asked to join (berth agent join)"
                      if ask is Ask.JOIN else f"cluster {cid}'s agent has not asked to renew")
    mode = None
    if ask is Ask.JOIN:
        try:
            mode = cluster_mode(store, cid)
        except Invalid as exc:
            raise Refused(f"its Cluster document: {exc}") from None
    expires = now + timedelta(seconds=reg.spec.credential_ttl)
    certificate, why = "", refusal(cid, reg, req, ask, now=now, mode=mode, replace=replace)
    if not why and req.csr and signer is not None:
        try:
            certificate = certs.sign(req.csr, signer, now=now, until=expires)
        except certs.CertificateError as exc:
            why = f"its certificate signing request: {exc}"
    drop = Delete(ask.key(cid), req_revision)
    if why:
        if ask is Ask.JOIN and _token_expired(reg, now):
            _spend_token(store, reg)
        reg.status = msgspec.structs.replace(reg.status, refused=why)
        _write(store, cid, reg, revision, drop)
        raise Refused(why)
    replaced = ask is Ask.JOIN and bool(reg.status.user)  # --replace: it held one
    user = agent_user(cid)
    auth.add_user(store, user, req.password_hash)
    auth.set_role(store, user, agent_grants(cid), user)
    if ask is Ask.JOIN:  # the bootstrap credential is spent
        _spend_token(store, reg)
    reg.status = msgspec.structs.replace(
        reg.status, identity=req.identity, user=user, approved=now, expires=expires,
        granted=granted(req.password_hash), refused="", revoked=None,
        certificate=certificate)
    _write(store, cid, reg, revision, drop)
    cert = ("; a client certificate signed for its key" if certificate else
            "; no client certificate signed (give --signer-cert and --signer-key): it "
            "keeps the one it has" if req.csr else "")
    done = "renewed" if ask is Ask.RENEWAL else "joined, replacing its agent," if replaced \
        else "joined"
    return (f"cluster {cid}: {done} as {req.identity}; "
            f"etcd user {user} until {expires:%Y-%m-%d %H:%M:%S} UTC{cert}")


def _token_expired(reg: Registration, now: datetime) -> bool:
    return reg.spec.token_expires is not None and reg.spec.token_expires <= now


def _spend_token(store: Store, reg: Registration) -> None:
    """The bootstrap token's user and role gone, and the registration saying so."""
    if reg.spec.token_user:
        auth.delete_user(store, reg.spec.token_user)
        auth.delete_role(store, reg.spec.token_user)
    reg.spec = msgspec.structs.replace(reg.spec, token_user="", token_expires=None)


def refusal(cid: str, reg: Registration, req: JoinRequest, ask: Ask, *, now: datetime,
            mode: ClusterMode | None, replace: bool = False) -> str:
    """Why ``req`` is not approved ("": it is). ``mode``: the Cluster's, for a join (None:
    there is no Cluster ``cid``).

    A renewal (from the agent's own key) needs the live credential it renews and the
    identity that joined. A join needs an unspent, unexpired token, the cluster's own
    identity if the name was taken, a cluster that is not Push (switching it to Pull is
    an act of its own), and no agent holding a live credential — that agent would be
    locked out by whoever holds the token — unless the operator says ``replace``."""
    st = reg.status
    if ask is Ask.RENEWAL:
        if not st.user:
            return "a renewal from a cluster whose agent holds no credential: join anew"
        if req.identity != st.identity:
            return (f"a renewal as identity {req.identity}, but the cluster joined as "
                    f"{st.identity}")
        return ""
    if req.renewal:
        return (f"a renewal is asked by the agent itself at {keys.renewal_key(cid)}, "
                "never with a bootstrap token (an agent older than this berth asks here: "
                "upgrade it)")
    if not reg.spec.token_user:
        return "no unused bootstrap token: mint one (berth cluster token create)"
    if _token_expired(reg, now):
        assert reg.spec.token_expires is not None
        return f"the bootstrap token expired at {reg.spec.token_expires:%Y-%m-%d %H:%M:%S} UTC"
    if st.identity and st.identity != req.identity:
        return (f"the name is taken: it joined as cluster identity {st.identity}, and a "
                f"second cluster (identity {req.identity}) may not take it over")
    if mode is not None and mode is not ClusterMode.PULL:
        return (f"cluster {cid} is registered in {mode.value} mode: an agent joins it only once "
                "its spec.mode is Pull (berth apply), never by holding a token")
    if st.user and not replace and (st.expires is None or st.expires > now):
        until = f" until {st.expires:%Y-%m-%d %H:%M:%S} UTC" if st.expires else ""
        return (f"its agent holds a live credential (etcd user {st.user}{until}): a join "
                "would hand the cluster to whoever holds this token. If that agent lost "
                "its credential, approve with --replace (its credential stops working) or "
                "revoke it first")
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
    _write(store, cid, reg, revision, Delete(keys.renewal_key(cid)))
    prefix = keys.work_prefix(cid)
    reply = store.call("kv/deleterange", {"key": b64(prefix), "range_end": b64(
        prefix_end(prefix))}, f"deleting {prefix}")
    done.append(f"{int(reply.get('deleted', 0))} works")
    return done


def expire(store: Store, *, now: datetime) -> list[str]:
    """Remove the users of agents whose credential expired (they did not renew in
    time), and of bootstrap tokens that expired unused: what was removed, a line each."""
    out = []
    kvs, _ = store.list_prefix(keys.REGISTRATIONS)
    for kv in kvs:
        if kv.key.endswith("/request"):
            continue
        try:
            cid = keys.parse_cluster_key(kv.key).cluster
            reg = msgspec.json.decode(kv.value, type=Registration)
        except (ValueError, msgspec.DecodeError, msgspec.ValidationError) as exc:
            log.warning("%s is not a registration (%s): skipped", kv.key, exc)
            continue
        st = reg.status
        said = []
        if st.user and st.expires is not None and st.expires <= now:
            auth.delete_user(store, st.user)
            auth.delete_role(store, st.user)
            reg.status = msgspec.structs.replace(
                st, user="", granted="", refused=f"its credential expired at "
                f"{st.expires:%Y-%m-%d %H:%M:%S} UTC")
            said.append(f"cluster {cid}: its agent's credential expired unrenewed: removed")
        if reg.spec.token_user and _token_expired(reg, now):
            said.append(f"cluster {cid}: its bootstrap token expired unused: "
                        f"user {reg.spec.token_user} removed")
            _spend_token(store, reg)
        if not said:
            continue
        try:
            _write(store, cid, reg, kv.mod_revision)
        except Refused:
            continue
        out += said
    return out


def refresh_roles(store: Store) -> list[str]:
    """Give every joined agent exactly :func:`agent_grants` (a berth that changed them —
    the renewal key — rewrites the roles of agents joined before): the clusters whose
    agent's role changed."""
    out = []
    kvs, _ = store.list_prefix(keys.REGISTRATIONS)
    for kv in kvs:
        try:
            ref = keys.parse_cluster_key(kv.key)
            reg = msgspec.json.decode(kv.value, type=Registration)
        except (ValueError, msgspec.DecodeError, msgspec.ValidationError):
            continue  # a request, or garbage (expire says so)
        user = reg.status.user
        if ref.what != "registration" or not user:
            continue
        if auth.role_grants(store, user) != set(agent_grants(ref.cluster)):
            auth.set_role(store, user, agent_grants(ref.cluster), user)
            out.append(ref.cluster)
    return out


def requests(store: Store) -> list[tuple[str, Ask]]:
    """The clusters that asked to join, and those whose agents asked to renew."""
    joins, _ = store.list_prefix(keys.REGISTRATIONS)
    renewals, _ = store.list_prefix(keys.RENEWALS)
    out = []
    for kv in [*joins, *renewals]:
        try:
            ref = keys.parse_cluster_key(kv.key)
        except ValueError:
            log.warning("%s is no key berth makes: skipped", kv.key)
            continue
        if ref.what in ("request", "renewal"):
            out.append((ref.cluster, Ask.JOIN if ref.what == "request" else Ask.RENEWAL))
    return sorted(out)


__all__ = ["RENEW_AT", "Ask", "Refused", "Token", "agent_grants", "agent_user", "approve", "asked",
           "cluster_mode", "expire", "granted", "join_grants", "join_user", "mint", "read",
           "refresh_roles", "refusal", "request_of", "requests", "revoke"]
