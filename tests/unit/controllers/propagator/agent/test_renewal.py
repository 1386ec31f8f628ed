"""An agent's renewal in memory (join.Renewal over etcd in memory): when it asks, where
it writes, what it asks with, and when it takes the new password. The same on real etcd
with authentication and the approver: tests/integration/test_agent_security.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import bcrypt
import msgspec

from berth.controllers.propagator.agent.join import Credentials, Renewal
from berth.store import agents as reg
from berth.store import encode, keys
from berth.store.documents import StatusMeta
from berth.store.documents.registration import JoinRequest, Registration, RegistrationStatus
from berth_testkit.memory import MemoryStore

CID = "default/a"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
LIFE = timedelta(seconds=100)


class Authenticating(MemoryStore):
    """etcd in memory, which takes any password (it models no authentication): what the
    agent authenticated with is noted."""

    def __init__(self) -> None:
        super().__init__()
        self.passwords: list[str] = []

    def use_password(self, password: str) -> None:
        self.passwords.append(password)


@dataclass
class Kept:
    where: str = "memory"
    saved: list[Credentials] = field(default_factory=list)

    def load(self) -> Credentials:
        return self.saved[-1]

    def save(self, made: Credentials) -> None:
        self.saved.append(made)


def registered(store: MemoryStore, **status: object) -> None:
    given: dict[str, object] = {"identity": "uid-a", "user": reg.agent_user(CID),
                                "approved": T0, "expires": T0 + LIFE, **status}
    doc = Registration(StatusMeta("a", "default"),
                       status=RegistrationStatus(**given))  # type: ignore[arg-type]
    kv = store.get(keys.registration_key(CID))
    if kv is None:
        store.create(keys.registration_key(CID), encode(doc))
    else:
        store.update(keys.registration_key(CID), encode(doc), kv.mod_revision)


def request(store: MemoryStore, key: keys.Key) -> JoinRequest | None:
    kv = store.get(key)
    return msgspec.json.decode(kv.value, type=JoinRequest) if kv else None


def test_an_agent_asks_to_renew_at_its_key_with_a_quarter_of_its_life_left() -> None:
    store, kept = Authenticating(), Kept()
    old = Credentials(CID, "memory", reg.agent_user(CID), "old", "uid-a")
    renewal = Renewal(store, old, kept)
    registered(store)
    renewal.step(T0 + timedelta(seconds=70))  # 30 % left: not yet
    assert request(store, keys.renewal_key(CID)) is None
    renewal.step(T0 + timedelta(seconds=76))
    asked = request(store, keys.renewal_key(CID))
    assert asked is not None and asked.renewal and asked.identity == "uid-a"
    assert request(store, keys.registration_request_key(CID)) is None  # never the join key
    renewal.step(T0 + timedelta(seconds=80))  # asked once: not again while pending
    assert request(store, keys.renewal_key(CID)) == asked
    assert store.passwords == [] and kept.saved == []
    # the approver grants the password asked for: the agent takes it and keeps it
    registered(store, granted=reg.granted(asked.password_hash), expires=T0 + 2 * LIFE)
    renewal.step(T0 + timedelta(seconds=81))
    new = store.passwords[-1]
    assert new != "old" and bcrypt.checkpw(new.encode(), asked.password_hash.encode())
    assert [c.password for c in kept.saved] == [new]
    assert renewal.credentials is not None and renewal.credentials.password == new


def test_a_grant_of_another_password_is_not_taken() -> None:
    store, kept = Authenticating(), Kept()
    renewal = Renewal(store, Credentials(CID, "memory", reg.agent_user(CID), "old", "uid-a"),
                      kept)
    registered(store)
    renewal.step(T0 + timedelta(seconds=90))
    registered(store, granted=reg.granted("$2b$12$someone.elses.hash"))
    renewal.step(T0 + timedelta(seconds=91))
    assert store.passwords == [] and kept.saved == []


def test_credentials_given_on_the_command_line_are_not_renewed() -> None:
    store = Authenticating()
    registered(store)
    Renewal(store, None, None).step(T0 + timedelta(seconds=99))
    assert request(store, keys.renewal_key(CID)) is None
