"""Who may be handed a pull cluster's credential (#72 items 1 and 2): the approval's
rules as a table, where a request is read from, and what an agent's and a token's roles
grant. Their real-etcd twin, the attacks themselves as a token holder would make them:
tests/integration/test_agent_security.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from berth.store import keys
from berth.store.agents import Ask, Token, agent_grants, join_grants, refusal
from berth.store.auth import Access, Grant
from berth.store.documents.decisions import StatusMeta
from berth.store.documents.infrastructure import ClusterMode
from berth.store.documents.registration import (
    JoinRequest,
    Registration,
    RegistrationSpec,
    RegistrationStatus,
)

CID = "edge/site-1"
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(days=20)
EARLIER = NOW - timedelta(seconds=1)


def reg(*, token: str = "berth-join.edge.site-1", token_expires: datetime | None = LATER,
        identity: str = "", user: str = "", expires: datetime | None = None
        ) -> Registration:
    return Registration(StatusMeta("site-1", "edge"),
                        RegistrationSpec(token_user=token, token_expires=token_expires),
                        RegistrationStatus(identity=identity, user=user, expires=expires))


def req(identity: str = "uid-1", *, renewal: bool = False) -> JoinRequest:
    return JoinRequest(StatusMeta("site-1", "edge"), identity, "$2b$10$hash", NOW,
                       renewal=renewal)


def joined(*, token: str = "berth-join.edge.site-1", token_expires: datetime | None = LATER,
           expires: datetime | None = LATER) -> Registration:
    """A cluster whose agent joined as uid-1 (and holds a credential until ``expires``)."""
    return reg(token=token, token_expires=token_expires, identity="uid-1",
               user="berth-agent.edge.site-1", expires=expires)

CASES = [
    # (what, registration, request, ask, cluster mode, replace, refused with)
    ("a first join", reg(), req(), Ask.JOIN, None, False, ""),
    ("a first join of a Pull cluster registered first", reg(), req(), Ask.JOIN, ClusterMode.PULL,
     False, ""),
    ("a join with an expired token", reg(token_expires=EARLIER), req(), Ask.JOIN, None,
     False, "the bootstrap token expired at"),
    ("a join with a spent token", reg(token=""), req(), Ask.JOIN, None, False,
     "no unused bootstrap token"),
    ("a join under a Push cluster's name", reg(), req(), Ask.JOIN, ClusterMode.PUSH, False,
     "is registered in Push mode: an agent joins it only once its spec.mode is Pull"),
    ("--replace does not switch a Push cluster", reg(), req(), Ask.JOIN, ClusterMode.PUSH, True,
     "is registered in Push mode"),
    ("another identity under a taken name", joined(), req("uid-2"), Ask.JOIN, ClusterMode.PULL,
     True, "the name is taken"),
    # the token-holder's take-over: it can read the identity that joined
    ("a join while the agent holds a live credential", joined(), req(), Ask.JOIN,
     ClusterMode.PULL, False, "its agent holds a live credential"),
    ("... handed over on purpose", joined(), req(), Ask.JOIN, ClusterMode.PULL, True, ""),
    ("a rejoin once the agent's credential expired", joined(expires=EARLIER),
     req(), Ask.JOIN, ClusterMode.PULL, False, ""),
    ("a rejoin after a revocation (no user)", reg(identity="uid-1"), req(), Ask.JOIN,
     ClusterMode.PULL, False, ""),
    ("a join request that says it renews (an old agent, or a token holder)",
     joined(), req(renewal=True), Ask.JOIN, ClusterMode.PULL, True,
     "a renewal is asked by the agent itself at /berth/v1/renewals/edge/site-1"),
    ("an expired token that says it renews", joined(token_expires=EARLIER),
     req(renewal=True), Ask.JOIN, ClusterMode.PULL, False, "a renewal is asked by the agent itself"),
    ("a renewal from the agent's own key", joined(token=""), req(renewal=True),
     Ask.RENEWAL, None, False, ""),
    ("a renewal with no live credential", reg(token="", identity="uid-1"),
     req(renewal=True), Ask.RENEWAL, None, False, "holds no credential: join anew"),
    ("a renewal under another identity", joined(token=""), req("uid-2"),
     Ask.RENEWAL, None, False, "a renewal as identity uid-2"),
]


@pytest.mark.parametrize(("what", "registration", "asked", "ask", "mode", "replace",
                          "refused"), CASES, ids=[c[0] for c in CASES])
def test_who_may_be_handed_a_clusters_credential(
    what: str, registration: Registration, asked: JoinRequest, ask: Ask,
    mode: ClusterMode | None, replace: bool, refused: str,
) -> None:
    why = refusal(CID, registration, asked, ask, now=NOW, mode=mode, replace=replace)
    if refused:
        assert refused in why, (what, why)
    else:
        assert why == "", (what, why)


def test_a_request_is_read_where_its_kind_is_written() -> None:
    assert Ask.JOIN.key(CID) == "/berth/v1/registrations/edge/site-1/request"
    assert Ask.RENEWAL.key(CID) == "/berth/v1/renewals/edge/site-1"
    assert keys.parse_cluster_key(Ask.RENEWAL.key(CID)) == keys.ClusterKeyRef(
        "renewal", CID)
    assert keys.problem("/berth/v1/renewals/edge/site-1/x") is not None


def writable(grants: list[Grant], key: str) -> bool:
    return any(g.access in (Access.WRITE, Access.READWRITE) and (
        key == g.key or (g.prefix and key.startswith(g.key))) for g in grants)


def test_only_the_agent_may_ask_to_renew_and_only_a_token_to_join() -> None:
    assert writable(agent_grants(CID), keys.renewal_key(CID))
    assert not writable(agent_grants(CID), keys.registration_request_key(CID))
    assert not writable(agent_grants(CID), keys.renewal_key("edge/site-2"))
    assert writable(join_grants(CID), keys.registration_request_key(CID))
    assert not writable(join_grants(CID), keys.renewal_key(CID))


def test_a_token_reads_namespace_name_secret() -> None:
    token = Token("edge/site-1", "3f9c")
    assert str(token) == "edge.site-1.3f9c"  # as docs/cli.md shows it
    assert Token.parse(str(token)) == token and token.user == "berth-join.edge.site-1"
