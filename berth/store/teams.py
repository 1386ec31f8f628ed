"""A team's access to its berth namespace: an etcd role per namespace, given to the
people and CI systems of that team (docs/teams.md "Access").

The role ``berth-team.<namespace>`` may write the namespace's applications, their
overrides, secrets, histories and rollout controls, and read what berth says of
them — Bindings, statuses, ledger, events —, the namespace's own clusters and
their statuses, and the global overrides (they change its copies too); nothing
else (:func:`team_grants`). etcd has no deny rule: every
grant is a prefix that holds the namespace's keys alone (``…/applications/<ns>/``,
the slash keeping ``team-ab`` out of ``team-a``'s). The clusters of the sets its
policy binds, in other namespaces, are not readable with it: a team sees where its
applications run in their Bindings and statuses (which name each cluster), not the
Cluster documents of another namespace.

Every function here manages etcd users and roles, so it runs as a user with etcd's
root role.
"""

from __future__ import annotations

import secrets

from berth.store import auth, keys
from berth.store.auth import Access, Grant
from berth.store.client import Store

ROLE_PREFIX = "berth-team."


def team_role(namespace: str) -> str:
    """The etcd role of ``namespace``'s team (a namespace has no dot)."""
    keys.check_namespace(namespace)
    return ROLE_PREFIX + namespace


def team_grants(namespace: str) -> list[Grant]:
    """All a team may do in etcd: its namespace's documents, and what berth says of them.
    ``/berth/v1/`` itself (a key that holds nothing) is readable for the store's
    revision reads."""
    def of(family: keys.Prefix, kind: str) -> keys.Prefix:
        return keys.in_namespace(family, kind, namespace)

    writes = [of(keys.ROOT, "Application"), of(keys.ROOT, "Override"),
              of(keys.SECRETS, "Application"), of(keys.HISTORY, "Application"),
              of(keys.ROLLOUTS, "Application")]
    reads = [of(keys.BINDINGS, "Application"), of(keys.STATUS, "Application"),
             of(keys.LEDGER, "Application"), of(keys.EVENTS, "Application"),
             of(keys.ROOT, "Cluster"), of(keys.STATUS, "Cluster"),
             keys.resource_prefix("GlobalOverride")]  # what changes its copies too
    return ([Grant(Access.READWRITE, p, prefix=True) for p in writes]
            + [Grant(Access.READ, p, prefix=True) for p in reads]
            + [Grant(Access.READ, keys.ROOT)])


def grant(store: Store, namespace: str, user: str, password: str | None = None) -> str | None:
    """Give ``user`` its team's access to ``namespace`` (the role made, or brought to
    exactly :func:`team_grants`). A user that does not exist is made, with
    ``password`` or a new one, which is returned (None: the user existed, its
    password unchanged unless ``password`` is given)."""
    role = team_role(namespace)
    keys.check_name(user, "user name")
    auth.define_role(store, role, team_grants(namespace))
    made = None
    if auth.user_roles(store, user) is None:  # no such user (one read, not every user)
        made = password or secrets.token_urlsafe(24)
        auth.make_user(store, user, made)  # hashed by etcd alone: once, not twice
    elif password is not None:
        auth.add_user(store, user, auth.hashed(password))
    auth.give_role(store, user, role)
    return made


def revoke(store: Store, namespace: str, user: str) -> bool:
    """Take ``namespace``'s access from ``user``; False if it did not have it. A user left
    with no role is deleted. (A watch it opened before keeps running: etcd checks a
    watch's permission only when it is made.)"""
    taken = auth.take_role(store, user, team_role(namespace))
    if taken and not auth.user_roles(store, user):
        auth.delete_user(store, user)
    return taken


def members(store: Store, namespace: str) -> list[str]:
    """The users that hold ``namespace``'s access."""
    role = team_role(namespace)
    return sorted(u for u in auth.users(store) if role in (auth.user_roles(store, u) or []))


__all__ = ["ROLE_PREFIX", "grant", "members", "revoke", "team_grants", "team_role"]
