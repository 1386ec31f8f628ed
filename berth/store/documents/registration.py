"""How an agent joins, renews and is revoked (docs/agents.md "Joining a cluster").

``/berth/v1/registrations/<ns>/<name>`` is the :class:`Registration`, written by
an administrator's commands alone (``berth cluster token create``, ``approve``,
``revoke``): the bootstrap token's etcd user and expiry, and once approved the
cluster's identity (its ``kube-system`` namespace's uid), the agent's etcd
user and when its credential expires. ``.../request`` is the :class:`JoinRequest`
the bootstrap user writes to join, and ``/berth/v1/renewals/<ns>/<name>`` the one
the agent itself writes to renew (its user alone may: where a request is says who
asked, never what it says): the identity, a bcrypt hash of a password the agent
made and keeps — the password itself never leaves the agent — and, where etcd wants client
certificates, a signing request for a key the agent made and keeps; the approved
registration carries the certificate back (``berth.store.certs``).
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from berth.store.documents.decisions import StatusMeta


class RegistrationSpec(msgspec.Struct, omit_defaults=True):
    token_user: str = ""  # the bootstrap credential's etcd user ("": none now)
    token_expires: datetime | None = None
    credential_ttl: float = 30 * 86400.0  # seconds an approved credential lives
    auto: bool = False  # approved by `berth cluster approve --watch` without an operator


class RegistrationStatus(msgspec.Struct, omit_defaults=True):
    identity: str = ""  # the cluster's kube-system namespace uid, once approved
    user: str = ""  # the agent's etcd user
    approved: datetime | None = None
    expires: datetime | None = None  # the agent renews when a quarter of its life is left
    granted: str = ""  # a digest of the password hash last approved: the agent's cue
    refused: str = ""  # why the last request was refused
    revoked: datetime | None = None  # berth cluster revoke: no work is written for it
    certificate: str = ""  # PEM: the agent's etcd client certificate, signed for its key


class Registration(msgspec.Struct, tag_field="kind", tag="Registration"):
    metadata: StatusMeta
    spec: RegistrationSpec = msgspec.field(default_factory=RegistrationSpec)
    status: RegistrationStatus = msgspec.field(default_factory=RegistrationStatus)
    api: str = "kubernetes"


class JoinRequest(msgspec.Struct, tag_field="kind", tag="JoinRequest", omit_defaults=True):
    metadata: StatusMeta
    identity: str  # the cluster's kube-system namespace uid
    password_hash: str  # bcrypt; the password stays with the agent
    at: datetime | None = None
    # True at the renewal key; at the join key, an agent older than the renewal key
    # (refused: a renewal is proven by where it is written)
    renewal: bool = False
    csr: str = ""  # PEM: a signing request for a key the agent keeps (etcd with mTLS)
    api: str = "kubernetes"


__all__ = ["JoinRequest", "Registration", "RegistrationSpec", "RegistrationStatus"]
