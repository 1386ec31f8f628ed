"""etcd's users and roles, through the gateway: what confines a pull cluster's agent.

etcd grants a role read or write on a key or a ``[key, range_end)`` range and
has no deny rule; only a user with the root role manages users and roles (a
user cannot even change its own password: tried on etcd 3.6). A user's
password may be set from a bcrypt hash of it (``hashedPassword``, etcd 3.5 on):
an agent makes its password and sends only the hash, so its password never
leaves it. Deleting a user refuses its next request at once — but a watch's
permission is checked only when the watch is created, and etcd has no way to
end another client's stream: what a revoked agent's open watch could still
see must not be written (docs/agents.md "Revoking").
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import bcrypt

from berth.store.client import Store
from berth.store.errors import StoreError
from berth.store.ops import b64, prefix_end


class Access(StrEnum):
    READ = "READ"
    WRITE = "WRITE"
    READWRITE = "READWRITE"


@dataclass(frozen=True, slots=True)
class Grant:
    """``access`` to ``key``, or to every key under it when ``prefix``."""

    access: Access
    key: str
    prefix: bool = False


def hashed(password: str, rounds: int = 10) -> str:
    """What etcd keeps of a password: a bcrypt hash (etcd's own cost is 10)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds)).decode()


def _call(store: Store, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
    return store.call(f"auth/{path}", body, what)


def users(store: Store) -> list[str]:
    reply = _call(store, "user/list", {}, "listing users")
    return [str(u) for u in reply.get("users") or []]


def roles(store: Store) -> list[str]:
    reply = _call(store, "role/list", {}, "listing roles")
    return [str(r) for r in reply.get("roles") or []]


def add_user(store: Store, name: str, password_hash: str) -> None:
    """Create ``name`` (or give it a new password, if it exists) from a bcrypt hash.

    etcd 3.6's server hashes the ``password`` of a user it adds, whatever hash comes
    with it (an empty password gets an empty password's hash); only a password change
    takes a hash as given, base64-encoded. So a new user is added with a password
    nobody knows, then given the hash."""
    if user_roles(store, name) is None:  # one user read, not the list of all
        _call(store, "user/add", {"name": name, "password": secrets.token_hex(32)},
              f"adding user {name}")
    _call(store, "user/changepw", {
        "name": name, "hashedPassword": base64.b64encode(password_hash.encode()).decode()},
        f"giving {name} its password")


def make_user(store: Store, name: str, password: str) -> None:
    """Create ``name`` with ``password``, which etcd hashes itself (one hash: what
    adding a user costs etcd anyway). For a password made where it is given out, as
    ``berth access grant`` does; an agent keeps its own and sends the hash
    (:func:`add_user`)."""
    _call(store, "user/add", {"name": name, "password": password}, f"adding user {name}")


def delete_user(store: Store, name: str) -> bool:
    """Delete ``name``; False if there was none."""
    return _delete(store, "user/delete", {"name": name}, f"user {name}")


def _delete(store: Store, path: str, body: dict[str, Any], what: str) -> bool:
    try:
        _call(store, path, body, f"deleting {what}")
    except StoreError as exc:
        if "not found" in str(exc):
            return False
        raise
    return True


def set_role(store: Store, name: str, grants: list[Grant], user: str) -> None:
    """Make role ``name`` hold exactly ``grants``, and give it to ``user`` alone."""
    if name in roles(store):
        _call(store, "role/delete", {"role": name}, f"deleting role {name}")
    _call(store, "role/add", {"name": name}, f"adding role {name}")
    for g in grants:
        _grant(store, name, g)
    give_role(store, user, name)


def _grant(store: Store, name: str, g: Grant) -> None:
    perm: dict[str, str] = {"permType": g.access.value, "key": b64(g.key)}
    if g.prefix:
        perm["range_end"] = b64(prefix_end(g.key))
    _call(store, "role/grant", {"name": name, "perm": perm},
          f"granting {g.access.value} on {g.key}{'*' if g.prefix else ''} to {name}")


def define_role(store: Store, name: str, grants: list[Grant]) -> None:
    """Make role ``name`` hold exactly ``grants``, made if there is none, else changed
    in place: the users that hold it keep it (deleting a role takes it from them)."""
    have = role_grants(store, name)
    if have is None:
        _call(store, "role/add", {"name": name}, f"adding role {name}")
        have = set()
    for g in have - set(grants):
        body: dict[str, str] = {"role": name, "key": b64(g.key)}
        if g.prefix:
            body["range_end"] = b64(prefix_end(g.key))
        _call(store, "role/revoke", body, f"revoking {g.key} from {name}")
    for g in grants:
        if g not in have:
            _grant(store, name, g)


def give_role(store: Store, user: str, role: str) -> None:
    _call(store, "user/grant", {"user": user, "role": role}, f"giving {user} role {role}")


def take_role(store: Store, user: str, role: str) -> bool:
    """Take ``role`` from ``user``; False if the user did not hold it (or does not exist)."""
    held = user_roles(store, user)
    if held is None or role not in held:
        return False
    _call(store, "user/revoke", {"name": user, "role": role}, f"taking {role} from {user}")
    return True


def user_roles(store: Store, user: str) -> list[str] | None:
    """The roles ``user`` holds (None: there is no such user)."""
    reply = _found(store, "user/get", {"name": user}, f"reading user {user}")
    return None if reply is None else [str(r) for r in reply.get("roles") or []]


def _found(store: Store, path: str, body: dict[str, Any], what: str) -> dict[str, Any] | None:
    """The answer to a read of a user or a role; None when there is no such one."""
    try:
        return _call(store, path, body, what)
    except StoreError as exc:
        if "not found" in str(exc):
            return None
        raise


def role_grants(store: Store, name: str) -> set[Grant] | None:
    """What role ``name`` grants now (None: there is no such role)."""
    reply = _found(store, "role/get", {"role": name}, f"reading role {name}")
    if reply is None:
        return None
    out = set()
    for perm in reply.get("perm") or []:
        key = base64.b64decode(perm.get("key", "")).decode()
        end = base64.b64decode(perm.get("range_end", "") or "").decode()
        out.add(Grant(Access(perm.get("permType", "READ")), key,
                      prefix=bool(end) and end == prefix_end(key)))
    return out


def delete_role(store: Store, name: str) -> bool:
    """Delete role ``name``; False if there was none."""
    return _delete(store, "role/delete", {"role": name}, f"role {name}")


__all__ = ["Access", "Grant", "add_user", "define_role", "delete_role", "delete_user",
           "give_role", "hashed", "role_grants", "roles", "set_role", "take_role", "user_roles",
           "users"]
