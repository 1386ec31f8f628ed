"""A team's etcd role, grant by grant (docs/teams.md "Access"): what of its namespace it
may write and read, and that no grant reaches another namespace — not even one whose
name starts with its own. (The same refused by a real etcd: tests/integration/
test_etcd_roles.py.)"""

from __future__ import annotations

import pytest

from berth.store import keys
from berth.store.auth import Access, Grant
from berth.store.teams import team_grants, team_role


def may(grants: list[Grant], key: str) -> Access | None:
    """What the grants allow on ``key`` (None: nothing)."""
    found = [g.access for g in grants
             if (key.startswith(g.key) if g.prefix else key == g.key)]
    if Access.READWRITE in found or {Access.READ, Access.WRITE} <= set(found):
        return Access.READWRITE
    return found[0] if found else None


@pytest.mark.parametrize(("key", "access"), [
    (keys.resource_key("Application", "web", "team-a"), Access.READWRITE),
    (keys.resource_key("Override", "o", "team-a"), Access.READWRITE),
    (keys.secrets_key("Application", "web", "team-a"), Access.READWRITE),
    (keys.history_key("team-a", "web"), Access.READWRITE),
    (keys.rollout_key("team-a", "web"), Access.READWRITE),
    (keys.binding_key("Application", "team-a", "web"), Access.READ),
    (keys.status_key("Application", "team-a", "web"), Access.READ),
    (keys.ledger_key(keys.ledger_prefix("Application", "team-a", "web"), "1", "s", 9),
     Access.READ),
    (keys.events_prefix("Application", "team-a", "web") + "x", Access.READ),
    (keys.resource_key("Cluster", "c", "team-a"), Access.READ),
    (keys.status_key("Cluster", "team-a", "c"), Access.READ),
    (keys.resource_key("GlobalOverride", "g"), Access.READ),
    (keys.ROOT, Access.READ),
    # another namespace, one whose name starts with its own, and what is not a team's
    (keys.resource_key("Application", "web", "team-b"), None),
    (keys.resource_key("Application", "web", "team-ab"), None),
    (keys.history_key("team-ab", "web"), None),
    (keys.binding_key("Application", "team-ab", "web"), None),
    (keys.resource_key("Cluster", "c", "platform"), None),
    (keys.secrets_key("Cluster", "c", "team-a"), None),
    (keys.resource_key("NamespacePolicy", "team-a"), None),
    (keys.resource_key("ClusterSet", "s"), None),
    (keys.resource_key("PriorityClass", "p"), None),
    (keys.resource_key("Metric", "m", "team-a"), None),
    (keys.work_key("team-a/c", "team-a", "web"), None),
    (keys.lease_key("scheduler"), None),
])
def test_a_team_may_do_in_etcd_what_its_namespace_needs_and_nothing_more(
        key: str, access: Access | None) -> None:
    assert may(team_grants("team-a"), key) == access


def test_a_team_role_is_named_after_a_valid_namespace() -> None:
    assert team_role("team-a") == "berth-team.team-a"
    with pytest.raises(ValueError, match="invalid namespace"):
        team_role("Team.A")
    every = team_grants("team-a")
    assert all(g.key.endswith("/team-a/") for g in every if g.prefix
               and g.key != keys.resource_prefix("GlobalOverride"))
